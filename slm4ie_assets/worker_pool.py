"""The process pool a run extracts with (pipeline.extract_parts).

Workers fork from a forkserver (pool_server.py) that has imported `pool_worker` (the part writer
and the extractors, not Dagster or the publish) once, so each new worker costs a fork, not an
interpreter start and ~0.2 s of imports: at 16 workers that was ~3 CPU seconds a run. The server is
started once per process (or early: `pool_server.start_early`) and may be older than the run: each
worker takes the run's environment and working folder in its initializer, as a spawned one would.
Every task is timed in its worker for the run's stage clock (pipeline_clock.py).
"""

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from typing import Any, TypeVar

from .catalog import DatasetSpec
from .pipeline_clock import StageClock, Timed, timed_call
from .pool_server import pool_context, usable_cpus
from .pool_worker import start_worker
from .progress import Counters, Log, init_pool_worker
from .shards import Shard
from .stalls import StallLimits, StallWatch, init_watched_worker

T = TypeVar("T")


def open_pool(spec: DatasetSpec, shards: list[Shard], workers: int, counters: Counters | None, period: float,
              log: Log | None) -> tuple[ProcessPoolExecutor, Callable[[list[int]], None] | None]:
    """The pool, and the stall watch to call while it works (None: not watched); the shared
    counters (and the watch's pid slots) reach the workers through the initializer."""
    init: Callable[..., None] | None = None
    init_args: tuple = ()
    watch = None
    if counters is not None and (spec.stall_seconds > 0 or spec.stall_timeout_seconds > 0):
        pids = multiprocessing.RawArray("q", len(shards))
        limits = StallLimits(spec.stall_seconds or float("inf"), spec.stall_timeout_seconds)
        watch = StallWatch(spec.key, shards, counters, pids, limits, log).check
        init, init_args = init_watched_worker, (counters, period, pids)
    elif counters is not None:
        init, init_args = init_pool_worker, (counters, period)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(), initializer=start_worker,
                               initargs=(dict(os.environ), os.getcwd(), workers < usable_cpus(), init, init_args))
    return pool, watch


def submit_timed(pool: ProcessPoolExecutor, clock: StageClock, stage: str, fn: Callable[..., T],
                 *args: object) -> "Future[T]":
    """`pool.submit(fn, *args)`, timed in the worker under `stage`; cancelling the returned future
    cancels the task."""
    inner = pool.submit(timed_call, fn, *args)
    outer: Future[T] = Future()

    def settle(done: "Future[Timed[T]]") -> None:
        if done.cancelled():
            outer.cancel()
            return
        exc = done.exception()
        if exc is not None:
            _settle_unless_cancelled(outer.set_exception, exc)
            return
        timed = done.result()
        clock.task_done(stage, timed)
        _settle_unless_cancelled(outer.set_result, timed.result)

    outer.add_done_callback(lambda f: f.cancelled() and inner.cancel())
    inner.add_done_callback(settle)
    return outer


def _settle_unless_cancelled(setter: Callable[[Any], None], value: object) -> None:
    """The caller may cancel a task that is already running (a stall kill cancels what is left):
    how it ends is then nobody's news, not an InvalidStateError traceback on stderr (issue 34)."""
    try:
        setter(value)
    except InvalidStateError:
        pass
