"""What an archive's recorded outputs mean on disk: whether they are intact (then the archive is
not unpacked again), which ones a newer version no longer holds (removed, unless edited or
claimed by another archive), and which records to forget once their archive is gone."""

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .state import ArchiveEntry, ArchiveState, OutputStamp


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
    state_changed: bool = False  # records of archives among the removed files were dropped


def remove_stale(raw_dir: Path, archives: dict[str, ArchiveEntry], rel: str, old: dict[str, OutputStamp],
                 new: dict[str, OutputStamp]) -> StaleOutputs:
    """Remove the files an earlier version of archive `rel` produced and this one does not, when
    nothing else claims them and they are exactly as unpacked (cascading into archives among them)."""
    result = StaleOutputs()
    work = [(rel, out, stamp) for out, stamp in old.items() if out not in new]
    while work:
        owner, out, stamp = work.pop()
        if any(out in e.outputs for a, e in archives.items() if a not in (owner, out)):
            continue
        path = raw_dir / out
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stamp.matches(st):
            result.kept.append(out)
            continue
        path.unlink()
        result.removed.append(out)
        inner = archives.pop(out, None)
        if inner is not None:
            result.state_changed = True
            work.extend((out, o, s) for o, s in inner.outputs.items())
    return result


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
