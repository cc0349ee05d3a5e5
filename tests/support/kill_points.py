"""SIGKILL before the k-th file-system mutation of this process (D17): the crash tests' children
(reliability/test_crash_mutation_points.py, reliability/test_archive_kills.py) call `arm` first, so
every rename, link, unlink, mkdir, fsync ... and every open for writing is a numbered point, and no
window is too short to be hit. Only the standard library: a child imports this in its first
moments, before the code under test."""

import builtins
import io
import os
import signal
from collections.abc import Callable

MUTATORS = ("replace", "rename", "symlink", "link", "unlink", "remove", "mkdir", "makedirs", "rmdir", "fsync",
            "ftruncate", "truncate", "utime", "chmod")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class KillPoints:
    """The points passed so far (`count`); point number `kill_at` (from 0) SIGKILLs the process
    before its call is made (-1: never). `at_each` runs at every point the process survives."""

    def __init__(self, kill_at: int, at_each: Callable[[], None] | None = None):
        self.kill_at = kill_at
        self.at_each = at_each
        self.count = 0

    def point(self) -> None:
        self.count += 1
        if self.count - 1 == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.at_each is not None:
            self.at_each()


def arm(kill_at: int, at_each: Callable[[], None] | None = None) -> KillPoints:
    """Wrap this process's `os` mutators, `os.open` and `open` for writing (for good: call it in a
    child that exits after the run) so that each call is a point of the returned KillPoints."""
    points = KillPoints(kill_at, at_each)

    def wrap(fn):
        def wrapped(*args, **kwargs):
            points.point()
            return fn(*args, **kwargs)
        return wrapped

    for name in MUTATORS:
        if hasattr(os, name):
            setattr(os, name, wrap(getattr(os, name)))
    real_os_open, real_open = os.open, io.open

    def os_open(path, flags, *args, **kwargs):
        if flags & WRITE_FLAGS:
            points.point()
        return real_os_open(path, flags, *args, **kwargs)

    def opener(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+"):
            points.point()
        return real_open(file, mode, *args, **kwargs)

    os.open = os_open
    builtins.open = io.open = opener
    return points
