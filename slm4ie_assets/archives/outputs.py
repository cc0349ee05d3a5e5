"""What an archive's recorded outputs mean on disk: whether they are intact (then the archive is
not unpacked again), which ones a newer version no longer holds (removed, unless edited, found in
place or claimed by another archive), what to withdraw before the same version is unpacked again,
what a killed run's intent left (complete, or to unpack again), and which records to forget once
their archive is gone."""

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .journal import Intent
from .state import INTERRUPTED, ArchiveEntry, ArchiveState, OutputStamp


def is_current(raw_dir: Path, entry: ArchiveEntry, st: os.stat_result) -> bool:
    """The archive is as last unpacked and every output is still exactly as written."""
    if entry.size != st.st_size or entry.mtime_ns != st.st_mtime_ns:
        return False
    for out, stamp in entry.outputs.items():
        try:
            ost = os.lstat(raw_dir / out)
        except OSError:
            return False
        if not stamp.matches(ost):
            return False
    return True


@dataclass(slots=True)
class StaleOutputs:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # changed since they were unpacked: somebody's edit
    found: list[str] = field(default_factory=list)  # in place before the archive was unpacked: not ours
    state_changed: bool = False  # records of archives among the removed files were dropped


def remove_stale(raw_dir: Path, archives: dict[str, ArchiveEntry], rel: str, old: ArchiveEntry,
                 new: Mapping[str, OutputStamp]) -> StaleOutputs:
    """Remove the files an earlier version `old` of archive `rel` produced and this one does not,
    when nothing else claims them and they are exactly as unpacked (cascading into archives among
    them). A file the record says was found in place is never removed: no archive wrote it."""
    result = StaleOutputs()
    work = [(rel, old, out) for out in old.outputs if out not in new]
    while work:
        owner, entry, out = work.pop()
        _left, inner = _take_back(raw_dir, archives, owner, entry, out, result)
        if inner is not None:
            work.extend((out, inner, o) for o in inner.outputs)
    return result


def same_version(entry: ArchiveEntry, st: os.stat_result) -> bool:
    """The archive on disk is the one recorded (or one a killed run was renaming the outputs of),
    not a newer version: unpacking it again gives the same tree."""
    return entry.size == INTERRUPTED or (entry.size == st.st_size and entry.mtime_ns == st.st_mtime_ns)


def withdraw(raw_dir: Path, archives: dict[str, ArchiveEntry], rel: str, entry: ArchiveEntry) -> StaleOutputs:
    """Remove what archive `rel` produced, at any depth, as recorded, before the same version is
    unpacked again (a kill during its renames or its roll-back, an output lost or changed), so its
    old tree never stands beside the new one uncharged by the root's budget (issue 39). A file
    changed since or found in place stays, claimed by a record of the archive that produced it
    (never current), so the new copy replaces a changed one as before and a found one stays found."""
    result = StaleOutputs()
    work = [(rel, entry)]
    while work:
        archive, record = work.pop()
        left = {}
        for out, stamp in record.outputs.items():
            stays, inner = _take_back(raw_dir, archives, archive, record, out, result)
            if stays:
                left[out] = stamp
            if inner is not None:
                work.append((out, inner))
        if left:
            found = tuple(out for out in record.found if out in left)
            archives[archive] = ArchiveEntry(INTERRUPTED, record.mtime_ns, left, record.dropped, found)
        elif archive == rel:
            archives.pop(rel, None)
    return result


def _take_back(raw_dir: Path, archives: dict[str, ArchiveEntry], owner: str, entry: ArchiveEntry, out: str,
               result: StaleOutputs) -> tuple[bool, ArchiveEntry | None]:
    """Remove output `out` of archive `owner` when it is exactly as recorded and no other archive
    claims it: (whether it is left in place, changed or found; the record of the archive it was,
    dropped, whose outputs go too, even when the archive itself is gone already)."""
    if out in entry.found:
        result.found.append(out)
        return True, None
    if any(out in e.outputs for a, e in archives.items() if a not in (owner, out)):
        return False, None
    path = raw_dir / out
    try:
        st: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not entry.outputs[out].matches(st):
            result.kept.append(out)
            return True, None
        path.unlink()
        result.removed.append(out)
    inner = archives.pop(out, None)
    if inner is not None:
        result.state_changed = True
    return False, inner


def interrupted_entry(raw_dir: Path, old: ArchiveEntry | None, new: ArchiveEntry) -> ArchiveEntry:
    """The record of an archive whose outputs are (or were, when a run was killed) being renamed
    into place: every output of both versions, each with the stamp of the version it holds on disk
    now, and a size that is never current, so the archive is unpacked again and withdraws what
    the new version does not hold."""
    outputs = {}
    for out, stamp in new.outputs.items():
        before = old.outputs.get(out) if old is not None else None
        outputs[out] = before if before is not None and _on_disk(raw_dir, out, before) else stamp
    found = set(new.found)
    if old is not None:
        for out, stamp in old.outputs.items():
            outputs.setdefault(out, stamp)
        found.update(f for f in old.found if f not in new.outputs)
    return ArchiveEntry(INTERRUPTED, new.mtime_ns, outputs, new.dropped,
                        tuple(out for out in outputs if out in found))


def _on_disk(raw_dir: Path, out: str, stamp: OutputStamp) -> bool:
    try:
        return stamp.matches(os.lstat(raw_dir / out))
    except OSError:
        return False


def resolve_intent(raw_dir: Path, archives: dict[str, ArchiveEntry], intent: Intent) -> StaleOutputs | None:
    """Bring the record of an archive a killed run was renaming into place up to date with the
    disk: every output in place, the intent is the record (and what the older version held beside
    it is withdrawn, returned); otherwise the record claims both versions and the archive is
    unpacked again (None). Reading the same intent twice gives the same record."""
    old = archives.get(intent.archive)
    new = intent.entry
    if all(_on_disk(raw_dir, out, stamp) for out, stamp in new.outputs.items()):
        archives[intent.archive] = new
        return remove_stale(raw_dir, archives, intent.archive, old, new.outputs) if old is not None else StaleOutputs()
    archives[intent.archive] = interrupted_entry(raw_dir, old, new)
    return None


def forget_vanished(raw_dir: Path, state: ArchiveState, seen: set[str]) -> bool:
    """Drop the records of archives not seen in this run that are no longer regular files;
    True when something was dropped. One that cannot be looked at now is kept."""
    changed = False
    tables: tuple[dict, ...] = (state.archives, state.failed)
    for table in tables:
        for rel in list(table):
            if rel in seen:
                continue
            try:
                gone = not stat.S_ISREG(os.lstat(raw_dir / rel).st_mode)
            except FileNotFoundError:
                gone = True
            except OSError:
                gone = False
            if gone:
                del table[rel]
                changed = True
    return changed
