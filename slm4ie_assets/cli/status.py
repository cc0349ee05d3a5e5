"""`slm4ie status KEY [--slices N] [--json]`: each shard's part, current, stale or missing, and its slice.

A batch array job's tasks each write one slice of the shards; until `publish` refuses, nothing
else says which slices are done. This lists every shard as `extract` plans it now (stat calls
only; archives not yet unpacked are not looked into, and nothing is written): `current` (its
part matches the raw files and extract.yaml), `stale` (a part exists, from other inputs or
settings, or damaged) or `missing` (no part). With `--slices N` each shard names the slice
`--slice I/N` gives it (slices.slice_of, the same rule), and each slice gets a line: done, or how many
of its shards still need `slm4ie extract KEY --slice I/N --no-publish`. Exit status 0.
"""

from dataclasses import asdict, dataclass

from ..catalog import Catalog, DatasetSpec
from ..engine.pool_server import effective_workers
from ..pipeline import plan_dataset
from ..planning.shards import Shard
from ..store.dataset_store import DatasetStore
from ..store.published_reader import published_version
from .output import json_text, shown
from .run import say
from .slices import Slice, slice_of


@dataclass(frozen=True)
class ShardStatus:
    key: str
    state: str  # current | stale | missing
    slice: str | None  # "I/N" with --slices N


def shard_states(spec: DatasetSpec, shards: list[Shard], slices: int | None) -> list[ShardStatus]:
    store = DatasetStore(spec)
    owner: dict[str, str] = {}
    for i in range(1, (slices or 0) + 1):
        owner.update((s.key, f"{i}/{slices}") for s in slice_of(shards, Slice(i, slices or 1)))
    rows = []
    for s in shards:
        meta = store.read_part_meta(s.key)
        state = "missing" if meta is None else "current" if store.part_is_current(s, meta) else "stale"
        rows.append(ShardStatus(s.key, state, owner.get(s.key)))
    return rows


def published_state(spec: DatasetSpec, up_to_date: bool) -> str:
    if up_to_date:
        return "up to date"
    # the version readers get: a bucket's newest commit, whatever this host's work folder holds
    return "out of date" if published_version(spec) is not None else "never published"


def slice_lines(rows: list[ShardStatus], slices: int, key: str) -> list[str]:
    lines = []
    for i in range(1, slices + 1):
        label = f"{i}/{slices}"
        mine = [r for r in rows if r.slice == label]
        todo = [r for r in mine if r.state != "current"]
        if todo:
            lines.append(f"slice {label}: {len(todo)} of {len(mine)} shard(s) not current: "
                         f"`slm4ie extract {key} --slice {label} --no-publish`")
        else:
            lines.append(f"slice {label}: done ({len(mine)} shard(s))")
    return lines


def status(spec: DatasetSpec, catalog: Catalog, slices: int | None = None, as_json: bool = False) -> int:
    plan = plan_dataset(spec, workers=effective_workers(None, catalog.max_workers),
                        group_threshold=catalog.shard_group_threshold)  # the shards `extract` plans
    rows = shard_states(spec, plan.shards, slices)
    counts = {state: sum(r.state == state for r in rows) for state in ("current", "stale", "missing")}
    published = published_state(spec, plan.up_to_date)
    if as_json:
        print(json_text({"dataset": spec.key, "shards": [asdict(r) for r in rows], "counts": counts,
                         "published": published, "slices": slices}))
        return 0
    say(f"{spec.key}: {len(rows)} shard(s): {counts['current']} current, {counts['stale']} stale, "
        f"{counts['missing']} missing; published version: {published}")
    names = [shown(r.key) for r in rows]  # a key keeps C1 and format characters as they are: escape them
    width = max([len(name) for name in names] + [5])
    say((f"{'shard':<{width}}  state    " + ("slice" if slices else "")).rstrip())
    for name, r in zip(names, rows, strict=True):
        say(f"{name:<{width}}  {r.state:<7}  {r.slice or ''}".rstrip())
    for line in slice_lines(rows, slices, spec.key) if slices else []:
        say(line)
    return 0
