"""The raw sensor's tick for a dataset whose raw folder is in a bucket (D26): ONE listing of the
prefix, compared with what the local mirror holds and with the previous tick's look
(planning/bucket_listing.py, through `RawSource.changes`). Nothing is downloaded: a tick stays
cheap whatever the object sizes, and it works before the first run has made the mirror.

Once what is new, changed or removed has settled (size and ETag unchanged since the previous tick,
or LastModified at least `settle_seconds` old; while objects still arrive it waits,
`max_settle_wait` at most, as for a folder), the tick requests ONE run of `extracted/<key>`, with
the folder sensor's tags and run-key scheme (dagster_layer/raw_requests.py): that run mirrors, plans
(holding back what is still arriving), extracts and publishes, and makes the shard partitions match.
The cursor keeps the digest of the work requested, so no tick asks for the same work twice; a
changed recipe (extract.yaml edited) asks for one run too, which re-extracts what it made stale.
A tick finding the dataset lock held skips: a run is mirroring, or rewriting parts.
"""

import hashlib
import time
from collections.abc import Callable
from dataclasses import replace

from dagster import SensorResult

from ..catalog import DatasetSpec
from ..pipeline import lock_path
from ..planning.bucket_listing import ListingChanges
from ..planning.raw_sources import raw_source
from ..storage.base import StoreError
from ..storage.mirror_state import MirrorStateError
from ..store.dataset_store import DatasetStore
from ..store.locks import LockTimeout, dataset_lock
from .raw_requests import extracted_run, lock_held, skipped, trigger_word
from .sensor_cursor import RawCursor

Log = Callable[[str], None]


def evaluate_listing(spec: DatasetSpec, previous: RawCursor, log: Log | None = None, warn: Log | None = None,
                     now_ns: int | None = None) -> SensorResult | None:
    """One tick for a raw folder copied from elsewhere; None for a raw folder read in place."""
    where = spec.raw_location or str(spec.raw_dir)
    try:
        changes = raw_source(spec).changes(spec, previous.look, now_ns)
    except (OSError, StoreError, MirrorStateError) as exc:
        return skipped(f"{spec.key}: cannot list {where}: {exc}; looking again next tick", previous)
    if changes is None:
        return None
    try:  # only to learn whether a run holds it: its mirror is under way, and its changes are its own
        with dataset_lock(lock_path(spec), spec.key, timeout=0, log=lambda _msg: None):
            pass
    except LockTimeout:
        return skipped(lock_held(spec), previous)
    _warn_once(spec, where, changes, warn)
    now_s = (time.time_ns() if now_ns is None else now_ns) // 1_000_000_000
    arriving = changes.arriving
    since = arriving.look.waiting_since if arriving.look.waiting_since is not None else now_s
    if arriving and now_s - since < spec.max_settle_wait:  # request nothing until the listing holds still
        return skipped(changes.reason(spec.key, where, spec.settle_seconds, spec.max_settle_wait - (now_s - since)),
                       replace(previous, look=replace(arriving.look, waiting_since=since)))
    # waited max_settle_wait: the run holds back what is still arriving (planning/held_inputs.py)
    following = replace(previous, recipe=spec.recipe, look=replace(arriving.look, waiting_since=now_s if arriving
                                                                   else None))
    note = f"; {len(arriving.fresh) + len(arriving.temporary)} still arriving after {spec.max_settle_wait}s " \
        f"(max_settle_wait): the run leaves them out ({arriving.names()})" if arriving else ""
    return _request(spec, where, changes, previous, following, note, log)


def _request(spec: DatasetSpec, where: str, changes: ListingChanges, previous: RawCursor, following: RawCursor,
             note: str, log: Log | None) -> SensorResult:
    """ONE run of extracted/<key> for settled changes (or a changed recipe) not requested before."""
    head = f"{spec.key}: {changes.inputs} object(s) in {where}"
    recipe_moved = previous.recipe not in ("", spec.recipe)
    if not changes.pending and not recipe_moved:
        return skipped(f"{head}, as the local mirror holds them: nothing to request{note}", following)
    work = hashlib.blake2b(f"{changes.work}\0{spec.recipe}".encode(), digest_size=8).hexdigest()
    what = changes.counts() or "the recipe changed (extract.yaml)"
    if work == previous.requested:
        return skipped(f"{head}; {what}: requested already (run key #{previous.requesting_ticks}); waiting for "
                       f"that run{note}", following)
    tick = previous.requesting_ticks + 1
    published = (DatasetStore(spec).current / "manifest.json").exists()
    trigger = trigger_word(published, changes.new, changes.changed or (("recipe",) if recipe_moved else ()),
                           changes.removed)
    words = f"{head}; {what}: requested one run of extracted/{spec.key}, which mirrors them, extracts and " \
        f"publishes{note}"
    if log is not None and note:
        log(note[2:])
    following = replace(following, last_tick=words, requesting_ticks=tick, requested=work)
    return SensorResult(run_requests=[extracted_run(spec, trigger, work, tick)], cursor=following.encode())


def _warn_once(spec: DatasetSpec, where: str, changes: ListingChanges, warn: Log | None) -> None:
    """Copy tools' leftovers found settled, and objects whose LastModified is ahead of this host's
    clock: named on the tick that first finds them so."""
    if warn is None:
        return
    if changes.arriving.stale:
        warn(changes.arriving.stale_warning(spec.key))
    if changes.arriving.future:
        warn(f"{spec.key}: {len(changes.arriving.future)} object(s) in {where} have a LastModified in the future: "
             "this host's clock is behind the store's; they are requested once their size and ETag are unchanged "
             "at the next tick")
