"""Whether an input changed between planning and the commit of its part (issue 20, case 2).

The persisted fingerprint (`size:mtime`) decides staleness between runs; it cannot see a file
rewritten in place at the same size within one mtime tick, nor a replacement by rename that keeps
size and mtime (`cp -p`, `rsync -a`). Within one run the check is stricter: every input is stamped
with size, mtime, ctime, inode and device when the run is planned, and again after its part has
been read. ctime cannot be set by a user and moves on every write, rename or chmod, so any change
in between shows. A part whose input changed is not committed, so a published version never holds
two states of one file.

ctime also moves on a `touch`, a `chmod` or a new hard link, which leave the bytes as they were
(issue 34, case 6: a backup tool's hard links cost a full rerun). So when a whole file's stamp
changed but its size did not (`only_metadata_may_differ`), the part writer extracts the shard once
more and commits only if the inputs held still meanwhile and both attempts wrote the same bytes
(parts/writer.py, `recheck_whole_files`): the part is then what the files hold now. Until issue 41
a digest of every whole input was taken before its read for this case, a second read of every
byte in every run; now only the rare changed file is read twice. A range of a split file is not
rechecked: its other ranges may have been read before a change, so any change fails the run.
"""

import os
import stat
from dataclasses import dataclass
from pathlib import Path

# (size, mtime_ns, ctime_ns, inode, device) of one file; a directory input: of every file in it
StatTuple = tuple[int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class InputStamp:
    """The stat of one input (a config directory: of each file below it, in walk order)."""

    entries: tuple[tuple[str, StatTuple | None], ...]  # (relative name, stat or None when unreadable)


class InputChanged(RuntimeError):
    """An input was written, replaced or removed while this run read it: the part is not
    committed and the run fails naming the file (the next run plans it afresh). `rel` is the
    file, so the parts this run already committed from it can be withdrawn too."""

    def __init__(self, message: str, rel: str = ""):
        super().__init__(message)
        self.rel = rel


def _stat_tuple(st: os.stat_result) -> StatTuple:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def stamp_of(path: Path) -> InputStamp:
    """The input's stamp now; a missing or unreadable input stamps as None (so it differs)."""
    try:
        st = os.stat(path)
    except OSError:
        return InputStamp((("", None),))
    if not stat.S_ISDIR(st.st_mode):
        return InputStamp((("", _stat_tuple(st)),))
    entries: list[tuple[str, StatTuple | None]] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, path)
        for name in sorted(filenames):
            try:
                entries.append((f"{rel_dir}/{name}", _stat_tuple(os.stat(os.path.join(dirpath, name)))))
            except OSError:
                entries.append((f"{rel_dir}/{name}", None))
    return InputStamp(tuple(entries))


def only_metadata_may_differ(planned: InputStamp, now: InputStamp) -> bool:
    """The same names, and every one that changed still stats at its planned size: a change the
    bytes must decide (`touch`, `chmod`, a hard link, or a rewrite in place)."""
    if [name for name, _ in planned.entries] != [name for name, _ in now.entries]:
        return False
    return all(before == after or (before is not None and after is not None and before[0] == after[0])
               for (_, before), (_, after) in zip(planned.entries, now.entries, strict=True))


def changed_entry(planned: InputStamp, now: InputStamp) -> str | None:
    """None when nothing changed, else what changed (a name inside a directory input, or "")."""
    if planned == now:
        return None
    before, after = dict(planned.entries), dict(now.entries)
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            return name
    return ""  # pragma: no cover - the tuples differ only in order, which the walk fixes


def describe_change(dataset: str, rel: str, inner: str) -> str:
    """The failure message: the file, what happened, and what to do."""
    where = f"{dataset}/{rel}" + (f" ({inner.removeprefix('./')})" if inner else "")
    return (f"{where}: the input changed while this run read it (size, mtime, ctime or inode differ from the "
            f"plan); its part was not committed and nothing was published. Write raw files elsewhere and move "
            f"them into the raw folder when complete, then materialize again")
