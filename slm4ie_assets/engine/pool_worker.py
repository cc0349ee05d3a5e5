"""The unit of work of a run (pipeline.extract_parts), by name: `PartWork.extract` writes one part,
`PartWork.count` counts one range of a split file (docs/splitting.md). engine/range_scheduler.py hands
them out; the same methods run in a pool worker, with the extractor rebuilt from the picklable
spec once per dataset and kept for the worker's next task, and, with one worker, in the run's own
process."""

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TypeVar

from ..catalog import DatasetSpec
from ..extractors.extract_context import RangeCounts, RangeStart
from ..extractors.input_file import InputFile
from ..parts.locked import PartOutcome, write_part_in_worker, write_part_locked
from ..parts.writer import count_range
from ..planning.shards import Shard
from ..store.dataset_store import DatasetStore
from ..store.locks import Log
from .stage_clock import StageClock
from .worker_context import WorkerContext, WorkerStart, current
from .worker_context import start as start_context


@dataclass(frozen=True)
class InProcess:
    """What a run extracting with one worker lends its `PartWork` in its own process: its worker
    context, its stage clock (a pool times its tasks itself) and its log (a wait for a shard lock
    is logged there)."""

    context: WorkerContext
    clock: StageClock
    log: Log | None = None


@dataclass(frozen=True)
class PartWork:
    """One dataset's parts and range counts, done where a task lands: pickled to a pool worker as
    (spec, force), which runs it with the context it was started with (`worker_context.current`);
    or `here`, in the run's own process."""

    spec: DatasetSpec
    force: bool = False
    here: InProcess | None = None  # None: in a pool worker

    def extract(self, task: int, shard: Shard, start: RangeStart) -> PartOutcome:
        """Write shard `task`'s part (a range continuing from `start`) under its shard lock."""
        context = self._context()
        context.mark_started(task)
        extractor = context.extractor(self.spec)
        store = DatasetStore(self.spec)
        with context.track(task, shard) as hook, self._timed("extract"):
            if self.here is None:  # a process of its own: it takes the dataset lock shared itself
                return write_part_in_worker(self.spec, extractor, shard, store, self.force, hook, start,
                                            context.text_writer_thread)
            return write_part_locked(self.spec, extractor, shard, store, self.force, hook, self.here.log, start,
                                     context.text_writer_thread)

    def count(self, file: InputFile) -> RangeCounts:
        """The count-only pass over one range of a split file (nothing is written)."""
        extractor = self._context().extractor(self.spec)
        with self._timed("count"):
            return count_range(self.spec, extractor, file)

    def _context(self) -> WorkerContext:
        return current() if self.here is None else self.here.context

    def _timed(self, stage: str) -> AbstractContextManager[None]:
        return nullcontext() if self.here is None else self.here.clock.timed(stage)


def start_worker(start: WorkerStart) -> None:
    """Pool initializer (engine/worker_pool.py): the run's environment and working folder, which a worker
    forked from an older forkserver would not have, then the worker's context, set once
    (engine/worker_context.py)."""
    os.environ.clear()
    os.environ.update(start.env)
    os.chdir(start.cwd)
    start_context(WorkerContext.in_pool(start))


T = TypeVar("T")


def run_marked(slot: int, fn: Callable[..., T], *args: object) -> T:
    """Run one task with this worker's pid in its slot, so that if the worker dies (a signal such
    as SIGBUS, os._exit) the calling process can name the task it held (worker_pool.WorkerDied)."""
    slots = current().task_slots
    if slots is not None:
        slots.mark_started(slot)
    try:
        return fn(*args)
    finally:
        if slots is not None:
            slots.mark_done(slot)
