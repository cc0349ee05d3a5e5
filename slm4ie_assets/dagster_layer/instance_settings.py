"""Does the instance running this step have the settings the project relies on?

deploy/dagster.instance.yaml (copied into any DAGSTER_HOME by `make home`) and the root dagster.yaml
set them: the queued run coordinator, a limit for the `slm4ie_extract` pool (extraction runs take
turns instead of oversubscribing cores), and `slm4ie_assets` among the managed Python loggers
(extractor warnings reach the event log). An instance without them still runs everything, only
less safely, so the first extraction step of a run says so in the run log, once.
"""

from dataclasses import dataclass

from dagster import DagsterInstance, QueuedRunCoordinator

POOL = "slm4ie_extract"
LOGGER = "slm4ie_assets"
SETTINGS_FILE = "deploy/dagster.instance.yaml"

_warned: set[str] = set()  # run ids already warned about in this process


@dataclass(frozen=True)
class MissingSetting:
    """One instance setting the project expects and does not find; `effect` is what the user loses."""

    name: str
    effect: str


def missing_settings(instance: DagsterInstance) -> list[MissingSetting]:
    """The expected settings this instance lacks (empty when it has them all)."""
    missing = []
    if not isinstance(instance.run_coordinator, QueuedRunCoordinator):
        missing.append(MissingSetting("run_coordinator: QueuedRunCoordinator",
                                      "runs from sensors and the UI start at once instead of queueing"))
    if not _pool_limited(instance):
        missing.append(MissingSetting(f"a limit for the pool {POOL} (concurrency.pools.default_limit)",
                                      "extraction runs can overlap and oversubscribe cores and memory"))
    if LOGGER not in instance.managed_python_loggers:
        missing.append(MissingSetting(f"python_logs.managed_python_loggers: [{LOGGER}]",
                                      "extractor warnings reach only the raw compute logs"))
    return missing


def _pool_limited(instance: DagsterInstance) -> bool:
    if instance.get_concurrency_config().pool_config.default_pool_limit is not None:
        return True
    try:  # a limit set for this pool alone (`dagster instance concurrency set`, the UI)
        return POOL in instance.event_log_storage.get_concurrency_keys()
    except NotImplementedError:
        return False


def warning_text(missing: list[MissingSetting]) -> str:
    lacks = "; ".join(f"{m.name} ({m.effect})" for m in missing)
    return (f"this Dagster instance lacks {lacks}. Copy {SETTINGS_FILE} into $DAGSTER_HOME "
            f"(`make home DAGSTER_HOME=...`) or add these keys to its dagster.yaml")


def warn_once_per_run(instance: DagsterInstance, run_id: str, warn) -> None:
    """Log the missing settings once per run (a run's steps share this process)."""
    if run_id in _warned:
        return
    _warned.add(run_id)
    missing = missing_settings(instance)
    if missing:
        warn(warning_text(missing))
