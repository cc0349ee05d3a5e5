"""Is anything still arriving in raw/<key>/? The raw sensor asks before it unpacks or plans.

`cp`, `rsync`, `wget` and `tar x` take minutes on a large corpus; a file planned halfway through is
published cut off (its last record a `malformed_json` drop). So a tick plans nothing while any
file under the raw folder is still being written: one whose mtime or ctime is younger than the
dataset's `settle_seconds`, or one with a name such tools write under (rsync's `.name.XXXXXX`,
`*.part`, ...; `extractors.base.is_arriving_name`). The ctime counts because a tool that
restores the source's mtime (`cp -p`, `tar x`, `rsync -t`) cannot set it: any write, rename or
chmod makes it now. Files the archive stage unpacked are left out (they were renamed into place
whole, and the tick that unpacked them has planned them). Only explicit runs (the UI, the CLI,
schedules) plan without waiting.
"""

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .archives import is_temp_name
from .archives.state import load_state
from .extractors.base import escaped_name, is_arriving_name
from .fswalk import walk

SHOWN = 3  # names in the sensor's skip reason


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The files of a raw folder still being written: temporary names, and files written lately."""

    temporary: tuple[str, ...]  # relative names such tools use while writing
    fresh: tuple[str, ...]  # written (mtime or ctime) within the settle time

    def __bool__(self) -> bool:
        return bool(self.temporary or self.fresh)

    def reason(self, dataset: str, settle_seconds: int) -> str:
        """The sensor's skip reason: how many files are still arriving, and some of their names."""
        names = [escaped_name(n) for n in (self.fresh + self.temporary)[:SHOWN]]
        more = len(self.fresh) + len(self.temporary) - len(names)
        shown = ", ".join(names) + (f" and {more} more" if more else "")
        return (f"{dataset}: {len(self.fresh) + len(self.temporary)} file(s) still arriving ({shown}): written "
                f"within the last {settle_seconds}s or under a temporary name; nothing is planned until they "
                "settle (write elsewhere, then move into raw/)")


def arrivals(raw_dir: Path, settle_seconds: int, state_file: Path, now_ns: int | None = None) -> Arrivals:
    """What under `raw_dir` is still arriving; `state_file` is the archive state, whose outputs are
    not arrivals. A folder that cannot be listed is the planner's to report, not this check's."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    window = settle_seconds * 1_000_000_000
    unpacked: set[str] = set()
    if settle_seconds > 0:
        unpacked = {out for entry in load_state(state_file, lambda _msg: None).archives.values()
                    for out in entry.outputs}
    temporary: list[str] = []
    fresh: list[str] = []
    for item in walk(raw_dir, lambda _folder, _exc: None):
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
        if stat.S_ISREG(st.st_mode) and now_ns - max(st.st_mtime_ns, st.st_ctime_ns) < window:
            fresh.append(item.rel)
    return Arrivals(tuple(sorted(temporary)), tuple(sorted(fresh)))
