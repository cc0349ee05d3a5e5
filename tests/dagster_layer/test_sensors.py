"""raw/<key>/ sensors, the republish automation sensor and the forced re-extraction schedules
(docs/architecture.md "The asset graph", DAGSTER_NOTES 2 and 10). Ticks run through `build_sensor_context` on a
real sqlite instance; the runs they request are executed for real and the published output is
compared with a fresh full extraction of the same raw tree after every step (D2)."""

import gzip
import json
import os

import pytest
from dagster import (
    AssetRecordsFilter,
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    build_schedule_context,
)

from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name, shards_key
from slm4ie_assets.dagster_layer.sensor_cursor import RawCursor, bucket_digests, moved_buckets
from slm4ie_assets.pipeline import lock_path
from slm4ie_assets.planning.shards import Shard
from slm4ie_assets.store.locks import dataset_lock
from support.dagster_project import DagsterProject, output_metadata, part_meta_mtimes, touch
from support.files import write_files
from support.watcher import Watcher

TEXTS = {"a.txt": "prvi a\n\ndrugi a\n", "b.txt": "prvi b\n", "sub/c.txt": "prvi c\n\ndrugi c\n"}


@pytest.fixture
def project(tmp_path):
    write_files(tmp_path / "raw" / "kas", TEXTS)
    return DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "academic", "watch_interval": 7}})


def test_sensor_settings_come_from_extract_yaml(tmp_path):
    write_files(tmp_path / "raw" / "on", {"a.txt": "x\n"})
    project = DagsterProject(tmp_path, {"on": {"extractor": "text", "domain": "d", "watch_interval": 9},
                                 "off": {"extractor": "text", "domain": "d", "watch": False, "settle_seconds": 45}})
    on, off = project.defs.get_sensor_def("raw_on_sensor"), project.defs.get_sensor_def("raw_off_sensor")
    assert on.minimum_interval_seconds == 9 and on.default_status == DefaultSensorStatus.RUNNING
    assert off.minimum_interval_seconds == 30 and off.default_status == DefaultSensorStatus.STOPPED
    # the UI's page states the settle rule with this dataset's numbers
    assert "size and mtime unchanged since the previous tick, or mtime at least 45s old" in off.description
    assert ".~tmp~/, .rsync-partial/, .azDownload-*" in off.description and "600s at most" in off.description
    auto = project.defs.get_sensor_def("slm4ie_republish_sensor")
    assert auto.default_status == DefaultSensorStatus.RUNNING  # Dagster's default one is STOPPED
    assert auto.minimum_interval_seconds == 9
    (tmp_path / "alone").mkdir()
    alone = DagsterProject(tmp_path / "alone", {"on": {"extractor": "text", "domain": "d"}})
    assert alone.defs.get_sensor_def("slm4ie_republish_sensor").minimum_interval_seconds == 15  # at most


def latest_partition_runs(instance, key: str = "kas") -> dict[str, str]:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=shards_key(key)), limit=1000).records
    out: dict[str, str] = {}
    for r in sorted(records, key=lambda r: r.storage_id):
        out[r.partition_key] = r.run_id
    return out


def test_add_touch_delete_each_give_one_run_that_publishes_and_output_stays_exact(project, instance):
    """One change, one run: the raw sensor asks extracted/kas to extract what is stale and publish;
    that run records the rebuilt shard's partition as materialized, and nothing else is requested."""
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()  # the automation sensor's first evaluation
    first = w.tick()
    assert first.run_requests == [] and w.partitions() == ["a.txt", "b.txt", "sub/c.txt"]
    spec = project.spec("kas")

    # adding a file: one new partition and one run, which extracts it alone and publishes
    write_files(project.raw("kas"), {"b2.txt": "nov dokument\n"})
    before = part_meta_mtimes(spec)
    data = w.tick()
    assert w.partitions() == ["a.txt", "b.txt", "sub/c.txt", "b2.txt"]
    (req,) = data.run_requests
    assert req.asset_selection == [extracted_key("kas")] and req.tags["slm4ie/trigger"] == "new"
    assert "1 new (b2.txt): requested one run of extracted/kas" in RawCursor.decode(data.cursor).last_tick
    assert w.tick().run_requests == []  # a tick never requests the same work twice
    (res,) = w.run(data)
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 1
    assert latest_partition_runs(instance)["b2.txt"] == res.run_id  # the UI shows the partition materialized
    after = part_meta_mtimes(spec)
    assert all(after[k] == v for k, v in before.items())  # untouched shards not re-extracted
    assert project.published("kas") == project.fresh("kas")
    assert w.automation() == []  # published by that run: no second run

    # touching a file: one run, which re-extracts its shard only
    touch(project.raw("kas") / "sub/c.txt", "spremenjen c\n")
    data = w.tick()
    (req,) = data.run_requests
    assert req.asset_selection == [extracted_key("kas")] and req.tags["slm4ie/trigger"] == "changed"
    assert w.tick().run_requests == []
    (res,) = w.run(data)
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 1
    assert latest_partition_runs(instance)["sub/c.txt"] == res.run_id
    assert b"spremenjen c" in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")
    assert w.automation() == []

    # deleting a file: its partition goes, one run drops its documents
    (project.raw("kas") / "b.txt").unlink()
    data = w.tick()
    assert w.partitions() == ["a.txt", "sub/c.txt", "b2.txt"]
    assert [(r.asset_selection, r.tags["slm4ie/trigger"]) for r in data.run_requests] == [
        ([extracted_key("kas")], "deleted")]
    w.run(data)
    assert b"prvi b" not in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")
    assert w.tick().run_requests == [] and w.automation() == []


def test_new_and_changed_files_together_are_one_run(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()
    w.tick()
    write_files(project.raw("kas"), {"0.txt": "prvi\n", "zz/9.txt": "zadnji\n", "m.txt": "sredina\n"})
    touch(project.raw("kas") / "a.txt", "spremenjen a\n")
    data = w.tick()
    (req,) = data.run_requests
    assert req.tags["slm4ie/trigger"] == "new+changed" and req.asset_selection == [extracted_key("kas")]
    keys = w.partitions()
    assert keys[-3:] == ["0.txt", "m.txt", "zz/9.txt"]  # shard order, appended last
    (res,) = w.run(data)
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 4
    runs = latest_partition_runs(instance)
    assert all(runs[k] == res.run_id for k in ("0.txt", "m.txt", "zz/9.txt", "a.txt"))
    assert project.published("kas") == project.fresh("kas")
    assert w.automation() == []


def test_a_file_moved_out_and_back_is_published_again_under_a_new_run_key(project, instance, tmp_path):
    """`mv` keeps the mtime, so the raw tree returns to a state it had, twice: each run key differs
    from every earlier one (Dagster silently drops a request whose key it has seen)."""
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    keys = []
    for _ in range(2):
        os.rename(project.raw("kas") / "b.txt", tmp_path / "b.txt")
        gone = w.tick()
        w.run(gone)
        assert b"prvi b" not in project.published("kas")[0]
        os.rename(tmp_path / "b.txt", project.raw("kas") / "b.txt")
        back = w.tick()
        (req,) = back.run_requests
        assert req.tags["slm4ie/trigger"] == "new"  # the publish without it removed its part
        w.run(back)
        assert b"prvi b" in project.published("kas")[0]
        keys += [r.run_key for r in gone.run_requests + back.run_requests]
    assert len(set(keys)) == 4, keys
    assert project.published("kas") == project.fresh("kas")


def test_a_tick_evaluated_again_from_the_same_cursor_repeats_its_run_keys(project, instance):
    """After a daemon crash between the runs' launch and the cursor's store, Dagster evaluates the tick
    again from the old cursor: the same keys, so it launches nothing twice."""
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    write_files(project.raw("kas"), {"n.txt": "nov\n"})
    context = w.cursor
    first = w.tick()
    w.cursor = context
    for k in first.dynamic_partitions_requests[0].partition_keys:
        instance.delete_dynamic_partition(partitions_name("kas"), k)  # as before the crash
    again = w.tick()
    assert [r.run_key for r in again.run_requests] == [r.run_key for r in first.run_requests]


def test_a_never_published_dataset_gets_one_extracted_run_registering_every_partition(project, instance):
    w = Watcher(project, instance)
    data = w.tick()
    assert w.partitions() == ["a.txt", "b.txt", "sub/c.txt"]
    (req,) = data.run_requests
    assert req.asset_selection == [extracted_key("kas")] and req.tags["slm4ie/trigger"] == "initial"
    w.run(data)
    assert project.published("kas") == project.fresh("kas")
    assert w.tick().run_requests == []


def test_new_shards_whose_parts_are_current_are_registered_without_a_run(project, instance, tmp_path):
    from dagster import instance_for_test

    project.publish(instance, "kas")
    (tmp_path / "other_home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "other_home")) as other:  # e.g. a wiped or new Dagster instance
        w = Watcher(project, other)
        data = w.tick()
        assert data.run_requests == [] and w.partitions() == ["a.txt", "b.txt", "sub/c.txt"]
    # d.txt extracted by a shards/kas run, never published (say the publish failed and the instance was wiped)
    write_files(project.raw("kas"), {"d.txt": "nov d\n"})
    instance.add_dynamic_partitions(partitions_name("kas"), ["d.txt"])
    project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key="d.txt")
    (tmp_path / "third_home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "third_home")) as third:
        w = Watcher(project, third)
        data = w.tick()
        assert w.partitions() == ["a.txt", "b.txt", "d.txt", "sub/c.txt"]
        # its part is current, but the published version lacks it: one run publishes, extracting nothing
        assert [r.tags["slm4ie/trigger"] for r in data.run_requests] == ["republish"]
        (res,) = w.run(data)
        assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 0
        assert project.published("kas") == project.fresh("kas")
        assert w.tick().run_requests == []


def test_a_tick_while_a_run_holds_the_dataset_lock_skips_and_keeps_the_cursor(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    cursor = w.cursor
    write_files(project.raw("kas"), {"new.txt": "nov\n"})
    with dataset_lock(lock_path(project.spec("kas")), "kas"):
        data = w.tick()
    assert data.run_requests == [] and "lock" in data.skip_message
    kept, now = RawCursor.decode(cursor), RawCursor.decode(w.cursor)
    assert (now.buckets, now.look, now.requesting_ticks) == (kept.buckets, kept.look, kept.requesting_ticks)
    assert now.last_tick == data.skip_message and "new.txt" not in w.partitions()
    assert [r.tags["slm4ie/trigger"] for r in w.tick().run_requests] == ["new"]  # picked up next tick


def test_d16_the_sensor_unpacks_a_new_archive_and_its_file_becomes_a_partition(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()
    w.tick()
    (project.raw("kas") / "arhiv").mkdir()
    (project.raw("kas") / "arhiv" / "z.txt.gz").write_bytes(gzip.compress(b"iz arhiva\n"))
    data = w.tick()
    assert (project.raw("kas") / "arhiv" / "z.txt").read_text() == "iz arhiva\n"
    assert w.partitions()[-1] == "arhiv/z.txt" and len(data.run_requests) == 1
    w.run(data)
    assert b"iz arhiva" in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")


def test_a_missing_raw_folder_skips_the_tick(tmp_path, instance):
    (tmp_path / "raw").mkdir()
    project = DagsterProject(tmp_path, {"nic": {"extractor": "text", "domain": "d"}})
    data = Watcher(project, instance, "nic").tick()
    assert data.run_requests == [] and "does not exist" in data.skip_message


def test_cursor_stays_small_whatever_the_number_of_shards():
    shards = [Shard(f"d{i // 1000}/f{i:06d}.txt", (), f"{i}:{i * 7919}", i) for i in range(100_000)]
    digests = bucket_digests(shards)
    cursor = RawCursor("kas: 100000 shard(s), nothing to extract", "recipe1", digests).encode()
    assert len(cursor) < 1200 and RawCursor.decode(cursor).digests_for("recipe1") == digests
    moved = shards[:]
    moved[500] = Shard(moved[500].key, (), "other", 1)
    assert len(moved_buckets(bucket_digests(moved), digests)) == 1
    assert RawCursor.decode(cursor).digests_for("recipe2") is None  # another config: every bucket is looked at
    assert RawCursor.decode("garbage") == RawCursor() == RawCursor.decode(None)
    assert RawCursor.decode("v1:recipe1:AAAA -.") == RawCursor()  # an older cursor: a first tick's look


def test_the_cursor_reads_as_the_ticks_verdict_and_wraps_on_the_sensor_page(project, instance):
    """The UI shows a `{"__class__": ...}` cursor as its field=value pairs: `last_tick` first, then
    groups no longer than a word, so the page's table wraps instead of widening."""
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    data = w.tick()
    doc = json.loads(data.cursor)
    assert list(doc)[:2] == ["__class__", "last_tick"] and doc["__class__"] == "RawSensorCursor"
    assert doc["last_tick"] == data.skip_message == "kas: 3 shard(s), nothing to extract"
    assert max(len(word) for word in data.cursor.split()) <= 40, data.cursor


def test_editing_the_dataset_config_requests_reextraction_of_every_shard(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    assert w.tick().run_requests == []
    edited = DagsterProject(project.root, {"kas": {"extractor": "text", "domain": "news", "watch_interval": 7}})
    w2 = Watcher(edited, instance)
    w2.cursor = w.cursor
    data = w2.tick()
    assert [(r.asset_selection, r.tags["slm4ie/trigger"]) for r in data.run_requests] == [
        ([extracted_key("kas")], "changed")]
    assert "3 changed (a.txt, b.txt, sub/c.txt)" in RawCursor.decode(data.cursor).last_tick


def test_schedule_only_when_configured_and_it_forces_reextraction(tmp_path, instance):
    write_files(tmp_path / "raw" / "kas", TEXTS)
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "d", "schedule": "0 3 * * 0"},
                                 "plain": {"extractor": "text", "domain": "d"}})
    schedules = {s.name: s for s in project.defs.schedules}
    assert list(schedules) == ["reextract_kas_schedule"]
    sched = schedules["reextract_kas_schedule"]
    assert sched.cron_schedule == "0 3 * * 0" and sched.default_status == DefaultScheduleStatus.RUNNING
    (req,) = sched.evaluate_tick(build_schedule_context(instance=instance)).run_requests
    assert req.run_config == {"resources": {"extract": {"config": {"force": True}}}}
    project.publish(instance, "kas")
    before = part_meta_mtimes(project.spec("kas"))
    res = project.materialize(instance, AssetSelection.assets(extracted_key("kas")), run_config=req.run_config)
    md = output_metadata(res, extracted_key("kas"))
    assert md["force"] is True and md["shards_extracted"] == 3
    after = part_meta_mtimes(project.spec("kas"))
    assert all(after[k] != before[k] for k in before)
