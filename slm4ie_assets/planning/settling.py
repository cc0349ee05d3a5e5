"""Has each file in raw/<key>/ settled? The raw sensor asks before it unpacks or plans.

`cp`, `rsync`, `wget` and `tar x` take minutes on a large corpus; a file planned halfway through is
published cut off (its last record a `malformed_json` drop). A file has settled when what it shows
has stopped moving: its size and mtime are the same as at the sensor's previous look (the look is
kept in the sensor's cursor), or its mtime is at least `settle_seconds` old. The ctime is not read:
a `mv` into raw/ makes it now, and a file moved in whole would then wait for nothing. Tools that
restore the source's mtime (`cp -p`, `tar x`, `rsync -t`) set it once the content is written, so
an old mtime means a whole file. An mtime in the future (a clock ahead on the host that wrote it)
settles by the two looks alone, and is named once in a warning (the tick that first sees it).

Copy tools' leftovers are never inputs: a name they write under (rsync's `.name.XXXXXX`, `*.part`,
...; `extractors.discovery.is_arriving_name`), and whatever is in a working folder of theirs
(`.~tmp~/`, `.rsync-partial/`, `.azDownload-*`; `fswalk.is_copy_tool_name`). One holds the dataset
back by the same rule as any file, read from what it shows (a file's size and mtime; a folder's: those
of every entry in it): only while that moved since the previous look and is younger than
`settle_seconds`. An aborted copy leaves such an entry for ever; once it has settled it is named in
one warning, on the tick that first finds it so (the look keeps a mark that it was named), and
ignored: it blocked every settled file for `max_settle_wait` at every change before. An empty working
folder is no sign of a copy. Files the archive stage unpacked have settled (they were renamed into
place whole). Only explicit runs (the UI, the CLI, schedules) plan without waiting.
"""

import base64
import hashlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..archives import is_temp_name
from ..archives.state import load_state
from ..extractors.discovery import escaped_name, is_arriving_name
from ..utils.fswalk import walk

SHOWN = 3  # names in the sensor's skip reason
STAMP = 8  # bytes of one file's digest in the look
MAX_STAMPS = 1024  # files whose look is kept (~11 KB of cursor), and as many leftovers; any beyond settle by age
FUTURE_SLACK_NS = 2_000_000_000  # an mtime this far ahead of the clock is "in the future"
_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Look:
    """What one tick saw: a digest of (name, size, mtime) for each file too young to have settled by
    age, and since when (unix seconds) the dataset has waited for files still arriving."""

    stamps: frozenset[bytes] = frozenset()
    waiting_since: int | None = None

    def encode(self) -> str:
        since = "-" if self.waiting_since is None else str(self.waiting_since)
        return f"{since}.{base64.b64encode(b''.join(sorted(self.stamps))).decode('ascii')}"

    @staticmethod
    def decode(text: str | None) -> "Look":
        """The previous look; an empty one (nothing seen) when `text` is missing or not a look."""
        since, sep, blob = (text or "").partition(".")
        try:
            raw = base64.b64decode(blob, validate=True)
            waiting = None if since == "-" else int(since)
        except ValueError:
            return Look()
        if not sep or len(raw) % STAMP:
            return Look()
        return Look(frozenset(raw[i:i + STAMP] for i in range(0, len(raw), STAMP)), waiting)


def stamp(rel: str, size: int | str, mtime_ns: int) -> bytes:
    return hashlib.blake2b(f"{rel}\0{size}\0{mtime_ns}".encode("utf-8", "surrogateescape"),
                           digest_size=STAMP).digest()


@dataclass(frozen=True, slots=True)
class Leftover:
    """What a copy tool's leftover shows on one look."""

    rel: str  # a file's path; a working folder's, ending in "/"
    shows: str  # a file's size; for a folder, a digest of every entry's path, size and mtime
    newest_ns: int  # its newest mtime

    def seen(self) -> bytes:
        return stamp(self.rel, self.shows, self.newest_ns)

    def named(self) -> bytes:
        """The look's mark that this state of it has settled and been named in a warning."""
        return stamp("\0named\0" + self.rel, self.shows, self.newest_ns)


def leftover(rel: str, path: str) -> Leftover | None:
    """What the leftover at `path` shows now; None when it is gone or an empty folder."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return Leftover(rel, str(st.st_size), st.st_mtime_ns)
    entries = sorted(_folder_entries(path))
    if not entries:
        return None
    digest = hashlib.blake2b("\0".join(f"{r}\0{size}\0{m}" for r, size, m in entries).encode(
        "utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return Leftover(rel + "/", digest, max(m for _, _, m in entries))


def _folder_entries(path: str) -> Iterator[tuple[str, int, int]]:
    """(path inside, size, mtime) of every entry below a working folder; linked folders not entered."""
    stack = [("", path)]
    while stack:
        prefix, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield prefix + entry.name, st.st_size, st.st_mtime_ns
            if stat.S_ISDIR(st.st_mode):
                stack.append((prefix + entry.name + "/", entry.path))


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The files of a raw folder that have not settled, and the look to keep for the next tick."""

    temporary: tuple[str, ...]  # copy tools' leftovers still changing: names (`x.part`), working folders (`.~tmp~/`)
    fresh: tuple[str, ...]  # young files that changed since the previous look (or were not in it)
    future: tuple[str, ...]  # files first seen this tick with an mtime ahead of the clock
    look: Look
    stale: tuple[str, ...] = ()  # copy tools' leftovers found settled this tick: to name once, then ignored

    def __bool__(self) -> bool:
        return bool(self.temporary or self.fresh)

    def blocked(self) -> frozenset[str]:
        """The paths an input must not be to be planned: each unsettled file or working folder, and
        every folder above one (a huggingface input is a config folder)."""
        out: set[str] = set()
        for path in self.temporary + self.fresh:
            parts = path.rstrip("/").split("/")
            out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        return frozenset(out)

    def names(self) -> str:
        names = [escaped_name(n) for n in (self.fresh + self.temporary)[:SHOWN]]
        more = len(self.fresh) + len(self.temporary) - len(names)
        return ", ".join(names) + (f" and {more} more" if more else "")

    def reason(self, dataset: str, settle_seconds: int, wait_left: int) -> str:
        """The sensor's skip reason: how many files are still arriving, some names, and the rule."""
        return (f"{dataset}: {len(self.fresh) + len(self.temporary)} file(s) still arriving ({self.names()}): "
                f"changed since the previous tick and written within the last {settle_seconds}s (a copy tool's "
                f"temporary name or folder too); nothing is planned until they settle, {wait_left}s more at most "
                "(max_settle_wait): then what has settled is planned (or write elsewhere, then move into raw/)")

    def stale_warning(self, dataset: str) -> str:
        """The one warning naming the leftovers found settled this tick ("" when none)."""
        if not self.stale:
            return ""
        names = [escaped_name(n) for n in self.stale[:SHOWN]]
        more = len(self.stale) - len(names)
        return (f"{dataset}: {len(self.stale)} copy tool leftover(s) have stopped changing "
                f"({', '.join(names)}{f' and {more} more' if more else ''}): the temporary files or working "
                "folders of a copy that was aborted or left them behind; never inputs, and ignored from now on "
                "(delete them, or finish the copy)")


def arrivals(raw_dir, settle_seconds: int, state_file, previous: Look | None = None,
             now_ns: int | None = None) -> Arrivals:
    """What under `raw_dir` has not settled since `previous` (the last tick's look); `state_file` is
    the archive state, whose outputs have settled. A folder that cannot be listed is the planner's to
    report, not this check's. `settle_seconds` 0: nothing waits (a leftover is named once)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    previous = previous or Look()
    leftovers: list[Leftover] = []

    def copy_temp(rel: str, entry: os.DirEntry) -> None:
        found = leftover(rel, entry.path)
        if found is not None:
            leftovers.append(found)

    unpacked: set[str] = set()
    if settle_seconds > 0:
        unpacked = {out for entry in load_state(state_file, lambda _msg: None).archives.values()
                    for out in entry.outputs}
    fresh: list[str] = []
    future: list[str] = []
    stamps: list[bytes] = []
    for item in walk(raw_dir, lambda _folder, _exc: None, copy_temp):
        name = item.entry.name
        if is_temp_name(name):
            continue  # the archive stage's own, removed by the next unpack
        if is_arriving_name(name):
            copy_temp(item.rel, item.entry)
            continue
        if settle_seconds <= 0 or item.rel in unpacked:
            continue
        try:
            st = os.stat(item.entry.path, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or now_ns - st.st_mtime_ns >= settle_seconds * _NS:
            continue  # settled by age
        seen = stamp(item.rel, st.st_size, st.st_mtime_ns)
        ahead = st.st_mtime_ns > now_ns + FUTURE_SLACK_NS  # never old enough: always kept in the look
        if ahead or len(stamps) < MAX_STAMPS:
            stamps.append(seen)
        if seen in previous.stamps:
            continue  # unchanged since the previous look
        fresh.append(item.rel)
        if ahead:
            future.append(item.rel)
    changing, stale, kept = judge_leftovers(leftovers, settle_seconds, previous, now_ns)
    return Arrivals(tuple(sorted(changing)), tuple(sorted(fresh)), tuple(sorted(future)),
                    Look(frozenset(stamps + kept), previous.waiting_since), tuple(sorted(stale)))


def judge_leftovers(leftovers: list[Leftover], settle_seconds: int, previous: Look,
                     now_ns: int) -> tuple[list[str], list[str], list[bytes]]:
    """(still changing, settled and not yet named, the stamps to keep) for copy tools' leftovers: one
    changes while what it shows moved since the previous look and is younger than `settle_seconds`."""
    changing: list[str] = []
    stale: list[str] = []
    kept: list[bytes] = []
    for left in leftovers:
        if left.named() in previous.stamps:
            mark = left.named()  # settled, and named on an earlier tick
        elif now_ns - left.newest_ns < settle_seconds * _NS and left.seen() not in previous.stamps:
            mark = left.seen()
            changing.append(left.rel)
        else:
            mark = left.named()
            stale.append(left.rel)
        if len(kept) < MAX_STAMPS:
            kept.append(mark)
    return changing, stale, kept
