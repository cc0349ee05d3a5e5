"""The process pool a run extracts with (pipeline.extract_parts).

Workers fork from a forkserver (engine/pool_server.py) that has imported `pool_worker` (the part writer
and the extractors, not Dagster or the publish) once, so each new worker costs a fork, not an
interpreter start and ~0.2 s of imports: at 16 workers that was ~3 CPU seconds a run. The server is
started once per process (or early: `pool_server.start_early`) and may be older than the run: each
worker takes the run's environment and working folder in its initializer, as a spawned one would.
Every task is timed in its worker for the run's stage clock (engine/stage_clock.py).

A worker that dies without a Python error (SIGBUS from a file truncated under a memory map, the
OOM killer's SIGKILL, a native crash) breaks the pool, which fails every task in flight with a
bare `BrokenProcessPool`. Each task therefore runs in a numbered slot where its worker writes its
pid (`pool_worker.run_marked`), so the run fails with `WorkerDied` naming the dataset, the shard
(or range count) and the file the dead worker held, and its signal.
"""

import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any, ParamSpec, TypeVar

from ..catalog import DatasetSpec
from ..extractors.input_file import InputFile
from ..planning.shards import Shard
from .pool_server import pool_context, usable_cpus
from .pool_worker import run_marked, start_worker
from .progress import Log, ShardCounters
from .stage_clock import StageClock, Timed, timed_call
from .stalls import StallLimits, StallWatch, TaskPids
from .worker_context import WorkerStart

T = TypeVar("T")
P = ParamSpec("P")
SLOTS = 1024  # task slots, reused in turn: far more than one pool has in flight (workers + its queue)


class WorkerDied(RuntimeError):
    """A pool worker ended without a Python error while it held a task; names the task."""


class TaskPool(ProcessPoolExecutor):
    """A process pool that knows which task each worker runs (its pid in the task's slot), so that
    a worker's death is reported naming what it held (`died`)."""

    def __init__(self, workers: int, initializer: Callable[..., None], initargs: tuple,
                 slots: TaskPids):
        super().__init__(max_workers=workers, mp_context=pool_context(), initializer=initializer,
                         initargs=initargs)
        self._slots = slots
        self._what: dict[int, str] = {}  # slot -> the task last submitted there
        self._next = 0
        self._workers: dict[int, Any] = {}  # every worker process started, by pid
        self._lock = threading.Lock()
        self._death: str | None = None

    def submit_marked(self, what: str, fn: Callable[..., T], *args: object) -> "Future[Timed[T]]":
        with self._lock:
            slot = self._next % SLOTS
            self._next += 1
            self._what[slot] = what
        fut = self.submit(timed_call, partial(run_marked, slot, fn), *args)
        self._workers.update(getattr(self, "_processes", None) or {})  # CPython's pid -> Process
        return fut

    def died(self, exc: BaseException) -> BaseException:
        """`exc`, or for a broken pool a WorkerDied naming the dead worker's task and signal."""
        if not isinstance(exc, BrokenProcessPool):
            return exc
        with self._lock:
            if self._death is None:
                self._death = self._describe_death()
        died = WorkerDied(self._death)
        died.__cause__ = exc
        return died

    def _describe_death(self) -> str:
        """Called as the pool breaks, before it terminates the other workers: the dead ones are
        those with an exit status."""
        self._workers.update(getattr(self, "_processes", None) or {})
        dead = [(pid, code) for pid, proc in self._workers.items() if (code := proc.exitcode) not in (None, 0)]
        lines = []
        for pid, code in dead:
            held = [self._what[i] for i in range(SLOTS) if self._slots.pid(i) == pid and i in self._what]
            doing = f"running {' and '.join(held)}" if held else "before it started a task"
            lines.append(f"a pool worker (pid {pid}) {doing} {exit_status(code)}")
        if not lines:
            running = [self._what[i] for i in range(SLOTS) if self._slots.pid(i) > 0 and i in self._what]
            lines.append("a pool worker died abruptly" + (f" while these ran: {'; '.join(running)}" if running else ""))
        return "; ".join(lines) + "; nothing was published. Check the input named (a file truncated or rewritten " \
            "while it was read, a damaged disk) and the memory of the host (the OOM killer), then run again"


def open_pool(spec: DatasetSpec, shards: list[Shard], workers: int, counters: ShardCounters | None,
              period: float, log: Log | None) -> tuple[ProcessPoolExecutor, Callable[[list[int]], None] | None]:
    """The pool, and the stall watch to call while it works (None: not watched); the shared
    counters and pid slots reach the workers in their `WorkerStart`. The text writer keeps its
    thread only while the pool leaves a core spare."""
    shard_pids, watch = None, None
    if counters is not None and (spec.stall_seconds > 0 or spec.stall_timeout_seconds > 0):
        shard_pids = TaskPids.shared(len(shards))
        limits = StallLimits(spec.stall_seconds or float("inf"), spec.stall_timeout_seconds)
        watch = StallWatch(spec.key, shards, counters, shard_pids, limits, log).check
    slots = TaskPids.shared(SLOTS)
    start = WorkerStart(dict(os.environ), os.getcwd(), workers < usable_cpus(), slots, counters, period, shard_pids)
    pool = TaskPool(workers, start_worker, (start,), slots)
    return pool, watch


def exit_status(code: int) -> str:
    """A process's exit as a person reads it: `died with SIGBUS (rc 135)`, `exited with code 3`."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"died with {name} (rc {128 - code})"
    return f"exited with code {code}"


def task_name(fn: Callable, args: Sequence[object]) -> str:
    """What a task works on, from its arguments (and the spec of the work it is a method of):
    `dataset 'd' shard 'a.txt@r1' (file a.txt, range 1)`."""
    owner_spec = getattr(getattr(fn, "__self__", None), "spec", None)
    dataset = next((f"dataset {a.key!r} " for a in (owner_spec, *args) if isinstance(a, DatasetSpec)), "")
    for a in args:
        if isinstance(a, Shard):
            files = [f.rel for f in a.files]
            shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            where = f", range {a.files[0].range.index}" if a.files[0].range is not None else ""
            return f"{dataset}shard {a.key!r} (file{'s' if len(files) > 1 else ''} {shown}{where})"
        if isinstance(a, InputFile):
            where = f" range {a.range.index}" if a.range is not None else ""
            return f"{dataset}the count of {a.rel!r}{where}"
    return f"{dataset}{getattr(fn, '__name__', 'a task')}"


def submit_timed(pool: ProcessPoolExecutor, clock: StageClock, stage: str, fn: Callable[..., T],
                 *args: object) -> "Future[T]":
    """`pool.submit(fn, *args)`, timed in the worker under `stage`; cancelling the returned future
    cancels the task."""
    if isinstance(pool, TaskPool):
        inner = pool.submit_marked(task_name(fn, args), fn, *args)
    else:
        inner = pool.submit(timed_call, fn, *args)
    outer: Future[T] = Future()

    def settle(done: "Future[Timed[T]]") -> None:
        if done.cancelled():
            outer.cancel()
            return
        exc = done.exception()
        if exc is not None:
            _settle_unless_cancelled(outer.set_exception, pool.died(exc) if isinstance(pool, TaskPool) else exc)
            return
        timed = done.result()
        clock.task_done(stage, timed)
        _settle_unless_cancelled(outer.set_result, timed.result)

    outer.add_done_callback(lambda f: f.cancelled() and inner.cancel())
    inner.add_done_callback(settle)
    return outer


class TimedPool(Executor):
    """A run's pool as the range scheduler sees it: `submit(work.extract, ...)` runs in a worker,
    timed under the stage the method is named for (`extract`, `count`; engine/stage_clock.py)."""

    def __init__(self, pool: ProcessPoolExecutor, clock: StageClock):
        self._pool, self._clock = pool, clock

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> "Future[T]":
        assert not kwargs, "pool tasks take positional arguments"
        return submit_timed(self._pool, self._clock, fn.__name__, fn, *args)


def _settle_unless_cancelled(setter: Callable[[Any], None], value: object) -> None:
    """The caller may cancel a task that is already running (a stall kill cancels what is left):
    how it ends is then nobody's news, not an InvalidStateError traceback on stderr (issue 34)."""
    try:
        setter(value)
    except InvalidStateError:
        pass
