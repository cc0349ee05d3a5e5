"""Only whole files in the runs a sensor starts: the shards whose files are still arriving.

The raw sensor plans a file once it has settled (planning/settling.py), but the runs it starts list
raw/<key>/ again themselves: the republish of extracted/<key> that the automation sensor requests
after shard runs, and the extraction of a dataset never published (or of many shards at once). A
file that began arriving after the sensor's tick would be extracted cut off and published. Such a
run leaves out every shard with a file still arriving by the sensor's rule, seen from one look: a
file, or a copy tool's temporary name or working folder, with an mtime younger than `settle_seconds`,
or than `watch_interval` if that is shorter. The sensor approves a file only once its mtime is
`settle_seconds` old or its size and mtime held still between two ticks at least `watch_interval`
apart, so a file it planned is never held back here. An mtime in the future is not held (the sensor
settles it by its two looks; it is warned about there).

A left-out shard is not in this publish (a file rewritten in place is missing from it until it has
settled), and its partition is removed with the rest of the plan, so the raw sensor finds it new
once it has settled and requests it: whatever arrives is published whole, one tick later.
A run a person started (the UI, `slm4ie extract`, a schedule) and a forced run hold nothing back.
The caller says where the archive state lies (`DatasetStore.archive_state`): planning sits below
the output folder's layout (docs/architecture.md, "The package").
"""

from dataclasses import dataclass
from pathlib import Path

from ..catalog import DatasetSpec
from .settling import Arrivals, arrivals
from .shards import Shard


def still_arriving(spec: DatasetSpec, archive_state: Path, now_ns: int | None = None) -> Arrivals:
    """What under raw/<key>/ is still arriving, from this one look (no previous look to compare);
    `archive_state`: the dataset's archive state file, whose recorded outputs are not arrivals."""
    window = min(spec.settle_seconds, spec.watch_interval)
    found = arrivals(spec.raw_dir, window, archive_state, None, now_ns)
    ahead = set(found.future)
    return Arrivals(found.temporary, tuple(rel for rel in found.fresh if rel not in ahead), (), found.look)


@dataclass(frozen=True)
class HeldBack:
    """The shards a sensor-started run plans, those it holds back, and the files still arriving."""

    planned: list[Shard]
    held: list[Shard]
    arriving: str = ""  # a few names (settling.Arrivals.names), for the run's log


def hold_back(spec: DatasetSpec, shards: list[Shard], archive_state: Path, now_ns: int | None = None) -> HeldBack:
    """Leave out the shards with a file still arriving, keeping plan order; nothing when none is."""
    arriving = still_arriving(spec, archive_state, now_ns)
    if not arriving:
        return HeldBack(shards, [])
    blocked = arriving.blocked()
    planned: list[Shard] = []
    held: list[Shard] = []
    for shard in shards:
        (held if any(f.rel in blocked for f in shard.files) else planned).append(shard)
    return HeldBack(planned, held, arriving.names() if held else "")
