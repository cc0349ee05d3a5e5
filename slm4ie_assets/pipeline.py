"""The extraction of one dataset in plain Python: plan, extract stale parts, publish.

Dagster's assets and IO manager call these functions; so do the benchmarks and tests, without a
Dagster instance. Every step is a pure function of the raw tree and the config.
"""

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .catalog import Catalog, DatasetSpec
from .extractors.base import Extractor
from .extractors.registry import make_extractor
from .locks import dataset_lock
from .manifest import Manifest
from .part_meta import PartMeta, merged_drops
from .part_writer import write_part
from .publish import current_metas, publish
from .shards import DEFAULT_GROUP_THRESHOLD, Shard, plan_shards
from .store import DatasetStore

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
    archive_report: "ArchiveReport | None" = None
    unreadable: list[str] = field(default_factory=list)  # D6: "<key>/<entry> [unreadable_path]"


def effective_workers(requested: int | None, default: int) -> int:
    n = default if requested is None else requested
    cpus = os.cpu_count() or 1
    return cpus if n <= 0 else max(1, n)


def lock_path(spec: DatasetSpec) -> Path:
    return DatasetStore(spec).state / "lock"


def require_raw_dir(spec: DatasetSpec) -> None:
    if not spec.raw_dir.is_dir():
        raise MissingRawDir(f"dataset {spec.key!r}: raw folder {spec.raw_dir} does not exist "
                            f"(put the {spec.extractor} input files under it)")


def unpack(spec: DatasetSpec, catalog: Catalog, log: Log | None = None) -> "ArchiveReport":
    from .archives import unpack_archives

    store = DatasetStore(spec)
    return unpack_archives(spec.raw_dir, store.state / "archives.json", catalog.archives, log=log)


def plan_dataset(spec: DatasetSpec, force: bool = False, workers: int = 1,
                 group_threshold: int = DEFAULT_GROUP_THRESHOLD) -> DatasetPlan:
    require_raw_dir(spec)
    extractor = make_extractor(spec.extractor, spec.options)
    discovery = extractor.list_inputs(spec.raw_dir)
    # D6: raw entries named like inputs that cannot be read
    unreadable = [f"{spec.key}/{entry} [unreadable_path]" for entry in discovery.unreadable]
    shards = plan_shards(extractor, discovery.files, group_threshold)
    store = DatasetStore(spec)
    stale = [s for s in shards if force or not store.part_is_current(s)]
    up_to_date = not force and not stale and store.is_published(shards)
    return DatasetPlan(spec, shards, stale, up_to_date, force, workers, unreadable=unreadable)


# ----------------------------------------------------------------------------- extraction


def _extract_one(spec: DatasetSpec, shard: Shard) -> PartMeta:
    """Pool worker: rebuild the extractor from the picklable spec and write one part."""
    extractor = _worker_extractor(spec)
    return write_part(spec, extractor, shard, DatasetStore(spec))


_WORKER_CACHE: dict = {}


def _worker_extractor(spec: DatasetSpec) -> Extractor:
    key = (spec.key, spec.recipe)
    ex = _WORKER_CACHE.get(key)
    if ex is None:
        ex = make_extractor(spec.extractor, spec.options)
        ex.prepare(spec.raw_dir)
        _WORKER_CACHE.clear()
        _WORKER_CACHE[key] = ex
    return ex


def extract_parts(spec: DatasetSpec, shards: list[Shard], workers: int = 1, log: Log | None = None,
                  on_part: OnPart | None = None) -> list[PartMeta]:
    """Write a part for each shard; largest first in the pool so the tail stays short.
    Returns the metas in the order of `shards`."""
    if not shards:
        return []
    store = DatasetStore(spec)
    results: dict[str, PartMeta] = {}
    total_bytes = sum(s.size for s in shards) or 1
    done_bytes = 0
    started = time.monotonic()
    last_log = [started]

    def report(shard: Shard, meta: PartMeta) -> None:
        nonlocal done_bytes
        results[shard.key] = meta
        done_bytes += shard.size
        if on_part is not None:
            on_part(shard, meta)
        now = time.monotonic()
        if log is not None and (now - last_log[0] >= 5 or len(results) == len(shards)):
            last_log[0] = now
            docs = sum(m.docs for m in results.values())
            mb = done_bytes / 1e6
            log(f"{spec.key}: {len(results)}/{len(shards)} shards, {docs} documents, "
                f"{mb:.1f}/{total_bytes / 1e6:.1f} MB in {now - started:.1f}s "
                f"({mb / max(now - started, 1e-6):.1f} MB/s)")

    workers = max(1, min(workers, len(shards)))
    if workers == 1:
        extractor = make_extractor(spec.extractor, spec.options)
        extractor.prepare(spec.raw_dir)
        for shard in shards:
            def progress(docs: int, nbytes: int, _s=shard) -> None:
                now = time.monotonic()
                if log is not None and now - last_log[0] >= 5:
                    last_log[0] = now
                    log(f"{spec.key}: shard {_s.key}: {docs} documents so far, {nbytes / 1e6:.1f} MB written")
            report(shard, write_part(spec, extractor, shard, store, progress))
    else:
        ctx = multiprocessing.get_context("spawn")
        order = sorted(shards, key=lambda s: -s.size)
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_extract_one, spec, s): s for s in order}
            try:
                for fut in as_completed(futures):
                    report(futures[fut], fut.result())
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return [results[s.key] for s in shards]


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


class StrictModeViolation(RuntimeError):
    pass


def check_strict(spec: DatasetSpec, metas: list[PartMeta], discovery: Sequence[str] = ()) -> None:
    if not spec.strict:
        return
    drops = merged_drops(metas, len(discovery))
    if drops:
        first = next((w for w in discovery), "") or next((w for m in metas for w in m.warnings), "")
        summary = ", ".join(f"{k}: {v}" for k, v in sorted(drops.items()))
        raise StrictModeViolation(f"dataset {spec.key!r} is strict and {sum(drops.values())} item(s) were skipped "
                                  f"({summary}); first: {first}")


def extract_and_publish(plan: DatasetPlan, log: Log | None = None,
                        on_part: OnPart | None = None) -> RunReport:
    """Bring every part up to date and publish, under the dataset lock."""
    spec = plan.spec
    started = time.monotonic()
    store = DatasetStore(spec)
    with dataset_lock(lock_path(spec), spec.key, log=log):
        store.cleanup(keep_keys=[s.key for s in plan.shards])
        # re-check under the lock: another run may have done the work meanwhile
        stale = [s for s in plan.shards if plan.force or not store.part_is_current(s)]
        if not plan.force and not stale and store.is_published(plan.shards):
            manifest = store.published_manifest()
            return RunReport(spec.key, True, len(plan.shards), [], manifest, [], time.monotonic() - started, [])
        metas_new = extract_parts(spec, stale, plan.workers, log, on_part)
        check_strict(spec, current_metas(spec, plan.shards, store), plan.unreadable)
        manifest = publish(spec, plan.shards, store, plan.unreadable)
    warnings = list(plan.unreadable) + [w for m in metas_new for w in m.warnings]
    return RunReport(spec.key, False, len(plan.shards), [s.key for s in stale], manifest, metas_new,
                     time.monotonic() - started, warnings)


def extract_dataset(spec: DatasetSpec, catalog: Catalog, force: bool = False, workers: int | None = None,
                    log: Log | None = None) -> RunReport:
    """The whole job without Dagster: unpack, plan, extract, publish."""
    require_raw_dir(spec)
    with dataset_lock(lock_path(spec), spec.key, log=log):
        unpack(spec, catalog, log)
    plan = plan_dataset(spec, force, effective_workers(workers, catalog.max_workers), catalog.shard_group_threshold)
    return extract_and_publish(plan, log)


# ----------------------------------------------------------------------------- shard partitions


@dataclass
class ShardBatch:
    """What a `shards/<key>` run will do: bring these shards' parts up to date, without publishing."""

    spec: DatasetSpec
    shards: list[Shard]
    force: bool = False
    workers: int = 1


def extract_shard_batch(batch: ShardBatch, log: Log | None = None,
                        on_part: OnPart | None = None) -> RunReport:
    """Extract the batch's stale parts (all when forced) under the dataset lock; `extracted/<key>`
    publishes them later. `RunReport.skipped` is true when every part was already current."""
    spec = batch.spec
    started = time.monotonic()
    store = DatasetStore(spec)
    with dataset_lock(lock_path(spec), spec.key, log=log):
        store.cleanup()  # D17: leftovers of interrupted runs; parts of other shards are kept
        stale = [s for s in batch.shards if batch.force or not store.part_is_current(s)]
        metas = extract_parts(spec, stale, batch.workers, log, on_part)
    check_strict(spec, metas)
    warnings = [w for m in metas for w in m.warnings]
    return RunReport(spec.key, not stale, len(batch.shards), [s.key for s in stale], None, metas,
                     time.monotonic() - started, warnings)
