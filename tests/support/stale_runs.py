"""The stale-run tests' Dagster project, a run held inside its extraction step, and runs as a
launcher leaves them (dagster_layer/test_stale_runs.py, reliability/test_pid_namespace.py): both
judge real runs of one instance with the project's own dagster.yaml."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import DagsterEvent, DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.events import EngineEventData

from slm4ie_assets.dagster_layer.stale_runs import RUN_TAG, WORKER_STARTED
from support.files import write_config, write_files
from support.paths import REPO


def held_run_script(module: str, name: str) -> str:
    """A `python -c` script that materializes extracted/k into the instance at argv[1] (catalog
    argv[2]) with `module.name` replaced: the step calls it after recording its process, and it
    prints "ready" and sleeps until killed. No single quote, so a shell can quote it."""
    return f"""
import sys, time
from dagster import AssetKey, DagsterInstance
import {module} as patched
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.definitions import build_definitions

def hold(*args, **kwargs):
    print("ready", flush=True)
    time.sleep(600)

patched.{name} = hold
instance = DagsterInstance.from_config(sys.argv[1])
job = build_definitions(load_catalog(sys.argv[2])).resolve_implicit_global_asset_job_def()
job.execute_in_process(instance=instance, asset_selection=[AssetKey(["extracted", "k"])])
"""


@contextmanager
def stale_run_project(root: Path) -> Iterator[tuple[Path, Path, DagsterInstance]]:
    """(DAGSTER_HOME with the project's dagster.yaml, extract.yaml of one text dataset `k`, the
    instance): the queued run coordinator, the run pool and the project's run launcher are real."""
    home = root / "home"
    home.mkdir()
    text = (REPO / "dagster.yaml").read_text().replace("base_dir: .dagster", f"base_dir: {home / '.dagster'}")
    (home / "dagster.yaml").write_text(text)
    write_files(root / "raw" / "k", {"a.txt": "ena\n\ndva\n"})
    config = write_config(root, {"k": {"extractor": "text", "domain": "test"}})
    instance = DagsterInstance.from_config(str(home))
    yield home, config, instance
    instance.dispose()


def add_run(instance, status: DagsterRunStatus, tags: dict, own: bool = True) -> DagsterRun:
    """A run with `tags`; `own`: tagged with its own run id, as a step of ours tags its run."""
    run = DagsterRun(job_name="j", status=status, tags=tags)
    if own:
        run = run.with_tags({**tags, RUN_TAG: run.run_id})
    instance.add_run(run)
    return run


def launched(instance, pid: int, tags: dict, started_at: float | None = None) -> DagsterRun:
    """A run as a launcher leaves it before its first step: Dagster's grpc tag and worker event, no
    process tags of ours."""
    run = add_run(instance, DagsterRunStatus.STARTED, tags, own=False)
    event = DagsterEvent(DagsterEventType.ENGINE_EVENT.value, job_name="j",
                         message=f"{WORKER_STARTED} (pid: {pid}).",
                         event_specific_data=EngineEventData.in_process(pid))
    instance.report_dagster_event(event, run.run_id, timestamp=started_at)
    return run
