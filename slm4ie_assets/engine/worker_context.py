"""What a process that extracts parts holds for its whole life, in one value: a pool worker's is
set once as it starts (`pool_worker.start_worker`, from the `WorkerStart` the pool hands it); the
calling process extracting with one worker builds its own (`WorkerContext.in_process`) and passes
it. Nothing here starts a thread or reads a file until a task asks for it, so a worker forked from
the preloaded server starts as fast as before.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..catalog import DatasetSpec
from ..extractors.base import Extractor
from ..extractors.registry import make_extractor
from ..planning.shards import Shard
from .progress import ShardCounters, ShardReporter
from .stalls import TaskPids

ProgressHook = Callable[[int, int, int], None]  # part_writer.Progress: documents, text bytes, files done


@dataclass(frozen=True)
class WorkerStart:
    """What the calling process hands each pool worker as it starts; the shared arrays (counters,
    pids) can reach a worker only this way."""

    env: dict[str, str]  # the run's environment and working folder: the server may be older than the run
    cwd: str
    text_writer_thread: bool  # only while the pool leaves a core spare (parts/writer.py)
    task_slots: TaskPids  # per pool task slot, the worker running it (worker_pool.TaskPool)
    counters: ShardCounters | None = None  # None: nobody follows the run's progress
    sampling_period: float = 1.0
    shard_pids: TaskPids | None = None  # per shard, for the stall watch (None: not watched)


@dataclass
class WorkerContext:
    """A worker's settings and the state it keeps from task to task."""

    text_writer_thread: bool = True
    reporter: ShardReporter | None = None  # publishes the progress of the shard being extracted
    shard_pids: TaskPids | None = None
    task_slots: TaskPids | None = None
    _cached: tuple[tuple[str, str], Extractor] | None = field(default=None, repr=False)

    @classmethod
    def in_pool(cls, start: WorkerStart) -> "WorkerContext":
        reporter = ShardReporter(start.counters, start.sampling_period) if start.counters is not None else None
        return cls(start.text_writer_thread, reporter, start.shard_pids, start.task_slots)

    @classmethod
    def in_process(cls, counters: ShardCounters | None, sampling_period: float) -> "WorkerContext":
        """The calling process extracting by itself: it keeps the text writer's thread (it has a core
        to spare for it) and is not stall-watched (a blocked read would block the watch too)."""
        return cls(True, ShardReporter(counters, sampling_period) if counters is not None else None)

    def extractor(self, spec: DatasetSpec) -> Extractor:
        """`spec`'s extractor, built and prepared once and kept for the next task of the same dataset."""
        key = (spec.key, spec.recipe)
        if self._cached is None or self._cached[0] != key:
            self._cached = None  # the previous dataset's goes before the next one prepares
            extractor = make_extractor(spec.extractor, spec.options)
            extractor.prepare(spec.raw_dir)
            self._cached = (key, extractor)
        return self._cached[1]

    def mark_started(self, task: int) -> None:
        """As a pool worker starts `task`: its pid, for the stall watch to name (and kill)."""
        if self.shard_pids is not None:
            self.shard_pids.mark_started(task)

    @contextmanager
    def track(self, task: int, shard: Shard) -> Iterator[ProgressHook | None]:
        """The part writer's progress hook while `shard` is extracted (None: nobody follows)."""
        if self.reporter is None:
            yield None
            return
        with self.reporter.track(task, shard) as hook:
            yield hook

    def close(self) -> None:
        """Stops the progress sampler (the calling process's own context, at the end of its run)."""
        if self.reporter is not None:
            self.reporter.close()


_CURRENT = WorkerContext()  # a pool worker's, replaced once by `start` (defaults: a pool without progress)


def start(context: WorkerContext) -> None:
    """Called once, in the pool's initializer."""
    global _CURRENT
    _CURRENT = context


def current() -> WorkerContext:
    """This pool worker's context."""
    return _CURRENT
