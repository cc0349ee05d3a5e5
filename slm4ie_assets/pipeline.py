"""The extraction of one dataset in plain Python: plan, extract stale parts, publish.

Dagster's assets and IO manager call these functions; so do the benchmarks and tests, without a
Dagster instance. Every step is a pure function of the raw tree and the config.
"""

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .catalog import Catalog, DatasetSpec
from .engine.pool_server import effective_workers
from .engine.pool_worker import InProcess, PartWork
from .engine.progress import (
    ProgressBoard,
    ShardCounters,
    progress_interval,
    sampling_period,
    summary_table,
)
from .engine.range_scheduler import run_pooled, run_serial
from .engine.stage_clock import StageClock
from .engine.stalls import POLL_SECONDS, StallLimits, StallWatch
from .engine.worker_context import WorkerContext
from .engine.worker_pool import WorkerPool, worker_start
from .extractors.registry import get_extractor_class, make_extractor
from .extractors.splitting import RangeStrategy
from .parts.locked import PartOutcome, outcome_message
from .planning.held_inputs import HeldBack, hold_back
from .planning.input_stamps import InputChanged
from .planning.raw_sources import raw_source
from .planning.shards import DEFAULT_GROUP_THRESHOLD, Shard, plan_shards
from .store.assembly import VersionStager
from .store.dataset_store import DatasetStore
from .store.locks import LockTimeout, dataset_lock
from .store.manifest import Manifest
from .store.part_meta import PartMeta, merged_drops
from .store.publish import publish
from .store.publish_targets import publish_target

if TYPE_CHECKING:  # imported when unpacking, not by every pool worker
    from .archives import ArchiveReport

Log = Callable[[str], None]
OnPart = Callable[[Shard, PartMeta], None]  # called as each part is committed


class MissingRawDir(FileNotFoundError):
    pass


@dataclass
class DatasetPlan:
    """What a run will do, decided from stat calls alone."""

    spec: DatasetSpec
    shards: list[Shard]
    stale: list[Shard]
    up_to_date: bool  # published output matches the shards
    force: bool = False
    workers: int = 1
    unreadable: list[str] = field(default_factory=list)  # D6: "<key>/<entry> [unreadable_path]"
    progress_seconds: float | None = None  # between progress lines; None: progress.progress_interval()
    clock: StageClock = field(default_factory=StageClock)  # seconds per stage (engine/stage_clock.py)
    held: list[str] = field(default_factory=list)  # shard keys left out: files still arriving (planning/held_inputs.py)
    arriving: str = ""  # a few of those files' names, for the log


def lock_path(spec: DatasetSpec) -> Path:
    return DatasetStore(spec).lock


def require_raw_dir(spec: DatasetSpec) -> None:
    if not raw_source(spec).present(spec):
        where = f"raw prefix {spec.raw_location} holds no object" if spec.raw_location else \
            f"raw folder {spec.raw_dir} does not exist"
        raise MissingRawDir(f"dataset {spec.key!r}: {where} (put the {spec.extractor} input files under it)")


def unpack(spec: DatasetSpec, catalog: Catalog, log: Log | None = None, workers: int | None = None) -> "ArchiveReport":
    """Unpack the dataset's archives (the caller holds the dataset lock exclusive); first, retire
    what a publish killed after its swap left (`DatasetStore.retire_unpublished`). One big archive
    is decoded on as many threads as the run may have workers (`workers`, else max_workers)."""
    from .archives import decoding_threads, unpack_archives

    raw_source(spec).bring_in(spec, log)  # a bucket's raw prefix mirrored into raw_dir (D26)
    store = DatasetStore(spec)
    store.retire_unpublished()
    with decoding_threads(effective_workers(workers, catalog.max_workers)):
        return unpack_archives(spec.raw_dir, store.archive_state, catalog.archives, log=log)


def plan_dataset(spec: DatasetSpec, force: bool = False, workers: int = 1,
                 group_threshold: int = DEFAULT_GROUP_THRESHOLD, progress_seconds: float | None = None,
                 archive_drops: Sequence[str] = (), hold_arriving: bool = False) -> DatasetPlan:
    """`archive_drops`: the ledger lines of the unpack before it (`ArchiveReport.drops`).
    `hold_arriving` (a run a sensor started, never forced): leave out the shards whose files are
    still arriving (planning/held_inputs.py), so only whole files are published."""
    require_raw_dir(spec)
    extractor = make_extractor(spec.extractor, spec.options)
    discovery = extractor.list_inputs(spec.raw_dir)
    # D6: skipped archives and members, then raw entries named like inputs that cannot be read
    unreadable = list(archive_drops) + [f"{spec.key}/{entry} [unreadable_path]" for entry in discovery.unreadable]
    shards = plan_shards(extractor, discovery.files, group_threshold, spec.split_bytes)  # docs/splitting.md
    store = DatasetStore(spec)
    held = hold_back(spec, shards, store.archive_state) if hold_arriving and not force else HeldBack(shards, [])
    shards = held.planned
    stale = [s for s in shards if force or not store.part_is_current(s)]
    up_to_date = (not force and not stale and store.is_published(shards, unreadable)
                  and publish_target(spec).is_current(spec, shards, unreadable))
    return DatasetPlan(spec, shards, stale, up_to_date, force, workers, unreadable=unreadable,
                       progress_seconds=progress_seconds, held=[s.key for s in held.held], arriving=held.arriving)


# ----------------------------------------------------------------------------- extraction


def extract_parts(spec: DatasetSpec, shards: list[Shard], workers: int = 1, log: Log | None = None,
                  on_part: OnPart | None = None, progress_seconds: float | None = None,
                  force: bool = False, on_current: OnPart | None = None,
                  clock: StageClock | None = None) -> list[PartMeta]:
    """Write a part for each shard that is stale (each, when forced) under the dataset lock SHARED
    and the shard's own lock, so runs on other shards of the dataset write theirs meanwhile;
    largest first in the pool so the tail stays short. With a `log`, a progress line every
    `progress_seconds` (default: progress.progress_interval) and at the end, logged from this
    process (DAGSTER_NOTES 5). Returns the metas this run wrote, in the order of `shards`: a shard
    another run made current while this one waited for its lock is left out. `on_current` is called
    for every shard whose part is current once its task is done, whoever wrote it."""
    if not shards:
        return []
    with dataset_lock(lock_path(spec), spec.key, log=log, shared=True):
        try:
            return _extract_parts_held(spec, shards, workers, log, on_part, progress_seconds, force, on_current,
                                       clock if clock is not None else StageClock())
        except InputChanged as exc:  # no part of this run read from the file's old state may stay
            DatasetStore(spec).uncommit(s.key for s in shards if any(f.rel == exc.rel for f in s.files))
            raise


def _extract_parts_held(spec: DatasetSpec, shards: list[Shard], workers: int, log: Log | None,
                        on_part: OnPart | None, progress_seconds: float | None, force: bool,
                        on_current: OnPart | None, clock: StageClock) -> list[PartMeta]:
    interval = progress_interval(progress_seconds)
    workers = max(1, min(workers, len(shards)))
    counters: ShardCounters | None = None  # written where each task is extracted
    board = None
    watched = workers > 1 and (spec.stall_seconds > 0 or spec.stall_timeout_seconds > 0)  # engine/stalls.py
    if log is not None or watched:
        counters = ShardCounters.for_tasks(len(shards), shared=workers > 1)
    if log is not None and counters is not None:
        board = ProgressBoard(spec.key, shards, counters, interval, log)
    results: dict[int, PartMeta] = {}

    def report(task: int, outcome: PartOutcome) -> None:
        meta = outcome.meta
        if outcome.waited_for and log is not None:
            log(outcome_message(spec, shards[task], outcome, force))
        if meta is None:  # another run made it current meanwhile: done, but not by this run
            current = DatasetStore(spec).read_part_meta(shards[task].key)
            if board is not None and current is not None:
                board.part_done(task, current)
            if on_current is not None and current is not None:
                on_current(shards[task], current)
            return
        if on_current is not None:
            on_current(shards[task], meta)
        results[task] = meta
        if board is not None:
            board.part_done(task, meta)
        if on_part is not None:
            on_part(shards[task], meta)

    with board if board is not None else nullcontext():
        if workers == 1:
            _extract_serial(spec, shards, counters, sampling_period(interval), report, force, log, clock)
        else:
            _extract_pooled(spec, shards, workers, counters, sampling_period(interval), report, force, log, clock)
    return [results[t] for t in range(len(shards)) if t in results]


def _extract_serial(spec: DatasetSpec, shards: list[Shard], counters: ShardCounters | None, period: float,
                    report: Callable[[int, PartOutcome], None], force: bool, log: Log | None,
                    clock: StageClock) -> None:
    """One worker: the unit of work runs in this process (its own worker context; with counters, a
    sampler thread tracks the bytes read); a range continues from the ranges just before it,
    counted when they are not in the run."""
    context = WorkerContext.in_process(counters, period)
    try:
        run_serial(shards, PartWork(spec, force, InProcess(context, clock, log)), report)
    finally:
        context.close()


def _extract_pooled(spec: DatasetSpec, shards: list[Shard], workers: int, counters: ShardCounters | None,
                    period: float, report: Callable[[int, PartOutcome], None], force: bool,
                    log: Log | None, clock: StageClock) -> None:
    """A pool of forkserver workers (engine/worker_pool.py), each job timed into `clock`; with the
    stall limits set, watched (engine/stalls.py)."""
    clock.pool_opened()
    with WorkerPool(spec, workers, worker_start(PartWork(spec, force), workers, counters, period), clock) as pool:
        watch = None
        if counters is not None and (spec.stall_seconds > 0 or spec.stall_timeout_seconds > 0):
            limits = StallLimits(spec.stall_seconds or float("inf"), spec.stall_timeout_seconds)
            watch = StallWatch(spec.key, shards, counters, pool, limits, log).check
        run_pooled(shards, pool, report, workers, _strategy(spec), watch, POLL_SECONDS)


def _strategy(spec: DatasetSpec) -> RangeStrategy:
    """How the dataset's ranges get their start (`Splitter.strategy`, docs/splitting.md)."""
    splitter = get_extractor_class(spec.extractor).splitter
    return RangeStrategy.CHAINS if splitter is None else splitter.strategy


# ----------------------------------------------------------------------------- one call


@dataclass
class RunReport:
    dataset: str
    skipped: bool
    shards: int
    extracted: list[str]
    manifest: Manifest | None  # the published version's; None for a shard batch
    parts: list[PartMeta]  # the parts this run extracted
    seconds: float
    warnings: list[str]
    stage_seconds: dict[str, float] = field(default_factory=dict)  # engine/stage_clock.STAGES
    stage_cpu: dict[str, float] = field(default_factory=dict)  # the pool's CPU seconds per stage


class StrictModeViolation(RuntimeError):
    pass


def check_strict(spec: DatasetSpec, metas: list[PartMeta], discovery: Sequence[str] = ()) -> None:
    if not spec.strict:
        return
    drops = merged_drops(metas, discovery)
    if drops:
        first = next((w for w in discovery), "") or next((w for m in metas for w in m.warnings), "")
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(drops.items()))
        raise StrictModeViolation(f"dataset {spec.key!r} is strict and {sum(drops.values())} item(s) were skipped "
                                  f"({summary}); first: {first}")


MAX_ROUNDS = 3  # part writing rounds before giving up on a dataset other runs keep re-planning


def extract_and_publish(plan: DatasetPlan, log: Log | None = None,
                        on_part: OnPart | None = None) -> RunReport:
    """Bring every part up to date and publish, then deliver the published version to the dataset's
    publish target (store/publish_targets.py: nothing more for a folder, a commit for a bucket).
    Clean-up, the up-to-date check and the publish hold the dataset lock EXCLUSIVE; part writing
    holds it SHARED (extract_parts), so runs on other shards write meanwhile. Whether there is
    work left is decided again under each lock."""
    report = _extract_and_publish_here(plan, log, on_part)
    if report.manifest is not None:
        raw_source(plan.spec).check_unchanged(plan.spec)
        publish_target(plan.spec).deliver(DatasetStore(plan.spec), plan.shards, plan.unreadable, plan.force, log)
    return report


def _extract_and_publish_here(plan: DatasetPlan, log: Log | None, on_part: OnPart | None) -> RunReport:
    spec = plan.spec
    started = time.monotonic()
    store = DatasetStore(spec)
    with dataset_lock(lock_path(spec), spec.key, log=log):
        store.cleanup(keep_keys=[s.key for s in plan.shards])
        # re-check under the lock: another run may have done the work meanwhile
        stale = [s for s in plan.shards if plan.force or not store.part_is_current(s)]
        if not plan.force and not stale and store.is_published(plan.shards, plan.unreadable):
            manifest = store.published_manifest()
            return RunReport(spec.key, True, len(plan.shards), [], manifest, [], time.monotonic() - started, [])
        stager = _start_stager(plan, store, stale)
    try:
        return _extract_then_publish(plan, store, stale, stager, started, log, on_part)
    finally:
        if stager is not None:
            stager.discard()  # nothing after a publish that used it


def _start_stager(plan: DatasetPlan, store: DatasetStore, stale: list[Shard]) -> VersionStager | None:
    """Stage the version while parts are extracted (store/assembly.py), when there is a copy to overlap:
    several parts (one is hard-linked) and some to write. The current ones are staged at once."""
    if len(plan.shards) < 2 or not stale:
        return None
    try:
        stager = VersionStager(store, plan.shards, plan.spec.text_path.name, plan.spec.sidecar_path.name,
                               partial(plan.clock.timed, "stage"))
    except OSError:
        return None  # a full disk, say: the publish assembles at once and reports what fails then
    writing = {s.key for s in stale}
    for index, shard in enumerate(plan.shards):
        if shard.key not in writing and (meta := store.read_part_meta(shard.key)) is not None:
            stager.committed(index, meta)
    return stager


def _extract_then_publish(plan: DatasetPlan, store: DatasetStore, stale: list[Shard], stager: VersionStager | None,
                          started: float, log: Log | None, on_part: OnPart | None) -> RunReport:
    spec = plan.spec
    index_of = {s.key: i for i, s in enumerate(plan.shards)}
    on_current = None if stager is None else (lambda shard, meta: stager.committed(index_of[shard.key], meta))
    written: dict[str, PartMeta] = {}  # by shard key: a part written again replaces its first meta
    for round_ in range(MAX_ROUNDS):
        written.update((m.shard, m) for m in extract_parts(spec, stale, plan.workers, log, on_part,
                                                           plan.progress_seconds, force=plan.force and round_ == 0,
                                                           on_current=on_current, clock=plan.clock))
        with plan.clock.timed("publish"), dataset_lock(lock_path(spec), spec.key, log=log):
            # between the two locks another run (planned from other raw files or another extract.yaml)
            # may have replaced or removed parts: write those again before publishing
            current = [store.read_part_meta(s.key) for s in plan.shards]  # read once: the check, then the publish
            stale = [s for s, m in zip(plan.shards, current, strict=True)
                     if m is None or not store.part_is_current(s, m)]
            if stale:
                continue
            manifest, skipped = _publish_held(plan, store, stager, cast(list[PartMeta], current))
        metas = [written[s.key] for s in plan.shards if s.key in written]
        warnings = list(plan.unreadable) + [w for m in metas for w in m.warnings]
        return _with_summary(RunReport(spec.key, skipped, len(plan.shards), [m.shard for m in metas], manifest,
                                       metas, time.monotonic() - started, warnings, dict(plan.clock.seconds),
                                       dict(plan.clock.cpu)), log)
    raise RuntimeError(f"dataset {spec.key!r}: other runs changed {len(stale)} of its parts again each time this "
                       f"run had written them ({MAX_ROUNDS} rounds), first {stale[0].key!r}; are runs with a "
                       "different extract.yaml or raw folder working on it? Run again once they are done")


def _with_summary(report: RunReport, log: Log | None) -> RunReport:
    """Log the end-of-run table (progress.summary_table) of a run that extracted or published."""
    if log is not None:
        log(summary_table(report.dataset, report.parts, report.manifest, report.seconds))
    return report


def _publish_held(plan: DatasetPlan, store: DatasetStore, stager: VersionStager | None,
                  metas: list[PartMeta]) -> tuple[Manifest | None, bool]:
    """Publish (the dataset lock is held EXCLUSIVE and every part is current, with `metas`), unless
    another run already published exactly these parts and this one is not forced. Returns
    (manifest, skipped)."""
    spec = plan.spec
    if not plan.force and store.is_published(plan.shards, plan.unreadable):
        return store.published_manifest(), True
    check_strict(spec, metas, plan.unreadable)
    return publish(spec, plan.shards, store, plan.unreadable, stager, metas), False


def extract_dataset(spec: DatasetSpec, catalog: Catalog, force: bool = False, workers: int | None = None,
                    log: Log | None = None) -> RunReport:
    """The whole job without Dagster: unpack, plan, extract, publish."""
    require_raw_dir(spec)
    with dataset_lock(lock_path(spec), spec.key, log=log):
        archives = unpack(spec, catalog, log)
    planning = time.perf_counter()
    plan = plan_dataset(spec, force, effective_workers(workers, catalog.max_workers), catalog.shard_group_threshold,
                        archive_drops=archives.drops)
    plan.clock.add("plan", time.perf_counter() - planning)
    return extract_and_publish(plan, log)


# ----------------------------------------------------------------------------- shard partitions


@dataclass
class ShardBatch:
    """What a `shards/<key>` run will do: bring these shards' parts up to date, without publishing."""

    spec: DatasetSpec
    shards: list[Shard]
    force: bool = False
    workers: int = 1
    progress_seconds: float | None = None  # between progress lines; None: progress.progress_interval()


def extract_shard_batch(batch: ShardBatch, log: Log | None = None,
                        on_part: OnPart | None = None) -> RunReport:
    """Extract the batch's stale parts (all when forced) under the dataset lock shared and each
    shard's lock, beside runs on other shards; `extracted/<key>` publishes them later.
    `RunReport.skipped` is true when this run wrote no part (every one was, or became, current)."""
    spec = batch.spec
    started = time.monotonic()
    store = DatasetStore(spec)
    try:  # D17: leftovers of interrupted runs; parts of other shards are kept
        with dataset_lock(lock_path(spec), spec.key, timeout=0):
            store.cleanup()
    except LockTimeout:
        pass  # another run is writing or publishing: its publish (or the next run) cleans up
    stale = [s for s in batch.shards if batch.force or not store.part_is_current(s)]
    metas = extract_parts(spec, stale, batch.workers, log, on_part, batch.progress_seconds, force=batch.force)
    check_strict(spec, metas)
    warnings = [w for m in metas for w in m.warnings]
    return _with_summary(RunReport(spec.key, not metas, len(batch.shards), [m.shard for m in metas], None, metas,
                                   time.monotonic() - started, warnings), log)
