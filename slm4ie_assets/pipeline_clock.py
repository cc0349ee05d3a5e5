"""Seconds per stage of one extraction run, so that a bench can show its critical path
(bench/scaling.py) without a profiler.

Serial stages, wall seconds in the parent: `plan` (listing and cutting the files), `pool_start`
(from asking for worker processes until the first of them holds a task), `publish` (from the last
part written until the version is published). Pooled stages, seconds summed over the workers:
`count` (count-only passes over earlier ranges) and `extract` (writing parts). `stage` is the
stager thread's copying, which overlaps the extraction.
"""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

STAGES = ("plan", "pool_start", "count", "extract", "stage", "publish")

T = TypeVar("T")


@dataclass
class StageClock:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:  # the stager thread adds too
            self.seconds[stage] += seconds

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)


@dataclass(frozen=True)
class Timed(Generic[T]):
    """A pooled task's result and the seconds the worker spent on it."""
    result: T
    seconds: float


def timed_call(fn: Callable[..., T], *args: object) -> Timed[T]:
    """Run `fn(*args)` in a worker and say how long it took (module level, so pools can pickle it)."""
    started = time.perf_counter()
    result = fn(*args)
    return Timed(result, time.perf_counter() - started)
