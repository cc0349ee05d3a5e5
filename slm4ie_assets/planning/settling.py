"""Has each file in raw/<key>/ settled? The raw sensor asks before it unpacks or plans.

`cp`, `rsync`, `wget` and `tar x` take minutes on a large corpus; a file planned halfway through is
published cut off (its last record a `malformed_json` drop). A file has settled when what it shows
has stopped moving: its size and mtime are the same as at the sensor's previous look (the look is
kept in the sensor's cursor), or its mtime is at least `settle_seconds` old. The ctime is not read:
a `mv` into raw/ makes it now, and a file moved in whole would then wait for nothing. Tools that
restore the source's mtime (`cp -p`, `tar x`, `rsync -t`) set it once the content is written, so
an old mtime means a whole file. An mtime in the future (a clock ahead on the host that wrote it)
settles by the two looks alone, and is named once in a warning (the tick that first sees it).

Never settled: a name copy and download tools write under (rsync's `.name.XXXXXX`, `*.part`, ...;
`extractors.discovery.is_arriving_name`), and whatever is in a copy tool's working folder (`.~tmp~/`,
`.rsync-partial/`, `.azDownload-*`; `fswalk.is_copy_tool_name`), which is never an input either.
Files the archive stage unpacked have settled (they were renamed into place whole). Only explicit
runs (the UI, the CLI, schedules) plan without waiting.
"""

import base64
import hashlib
import os
import stat
import time
from dataclasses import dataclass

from ..archives import is_temp_name
from ..archives.state import load_state
from ..extractors.discovery import escaped_name, is_arriving_name
from ..utils.fswalk import walk

SHOWN = 3  # names in the sensor's skip reason
STAMP = 8  # bytes of one file's digest in the look
MAX_STAMPS = 1024  # files whose look is kept (~11 KB of cursor); any beyond settle by their age alone
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


def stamp(rel: str, size: int, mtime_ns: int) -> bytes:
    return hashlib.blake2b(f"{rel}\0{size}\0{mtime_ns}".encode("utf-8", "surrogateescape"),
                           digest_size=STAMP).digest()


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The files of a raw folder that have not settled, and the look to keep for the next tick."""

    temporary: tuple[str, ...]  # copy tools' names and non-empty working folders (`.~tmp~/`)
    fresh: tuple[str, ...]  # young files that changed since the previous look (or were not in it)
    future: tuple[str, ...]  # files first seen this tick with an mtime ahead of the clock
    look: Look

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
                f"changed since the previous tick (and written within the last {settle_seconds}s) or under a copy "
                f"tool's temporary name; nothing is planned until they settle, {wait_left}s more at most "
                "(max_settle_wait): then what has settled is planned (or write elsewhere, then move into raw/)")


def arrivals(raw_dir, settle_seconds: int, state_file, previous: Look | None = None,
             now_ns: int | None = None) -> Arrivals:
    """What under `raw_dir` has not settled since `previous` (the last tick's look); `state_file` is
    the archive state, whose outputs have settled. A folder that cannot be listed is the planner's to
    report, not this check's. `settle_seconds` 0: only copy tools' names and folders count."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    previous = previous or Look()
    temporary: list[str] = []

    def copy_temp(rel: str, entry: os.DirEntry) -> None:
        try:
            if not entry.is_dir(follow_symlinks=False):
                temporary.append(rel)
            elif any(True for _ in os.scandir(entry.path)):
                temporary.append(rel + "/")
        except OSError:
            pass

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
            temporary.append(item.rel)
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
    return Arrivals(tuple(sorted(temporary)), tuple(sorted(fresh)), tuple(sorted(future)),
                    Look(frozenset(stamps), previous.waiting_since))
