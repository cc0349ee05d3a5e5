"""`slm4ie extract` and `slm4ie publish`: the plain-Python pipeline with progress on the terminal.

A batch array job runs `extract KEY --slice I/N --no-publish` in N tasks, then `publish KEY` once;
each task writes the stale shards of its slice (slices.py) under the shard locks, as `shards/<key>`
runs do.
With a Dagster instance configured, each command records what it did there (record.py).
"""

import sys
import time

from ..catalog import Catalog, DatasetSpec
from ..engine.pool_server import effective_workers
from ..pipeline import (
    DatasetPlan,
    ShardBatch,
    extract_and_publish,
    extract_shard_batch,
    lock_path,
    plan_dataset,
    require_raw_dir,
    unpack,
)
from ..planning.shards import Shard
from ..store.locks import dataset_lock
from . import record
from .output import shown, shown_message
from .slices import Slice, slice_of

PROGRESS_SECONDS = 5.0  # a terminal wants to see it move sooner than a run log


def say(message: str) -> None:
    """A progress line, a summary table or a result, as the pipeline and the commands word it; names and
    warnings in it are shown as `output.shown` shows them (its own line breaks kept)."""
    print(shown_message(message), flush=True)


def extract(spec: DatasetSpec, catalog: Catalog, force: bool, workers: int | None, part: Slice | None,
            publish: bool) -> int:
    require_raw_dir(spec)
    with dataset_lock(lock_path(spec), spec.key, log=say):
        archives = unpack(spec, catalog, say, workers=workers)
    plan = plan_dataset(spec, force, effective_workers(workers, catalog.max_workers), catalog.shard_group_threshold,
                        progress_seconds=PROGRESS_SECONDS, archive_drops=archives.drops)
    if publish:  # what pipeline.extract_dataset does, with terminal-paced progress
        report = extract_and_publish(plan, log=say)
        say(f"{spec.key}: " + ("already published, nothing to do" if report.skipped else
                               f"published {published_at(spec)}"))
        record.published(plan, report, f"slm4ie extract {spec.key}", say)
        return 0
    mine = slice_of(plan.shards, part) if part is not None else plan.shards
    label = f" (slice {part.index}/{part.count}: {len(mine)} of {len(plan.shards)} shards)" if part else ""
    say(f"{spec.key}: {sum(s.key in _keys(plan.stale) for s in mine)} stale shard(s) to extract{label}")
    report = extract_shard_batch(ShardBatch(spec, mine, force, plan.workers, PROGRESS_SECONDS), log=say)
    say(f"{spec.key}: wrote {len(report.extracted)} part(s); publish with `slm4ie publish {spec.key}` "
        "once every slice is done")
    command = f"slm4ie extract {spec.key}" + (f" --slice {part.index}/{part.count}" if part else "") + " --no-publish"
    record.parts_written(spec, report.parts, command, say)
    return 0


def _keys(shards: list[Shard]) -> set[str]:
    return {s.key for s in shards}


def publish_when_current(spec: DatasetSpec, catalog: Catalog) -> int:
    """Publish the current parts; refuse, naming the shards whose part is missing or out of date."""
    plan = plan_dataset(spec, workers=1, group_threshold=catalog.shard_group_threshold)
    if plan.stale:
        names = ", ".join(repr(s.key) for s in plan.stale[:5]) + (" …" if len(plan.stale) > 5 else "")
        print(shown(f"slm4ie: not publishing {spec.key}: {len(plan.stale)} of {len(plan.shards)} shard(s) have no "
              f"current part ({names}); run `slm4ie extract {spec.key} --slice I/N --no-publish` for the "
              "missing slices (or `slm4ie extract " f"{spec.key}`)"), file=sys.stderr)
        return 1
    if plan.up_to_date:
        say(f"{spec.key}: already published, nothing to do")
        return 0
    started = time.monotonic()
    current = DatasetPlan(spec, plan.shards, [], False, unreadable=plan.unreadable)
    report = extract_and_publish(current, log=say)
    say(f"{spec.key}: published {published_at(spec)} in {time.monotonic() - started:.1f}s"
        if not report.skipped else f"{spec.key}: already published, nothing to do")
    record.published(current, report, f"slm4ie publish {spec.key}", say)
    return 0


def published_at(spec: DatasetSpec) -> str:
    """Where a reader finds the published text: the output folder's, or the bucket's top-level copy."""
    if spec.output_location is not None:
        return f"{spec.output_location.rstrip('/')}/{spec.text_path.name}"
    return str(spec.text_path)
