"""Sensors watching `raw/<key>/`, one per dataset, plus the automation sensor that republishes and
one that frees the pool slots of runs whose process died (dagster_layer/stale_runs.py).

A tick unpacks new archives (under the dataset lock), lists and stats the raw files (no content
reads) and compares them with the `shards/<key>` partitions registered in the instance and with
a small cursor:
  - new shards are added as partitions; those whose part is not current get ONE run over their
    key range (they are appended last, so the range is contiguous), or runs of at most
    `max_shards_per_run` when the dataset fans out (D24);
  - changed shards get one run each, with run_key `<shard>@<fingerprint>`, so the same work is
    never requested twice;
  - vanished shards are deleted; when that is all that happened, extracted/<key> is requested
    directly to republish (otherwise its eager condition republishes after the shard runs);
  - when more than MAX_CHANGED_RUNS shards changed, or more than MAX_RANGE_SHARDS are new, one
    extracted/<key> run does everything in its process pool instead (per-run and per-partition
    event costs would dominate, DAGSTER_NOTES 2); so does the very first extraction of a dataset
    that was never published (nothing to republish yet, and the automation sensor only reacts to
    shard updates it has seen after its own first evaluation); a dataset that fans out (D24) gets
    its shard runs instead, first extraction included, and the eager condition publishes after them.

The cursor holds the dataset's recipe and one 8-byte digest per bucket of shards (64 buckets,
hashed by key), about 700 characters whatever the dataset size: Dagster stores the cursor with
every tick. Only the part metas of shards in buckets whose digest moved are read, so an idle tick
reads no part meta; a changed recipe (extract.yaml edited) moves every bucket.
A tick finding the dataset lock held skips, leaving the cursor alone: a run is rewriting parts.
A tick that finds files that have not settled (planning/settling.py: size or mtime moved since the previous
tick and the mtime younger than `settle_seconds`, or a copy tool's temporary name or folder) plans
nothing and says how many, for `max_settle_wait` at most: then it plans the shards whose files have
settled and holds back the others (neither planned nor deleted). The cursor carries, after the bucket
digests, the look planning/settling.py compares with and since when the dataset has waited.
A tick that finds the raw tree changed also reports an observation of the external `raw/<key>` asset
whose data version digests the shard keys and fingerprints (dagster_layer/lineage.py, DAGSTER_NOTES 6).
"""

import base64
import hashlib
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from dagster import (
    AddDynamicPartitionsRequest,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from ..catalog import Catalog, DatasetSpec
from ..pipeline import lock_path, unpack
from ..planning.settling import Arrivals, Look, arrivals
from ..planning.shards import Shard, list_shards
from ..store.dataset_store import DatasetStore
from ..store.locks import LockTimeout, dataset_lock
from .assets import SHARD_EVENT_LIMIT, extracted_key, partitions_name, shards_key
from .lineage import observed_raw_version, raw_observation
from .stale_runs import reap_dead_runs

SENSOR_BUCKETS = 64
_DIGEST = 8
CURSOR_PREFIX = "v1:"
MAX_CHANGED_RUNS = 16
MAX_RANGE_SHARDS = SHARD_EVENT_LIMIT  # a range run writes a planned and a materialization event per partition
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
LOOK_SEPARATOR = " "  # between the bucket digests and the look; neither uses a space


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def sensor_bucket(key: str) -> int:
    return zlib.crc32(_b(key)) % SENSOR_BUCKETS


def bucket_digests(shards: list[Shard]) -> bytes:
    hashers = [hashlib.blake2b(digest_size=_DIGEST) for _ in range(SENSOR_BUCKETS)]
    for s in shards:
        hashers[sensor_bucket(s.key)].update(_b(f"{s.key}\0{s.fingerprint}\n"))
    return b"".join(h.digest() for h in hashers)


def encode_cursor(digests: bytes, recipe: str) -> str:
    return f"{CURSOR_PREFIX}{recipe}:{base64.b64encode(digests).decode('ascii')}"


def decode_cursor(cursor: str | None, recipe: str) -> bytes | None:
    """The bucket digests of the previous tick; None (look at every bucket) when there is no usable
    cursor or the dataset's recipe (extractor, config, format) changed since, staling every part."""
    prefix = f"{CURSOR_PREFIX}{recipe}:"
    if not cursor or not cursor.startswith(prefix):
        return None
    try:
        raw = base64.b64decode(cursor[len(prefix):], validate=True)
    except ValueError:
        return None
    return raw if len(raw) == SENSOR_BUCKETS * _DIGEST else None


def split_cursor(cursor: str | None) -> tuple[str | None, Look]:
    """The plan cursor (bucket digests) and the settling look of a raw sensor's cursor."""
    plan, _, look = (cursor or "").partition(LOOK_SEPARATOR)
    return plan or None, Look.decode(look)


def join_cursor(plan: str | None, look: Look) -> str:
    return f"{plan or ''}{LOOK_SEPARATOR}{look.encode()}"


def _digest(items: Iterable[str]) -> str:
    h = hashlib.sha1()
    for item in items:
        h.update(_b(item))
        h.update(b"\n")
    return h.hexdigest()[:16]


@dataclass
class WatchDiff:
    """What changed under raw/<key>/ since the partitions and the cursor were last brought in line."""

    shards: list[Shard]
    new_current: list[str]  # new partitions whose part is already current: registered, no run
    new_stale: list[Shard]  # new partitions to extract, in shard order
    changed: list[Shard]  # registered partitions whose part is stale
    gone: list[str]  # registered partitions without a shard
    cursor: str
    buckets_checked: int = 0
    published: bool = True  # the dataset has a published version

    @property
    def idle(self) -> bool:
        return not (self.new_current or self.new_stale or self.changed or self.gone)


def diff_raw(spec: DatasetSpec, shards: list[Shard], registered: Sequence[str], cursor: str | None) -> WatchDiff:
    """Compare the planned shards with the registered partitions and the previous cursor."""
    store = DatasetStore(spec)
    digests = bucket_digests(shards)
    old = decode_cursor(cursor, spec.recipe)
    if old is None:
        moved = set(range(SENSOR_BUCKETS))
    else:
        moved = {i for i in range(SENSOR_BUCKETS)
                 if digests[i * _DIGEST:(i + 1) * _DIGEST] != old[i * _DIGEST:(i + 1) * _DIGEST]}
    reg = set(registered)
    planned = {s.key for s in shards}
    new_current: list[str] = []
    new_stale: list[Shard] = []
    changed: list[Shard] = []
    for s in shards:
        if s.key not in reg:
            if store.part_is_current(s):
                new_current.append(s.key)
            else:
                new_stale.append(s)
        elif moved and sensor_bucket(s.key) in moved and not store.part_is_current(s):
            changed.append(s)
    gone = [k for k in registered if k not in planned]
    published = (store.current / "manifest.json").exists()
    return WatchDiff(shards, new_current, new_stale, changed, gone, encode_cursor(digests, spec.recipe), len(moved),
                     published)


def run_requests_for(spec: DatasetSpec, diff: WatchDiff) -> list[RunRequest]:
    shards_asset, extracted_asset = shards_key(spec.key), extracted_key(spec.key)
    tags = {"slm4ie/dataset": spec.key}
    work = diff.new_stale or diff.changed
    fan_out = spec.max_shards_per_run > 0  # new shards go to runs of at most that many (D24)
    one_run = not fan_out and (not diff.published or len(diff.new_stale) > MAX_RANGE_SHARDS)
    if work and (one_run or len(diff.changed) > MAX_CHANGED_RUNS):
        state = _digest(f"{s.key}@{s.fingerprint}" for s in diff.shards)
        trigger = "bulk" if diff.published else "initial"
        return [RunRequest(run_key=f"{trigger}@{state}", asset_selection=[extracted_asset],
                           tags={**tags, "slm4ie/trigger": trigger})]
    requests = new_shard_requests(spec, diff.new_stale, tags)
    for s in diff.changed:
        requests.append(RunRequest(run_key=f"{s.key}@{s.fingerprint}", partition_key=s.key,
                                   asset_selection=[shards_asset], tags={**tags, "slm4ie/trigger": "changed"}))
    if diff.gone and not requests:
        state = _digest(f"{s.key}@{s.fingerprint}" for s in diff.shards)
        requests.append(RunRequest(run_key=f"publish@{state}", asset_selection=[extracted_asset],
                                   tags={**tags, "slm4ie/trigger": "deleted"}))
    return requests


def new_shard_requests(spec: DatasetSpec, new: list[Shard], tags: dict[str, str]) -> list[RunRequest]:
    """One run per contiguous range of new shards (they are registered last, in shard order), cut
    into runs of at most `max_shards_per_run` when the dataset fans out (D24)."""
    shards_asset = shards_key(spec.key)
    size = spec.max_shards_per_run or len(new) or 1
    requests = []
    for i in range(0, len(new), size):
        chunk = new[i:i + size]
        if len(chunk) == 1:
            requests.append(RunRequest(run_key=f"{chunk[0].key}@{chunk[0].fingerprint}", partition_key=chunk[0].key,
                                       asset_selection=[shards_asset], tags={**tags, "slm4ie/trigger": "new"}))
        else:
            requests.append(RunRequest(
                run_key=f"new@{_digest(f'{s.key}@{s.fingerprint}' for s in chunk)}", asset_selection=[shards_asset],
                tags={**tags, "slm4ie/trigger": "new", RANGE_START: chunk[0].key, RANGE_END: chunk[-1].key}))
    return requests


def sensor_result(spec: DatasetSpec, diff: WatchDiff, observed_raw: str | None = None, note: str = "") -> SensorResult:
    """`observed_raw`: the data version of the latest raw/<key> observation; a tree that differs from
    it is observed again, so an idle tick writes no event. `note` ends the skip reason."""
    name = partitions_name(spec.key)
    partition_requests: list[AddDynamicPartitionsRequest | DeleteDynamicPartitionsRequest] = []
    added = diff.new_current + [s.key for s in diff.new_stale]  # the shards to extract end up contiguous, last
    if added:
        partition_requests.append(AddDynamicPartitionsRequest(name, added))
    if diff.gone:
        partition_requests.append(DeleteDynamicPartitionsRequest(name, diff.gone))
    requests = run_requests_for(spec, diff)
    observation = raw_observation(spec, diff.shards)
    observations = [] if observation.data_version == observed_raw else [observation]
    skip = None
    if not requests:
        skip = SkipReason(f"{spec.key}: {len(diff.shards)} shard(s), nothing to extract"
                          + (f"; {len(added)} current partition(s) registered" if added else "") + note)
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=diff.cursor,
                        skip_reason=skip, asset_events=observations)


def evaluate_raw(
    spec: DatasetSpec,
    catalog: Catalog,
    instance: DagsterInstance,
    cursor: str | None,
    log: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    now_ns: int | None = None,
) -> SensorResult | SkipReason:
    """One tick for `spec`: settle, unpack, list, diff, under the dataset lock (never waiting for it)."""
    if not spec.raw_dir.is_dir():
        return SkipReason(f"{spec.key}: raw folder {spec.raw_dir} does not exist")
    plan_cursor, previous = split_cursor(cursor)
    try:
        with dataset_lock(lock_path(spec), spec.key, timeout=0, log=lambda _msg: None):
            arriving = arrivals(spec.raw_dir, spec.settle_seconds, DatasetStore(spec).state / "archives.json",
                                previous, now_ns)
            _warn_future(spec, arriving, warn)
            if warn is not None and arriving.stale:  # copy tools' leftovers that stopped changing: named once
                warn(arriving.stale_warning(spec.key))
            now_s = (time.time_ns() if now_ns is None else now_ns) // 1_000_000_000
            since = arriving.look.waiting_since if arriving.look.waiting_since is not None else now_s
            if arriving and now_s - since < spec.max_settle_wait:  # plan nothing until the copy is done
                look = replace(arriving.look, waiting_since=since)
                return SensorResult(skip_reason=arriving.reason(spec.key, spec.settle_seconds,
                                                                spec.max_settle_wait - (now_s - since)),
                                    cursor=join_cursor(plan_cursor, look))
            unpack(spec, catalog, log=log)
            shards = list_shards(spec, catalog.shard_group_threshold)
            blocked = arriving.blocked() if arriving else frozenset()
            held = {s.key for s in shards if blocked and any(f.rel in blocked for f in s.files)}
            registered = [k for k in instance.get_dynamic_partitions(partitions_name(spec.key)) if k not in held]
            diff = diff_raw(spec, [s for s in shards if s.key not in held], registered, plan_cursor)
        observed = observed_raw_version(instance, spec.key)
    except LockTimeout:
        return SkipReason(
            f"{spec.key}: a run holds the dataset lock (parts are being rewritten); looking again next tick"
        )
    # waited max_settle_wait: what has settled is planned now, the rest waits (as long again at most)
    diff.cursor = join_cursor(diff.cursor, replace(arriving.look, waiting_since=now_s if arriving else None))
    note = ""
    if arriving:
        note = (f"; {len(held)} shard(s) held back after {spec.max_settle_wait}s (max_settle_wait) while "
                f"{len(arriving.fresh) + len(arriving.temporary)} file(s) are still arriving ({arriving.names()})")
        if log is not None:
            log(note[2:])
    return sensor_result(spec, diff, observed, note)  # unpack has logged its warnings


def _warn_future(spec: DatasetSpec, arriving: Arrivals, warn: Callable[[str], None] | None) -> None:
    """Once, on the tick that first sees it: a file whose mtime is ahead of this host's clock."""
    if warn is not None and arriving.future:
        shown = Arrivals((), arriving.future, (), arriving.look).names()
        warn(f"{spec.key}: {len(arriving.future)} file(s) have a modification time in the future ({shown}): the "
             "writing host's clock is ahead, or the time was copied from such a host; they are planned once their "
             "size and mtime are unchanged at the next tick")


def build_raw_sensor(spec: DatasetSpec, catalog: Catalog) -> SensorDefinition:
    @sensor(
        name=f"raw_{spec.key}_sensor",
        minimum_interval_seconds=spec.watch_interval,
        default_status=DefaultSensorStatus.RUNNING if spec.watch else DefaultSensorStatus.STOPPED,
        target=AssetSelection.assets(shards_key(spec.key), extracted_key(spec.key)),
        description=(f"Watches the raw files of {spec.key} every {spec.watch_interval}s: extracts new or changed "
                     f"shards, drops vanished ones and republishes extracted/{spec.key}. A file is planned once "
                     "settled: size and mtime unchanged since the previous tick, or mtime at least "
                     f"{spec.settle_seconds}s old. While files arrive (or have a copy tool's temporary name: "
                     f"rsync, browsers, .~tmp~/, .rsync-partial/, .azDownload-*, never inputs) it waits, "
                     f"{spec.max_settle_wait}s at most, then plans what has settled."
                     + ("" if spec.watch else " Off because extract.yaml sets `watch: false`; start it here to "
                                              "watch anyway.")),
    )
    def _raw_sensor(context: SensorEvaluationContext):
        return evaluate_raw(spec, catalog, context.instance, context.cursor, log=context.log.info,
                            warn=context.log.warning)

    return _raw_sensor


def build_automation_sensor(catalog: Catalog) -> AutomationConditionSensorDefinition:
    """Dagster's default automation sensor is STOPPED; this one runs, so extracted/<key> republishes
    after shard runs without anyone switching it on. It ticks as often as the quickest dataset's
    `watch_interval` (watched or not: shard backfills from the UI need the republish too), 5-15 s:
    its wait is part of the minute from `cp` to publish."""
    intervals = [s.watch_interval for s in catalog.datasets.values()] or [15]
    return AutomationConditionSensorDefinition(
        "slm4ie_republish_sensor",
        target=AssetSelection.assets(*(extracted_key(k) for k in catalog.datasets)),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=max(5, min(15, min(intervals))),
        description="Evaluates extracted/<key>'s eager condition: republish after shard partitions were materialized.",
    )


STALE_RUN_SENSOR = "slm4ie_stale_run_sensor"


def build_stale_run_sensor() -> SensorDefinition:
    """Under the daemon: frees the pool slots of runs whose process died (dagster_layer/stale_runs.py), so queued
    runs start even when no extraction step runs on this host to do it."""

    @sensor(
        name=STALE_RUN_SENSOR,
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.RUNNING,
        description=("Marks runs of this host whose process is gone (killed with SIGKILL, out of memory, shutdown) "
                     "as failed, so they stop holding the `slm4ie_extract` pool and queued runs can start. "
                     "Requests no runs."),
    )
    def _stale_run_sensor(context: SensorEvaluationContext):
        reaped = reap_dead_runs(context.instance, log=context.log.warning)
        if reaped:
            return SkipReason(f"marked {len(reaped)} run(s) whose process is gone as ended: {', '.join(reaped)}")
        return SkipReason("no run of this host has lost its process")

    return _stale_run_sensor
