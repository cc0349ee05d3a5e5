"""Seconds per stage of one extraction run, so that a bench can show its critical path
(bench/scaling.py) without a profiler.

Serial stages, wall seconds in the parent: `plan` (listing and cutting the files), `pool_start`
(from asking for worker processes until the first of them starts a task), `publish` (from the last
part written until the version is published). Pooled stages, seconds summed over the workers:
`count` (count-only passes over earlier ranges) and `extract` (writing parts), and beside them the
CPU seconds the pool's workers spent on each (`cpu`: on a busy host wall seconds in a worker also
count the neighbours' turns, CPU seconds do not; bench/scaling.py projects from them). `stage` is
the stager thread's copying, which overlaps the extraction.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

STAGES = ("plan", "pool_start", "count", "extract", "stage", "publish")

T = TypeVar("T")


@dataclass(frozen=True)
class Timed(Generic[T]):
    """A pooled task's result, when the worker started it (epoch seconds) and how long it took."""

    result: T
    started: float
    seconds: float
    cpu: float = 0.0  # CPU seconds of the worker process (its threads included) while it ran


@dataclass
class StageClock:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    cpu: dict[str, float] = field(default_factory=dict)  # pooled stages: the workers' CPU seconds
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _pool_opened: float | None = None
    _first_task: float | None = None

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:  # the stager thread and the pool's result thread add too
            self.seconds[stage] += seconds

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started)

    def pool_opened(self) -> None:
        self._pool_opened, self._first_task = time.time(), None

    def task_done(self, stage: str, timed: Timed) -> None:
        """A pooled task's seconds; the first task to start ends the pool's start-up."""
        self.add(stage, timed.seconds)
        with self._lock:
            self.cpu[stage] = self.cpu.get(stage, 0.0) + timed.cpu
            if self._pool_opened is not None and self._first_task is None:
                self._first_task = timed.started
                self.seconds["pool_start"] += max(0.0, timed.started - self._pool_opened)
            elif self._first_task is not None and timed.started < self._first_task:
                self.seconds["pool_start"] -= self._first_task - timed.started
                self._first_task = timed.started
