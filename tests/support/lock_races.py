"""Ordering races between real runs by events, never by timing: which process holds which flock
now (read from /proc/locks, without touching the lock), and freezing a run's whole process group
with SIGSTOP while it holds one (tests/reliability/test_shard_locks.py)."""

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from support.dagster_cli import dagster_env
from support.paths import REPO, VENV_BIN

WAIT_LIMIT = 600  # seconds before a wait for an event is declared hung (a failure, not a timing claim)


class MaterializeRun:
    """`dagster asset materialize` of `shards/<key>` over a partition range (or of `extracted/<key>`)
    in its own process group, one worker, its log collected as it is written."""

    def __init__(self, config: Path, home: Path, key: str, first: str | None = None, last: str | None = None,
                 force: bool = False):
        settings: dict = {"max_workers": 1, **({"force": True} if force else {})}
        select = ["--select", f"extracted/{key}"] if first is None else [
            "--select", f"shards/{key}", "--partition-range", f"{first}...{last}"]
        args = [str(VENV_BIN / "dagster"), "asset", "materialize", *select,
                "--config-json", json.dumps({"resources": {"extract": {"config": settings}}})]
        self.proc = subprocess.Popen(args, cwd=REPO, env=dagster_env(config, home), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait(self) -> int:
        rc = self.proc.wait(timeout=WAIT_LIMIT)
        self._reader.join(timeout=30)
        return rc

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(timeout=30)

    def owns(self, pid: int) -> bool:
        """Whether `pid` is one of the run's processes (the CLI, its step process, pool workers)."""
        try:
            return os.getpgid(pid) == self.proc.pid
        except ProcessLookupError:
            return False


def flock_holders(path: Path) -> list[tuple[int, str]]:
    """(pid, READ|WRITE) of every process holding an flock on `path` now, from /proc/locks."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return []
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = []
    with open("/proc/locks") as fh:
        for line in fh:
            fields = line.split()
            if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or fields[5] != device:
                continue  # "->" marks a blocked waiter; our locks poll, so none should appear
            holders.append((int(fields[4]), fields[3]))
    return holders


def holds(run: MaterializeRun, path: Path, mode: str = "WRITE") -> bool:
    return any(run.owns(pid) and kind == mode for pid, kind in flock_holders(path))


def wait_for(predicate, what: str, runs: list[MaterializeRun]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT
    while not predicate():
        for run in runs:
            if run.proc.poll() is not None:
                run.wait()
                raise AssertionError(f"a run ended while waiting for {what}:\n{run.log[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.002)


def freeze_while_holding(run: MaterializeRun, lock_files: list[Path]) -> Path:
    """SIGSTOP `run`'s process group at a moment it holds one of `lock_files`, and return that one.
    A run seen holding a lock may let it go before the signal lands: then it is let go on and
    caught again on its next shard."""
    for _ in range(len(lock_files)):
        wait_for(lambda: any(holds(run, p) for p in lock_files), "the run to hold a shard lock", [run])
        run.signal(signal.SIGSTOP)
        held = [p for p in lock_files if holds(run, p)]
        if held:
            return held[0]
        run.signal(signal.SIGCONT)
    raise AssertionError("the run let go of each shard lock before it could be frozen")
