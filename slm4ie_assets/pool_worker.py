"""What a pool worker runs (pipeline.extract_parts): one part written, or one range of a
split file counted (docs/splitting.md), with the extractor rebuilt from the picklable spec once per
dataset and kept for the worker's next task."""

import os
from collections.abc import Callable, MutableSequence
from typing import TypeVar

from .assumed_counts import RangeCount
from .catalog import DatasetSpec
from .extractors.base import Extractor
from .extractors.extract_context import FILE_START, RangeCounts
from .extractors.input_file import InputFile
from .extractors.registry import make_extractor
from .locked_parts import PartOutcome, write_part_in_worker
from .part_writer import assume_range, count_range, use_text_writer_thread
from .progress import pool_worker_hook
from .shards import Shard
from .stalls import mark_started
from .store import DatasetStore


def extract_one(spec: DatasetSpec, shard: Shard, task: int, force: bool,
                before: RangeCounts | None = FILE_START, pending: bool = False) -> PartOutcome:
    """Pool worker: rebuild the extractor from the picklable spec and write one part (a range of a
    split file continues where `before` says; None: speculatively; `pending`: from assumed counts,
    docs/splitting.md)."""
    mark_started(task)
    extractor = worker_extractor(spec)
    with pool_worker_hook(task, shard) as hook:
        return write_part_in_worker(spec, extractor, shard, DatasetStore(spec), force, hook, before, pending)


def count_one(spec: DatasetSpec, file: InputFile, assume: bool = False) -> RangeCount:
    """Pool worker: the count-only pass over one range of a split file (nothing is written);
    `assume`: the range is extracted in this run too, so an assumed count will do."""
    extractor = worker_extractor(spec)
    if assume:
        return assume_range(spec, extractor, file)
    return RangeCount(count_range(spec, extractor, file), assumed=False)


_CACHE: dict = {}


def worker_extractor(spec: DatasetSpec) -> Extractor:
    key = (spec.key, spec.recipe)
    ex = _CACHE.get(key)
    if ex is None:
        ex = make_extractor(spec.extractor, spec.options)
        ex.prepare(spec.raw_dir)
        _CACHE.clear()
        _CACHE[key] = ex
    return ex


def start_worker(env: dict[str, str], cwd: str, text_thread: bool, init: Callable[..., None] | None,
                 init_args: tuple, slots: MutableSequence[int] | None = None) -> None:
    """Pool initializer (worker_pool.py): the run's environment and working folder, which a worker
    forked from an older forkserver would not have, whether a part's text gets its own writer
    thread (only while the pool leaves a core spare), the pool's task slots (`run_marked`), then
    the run's own initializer."""
    global _SLOTS
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    use_text_writer_thread(text_thread)
    _SLOTS = slots
    if init is not None:
        init(*init_args)


T = TypeVar("T")
_SLOTS: MutableSequence[int] | None = None  # shared with the calling process: pid per task slot


def run_marked(slot: int, fn: Callable[..., T], *args: object) -> T:
    """Run one task with this worker's pid in its slot, so that if the worker dies (a signal such
    as SIGBUS, os._exit) the calling process can name the task it held (worker_pool.WorkerDied)."""
    if _SLOTS is not None:
        _SLOTS[slot] = os.getpid()
    try:
        return fn(*args)
    finally:
        if _SLOTS is not None:
            _SLOTS[slot] = 0
