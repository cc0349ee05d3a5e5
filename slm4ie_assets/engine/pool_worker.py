"""The unit of work of a run (pipeline.extract_parts), by name: `PartWork.extract` writes one part,
`PartWork.count` counts one range of a split file (docs/splitting.md), and the loop a pool worker
runs them in (`serve`). engine/range_scheduler.py hands out the jobs; the same methods run in a pool
worker, with the extractor rebuilt from the picklable spec once per dataset and kept for the
worker's next task, and, with one worker, in the run's own process."""

import os
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..catalog import DatasetSpec
from ..extractors.extract_context import RangeCounts, RangeStart
from ..extractors.input_file import InputFile
from ..parts.locked import PartOutcome, write_part_in_worker, write_part_locked
from ..parts.writer import count_range
from ..planning.shards import Shard
from ..store.dataset_store import DatasetStore
from ..store.locks import Log
from .progress import ShardCounters
from .stage_clock import StageClock, Timed
from .worker_context import WorkerContext, current
from .worker_context import start as start_context


@dataclass(frozen=True)
class InProcess:
    """What a run extracting with one worker lends its `PartWork` in its own process: its worker
    context, its stage clock (a pool worker's jobs are timed by `serve`) and its log (a wait for a
    shard lock is logged there)."""

    context: WorkerContext
    clock: StageClock
    log: Log | None = None


@dataclass(frozen=True)
class PartWork:
    """One dataset's parts and range counts, done where a job lands: handed to each pool worker
    once, as it starts, as (spec, force), which runs it with the context it was started with
    (`worker_context.current`); or `here`, in the run's own process."""

    spec: DatasetSpec
    force: bool = False
    here: InProcess | None = None  # None: in a pool worker

    def extract(self, task: int, shard: Shard, start: RangeStart) -> PartOutcome:
        """Write shard `task`'s part (a range continuing from `start`) under its shard lock."""
        context = self._context()
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


@dataclass(frozen=True)
class WorkerStart:
    """What the calling process hands each pool worker as it starts: the work, the run's
    environment and working folder (the server may be older than the run), and the shared counters
    (a shared array reaches a worker only this way)."""

    work: PartWork
    env: dict[str, str]
    cwd: str
    text_writer_thread: bool  # only while the pool leaves a core spare (parts/writer.py)
    counters: ShardCounters | None = None  # None: nobody follows the run's progress
    sampling_period: float = 1.0


class RemoteTraceback(Exception):
    """Where a job failed in its worker: the worker's traceback, as the cause of what it raised."""

    def __str__(self) -> str:
        return f"\n{self.args[0]}" if self.args else ""


@dataclass(frozen=True)
class Failed:
    """What a job raised in its worker, and where."""

    error: BaseException
    where: str

    def raised(self) -> BaseException:
        self.error.__cause__ = RemoteTraceback(self.where)
        return self.error


def serve(start: WorkerStart, conn: Connection) -> None:
    """A pool worker's life (engine/worker_pool.py): the run's environment, folder and context once,
    then one job at a time from `conn`, answered with its result and seconds (`Timed`) or what it
    raised (`Failed`), until the pool sends None or goes away."""
    os.environ.clear()
    os.environ.update(start.env)
    os.chdir(start.cwd)
    start_context(WorkerContext.in_pool(start.text_writer_thread, start.counters, start.sampling_period))
    while (job := _receive(conn)) is not None:
        started, clock, cpu = time.time(), time.perf_counter(), time.process_time()
        try:
            result = job.run(start.work)
            answer: Any = Timed(result, started, time.perf_counter() - clock, time.process_time() - cpu)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling process
            answer = Failed(exc, traceback.format_exc())
            if not isinstance(exc, Exception):  # interrupted, or told to exit: say so and go
                _answer(conn, answer)
                raise
        if not _answer(conn, answer):
            return


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except (EOFError, OSError):  # the calling process is gone
        return None


def _answer(conn: Connection, answer: object) -> bool:
    """Send the answer; False when the calling process is gone."""
    try:
        conn.send(answer)
    except (BrokenPipeError, OSError):
        return False
    except Exception as exc:  # noqa: BLE001 - an answer that does not pickle (an odd exception)
        conn.send(Failed(RuntimeError(f"{type(exc).__name__}: {exc}"), traceback.format_exc()))
    return True
