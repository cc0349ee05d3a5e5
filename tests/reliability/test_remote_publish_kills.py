"""A publish through the Store interface SIGKILLed before each of its store writes (docs/guarantees.md,
"On a bucket"; D17): every upload, the commit, each top-level copy, the top-level record, each
deletion of the clean-up and the lease's own writes. The run is a real child process whose store
calls `support.kill_points.KillPoints` before each write, create and delete, so no step is missed.

After every kill a reader that follows the newest commit record sees the previous version or the
new one, whole; each top-level object is whole and never shows the new text beside the older
sidecar. The next run (publish, or settle when the new version is already committed) succeeds,
leaves nothing of the killed run behind, and its objects are byte for byte what the POSIX publish
of the same parts shows. A function over a store opener: a folder today, a bucket once it lands.
"""

import multiprocessing
import signal

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import plan_dataset
from slm4ie_assets.store.lease import Lease
from slm4ie_assets.store.remote_publish import publish_version, settle
from slm4ie_assets.store.remote_versions import KEEP_COMMITS, CommitRecord, RemoteLayout, published_matches
from support.kill_points import KillPoints
from support.remote_stores import (
    KEY,
    STORE_KINDS,
    HookedStore,
    opener_for,
    posix_versions,
    published_name,
    read_all,
    read_or_none,
    restore,
    snapshot,
)

LAYOUT = RemoteLayout(KEY)
CTX = multiprocessing.get_context("fork")


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    return posix_versions(tmp_path_factory.mktemp("posix"), ("a", "b", "c", "plain"))


@pytest.fixture(params=STORE_KINDS)
def opener(request, tmp_path):
    return opener_for(request.param, request, tmp_path)


def _killed_publish(opener, version, kill_at, counter) -> None:
    points = KillPoints(kill_at)
    store = HookedStore(opener(), lambda operation, name: points.point())
    with Lease(store, KEY) as lease:
        publish_version(store, KEY, version.local, version.manifest, lease)
    counter.value = points.count


def _run_child(opener, version, kill_at: int) -> tuple[int, int]:
    counter = CTX.Value("i", -1)
    child = CTX.Process(target=_killed_publish, args=(opener, version, kill_at, counter))
    child.start()
    child.join(60)
    assert child.exitcode is not None, "the publishing child hung"
    return child.exitcode, counter.value


def _next_run(store, version, shards) -> None:
    """What the caller does next: under the lease, skip (settling leftovers and top-level copies)
    when the version is already published, else publish it."""
    with Lease(store, KEY, timeout=30) as lease:
        if published_matches(store, KEY, version.manifest.recipe, shards):
            settle(store, KEY, lease)
        else:
            publish_version(store, KEY, version.local, version.manifest, lease)


def _assert_old_or_new(store, versions, old, new, note) -> str:
    seen = published_name(store, versions)
    assert seen in (old.name, new.name), note
    pair = (read_all(store, LAYOUT.text), read_or_none(store, LAYOUT.sidecar))
    allowed = {(old.text, old.sidecar), (old.text, new.sidecar), (new.text, new.sidecar)}
    assert pair in allowed, f"{note}: the top-level objects are torn or show the new text beside an older sidecar"
    if seen == old.name:
        assert pair[0] == old.text, f"{note}: a top-level copy is ahead of the commit"
    return seen


def _assert_recovered(store, versions, new, note) -> None:
    assert published_name(store, versions) == new.name, note
    assert read_all(store, LAYOUT.text) == new.text, f"{note}: not the POSIX publish's bytes"
    assert read_or_none(store, LAYOUT.sidecar) == new.sidecar, f"{note}: not the POSIX publish's sidecar"
    records = [o.name for o in store.list(LAYOUT.published)]
    assert len(records) == KEEP_COMMITS, (note, records)
    kept = {name: size for r in records for name, size in CommitRecord.from_json(read_all(store, r)).objects().items()}
    assert {o.name: o.size for o in store.list(LAYOUT.versions)} == kept, f"{note}: versions no kept commit names"
    leases = [o.name for o in store.list(".slm4ie/k/lease/")]
    expected = {LAYOUT.text, LAYOUT.top_level_record, *records, *leases,
                *(o.name for o in store.list(LAYOUT.versions))} | ({LAYOUT.sidecar} if new.sidecar else set())
    assert {o.name for o in store.list("")} == expected and len(leases) == 1, f"{note}: leftovers"


@pytest.mark.parametrize("new_name", ["c", "plain"])
def test_sigkill_before_each_store_write_of_a_publish(opener, versions, new_name):
    """`plain` has no sidecar: its publish also removes the top-level sidecar."""
    store = opener()
    old, new = versions["b"], versions[new_name]
    shards = plan_dataset(load_catalog(new.config).dataset(KEY)).shards
    for name in ("a", "b"):  # two commits already, so this publish also retires a's record and version
        _next_run(store, versions[name], plan_dataset(load_catalog(versions[name].config).dataset(KEY)).shards)
    saved = snapshot(store)
    exitcode, points = _run_child(opener, new, -1)
    assert exitcode == 0 and points >= 10, (exitcode, points)
    print(f"{points} store writes in a publish of {new_name}")
    _assert_recovered(store, versions, new, "unkilled")
    seen = []
    for kill_at in range(points):
        note = f"killed before store write {kill_at} of {points}"
        restore(store, saved)
        exitcode, _ = _run_child(opener, new, kill_at)
        assert exitcode == -signal.SIGKILL, note
        seen.append(_assert_old_or_new(store, versions, old, new, note))
        _next_run(store, new, shards)
        _assert_recovered(store, versions, new, note)
    assert seen[0] == old.name and seen[-1] == new.name and old.name in seen and new.name in seen
