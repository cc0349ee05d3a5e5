"""A per-dataset lock, so two runs on the same dataset never interleave their writes.

`flock` is released by the kernel when the holder dies, so a killed run never leaves a stale lock.
"""

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable


class LockTimeout(RuntimeError):
    pass


@contextmanager
def dataset_lock(path: Path, dataset: str, timeout: float = 6 * 3600, log: Callable[[str], None] | None = None,
                 poll: float = 0.2):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        announced = False
        holder = ""
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not holder:
                    try:
                        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                    except OSError:
                        pass
                if not announced and log is not None:
                    log(f"{dataset}: another run holds the dataset lock ({holder or 'unknown holder'}); waiting")
                    announced = True
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{dataset}: gave up after {timeout:.0f}s waiting for the dataset lock {path} "
                                      f"held by another run ({holder or 'unknown holder'})") from None
                time.sleep(poll)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
