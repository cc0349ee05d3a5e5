"""A per-dataset lock, so two runs on the same dataset never interleave their writes.

`flock` is released by the kernel when the holder dies, so a killed run never leaves a stale lock.
The lock file is opened without following a symbolic link and is rewritten only once it is known to
be a regular file with no other name: a link planted at the lock path could otherwise make a run
create or truncate any file the user can write (the pattern of filelock's CVE-2025-68146).
"""

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LockTimeout(RuntimeError):
    pass


class LockFileError(RuntimeError):
    """Something other than our own lock file sits at the lock path; it is left untouched."""


@contextmanager
def dataset_lock(path: Path, dataset: str, timeout: float = 6 * 3600, log: Callable[[str], None] | None = None,
                 poll: float = 0.2) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_lock_file(path, dataset)
    try:
        _wait_for_lock(fd, path, dataset, timeout, log, poll)
        _record_holder(fd)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock_file(path: Path, dataset: str) -> int:
    """Open (creating) the lock file itself, never what a link there points to.
    O_NONBLOCK only keeps a FIFO planted there from hanging the open; it is cleared again."""
    remedy = f"remove it (rm {str(path)!r}) and run again; the lock file is recreated on the next run"
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise LockFileError(f"{dataset}: the dataset lock {path} is a symbolic link (to {os.readlink(path)!r}); "
                                f"refusing to follow it, so its target is not touched: {remedy}") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            raise LockFileError(f"{dataset}: the dataset lock {path} is not a regular file; {remedy}") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LockFileError(f"{dataset}: the dataset lock {path} is not a regular file; {remedy}")
        if info.st_nlink != 1:
            raise LockFileError(f"{dataset}: the dataset lock {path} is a hard link ({info.st_nlink} names for one "
                                f"file), so writing it would change another file too; {remedy}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _wait_for_lock(fd: int, path: Path, dataset: str, timeout: float, log: Callable[[str], None] | None,
                   poll: float) -> None:
    deadline = time.monotonic() + timeout
    announced = False
    holder = ""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
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


def _record_holder(fd: int) -> None:
    """Name the holder in the file, for a waiting run's message; only ever on the checked lock file."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}".encode(), 0)
