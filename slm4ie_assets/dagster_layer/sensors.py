"""Sensors watching `raw/<key>/`, one per dataset, plus the automation sensor that republishes and
one that frees the pool slots of runs whose process died (dagster_layer/stale_runs.py).

A tick unpacks new archives (under the dataset lock), lists and stats the raw files (no content
reads) and compares them with the `shards/<key>` partitions registered in the instance and with
its cursor (dagster_layer/sensor_cursor.py):
  - new shards are added as partitions, vanished ones deleted;
  - one change, one run: whatever changed (new, changed or vanished shards, or current parts the
    published version lacks) is handed to ONE `extracted/<key>` run, which extracts what is stale in
    its process pool, records each shard it rebuilt as a materialization of its `shards/<key>`
    partition (up to SHARD_EVENT_LIMIT, DAGSTER_NOTES 2) and publishes. A second run started by
    the automation sensor after a `shards/<key>` run cost 15-50 s of run start-up per change;
  - a dataset that fans out (D24) gets `shards/<key>` runs instead, new shards in runs of at most
    `max_shards_per_run`, first extraction included, and one run per changed shard (more than
    MAX_CHANGED_RUNS go to one extracted/<key> run); the eager condition publishes after them;
  - each run key ends with the cursor's count of requesting ticks, so new work never repeats a key,
    and a tick the daemon evaluates again from the same cursor repeats its keys (deduplicated).
Only the part metas of shards in buckets whose digest moved are read, so an idle tick reads no part
meta; a changed recipe (extract.yaml edited) moves every bucket.
A tick finding the dataset lock held skips, leaving the plan alone: a run is rewriting parts.
A tick that finds files that have not settled (planning/settling.py: size or mtime moved since the previous
tick and the mtime younger than `settle_seconds`, or a copy tool's temporary name or folder) plans
nothing and says how many, for `max_settle_wait` at most: then it plans the shards whose files have
settled and holds back the others (neither planned nor deleted).
A tick that finds the raw tree changed also reports an observation of the external `raw/<key>` asset
whose data version digests the shard keys and fingerprints (dagster_layer/lineage.py, DAGSTER_NOTES 6).
Every tick's verdict, in words, is its skip reason and the cursor's `last_tick`, which the sensor's page shows.
A raw folder in a bucket is listed instead, never downloaded in a tick (dagster_layer/bucket_sensor.py).
"""

import hashlib
import time
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
from ..extractors.discovery import escaped_name
from ..pipeline import lock_path, unpack
from ..planning.settling import Arrivals, arrivals
from ..planning.shards import Shard, list_shards
from ..store.dataset_store import DatasetStore
from ..store.locks import LockTimeout, dataset_lock
from .assets import extracted_key, partitions_name, shards_key
from .bucket_sensor import evaluate_listing
from .lineage import observed_raw_version, raw_observation
from .raw_requests import extracted_run, lock_held, skipped, trigger_word
from .sensor_cursor import RawCursor, bucket_digests, moved_buckets, sensor_bucket
from .stale_runs import reap_dead_runs

MAX_CHANGED_RUNS = 16  # fan-out datasets: above this many changed shards, one extracted/<key> run
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
NAMES_SHOWN = 3  # shard keys named in a tick's verdict


def _digest(items: Iterable[str]) -> str:
    h = hashlib.sha1()
    for item in items:
        h.update(item.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()[:16]


@dataclass
class WatchDiff:
    """What changed under raw/<key>/ since the partitions and the cursor were last brought in line."""

    shards: list[Shard]
    new_current: list[str]  # new partitions whose part is already current: registered, no extraction
    new_stale: list[Shard]  # new partitions to extract, in shard order
    changed: list[Shard]  # registered partitions whose part is stale
    gone: list[str]  # registered partitions without a shard
    digests: bytes  # the bucket digests of `shards`, for the next cursor
    buckets_checked: int = 0
    published: bool = True  # the dataset has a published version
    unpublished: tuple[str, ...] = ()  # new partitions whose current part the published version lacks

    @property
    def idle(self) -> bool:
        return not (self.new_current or self.new_stale or self.changed or self.gone)

    @property
    def needs_publish(self) -> bool:
        return bool(self.new_stale or self.changed or self.gone or self.unpublished)


def diff_raw(spec: DatasetSpec, shards: list[Shard], registered: Sequence[str], previous: bytes | None) -> WatchDiff:
    """Compare the planned shards with the registered partitions and the previous tick's bucket digests."""
    store = DatasetStore(spec)
    digests = bucket_digests(shards)
    moved = moved_buckets(digests, previous)
    reg = set(registered)
    planned = {s.key for s in shards}
    new_current: list[Shard] = []
    new_stale: list[Shard] = []
    changed: list[Shard] = []
    for s in shards:
        if s.key not in reg:
            (new_current if store.part_is_current(s) else new_stale).append(s)
        elif moved and sensor_bucket(s.key) in moved and not store.part_is_current(s):
            changed.append(s)
    gone = [k for k in registered if k not in planned]
    manifest = store.published_manifest() if new_current else None
    published = manifest is not None or (store.current / "manifest.json").exists()
    in_version = set(manifest.shards) if manifest is not None else set()
    unpublished = tuple(s.key for s in new_current if (s.key, s.fingerprint) not in in_version)
    return WatchDiff(shards, [s.key for s in new_current], new_stale, changed, gone, digests, len(moved), published,
                     unpublished)


def _state(shards: Iterable[Shard]) -> str:
    return _digest(f"{s.key}@{s.fingerprint}" for s in shards)


def trigger_of(diff: WatchDiff) -> str:
    """The `slm4ie/trigger` tag: why the run was requested."""
    return trigger_word(diff.published, diff.new_stale, diff.changed, diff.gone)


def run_requests_for(spec: DatasetSpec, diff: WatchDiff, tick: int) -> list[RunRequest]:
    """The runs this tick's change needs; `tick` (the count of requesting ticks, this one included)
    ends every run key."""
    tags = {"slm4ie/dataset": spec.key}
    if spec.max_shards_per_run > 0 and len(diff.changed) <= MAX_CHANGED_RUNS:
        requests = fan_out_requests(spec, diff, tags, tick)
        if requests or not diff.needs_publish:
            return requests
    elif not diff.needs_publish:
        return []
    return [extracted_run(spec, trigger_of(diff), _state(diff.shards), tick)]


def fan_out_requests(spec: DatasetSpec, diff: WatchDiff, tags: dict[str, str], tick: int) -> list[RunRequest]:
    """D24: new shards in runs of at most `max_shards_per_run` (contiguous: they are registered last,
    in shard order), one run per changed shard; extracted/<key>'s eager condition publishes after them."""
    shards_asset = shards_key(spec.key)
    size = spec.max_shards_per_run
    requests = []
    for i in range(0, len(diff.new_stale), size):
        chunk = diff.new_stale[i:i + size]
        if len(chunk) == 1:
            requests.append(RunRequest(run_key=f"{chunk[0].key}@{chunk[0].fingerprint}#{tick}",
                                       partition_key=chunk[0].key, asset_selection=[shards_asset],
                                       tags={**tags, "slm4ie/trigger": "new"}))
        else:
            requests.append(RunRequest(
                run_key=f"new@{_state(chunk)}#{tick}", asset_selection=[shards_asset],
                tags={**tags, "slm4ie/trigger": "new", RANGE_START: chunk[0].key, RANGE_END: chunk[-1].key}))
    for s in diff.changed:
        requests.append(RunRequest(run_key=f"{s.key}@{s.fingerprint}#{tick}", partition_key=s.key,
                                   asset_selection=[shards_asset], tags={**tags, "slm4ie/trigger": "changed"}))
    return requests


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(escaped_name(k) for k in keys[:NAMES_SHOWN])
    return shown + (f" and {len(keys) - NAMES_SHOWN} more" if len(keys) > NAMES_SHOWN else "")


def verdict(spec: DatasetSpec, diff: WatchDiff, requests: list[RunRequest], added: int) -> str:
    """The tick's outcome in words: the skip reason, or what it asked for and why."""
    head = f"{spec.key}: {len(diff.shards)} shard(s)"
    if not requests:
        return head + ", nothing to extract" + (f"; {added} current partition(s) registered" if added else "")
    changes = [f"{len(found)} {word} ({_names([k if isinstance(k, str) else k.key for k in found])})"
               for word, found in (("new", diff.new_stale), ("changed", diff.changed), ("gone", diff.gone),
                                   ("current but unpublished", diff.unpublished)) if found]
    targets = sorted({"+".join(k.to_user_string() for k in r.asset_selection or []) for r in requests})
    runs = f"{len(requests)} run(s) of {', '.join(targets)}" if len(requests) > 1 else f"one run of {targets[0]}"
    return f"{head}; {'; '.join(changes) or 'first extraction'}: requested {runs}"


def sensor_result(spec: DatasetSpec, diff: WatchDiff, cursor: RawCursor, observed_raw: str | None = None,
                  note: str = "") -> SensorResult:
    """`cursor`: the next cursor but for the plan and the verdict, which this fills in.
    `observed_raw`: the data version of the latest raw/<key> observation; a tree that differs from
    it is observed again, so an idle tick writes no event. `note` ends the verdict."""
    name = partitions_name(spec.key)
    partition_requests: list[AddDynamicPartitionsRequest | DeleteDynamicPartitionsRequest] = []
    added = diff.new_current + [s.key for s in diff.new_stale]  # the shards to extract end up contiguous, last
    if added:
        partition_requests.append(AddDynamicPartitionsRequest(name, added))
    if diff.gone:
        partition_requests.append(DeleteDynamicPartitionsRequest(name, diff.gone))
    tick = cursor.requesting_ticks + 1
    requests = run_requests_for(spec, diff, tick)
    observation = raw_observation(spec, diff.shards)
    observations = [] if observation.data_version == observed_raw else [observation]
    words = verdict(spec, diff, requests, len(added)) + note
    following = replace(cursor, last_tick=words, recipe=spec.recipe, buckets=diff.digests,
                        requesting_ticks=tick if requests else cursor.requesting_ticks)
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests,
                        cursor=following.encode(), skip_reason=None if requests else SkipReason(words),
                        asset_events=observations)


def evaluate_raw(
    spec: DatasetSpec,
    catalog: Catalog,
    instance: DagsterInstance,
    cursor: str | None,
    log: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    now_ns: int | None = None,
) -> SensorResult:
    """One tick for `spec`: settle, unpack, list, diff, under the dataset lock (never waiting for it)."""
    previous = RawCursor.decode(cursor)
    listed = evaluate_listing(spec, previous, log, warn, now_ns)  # a bucket's prefix: listed, the run copies
    if listed is not None:
        return listed
    if not spec.raw_dir.is_dir():
        return skipped(f"{spec.key}: raw folder {spec.raw_dir} does not exist", previous)
    try:
        with dataset_lock(lock_path(spec), spec.key, timeout=0, log=lambda _msg: None):
            arriving = arrivals(spec.raw_dir, spec.settle_seconds, DatasetStore(spec).archive_state,
                                previous.look, now_ns)
            _warn_future(spec, arriving, warn)
            if warn is not None and arriving.stale:  # copy tools' leftovers that stopped changing: named once
                warn(arriving.stale_warning(spec.key))
            now_s = (time.time_ns() if now_ns is None else now_ns) // 1_000_000_000
            since = arriving.look.waiting_since if arriving.look.waiting_since is not None else now_s
            if arriving and now_s - since < spec.max_settle_wait:  # plan nothing until the copy is done
                reason = arriving.reason(spec.key, spec.settle_seconds, spec.max_settle_wait - (now_s - since))
                return skipped(reason, replace(previous, look=replace(arriving.look, waiting_since=since)))
            unpack(spec, catalog, log=log)
            shards = list_shards(spec, catalog.shard_group_threshold)
            blocked = arriving.blocked() if arriving else frozenset()
            held = {s.key for s in shards if blocked and any(f.rel in blocked for f in s.files)}
            registered = [k for k in instance.get_dynamic_partitions(partitions_name(spec.key)) if k not in held]
            diff = diff_raw(spec, [s for s in shards if s.key not in held], registered,
                            previous.digests_for(spec.recipe))
        observed = observed_raw_version(instance, spec.key)
    except LockTimeout:
        return skipped(lock_held(spec), previous)
    # waited max_settle_wait: what has settled is planned now, the rest waits (as long again at most)
    following = replace(previous, look=replace(arriving.look, waiting_since=now_s if arriving else None))
    note = ""
    if arriving:
        note = (f"; {len(held)} shard(s) held back after {spec.max_settle_wait}s (max_settle_wait) while "
                f"{len(arriving.fresh) + len(arriving.temporary)} file(s) are still arriving ({arriving.names()})")
        if log is not None:
            log(note[2:])
    return sensor_result(spec, diff, following, observed, note)  # unpack has logged its warnings


def _warn_future(spec: DatasetSpec, arriving: Arrivals, warn: Callable[[str], None] | None) -> None:
    """Once, on the tick that first sees it: a file whose mtime is ahead of this host's clock."""
    if warn is not None and arriving.future:
        shown = Arrivals((), arriving.future, (), arriving.look).names()
        warn(f"{spec.key}: {len(arriving.future)} file(s) have a modification time in the future ({shown}): the "
             "writing host's clock is ahead, or the time was copied from such a host; they are planned once their "
             "size and mtime are unchanged at the next tick")


def raw_sensor_description(spec: DatasetSpec) -> str:
    """The sensor's page states its rule with the dataset's own numbers (one paragraph: the UI shows it whole)."""
    k = spec.key
    run = (f"runs of shards/{k} (at most {spec.max_shards_per_run} shards each), then extracted/{k} republishes"
           if spec.max_shards_per_run else f"one run of extracted/{k}, which extracts what is stale and publishes")
    return (f"Watches the raw files of {spec.key} every {spec.watch_interval}s. New, changed and deleted files become "
            f"{run}. A file is planned once settled: size and mtime unchanged since the previous tick, or mtime "
            f"at least {spec.settle_seconds}s old. While files arrive (or have a copy tool's temporary name: rsync, "
            f"browsers, .~tmp~/, .rsync-partial/, .azDownload-*, never inputs) it waits, {spec.max_settle_wait}s at "
            "most, then plans what has settled. Each tick's verdict is its skip reason and the cursor's last_tick."
            + ("" if spec.watch else " Off because extract.yaml sets `watch: false`; start it here to watch anyway."))


def build_raw_sensor(spec: DatasetSpec, catalog: Catalog) -> SensorDefinition:
    @sensor(
        name=f"raw_{spec.key}_sensor",
        minimum_interval_seconds=spec.watch_interval,
        default_status=DefaultSensorStatus.RUNNING if spec.watch else DefaultSensorStatus.STOPPED,
        target=AssetSelection.assets(shards_key(spec.key), extracted_key(spec.key)),
        description=raw_sensor_description(spec),
    )
    def _raw_sensor(context: SensorEvaluationContext):
        return evaluate_raw(spec, catalog, context.instance, context.cursor, log=context.log.info,
                            warn=context.log.warning)

    return _raw_sensor


def build_automation_sensor(catalog: Catalog) -> AutomationConditionSensorDefinition:
    """Dagster's default automation sensor is STOPPED; this one runs, so extracted/<key> republishes
    after `shards/<key>` runs (a backfill or Materialize in the UI, a fan-out dataset's sensor runs)
    without anyone switching it on. It ticks as often as the quickest dataset's `watch_interval`, 5-15 s.
    The raw sensors' own runs publish themselves and need it not."""
    intervals = [s.watch_interval for s in catalog.datasets.values()] or [15]
    return AutomationConditionSensorDefinition(
        "slm4ie_republish_sensor",
        target=AssetSelection.assets(*(extracted_key(k) for k in catalog.datasets)),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=max(5, min(15, min(intervals))),
        description=("Evaluates extracted/<key>'s eager condition: republishes a dataset after shards/<key> partitions "
                     "were materialized by their own runs (a backfill, Materialize on a shard, a fan-out dataset)."),
    )


STALE_RUN_SENSOR = "slm4ie_stale_run_sensor"


def build_stale_run_sensor() -> SensorDefinition:
    """Under the daemon: ends runs whose worker is gone, so queued runs start and no run waits for
    ever: runs of this host whose process died (dagster_layer/stale_runs.py), even when no extraction
    step runs here to do it; and, on a Slurm instance, runs whose job ended while still queued
    (slurm/unstarted.py), which Dagster's run monitoring leaves STARTING until its start timeout.
    Every 30 s, the shipped run monitoring's poll."""

    @sensor(
        name=STALE_RUN_SENSOR,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.RUNNING,
        description=("Marks runs of this host whose process is gone (killed with SIGKILL, out of memory, shutdown) "
                     "as failed, so they stop holding the `slm4ie_extract` pool and queued runs can start; on "
                     "Slurm, also runs whose job was cancelled or failed before it started. Requests no runs."),
    )
    def _stale_run_sensor(context: SensorEvaluationContext):
        from ..slurm.unstarted import end_unstarted_runs  # the Slurm launcher's modules, only once a tick runs

        reaped = reap_dead_runs(context.instance, log=context.log.warning)
        unstarted = end_unstarted_runs(context.instance, log=context.log.warning)
        said = []
        if reaped:
            said.append(f"marked {len(reaped)} run(s) whose process is gone as ended: {', '.join(reaped)}")
        if unstarted:
            said.append(f"failed {len(unstarted)} run(s) whose Slurm job ended before it started: "
                        f"{', '.join(unstarted)}")
        return SkipReason("; ".join(said) or "no run of this host has lost its process")

    return _stale_run_sensor
