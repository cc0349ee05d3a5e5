"""Whose files are in raw/<key>/: which files an archive produced, as the archive state records it,
and so which ones unpacking may replace (issue 39, D16).

A member may be renamed over a file only when the state records that file as an archive's output.
Any other file is somebody's own (a hand-fixed copy, a corpus.txt beside corpus.tar.gz): a member
that would replace it refuses its root archive, unless the file already holds exactly the
member's bytes; then nothing needs replacing, and the file is taken as it is, recorded as found
(never removed: no archive wrote it). That also covers a lost state file: every output still holds
its member, so the next run takes each one back instead of refusing the dataset's archives."""

import os
import stat
from pathlib import Path

from .state import ArchiveEntry, Blocker, OutputStamp

_COMPARE_CHUNK = 1 << 20


class Owners:
    """Which archive's recorded outputs hold each file, kept up to date through the run."""

    def __init__(self, raw_dir: Path, archives: dict[str, ArchiveEntry]):
        self.raw_dir = raw_dir
        self.archives = archives  # the state's own table: entries recorded or removed show at once
        self._claims = {out: rel for rel, entry in archives.items() for out in entry.outputs}

    def claim(self, rel: str, outputs: dict[str, OutputStamp]) -> None:
        self._claims.update((out, rel) for out in outputs)

    def owner(self, out: str) -> str | None:
        """The archive whose recorded outputs hold `out` (the last one to claim it), else None."""
        rel = self._claims.get(out)
        entry = self.archives.get(rel) if rel is not None else None
        return rel if entry is not None and out in entry.outputs else None

    def produced(self, out: str) -> bool:
        """An archive wrote `out`, as recorded: a member may replace it."""
        rel = self.owner(out)
        return rel is not None and out not in self.archives[rel].found

    def where(self, out: str) -> str:
        return f"{self.raw_dir.name}/{out}"


def blocker_of(raw_dir: Path, out: str) -> Blocker | None:
    """The file at `out` as it stands now, to tell later whether it was moved or changed."""
    try:
        st = os.lstat(raw_dir / out)
    except OSError:
        return None
    return Blocker(out, OutputStamp(st.st_size, st.st_mtime_ns))


def still_blocks(raw_dir: Path, blocker: Blocker) -> bool:
    try:
        return blocker.stamp.matches(os.lstat(raw_dir / blocker.rel))
    except OSError:
        return False


def same_bytes(existing: Path, staged: Path) -> bool:
    """Whether the regular file `existing` holds exactly the bytes of `staged`."""
    try:
        st = os.lstat(existing)
        if not stat.S_ISREG(st.st_mode) or st.st_size != os.lstat(staged).st_size:
            return False
        with open(existing, "rb") as a, open(staged, "rb") as b:
            while True:
                chunk = a.read(_COMPARE_CHUNK)
                if chunk != b.read(_COMPARE_CHUNK):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False
