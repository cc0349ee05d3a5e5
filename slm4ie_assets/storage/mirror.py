"""A store's objects mirrored into a local folder, so the POSIX pipeline can extract a raw folder that
lives in a bucket (issue 42, its first step; ranged reads replace the mirror later; D26).

Only what changed moves: an object is downloaded when its size or tag differs from what the last
mirror recorded (storage/mirror_state.py), or its local copy is gone or altered. Each download goes
to a temporary file in a hidden folder beside the local one, is fsynced, given the object's
modified time as its mtime (the settle rule and the input stamps see the object's age), and renamed
into place: the local folder only ever holds whole files. Files whose objects vanished are removed,
but only files the mirror wrote: the state names them, and anything else in the folder (a file put
there by hand, an archive's outputs) is never replaced or removed. Memory stays flat whatever the
object sizes: bytes stream in CHUNK pieces.

A kill at any point leaves whole files only, every one the mirror may touch written down before it
was touched, so the next mirror repairs the folder. Two mirrors of one folder queue on a lock beside
the state file. `changed_since` tells, before a publish, which mirrored objects changed since.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..utils.durable import fsync_dir
from .base import Store, StoredObject
from .mirror_state import MirroredFile, MirrorState, load_state, save_state

CHUNK = 8 << 20  # bytes read from the store and written at a time
CHECKPOINT_SECONDS = 5.0  # while downloading, the state is saved this often (a kill re-downloads less)
_NAME_MAX = 255  # bytes in one path component on Linux file systems
_LOG = logging.getLogger(__name__)


class ObjectChangedWhileCopied(Exception):
    """An object's size differed from its listing while it was copied: it is being rewritten."""


@dataclass(frozen=True)
class MirrorReport:
    """What a mirror did, and the objects the local folder holds copies of (for `changed_since`)."""

    store: str
    local_dir: Path
    mirrored: tuple[StoredObject, ...]  # each object whose copy is in the local folder, as listed
    downloaded: tuple[str, ...]
    removed: tuple[str, ...]
    skipped: tuple[str, ...]  # names not mirrored: not safe paths, or in the way of others
    bytes_downloaded: int
    warnings: tuple[str, ...]


def mirror(store: Store, local_dir: Path, state_file: Path) -> MirrorReport:
    """Bring `local_dir` to `store`'s objects, downloading only what changed since the last mirror
    recorded in `state_file` (outside `local_dir`)."""
    local_dir = Path(local_dir)
    with _locked(state_file):
        state = load_state(state_file, store.url)
        temp_dir = _temp_dir(local_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)  # a killed mirror's partial downloads
        warnings: list[str] = []
        listing = _mirrorable(store, warnings)
        files = dict(state.files)
        removed = sorted(set(files) - {o.name for o in listing.safe})
        for name in removed:  # first, so that a new object may take a name their folders held
            _remove(local_dir, name)
            del files[name]
        plan = _plan(local_dir, files, listing, warnings)
        files.update({o.name: _planned(o) for o in plan.fetch})
        save_state(state_file, MirrorState(store.url, files))  # each file to be written is written down first
        downloaded, size = _download_all(store, local_dir, temp_dir, plan.fetch, state_file, files)
        save_state(state_file, MirrorState(store.url, files))
        shutil.rmtree(temp_dir, ignore_errors=True)
    skipped = sorted(set(o.name for o in listing.unsafe) | set(plan.blocked))
    for text in warnings:
        _LOG.warning(text)
    return MirrorReport(store.url, local_dir, tuple(o for o in listing.safe if o.name in files),
                        tuple(downloaded), tuple(removed), tuple(skipped), size, tuple(warnings))


def changed_since(store: Store, report: MirrorReport) -> list[str]:
    """The mirrored objects whose size or tag changed, or that vanished, since `report`'s mirror: the
    inputs a run must not publish from (InputChanged). New objects are not changes: a later run
    plans them, as a file copied into a raw folder during a run is."""
    return [name for name, _now in changed_objects(store, {o.name: (o.size, o.tag) for o in report.mirrored})]


def changed_objects(store: Store, copied: Mapping[str, tuple[int, str]]) -> list[tuple[str, StoredObject | None]]:
    """Each name of `copied` (name -> size and tag when copied) whose object now differs, with what it
    is now (None: gone), in name order; one listing of the store."""
    now = {o.name: o for o in store.list()}
    return [(name, now.get(name)) for name, was in sorted(copied.items())
            if name not in now or (now[name].size, now[name].tag) != was]


# ----------------------------------------------------------------------------- listing and plan


@dataclass(frozen=True)
class _Listing:
    safe: list[StoredObject]
    unsafe: list[StoredObject]


@dataclass(frozen=True)
class _Plan:
    fetch: list[StoredObject]  # new or changed objects, or whose local copy is gone or altered
    blocked: list[str]  # objects whose local name something else holds


def _mirrorable(store: Store, warnings: list[str]) -> _Listing:
    """The store's objects split into those a mirror copies (`mirrorable`) and the others, each named
    in a warning."""
    listing = list(store.list())
    safe, unsafe = [], []
    for obj, why in _judged(listing):
        if why is None:
            safe.append(obj)
        else:
            unsafe.append(obj)
            warnings.append(f"{store.url}: object {obj.name!r} not mirrored: {why}")
    return _Listing(safe, unsafe)


def mirrorable(listing: list[StoredObject]) -> list[StoredObject]:
    """The objects of one listing that a mirror copies (the raw sensor compares these with the
    mirror's state without downloading anything)."""
    return [obj for obj, why in _judged(listing) if why is None]


def _judged(listing: list[StoredObject]) -> Iterator[tuple[StoredObject, str | None]]:
    """Each object with why it cannot be mirrored (None: it can): its name must be a safe relative
    path on this host, and an object whose name is a folder of other objects ('a' beside 'a/b')
    cannot be a file here: the folder wins, whatever the order."""
    folders = {name.rsplit("/", 1)[0] for name in (o.name for o in listing) if "/" in name}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    for obj in listing:
        yield obj, _unsafe(obj.name) or ("a folder of other objects" if obj.name in folders else None)


def _unsafe(name: str) -> str | None:
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "not a relative path (absolute, or an empty, '.' or '..' part)"
    if "\0" in name or any(len(p.encode("utf-8", "surrogateescape")) > _NAME_MAX for p in parts):
        return f"a NUL byte or a part over {_NAME_MAX} bytes"
    return None


def _plan(local_dir: Path, files: dict[str, MirroredFile], listing: _Listing, warnings: list[str]) -> _Plan:
    """What to download, given the files the mirror answers for (those of vanished objects removed)."""
    fetch, blocked = [], []
    for obj in listing.safe:
        mine = files.get(obj.name)
        if mine is not None and mine.whole and (mine.size, mine.tag) == (obj.size, obj.tag) \
                and _intact(local_dir / obj.name, mine):
            continue
        in_the_way = _in_the_way(local_dir, obj.name, mine is not None)
        if in_the_way is None:
            fetch.append(obj)
        else:
            blocked.append(obj.name)
            warnings.append(f"{local_dir / obj.name}: object {obj.name!r} not mirrored: {in_the_way}")
    return _Plan(fetch, blocked)


def _intact(path: Path, mine: MirroredFile) -> bool:
    """The copy is still as the mirror left it (nobody deleted, truncated or rewrote it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == mine.size and st.st_mtime_ns == mine.modified_ns


def _in_the_way(local_dir: Path, name: str, mine: bool) -> str | None:
    """What keeps `name` from being written: a link or a file on its path, a folder at its place, or
    at its place a file the mirror did not write (`mine`: the state names it)."""
    parts = name.split("/")
    for depth in range(1, len(parts) + 1):
        rel = "/".join(parts[:depth])
        try:
            st = os.lstat(local_dir / rel)
        except FileNotFoundError:
            return None
        last = depth == len(parts)
        if stat.S_ISLNK(st.st_mode):
            return f"{rel!r} is a symbolic link here"
        if stat.S_ISDIR(st.st_mode):
            if last:
                return "a folder has its name here"
            continue
        if last and mine:
            return None
        return f"{rel!r} is a file the mirror did not write"
    return None


def _planned(obj: StoredObject) -> MirroredFile:
    return MirroredFile(obj.name, obj.size, obj.tag, obj.modified_ns, obj.version, whole=False)


# ----------------------------------------------------------------------------- changing the folder


def _remove(local_dir: Path, name: str) -> None:
    """Remove a file the mirror wrote, then the folders that removal left empty."""
    path = local_dir / name
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):  # gone, or a file now holds a folder's name on its path
        pass
    folder = path.parent
    while folder != local_dir and local_dir in folder.parents:
        try:
            os.rmdir(folder)
        except OSError:  # not empty (or gone): what is left in it is not ours to judge
            break
        folder = folder.parent


def _download_all(store: Store, local_dir: Path, temp_dir: Path, fetch: list[StoredObject], state_file: Path,
                  files: dict[str, MirroredFile]) -> tuple[list[str], int]:
    done: list[str] = []
    total = 0
    last_save = time.monotonic()
    touched: set[Path] = set()
    for obj in fetch:
        target = local_dir / obj.name
        total += _download(store, obj, temp_dir, target)
        touched.add(target.parent)
        files[obj.name] = files[obj.name].placed()
        done.append(obj.name)
        if time.monotonic() - last_save >= CHECKPOINT_SECONDS:
            _checkpoint(touched, state_file, MirrorState(store.url, files))
            last_save = time.monotonic()
    for folder in touched:
        fsync_dir(folder)  # the renames are durable before the state calls them whole
    return done, total


def _checkpoint(touched: set[Path], state_file: Path, state: MirrorState) -> None:
    for folder in touched:
        fsync_dir(folder)
    touched.clear()
    save_state(state_file, state)


def _download(store: Store, obj: StoredObject, temp_dir: Path, target: Path) -> int:
    """Copy one object to `target` through a temporary file: whole, fsynced, with the object's mtime."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    temp = temp_dir / (hashlib.sha256(obj.name.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".part")
    written = 0
    try:
        with store.open_read(obj.name) as source, open(temp, "wb") as out:
            while chunk := source.read(CHUNK):
                out.write(chunk)
                written += len(chunk)
            if written != obj.size:
                raise ObjectChangedWhileCopied(f"{store.url}: object {obj.name!r} had {written} bytes, listed with "
                                               f"{obj.size}: it changed while it was copied; run again")
            out.flush()
            os.utime(out.fileno(), ns=(obj.modified_ns, obj.modified_ns))
            os.fsync(out.fileno())
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return written


def _temp_dir(local_dir: Path) -> Path:
    """A hidden folder beside the local one (the same file system, so a rename moves a file in whole)."""
    return local_dir.parent / f".{local_dir.name}.mirror-tmp"


@contextmanager
def _locked(state_file: Path) -> Iterator[None]:
    state_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_file.with_name(state_file.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
