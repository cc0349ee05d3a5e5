"""The per-dataset lock file is ours alone (issue 15 item 6): a symbolic link, a hard link or a
non-regular file planted at extracted/.slm4ie/<key>/lock is refused, and its target is never
opened for writing, created or truncated (the pattern of filelock's CVE-2025-68146). The dataset
lock is shared by part writers and exclusive for everything else; shard locks name their shard
(issue 14 item 2; the runs are in tests/reliability/test_shard_locks.py)."""

import os
import subprocess
import sys
import time

import pytest

from slm4ie_assets.store.locks import LockFileError, LockTimeout, dataset_lock, shard_lock
from support.paths import REPO

VICTIM_BYTES = b"precious data that must survive\n" * 100


@pytest.fixture
def lock(tmp_path):
    return tmp_path / "extracted" / ".slm4ie" / "kas" / "lock"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_bytes(VICTIM_BYTES)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path


def assert_untouched(victim):
    assert victim.read_bytes() == VICTIM_BYTES
    assert victim.stat().st_mtime_ns == 1_000_000_000


def test_a_fresh_lock_is_a_regular_file_naming_its_holder(lock):
    with dataset_lock(lock, "kas"):
        assert lock.is_file() and not lock.is_symlink()
        assert lock.read_text().startswith(f"pid {os.getpid()} since ")
        assert lock.stat().st_mode & 0o777 == 0o644 & ~_umask()


def test_an_old_holder_line_is_replaced_not_appended_to(lock):
    lock.parent.mkdir(parents=True)
    lock.write_text("pid 1 since 1999-01-01T00:00:00Z and a long stale tail " * 10)
    with dataset_lock(lock, "kas"):
        assert lock.read_text() == lock.read_text().strip()
        assert lock.read_text().startswith(f"pid {os.getpid()} since ") and "stale" not in lock.read_text()


def test_a_second_holder_times_out_naming_the_first(lock):
    with dataset_lock(lock, "kas"):
        with pytest.raises(LockTimeout, match=rf"kas: gave up after 0s .* \(pid {os.getpid()} since "):
            with dataset_lock(lock, "kas", timeout=0):
                pass  # pragma: no cover
    with dataset_lock(lock, "kas", timeout=0):
        pass  # released: free again


def test_a_symlink_to_a_victim_is_refused_and_the_victim_untouched(lock, victim):
    lock.parent.mkdir(parents=True)
    lock.symlink_to(victim)
    with pytest.raises(LockFileError) as err:
        with dataset_lock(lock, "kas", timeout=0):
            pytest.fail("entered the lock through a symlink")  # pragma: no cover
    msg = str(err.value)
    assert str(lock) in msg and "symbolic link" in msg and str(victim) in msg
    assert "remove it" in msg
    assert_untouched(victim)
    assert lock.is_symlink()  # left for the operator to inspect


def test_a_dangling_symlink_does_not_create_its_target(lock, tmp_path):
    lock.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere" / "created-by-the-lock"
    target.parent.mkdir()
    lock.symlink_to(target)
    with pytest.raises(LockFileError, match="symbolic link"):
        with dataset_lock(lock, "kas"):
            pass  # pragma: no cover
    assert not target.exists()


def test_a_symlink_to_a_lock_held_elsewhere_is_refused_too(lock, tmp_path):
    """Even a link to a genuine lock file is refused: the lock must be the file at its own path."""
    real = tmp_path / "other" / "lock"
    with dataset_lock(real, "other"):
        lock.parent.mkdir(parents=True)
        lock.symlink_to(real)
        before = real.read_bytes()
        with pytest.raises(LockFileError):
            with dataset_lock(lock, "kas", timeout=0):
                pass  # pragma: no cover
        assert real.read_bytes() == before


def test_a_hard_link_to_a_victim_is_refused_and_the_victim_untouched(lock, victim):
    lock.parent.mkdir(parents=True)
    os.link(victim, lock)
    with pytest.raises(LockFileError) as err:
        with dataset_lock(lock, "kas"):
            pass  # pragma: no cover
    assert str(lock) in str(err.value) and "hard link" in str(err.value)
    assert_untouched(victim)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_non_regular_file_at_the_lock_path_is_refused_quickly(lock, kind):
    lock.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    started = time.monotonic()
    with pytest.raises(LockFileError) as err:
        with dataset_lock(lock, "kas"):
            pass  # pragma: no cover
    assert time.monotonic() - started < 5
    assert str(lock) in str(err.value) and "not a regular file" in str(err.value)


def test_the_lock_descriptor_is_not_inherited_by_child_processes(lock):
    """A child started while the lock is held must not keep the lock alive after the holder ends."""
    code = ("import os, sys\n"
            "fds = [int(n) for n in os.listdir('/proc/self/fd')]\n"
            "targets = [os.readlink(f'/proc/self/fd/{n}') for n in fds if os.path.exists(f'/proc/self/fd/{n}')]\n"
            "sys.exit(1 if sys.argv[1] in targets else 0)\n")
    with dataset_lock(lock, "kas"):
        done = subprocess.run([sys.executable, "-c", code, str(lock)], close_fds=False, cwd=REPO)
    assert done.returncode == 0


def test_shared_holders_coexist_and_exclude_an_exclusive_one(tmp_path):
    """Part writers share the dataset lock; a publisher (exclusive) waits for all of them and is
    told who holds it; a part writer waits for a publisher the same way."""
    lock = tmp_path / "lock"
    with dataset_lock(lock, "kas", shared=True), dataset_lock(lock, "kas", shared=True):
        held_by_us = rf"kas: gave up after 0s waiting for the dataset lock .* \(pid {os.getpid()} "
        with pytest.raises(LockTimeout, match=held_by_us):
            with dataset_lock(lock, "kas", timeout=0):
                pass  # pragma: no cover
    with dataset_lock(lock, "kas"):
        with pytest.raises(LockTimeout, match="waiting for the dataset lock"):
            with dataset_lock(lock, "kas", timeout=0, shared=True):
                pass  # pragma: no cover
    with dataset_lock(lock, "kas", timeout=0):
        assert lock.read_text() == lock.read_text().strip() and lock.read_text().startswith(f"pid {os.getpid()} ")


def test_a_shard_lock_names_its_shard_when_waiting_and_yields_the_holder_it_waited_for(tmp_path):
    """A second process holds `a.txt`'s lock until the test lets it go: the waiter logs once, naming
    the shard and the holder's pid, and is handed that holder (so it re-checks the part)."""
    lock, release = tmp_path / "a.lock", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, pathlib\n"
        "from slm4ie_assets.store.locks import shard_lock\n"
        "with shard_lock(pathlib.Path(sys.argv[1]), 'k', 'a.txt'):\n"
        "    print('held', flush=True)\n"
        "    while not pathlib.Path(sys.argv[2]).exists():\n"
        "        time.sleep(0.01)\n"), str(lock), str(release)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(LockTimeout, match=rf"kas: gave up after 0s waiting for the lock of shard 'a.txt' "
                                              rf".* held by another run \(pid {holder.pid} since "):
            with shard_lock(lock, "kas", "a.txt", timeout=0):
                pass  # pragma: no cover
        messages: list[str] = []

        def log(message: str) -> None:
            messages.append(message)
            release.touch()  # the holder lets go only once this run has said it waits

        with shard_lock(lock, "kas", "a.txt", log=log, poll=0.01) as waited_for:
            assert waited_for.startswith(f"pid {holder.pid} since ")
        assert messages == [f"kas: another run is writing shard 'a.txt' ({waited_for}); waiting"]
        with shard_lock(lock, "kas", "a.txt") as waited_for:
            assert waited_for == ""
    finally:
        release.touch()
        holder.wait(timeout=60)


def test_a_shard_lock_that_is_a_hard_link_is_refused_naming_the_shard(tmp_path, victim):
    lock = tmp_path / "locks" / "0123.lock"
    lock.parent.mkdir()
    os.link(victim, lock)
    with pytest.raises(LockFileError, match=r"kas: the lock of shard 'a.txt' .* is a hard link"):
        with shard_lock(lock, "kas", "a.txt"):
            pass  # pragma: no cover
    assert_untouched(victim)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
