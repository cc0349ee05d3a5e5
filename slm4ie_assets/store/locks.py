"""The dataset lock and the shard locks, so two runs never interleave their writes to one part or
publish from a part that is being rewritten.

Lock protocol (docs/architecture.md, "Locks"): writing a part holds the dataset lock SHARED and
that shard's lock EXCLUSIVE; unpacking, publishing and the dataset-wide clean-up hold the dataset
lock EXCLUSIVE. Locks are always taken in that order (dataset, then shard) and nobody waits for a
dataset lock while holding a shard lock, so no two runs can wait for each other.

`flock` is released by the kernel when the holder dies, so a killed run never leaves a stale lock.
A lock file is opened without following a symbolic link and is rewritten only once it is known to
be a regular file with no other name: a link planted at the lock path could otherwise make a run
create or truncate any file the user can write (the pattern of filelock's CVE-2025-68146).
`flock` is a local-kernel lock: see docs/architecture.md for shared volumes (NFS) and pods.
"""

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
TIMEOUT_ENV = "SLM4IE_LOCK_TIMEOUT"


def _timeout_from_env(default: float = 6 * 3600) -> float:
    """How long a run waits for another run's lock: 6 h, or $SLM4IE_LOCK_TIMEOUT seconds. Read at
    import, so the CLI, the code server and pool workers all wait the same."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        raise ValueError(f"{TIMEOUT_ENV}={raw!r}: expected the seconds a run waits for a lock, a number >= 0")
    return value


DEFAULT_TIMEOUT = _timeout_from_env()

Log = Callable[[str], None]


class LockTimeout(RuntimeError):
    pass


class LockFileError(RuntimeError):
    """Something other than our own lock file sits at the lock path; it is left untouched."""


@dataclass(frozen=True, slots=True)
class _LockName:
    """How messages name a lock: the dataset's, or one shard's."""

    dataset: str
    lock: str  # "the dataset lock", "the lock of shard 'a.txt'"
    held: str  # "another run holds the dataset lock", "another run is writing shard 'a.txt'"


@contextmanager
def dataset_lock(path: Path, dataset: str, timeout: float = DEFAULT_TIMEOUT, log: Log | None = None,
                 poll: float = 0.2, shared: bool = False) -> Iterator[None]:
    """Hold the dataset lock: EXCLUSIVE to unpack, publish or clean up; `shared` to write parts."""
    name = _LockName(dataset, "the dataset lock", "another run holds the dataset lock")
    with _held(path, name, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, timeout, log, poll):
        yield


@contextmanager
def shard_lock(path: Path, dataset: str, shard: str, timeout: float = DEFAULT_TIMEOUT, log: Log | None = None,
               poll: float = 0.2) -> Iterator[str]:
    """Hold one shard's lock (taken only while holding the dataset lock shared). Yields the holder
    this call waited for ("" when the lock was free): the caller then re-checks whether the part
    is current, since that run may have just written it."""
    name = _LockName(dataset, f"the lock of shard {shard!r}", f"another run is writing shard {shard!r}")
    with _held(path, name, fcntl.LOCK_EX, timeout, log, poll) as waited_for:
        yield waited_for


@contextmanager
def _held(path: Path, name: _LockName, mode: int, timeout: float, log: Log | None, poll: float) -> Iterator[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_lock_file(path, name)
    try:
        waited_for = _wait_for_lock(fd, path, name, mode, timeout, log, poll)
        _record_holder(fd)
        try:
            yield waited_for
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock_file(path: Path, name: _LockName) -> int:
    """Open (creating) the lock file itself, never what a link there points to.
    O_NONBLOCK only keeps a FIFO planted there from hanging the open; it is cleared again."""
    remedy = f"remove it (rm {str(path)!r}) and run again; the lock file is recreated on the next run"
    where = f"{name.dataset}: {name.lock} {path}"
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise LockFileError(f"{where} is a symbolic link (to {os.readlink(path)!r}); "
                                f"refusing to follow it, so its target is not touched: {remedy}") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            raise LockFileError(f"{where} is not a regular file; {remedy}") from None
        if exc.errno == errno.ENOENT:  # the folder was made just before: something removed it
            raise LockFileError(removed_while_opening(where, path)) from None
        raise
    try:
        check_opened_lock(os.fstat(fd), where, path, remedy)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_opened_lock(info: os.stat_result, where: str, path: Path, remedy: str) -> None:
    """Refuse what was opened at the lock path unless it is a regular file with one name. No name
    at all means it was removed (alone or with its folder) right after this run created it: a lock
    on a file nobody else can open would exclude no one."""
    if not stat.S_ISREG(info.st_mode):
        raise LockFileError(f"{where} is not a regular file; {remedy}")
    if info.st_nlink == 0:
        raise LockFileError(removed_while_opening(where, path))
    if info.st_nlink != 1:
        raise LockFileError(f"{where} is a hard link ({info.st_nlink} names for one "
                            f"file), so writing it would change another file too; {remedy}")


def removed_while_opening(where: str, path: Path) -> str:
    return (f"{where} was removed while this run opened it (the lock file, or its folder {path.parent}, "
            f"was deleted by something else: a clean-up of the output folder during the run?); nothing "
            f"was written. Make sure nothing deletes {path.parent} while runs are going, then run again")


def _wait_for_lock(fd: int, path: Path, name: _LockName, mode: int, timeout: float, log: Log | None,
                   poll: float) -> str:
    """Poll (never block in the kernel: the timeout and the message need the loop). Returns the
    holder waited for, or "" when the lock was free at once."""
    deadline = time.monotonic() + timeout
    waited = announced = False
    holder = ""
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return (holder or "unknown holder") if waited else ""
        except BlockingIOError:
            waited = True
            if not holder:
                try:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                except OSError:
                    pass
            if not announced and log is not None:
                log(f"{name.dataset}: {name.held} ({holder or 'unknown holder'}); waiting")
                announced = True
            if time.monotonic() >= deadline:
                raise LockTimeout(f"{name.dataset}: gave up after {timeout:.0f}s waiting for {name.lock} {path} "
                                  f"held by another run ({holder or 'unknown holder'})") from None
            time.sleep(poll)


def _record_holder(fd: int) -> None:
    """Name the holder in the file, for a waiting run's message; only ever on the checked lock file.
    Holders of a shared lock each write their line; the last one written is shown. Only a note: a
    full disk must not cost the lock (the run then fails where it writes, naming the dataset)."""
    line = f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}".encode()
    try:
        os.pwrite(fd, line, 0)
        os.ftruncate(fd, len(line))
    except OSError:
        pass
