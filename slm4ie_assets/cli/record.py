"""Whether `slm4ie extract`/`publish` record their work in a Dagster instance, and doing it.

The rule (README "Run on a cluster without Dagster"): an instance is configured when
`DAGSTER_HOME` is set and `$DAGSTER_HOME/dagster.yaml` exists, as every `dagster` command would
use it; `SLM4IE_RECORD=0` (or `no`, `off`, `false`) turns recording off. The work is recorded in
that instance whatever folder the command runs in: relative storage paths in its dagster.yaml are
read from $DAGSTER_HOME (dagster_layer/instance_record.py), and the message names the storage
written. Without an instance the CLI never imports Dagster: dagster_layer/instance_record.py, which
does, is imported only here, lazily.
Recording is a report of work already on disk: when it fails, the command says so on stderr and
still succeeds, since the parts and the published version are there either way.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..catalog import DatasetSpec
from ..pipeline import DatasetPlan, RunReport
from ..store.part_meta import PartMeta

RECORD_ENV = "SLM4IE_RECORD"
OFF = ("0", "no", "off", "false")


def instance_home() -> Path | None:
    """The Dagster instance to record into, by the rule above; None: do not record."""
    if os.environ.get(RECORD_ENV, "").strip().lower() in OFF:
        return None
    home = os.environ.get("DAGSTER_HOME", "")
    if not home or not (Path(home) / "dagster.yaml").is_file():
        return None
    return Path(home)


def parts_written(spec: DatasetSpec, metas: list[PartMeta], command: str, say: Callable[[str], None]) -> None:
    """Record the parts a slice (or `--no-publish` run) wrote as `shards/<key>` partition materializations."""
    home = instance_home()
    if home is None or not metas:
        return

    def record(instance, where: str) -> None:
        from ..dagster_layer.instance_record import record_parts

        n = record_parts(instance, spec, metas, command)
        say(f"{spec.key}: recorded {n} shards/{spec.key} partition materialization(s) in the Dagster instance "
            f"at {where}")

    _with_instance(home, record)


def published(plan: DatasetPlan, report: RunReport, command: str, say: Callable[[str], None]) -> None:
    """Record a publish (and the parts extracted on the way) as materializations."""
    home = instance_home()
    if home is None or report.skipped:
        return

    def record(instance, where: str) -> None:
        from ..dagster_layer.instance_record import record_parts, record_publish

        n = record_parts(instance, plan.spec, report.parts, command)
        record_publish(instance, plan, report, command)
        say(f"{plan.spec.key}: recorded extracted/{plan.spec.key}" + (f" and {n} shard partition(s)" if n else "")
            + f" in the Dagster instance at {where}")

    _with_instance(home, record)


def _with_instance(home: Path, record: Callable) -> None:
    """Run `record(instance, where)`: `where` names $DAGSTER_HOME and the storage written in it."""
    try:
        from ..dagster_layer.instance_record import open_instance, stored_in

        with open_instance(home) as instance:
            record(instance, f"{home} (DAGSTER_HOME; stored in {stored_in(instance)})")
    except Exception as exc:  # noqa: BLE001 - a report, not the work: the outputs are already on disk
        print(f"slm4ie: warning: the work is done, but recording it in the Dagster instance at {home} failed "
              f"({type(exc).__name__}: {exc}); set {RECORD_ENV}=0 to stop trying", file=sys.stderr)
