"""What a process that extracts parts holds for its whole life, in one value: a pool worker's is
set once as it starts (`pool_worker.serve`, from the `WorkerStart` the pool hands it); the calling
process extracting with one worker builds its own (`WorkerContext.in_process`) and passes it.
Nothing here starts a thread or reads a file until a task asks for it, so a worker forked from the
preloaded server starts as fast as before.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..catalog import DatasetSpec
from ..extractors.base import Extractor
from ..extractors.registry import make_extractor
from ..planning.shards import Shard
from .progress import ShardCounters, ShardReporter

ProgressHook = Callable[[int, int, int], None]  # part_writer.Progress: documents, text bytes, files done


@dataclass
class WorkerContext:
    """A worker's settings and the state it keeps from task to task."""

    text_writer_thread: bool = True
    reporter: ShardReporter | None = None  # publishes the progress of the shard being extracted
    _cached: tuple[tuple[str, str], Extractor] | None = field(default=None, repr=False)

    @classmethod
    def in_pool(cls, text_writer_thread: bool, counters: ShardCounters | None,
                sampling_period: float) -> "WorkerContext":
        """A pool worker's, set once as it starts (pool_worker.serve)."""
        reporter = ShardReporter(counters, sampling_period) if counters is not None else None
        return cls(text_writer_thread, reporter)

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
    """Called once, as a pool worker starts (pool_worker.serve)."""
    global _CURRENT
    _CURRENT = context


def current() -> WorkerContext:
    """This pool worker's context."""
    return _CURRENT
