"""Publishing through the Store interface and the dataset lease (docs/guarantees.md, "On a bucket";
store/remote_publish.py, store/lease.py): what a reader sees, skip-unless-force, two publishers
racing at the commit point, the lease serialising runs, and how a lease is waited for, broken and
lost. Every test is a function over a store opener (`STORE_KINDS`): a folder today, a bucket too
once the bucket store lands. Real processes where two runs meet."""

import io
import multiprocessing
import os
import signal
import time

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import plan_dataset
from slm4ie_assets.store.lease import Lease, LeaseHolder, LeaseLost, LeaseRecord, LeaseTimeout
from slm4ie_assets.store.remote_publish import PublishedByAnother, publish_version, settle
from slm4ie_assets.store.remote_versions import (
    CommitRecord,
    RemoteLayout,
    published_matches,
    read_published,
)
from support.remote_stores import (
    KEY,
    STORE_KINDS,
    HookedStore,
    NoLease,
    opener_for,
    posix_versions,
    published_name,
    read_all,
    read_or_none,
)

LAYOUT = RemoteLayout(KEY)
CTX = multiprocessing.get_context("fork")


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    return posix_versions(tmp_path_factory.mktemp("posix"))


@pytest.fixture(params=STORE_KINDS)
def opener(request, tmp_path):
    return opener_for(request.param, request, tmp_path)


def _publish(store, version, **lease_kw):
    with Lease(store, KEY, **lease_kw) as lease:
        return publish_version(store, KEY, version.local, version.manifest, lease)


def _names(store, prefix=""):
    return [o.name for o in store.list(prefix)]


def test_each_publish_is_read_back_whole_and_equals_the_posix_publish(opener, versions):
    store = opener()
    assert read_published(store, KEY) is None
    for seq, name in enumerate(("a", "plain", "b", "c"), start=1):
        record = _publish(store, versions[name])
        assert record.seq == seq and published_name(store, versions) == name
        assert read_all(store, LAYOUT.text) == versions[name].text  # byte for byte what POSIX publishes
        assert read_or_none(store, LAYOUT.sidecar) == versions[name].sidecar  # none after "plain"
    records = [read_published(store, KEY)]
    assert _names(store, LAYOUT.published) == [LAYOUT.commit_name(3), LAYOUT.commit_name(4)]  # the newest two
    kept = {LAYOUT.commit_name(3): "b", LAYOUT.commit_name(4): "c"}
    version_folders = {n.split("/")[3] for n in _names(store, LAYOUT.versions)}
    assert len(version_folders) == 2 and records[0] is not None and records[0].version in version_folders
    assert set(_names(store)) == {LAYOUT.text, LAYOUT.sidecar, LAYOUT.top_level_record, *kept,
                                  *_names(store, LAYOUT.versions), *_names(store, ".slm4ie/k/lease/")}
    assert len(_names(store, ".slm4ie/k/lease/")) == 1


def test_published_matches_answers_skip_unless_force(opener, versions):
    store = opener()
    _publish(store, versions["a"])
    plan_a = plan_dataset(load_catalog(versions["a"].config).dataset(KEY))
    plan_b = plan_dataset(load_catalog(versions["b"].config).dataset(KEY))
    recipe = versions["a"].manifest.recipe
    assert published_matches(store, KEY, recipe, plan_a.shards)
    assert not published_matches(store, KEY, recipe, plan_b.shards)
    assert not published_matches(store, KEY, recipe + "x", plan_a.shards)
    assert not published_matches(store, KEY, recipe, plan_a.shards, discovery=["raw/k/x: unreadable"])
    assert not published_matches(store, "other", recipe, plan_a.shards)


def _racer(opener, version, barrier, results) -> None:
    """Publish with a guard that lets every step pass. The racers meet before their first upload (each
    one's opening clean-up, done without a lease, would otherwise remove the other's uploads and so
    withdraw its commit too) and again just before the commit."""
    uploads: list[str] = []

    def before(operation, name):
        if operation == "write" and name.startswith(LAYOUT.versions) and not uploads:
            uploads.append(name)
            barrier.wait(30)
        if operation == "create" and name.startswith(LAYOUT.published):
            barrier.wait(30)

    store = HookedStore(opener(), before)
    try:
        record = publish_version(store, KEY, version.local, version.manifest, NoLease(f"racer {version.name}"))
        results.put(("won", version.name, record.seq, record.version))
    except PublishedByAnother as exc:
        winner = exc.winner.version if exc.winner else None
        results.put(("lost", version.name, str(exc), winner))
    except Exception as exc:  # reported, so the test fails with it at once
        results.put(("failed", version.name, repr(exc), None))
        raise


def test_two_publishers_racing_at_the_commit_exactly_one_wins_and_the_other_names_it(opener, versions):
    store = opener()
    _publish(store, versions["a"])
    barrier, results = CTX.Barrier(2), CTX.Queue()
    racers = [CTX.Process(target=_racer, args=(opener, versions[n], barrier, results)) for n in ("b", "c")]
    for p in racers:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in racers)
    for p in racers:
        p.join(30)
        assert p.exitcode == 0
    (lost, loser, message, winner_version), (won, winner, seq, version) = outcomes
    assert (lost, won, seq) == ("lost", "won", 2), outcomes
    assert winner_version == version and version in message and f"racer {winner}" in message
    assert f"{LAYOUT.commit_name(2)}" in message and loser != winner
    assert published_name(store, versions) == winner
    assert {n.split("/")[3] for n in _names(store, LAYOUT.versions)} == {
        read_published(store, KEY).version, *(r.version for r in [_record(store, 1)])}  # the loser's is gone


def _record(store, seq):
    return CommitRecord.from_json(read_all(store, LAYOUT.commit_name(seq)))


def _lease_publisher(opener, version, took, waiting, logs) -> None:
    store = opener()
    with Lease(store, KEY, log=logs.put, poll=0.05) as lease:
        took.set()
        if version.name == "b":  # the first holder keeps the lease until the other logs its wait
            waiting.wait(30)
        publish_version(store, KEY, version.local, version.manifest, lease)
    logs.put(f"published {version.name} as {lease.holder}")


def test_the_lease_makes_a_second_publisher_wait_then_publish_after_the_first(opener, versions):
    store = opener()
    took, waiting, logs = CTX.Event(), CTX.Event(), CTX.Queue()
    first = CTX.Process(target=_lease_publisher, args=(opener, versions["b"], took, waiting, logs))
    first.start()
    assert took.wait(30)
    second = CTX.Process(target=_lease_publisher, args=(opener, versions["c"], took, waiting, logs))
    second.start()
    wait_line = logs.get(timeout=30)
    waiting.set()
    lines = [logs.get(timeout=30) for _ in range(2)]
    for p in (first, second):
        p.join(30)
        assert p.exitcode == 0
    holder_b = lines[0].split(" as ", 1)[1]
    assert lines[0].startswith("published b") and lines[1].startswith("published c"), lines
    assert wait_line.startswith(f"{KEY}: another run holds the lease ") and f"({holder_b}); waiting" in wait_line
    assert "/.slm4ie/k/lease/000000000001.json" in wait_line
    assert [_record(store, s).manifest for s in (1, 2)] == [versions["b"].manifest, versions["c"].manifest]
    assert published_name(store, versions) == "c"


def _hold_and_die(opener, took) -> None:
    lease = Lease(opener(), KEY, ttl=3600)
    lease.acquire()
    took.set()
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_holder_killed_on_this_host_costs_no_wait(opener):
    """ttl one hour: the lease can only be taken at once because its holder's process is gone."""
    took = CTX.Event()
    holder = CTX.Process(target=_hold_and_die, args=(opener, took))
    holder.start()
    holder.join(30)
    assert took.is_set() and holder.exitcode == -signal.SIGKILL
    store = opener()
    with Lease(store, KEY, ttl=3600, timeout=30) as lease:
        assert lease.held and lease.generation == 2
        assert _names(store, ".slm4ie/k/lease/") == [".slm4ie/k/lease/000000000002.json"]


def test_a_waiter_times_out_naming_the_lease_object_and_its_holder(opener):
    store = opener()
    logged: list[str] = []
    with Lease(store, KEY, run_id="first-run") as holder:
        with pytest.raises(LeaseTimeout) as err:
            Lease(opener(), KEY, timeout=0.3, poll=0.05, log=logged.append).acquire()
        assert holder.held
    where = f"{store.url.rstrip('/')}/.slm4ie/k/lease/000000000001.json"
    assert where in str(err.value) and "run first-run (pid " in str(err.value)
    assert len(logged) == 1 and where in logged[0] and logged[0].endswith("; waiting")


def _foreign_lease(store, expires_at: float, ttl: float) -> None:
    """A lease taken by a run on another host (its pid means nothing here)."""
    record = LeaseRecord(LeaseHolder("elsewhere.example", 4242, "far-run", "b/1/2"), 1, ttl, "2020-01-01T00:00:00Z",
                         expires_at)
    store.create(".slm4ie/k/lease/000000000001.json", record.to_json())


def _breaker(opener, results, done) -> None:
    lease = Lease(opener(), KEY, ttl=30, timeout=1, poll=0.05)
    try:
        lease.acquire()
    except LeaseTimeout as exc:
        results.put(("waited", str(exc)))
        return
    results.put(("took", str(lease.holder)))
    done.wait(30)  # keep holding until the other breaker has given up
    lease.release()


def test_two_breakers_of_an_expired_lease_exactly_one_takes_it(opener):
    store = opener()
    _foreign_lease(store, expires_at=time.time() - 3600, ttl=5)
    results, done = CTX.Queue(), CTX.Event()
    breakers = [CTX.Process(target=_breaker, args=(opener, results, done)) for _ in range(2)]
    for p in breakers:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in breakers)
    done.set()
    for p in breakers:
        p.join(30)
    (took, holder), (waited, message) = outcomes
    assert (took, waited) == ("took", "waited") and holder in message, outcomes
    assert "000000000002.json" in message


def test_a_lease_seen_unchanged_for_a_ttl_is_broken_whatever_its_clock_says(opener):
    """The holder's clock may run far ahead (expires_at a year away): a waiter that sees the record
    unchanged for a whole ttl by its own clock breaks it."""
    store = opener()
    _foreign_lease(store, expires_at=time.time() + 3e7, ttl=0.3)
    logged: list[str] = []
    with Lease(store, KEY, ttl=0.3, timeout=30, poll=0.05, log=logged.append) as lease:
        assert lease.generation == 2
    assert len(logged) == 1 and "run far-run (pid 4242 on elsewhere.example)" in logged[0]


def test_a_holder_whose_lease_object_changed_loses_it_and_publishes_nothing(opener, versions):
    store = opener()
    _publish(store, versions["a"])
    lease = Lease(store, KEY, ttl=0.3)
    lease.acquire()
    name = ".slm4ie/k/lease/" + f"{lease.generation:012d}.json"
    store.write(name, io.BytesIO(b'{"someone": "else"}'))  # another writer overwrote it
    deadline = time.monotonic() + 30
    while lease.held and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not lease.held
    before = sorted(_names(store))
    with pytest.raises(LeaseLost, match="changed or removed by another run"):
        publish_version(store, KEY, versions["b"].local, versions["b"].manifest, lease)
    assert sorted(_names(store)) == before and published_name(store, versions) == "a"
    lease.release()


def test_clean_up_removes_what_a_killed_run_left_and_settle_repairs_the_top_level(opener, versions):
    store = opener()
    _publish(store, versions["a"])
    left = LAYOUT.version_folder("v1-killed-1-abc") + LAYOUT.text
    store.write(left, io.BytesIO(b"half a version"))  # uploaded by a run killed before its commit
    store.write(LAYOUT.text, io.BytesIO(b"edited by hand\n"))
    with Lease(store, KEY) as lease:
        assert settle(store, KEY, lease)
        assert not settle(store, KEY, lease)  # a second look rewrites nothing
    assert left not in _names(store) and read_all(store, LAYOUT.text) == versions["a"].text


def test_a_commit_naming_missing_objects_is_passed_over_by_readers(opener, versions):
    """What a run suspended past its lease can leave for an instant before it withdraws it."""
    store = opener()
    _publish(store, versions["a"])
    ghost = CommitRecord(2, "v2-gone", LAYOUT.version_folder("v2-gone") + LAYOUT.text, None, versions["b"].manifest)
    store.create(LAYOUT.commit_name(2), ghost.to_json())
    assert published_name(store, versions) == "a"
