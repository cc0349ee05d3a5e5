"""A pool worker that stops making progress (SIGSTOP, a hung NFS read, a livelock) is noticed.

Without this a run waits for ever and its progress lines repeat the same numbers with a growing
ETA. The calling process already sees, per shard, the documents written and the input bytes read
(engine/progress.py's `ShardCounters`), and the pool's pid table says which worker runs it. While
it waits for the pool, the calling process looks every second: a shard in flight whose two numbers
have not moved for `stall_seconds` is logged once, naming the shard and the worker's pid; with
`stall_timeout_seconds` set, one that has not moved for that long fails the run with
`WorkerStalled` naming them, after the pool's workers are killed (a stopped or blocked process, even
an idle one, would otherwise keep the pool, and so the run, from ending). A killed worker's locks
go with it; its unfinished part is only `.partial` files, which the next run removes.

With one worker the shard is extracted in the calling process, which cannot be watched this way
from inside (a blocked read blocks the watcher's own process too); only pool workers are watched.
"""

import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..planning.shards import Shard
from .progress import ShardCounters

Log = Callable[[str], None]
POLL_SECONDS = 1.0  # how often the calling process looks while it waits for the pool


@dataclass(frozen=True, slots=True)
class StallLimits:
    """Seconds without progress before a shard is reported, and before the run fails (0: never)."""

    warn_seconds: float
    fail_seconds: float = 0.0


class WorkerStalled(RuntimeError):
    """A pool worker made no progress on its shard for `stall_timeout_seconds`; it was killed."""


class PidTable(Protocol):
    """Which pool worker runs each job (engine/worker_pool.py's one pid table), by slot: a shard's
    extraction is in its task's slot."""

    def pid(self, slot: int) -> int:
        """The pid of the worker running the job in `slot` (0: none)."""
        ...

    def workers(self) -> set[int]:
        """Every worker of the pool."""
        ...


class StallWatch:
    """The calling process's check of the shards in flight; `check` is called while it waits."""

    def __init__(self, dataset: str, shards: Sequence[Shard], counters: ShardCounters, pids: PidTable,
                 limits: StallLimits, log: Log | None):
        self._dataset, self._shards, self._counters, self._pids = dataset, shards, counters, pids
        self._limits, self._log = limits, log
        self._seen: dict[int, tuple[tuple[int, int], float]] = {}  # task -> (its numbers, since when)
        self._reported: set[int] = set()

    def check(self, in_flight: Iterable[int], now: float | None = None) -> None:
        """Note what moved among the shards being extracted (`in_flight`); report (once) or fail on
        what did not."""
        now = time.monotonic() if now is None else now
        flying = list(in_flight)
        for task in flying:
            numbers = self._counters.numbers(task)
            seen = self._seen.get(task)
            if seen is None or seen[0] != numbers or self._pids.pid(task) <= 0:  # moved, or not started yet
                self._seen[task] = (numbers, now)
                self._reported.discard(task)
                continue
            self._judge(task, now - seen[1])
        for task in set(self._seen) - set(flying):
            del self._seen[task]

    def _judge(self, task: int, quiet: float) -> None:
        pid = self._pids.pid(task)
        fail = self._limits.fail_seconds
        if fail > 0 and quiet >= fail:
            # every worker of this pool goes (each wrote its pid here on its first shard): the pool
            # cannot shut down while one is stopped or blocked, even an idle one, and a killed part
            # writer leaves only `.partial` files (crash-safe by design)
            for worker in sorted(self._pids.workers(), key=lambda p: p != pid):
                try:
                    os.kill(worker, signal.SIGKILL)
                except OSError:
                    pass  # it ended meanwhile
            raise WorkerStalled(f"{self._what(task, pid)} for {quiet:.0f}s, beyond stall_timeout_seconds "
                                f"({fail:g}); the run's workers were killed and nothing was published. Check the "
                                "input (a hung network mount, a file being rewritten) and run again")
        if quiet >= self._limits.warn_seconds and task not in self._reported and self._log is not None:
            self._reported.add(task)
            self._log(f"WARNING {self._what(task, pid)} for {quiet:.0f}s (stall_seconds "
                      f"{self._limits.warn_seconds:g}); still waiting" + ("" if fail > 0 else
                      "; set stall_timeout_seconds to fail such a run"))

    def _what(self, task: int, pid: int) -> str:
        worker = f"worker pid {pid}" if pid > 0 else "a worker that has not reported its pid"
        return (f"{self._dataset}: shard {self._shards[task].key!r} ({worker}) has made no progress "
                "(no document written, no input byte read)")
