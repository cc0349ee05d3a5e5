"""The process pool a run extracts with (pipeline.extract_parts): a few worker processes, each
with a pipe of its own, one job at a time (engine/range_scheduler.py keeps one job per worker in
flight, so nothing ever queues).

Workers fork from a forkserver (engine/pool_server.py) that has imported `pool_worker` (the part
writer and the extractors, not Dagster or the publish) once, so each new worker costs a fork, not
an interpreter start and ~0.2 s of imports: at 16 workers that was ~3 CPU seconds a run. The server
is started once per process (or early: `pool_server.start_early`) and may be older than the run:
each worker takes the run's environment and working folder as it starts (`pool_worker.serve`), as
a spawned one would. A job goes to a free worker as the scheduler's own typed entry
(`range_scheduler.Extracting` or `Counting`), which names its stage and its slot in the one pid
table (which worker runs it: the stall watch names and kills by it); the worker answers with the
result and its seconds, which go into the run's stage clock under that stage.

A worker that dies without a Python error (SIGBUS from a file truncated under a memory map, the OOM
killer's SIGKILL, a native crash) is seen through its process sentinel: the run fails with
`WorkerDied` naming the dataset, the shard (or range count) and the file it held, and its signal.
"""

import os
import signal
from multiprocessing.connection import Connection, wait
from typing import Any

from ..catalog import DatasetSpec
from ..utils.cpus import usable_cpus
from .pool_server import pool_context
from .pool_worker import Failed, PartWork, WorkerStart, serve
from .progress import ShardCounters
from .range_scheduler import Counting, Extracting, Job
from .stage_clock import StageClock, Timed


class WorkerDied(RuntimeError):
    """A pool worker ended without a Python error while it held a job; names the job."""


class WorkerPool:
    """`workers` processes forked from the pool's server, each fed one job at a time through its
    own pipe (`start`), answered through the same pipe (`finished`). Use it as a context manager:
    leaving it lets every worker finish its job and exit."""

    def __init__(self, spec: DatasetSpec, workers: int, start: WorkerStart, clock: StageClock):
        self._ctx = pool_context()
        self._dataset, self._max, self._start, self._clock = spec.key, workers, start, clock
        self._procs: list[Any] = []  # multiprocessing's Process objects (their pid, sentinel, exitcode)
        self._conns: list[Connection] = []
        self._idle: list[int] = []
        self._holding: dict[int, Job] = {}  # worker -> its job
        self._pids: dict[int, int] = {}  # the pid table: job slot -> the pid of the worker running it

    def _spawn(self) -> int:
        """One more worker (started as the first jobs come, so the first one runs at once)."""
        assert len(self._procs) < self._max, "the scheduler starts no more jobs than workers"
        ours, theirs = self._ctx.Pipe()
        proc = self._ctx.Process(  # type: ignore[attr-defined]  # every concrete context has it
            target=serve, args=(self._start, theirs), name=f"slm4ie-worker-{len(self._procs)}", daemon=True)
        try:
            proc.start()
        finally:
            theirs.close()  # the worker's end lives in the worker only: its death reads as EOF here
        self._procs.append(proc)
        self._conns.append(ours)
        return len(self._procs) - 1

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, job: Job) -> None:
        """Run `job` on a free worker (the scheduler never starts more jobs than workers)."""
        worker = self._idle.pop() if self._idle else self._spawn()
        self._holding[worker] = job
        self._pids[job.slot] = self._procs[worker].pid
        try:
            self._conns[worker].send(job)
        except OSError:  # it died while idle: its sentinel says how, at the next `finished`
            pass

    def finished(self, timeout: float | None) -> list[tuple[Job, object]]:
        """The jobs done (waiting up to `timeout` s for the first), each with its result; a job's
        exception is raised here, a dead worker's as `WorkerDied`."""
        busy = list(self._holding)
        ready = set(wait([self._conns[w] for w in busy] + [self._procs[w].sentinel for w in busy], timeout))
        done: list[tuple[Job, object]] = []
        dead = []
        for worker in busy:
            if self._conns[worker] in ready:
                try:
                    answer = self._conns[worker].recv()
                except (EOFError, OSError):
                    dead.append(worker)
                    continue
                job = self._free(worker)
                if isinstance(answer, Failed):
                    raise answer.raised()
                assert isinstance(answer, Timed)
                self._clock.task_done(job.stage, answer)
                done.append((job, answer.result))
            elif self._procs[worker].sentinel in ready:
                dead.append(worker)
        if dead:
            raise self._died(dead)
        return done

    def pid(self, slot: int) -> int:
        """The worker running the job in `slot` (0: none)."""
        return self._pids.get(slot, 0)

    def workers(self) -> set[int]:
        """Every worker's pid."""
        return {p.pid for p in self._procs if p.pid is not None}

    def _free(self, worker: int) -> Job:
        job = self._holding.pop(worker)
        self._pids.pop(job.slot, None)
        self._idle.append(worker)
        return job

    def _died(self, dead: list[int]) -> WorkerDied:
        lines = []
        for worker in dead:
            proc = self._procs[worker]
            proc.join(5)
            job = self._holding.get(worker)
            doing = f"running {job_name(self._dataset, job)}" if job is not None else "before it started a task"
            code = proc.exitcode
            status = exit_status(code) if code is not None else "died abruptly"
            lines.append(f"a pool worker (pid {proc.pid}) {doing} {status}")
        for proc in self._procs:  # the run fails: the others' jobs are abandoned, as their .partial files are
            if proc.exitcode is None:
                proc.terminate()
        return WorkerDied("; ".join(lines) + "; nothing was published. Check the input named (a file truncated or "
                          "rewritten while it was read, a damaged disk) and the memory of the host (the OOM killer), "
                          "then run again")

    def close(self) -> None:
        """Let every worker finish its job (its answer is read and dropped: the run is over), then
        tell it to exit and wait for it."""
        while self._holding_alive():
            try:
                self.finished(None)
            except BaseException:  # noqa: BLE001 - a second failure adds nothing to the first
                pass
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self._procs:
            proc.join()
        for conn in self._conns:
            conn.close()

    def _holding_alive(self) -> bool:
        for worker in list(self._holding):
            if self._procs[worker].exitcode is not None:
                self._free(worker)
        return bool(self._holding)


def worker_start(work: PartWork, workers: int, counters: ShardCounters | None, period: float) -> WorkerStart:
    """What each worker of a run's pool starts with: the text writer keeps its thread only while
    the pool leaves a core spare."""
    return WorkerStart(work, dict(os.environ), os.getcwd(), workers < usable_cpus(), counters, period)


def exit_status(code: int) -> str:
    """A process's exit as a person reads it: `died with SIGBUS (rc 135)`, `exited with code 3`."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"died with {name} (rc {128 - code})"
    return f"exited with code {code}"


def job_name(dataset: str, job: Job) -> str:
    """What a job works on: `dataset 'd' shard 'a.txt%r1' (file a.txt, range 1)`, or `dataset 'd'
    the count of 'a.txt' range 0`."""
    if isinstance(job, Counting):
        where = f" range {job.file.range.index}" if job.file.range is not None else ""
        return f"dataset {dataset!r} the count of {job.file.rel!r}{where}"
    assert isinstance(job, Extracting)
    files = [f.rel for f in job.shard.files]
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    rng = job.shard.files[0].range
    where = f", range {rng.index}" if rng is not None else ""
    return f"dataset {dataset!r} shard {job.shard.key!r} (file{'s' if len(files) > 1 else ''} {shown}{where})"
