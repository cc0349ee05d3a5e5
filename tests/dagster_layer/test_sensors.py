"""raw/<key>/ sensors, the republish automation sensor and the forced re-extraction schedules
(docs/architecture.md "The asset graph", DAGSTER_NOTES 2 and 10). Ticks run through `build_sensor_context` on a
real sqlite instance; the runs they request are executed for real and the published output is
compared with a fresh full extraction of the same raw tree after every step (D2)."""

import gzip

import pytest
from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    build_schedule_context,
)

from slm4ie_assets.dagster_layer import sensors as sensors_module
from slm4ie_assets.dagster_layer.assets import extracted_key, shards_key
from slm4ie_assets.dagster_layer.sensors import SENSOR_BUCKETS, bucket_digests, decode_cursor, encode_cursor
from slm4ie_assets.pipeline import lock_path
from slm4ie_assets.planning.shards import Shard
from slm4ie_assets.store.locks import dataset_lock
from support.dagster_project import DagsterProject, output_metadata, part_meta_mtimes, touch
from support.files import write_files
from support.watcher import Watcher

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
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


def test_add_touch_delete_each_give_exactly_the_runs_needed_and_output_stays_exact(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()  # the automation sensor's first evaluation
    first = w.tick()
    assert first.run_requests == [] and w.partitions() == ["a.txt", "b.txt", "sub/c.txt"]
    spec = project.spec("kas")

    # adding a file: exactly one new partition and one run for it
    write_files(project.raw("kas"), {"b2.txt": "nov dokument\n"})
    before = part_meta_mtimes(spec)
    data = w.tick()
    assert w.partitions() == ["a.txt", "b.txt", "sub/c.txt", "b2.txt"]
    assert [(r.partition_key, r.asset_selection) for r in data.run_requests] == [("b2.txt", [shards_key("kas")])]
    assert w.tick().run_requests == []  # a tick never requests the same work twice
    w.run(data)
    res = w.republish_if_requested()
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 0
    after = part_meta_mtimes(spec)
    assert all(after[k] == v for k, v in before.items())  # untouched shards not re-extracted
    assert project.published("kas") == project.fresh("kas")
    assert w.automation() == []  # republished once, no loop

    # touching a file: one run, for its shard only
    touch(project.raw("kas") / "sub/c.txt", "spremenjen c\n")
    data = w.tick()
    assert [r.partition_key for r in data.run_requests] == ["sub/c.txt"]
    assert data.run_requests[0].run_key.startswith("sub/c.txt@")  # includes the fingerprint
    assert w.tick().run_requests == []
    w.run(data)
    w.republish_if_requested()
    assert b"spremenjen c" in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")

    # deleting a file: its partition goes, a publish run drops its documents
    (project.raw("kas") / "b.txt").unlink()
    data = w.tick()
    assert w.partitions() == ["a.txt", "sub/c.txt", "b2.txt"]
    assert [(r.asset_selection, r.partition_key) for r in data.run_requests] == [([extracted_key("kas")], None)]
    w.run(data)
    assert b"prvi b" not in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")
    assert w.tick().run_requests == []


def test_new_files_together_get_one_run_over_their_contiguous_partition_range(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()
    w.tick()
    write_files(project.raw("kas"), {"0.txt": "prvi\n", "zz/9.txt": "zadnji\n", "m.txt": "sredina\n"})
    touch(project.raw("kas") / "a.txt", "spremenjen a\n")
    data = w.tick()
    new_run = [r for r in data.run_requests if r.tags.get("slm4ie/trigger") == "new"]
    changed = [r for r in data.run_requests if r.tags.get("slm4ie/trigger") == "changed"]
    assert len(data.run_requests) == 2 and len(new_run) == 1 and [r.partition_key for r in changed] == ["a.txt"]
    keys = w.partitions()
    start, end = new_run[0].tags[RANGE_START], new_run[0].tags[RANGE_END]
    assert keys[keys.index(start):keys.index(end) + 1] == ["0.txt", "m.txt", "zz/9.txt"]  # shard order, appended last
    results = w.run(data)
    assert output_metadata(results[0], shards_key("kas"))["batch_shards_extracted"] == 3
    w.republish_if_requested()
    assert project.published("kas") == project.fresh("kas")


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
    project.publish(instance, "kas")
    home = tmp_path / "other_home"
    home.mkdir()
    from dagster import instance_for_test

    with instance_for_test(temp_dir=str(home)) as other:  # e.g. a wiped or new Dagster instance
        w = Watcher(project, other)
        data = w.tick()
        assert data.run_requests == [] and w.partitions() == ["a.txt", "b.txt", "sub/c.txt"]


def test_many_changed_shards_fold_into_one_extracted_run(project, instance, monkeypatch):
    monkeypatch.setattr(sensors_module, "MAX_CHANGED_RUNS", 2)
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    for rel in TEXTS:
        touch(project.raw("kas") / rel)
    data = w.tick()
    requested = [(r.asset_selection, r.tags["slm4ie/trigger"]) for r in data.run_requests]
    assert requested == [([extracted_key("kas")], "bulk")]
    res = w.run(data)[0]
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 3


def test_a_tick_while_a_run_holds_the_dataset_lock_skips_and_keeps_the_cursor(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    cursor = w.cursor
    write_files(project.raw("kas"), {"new.txt": "nov\n"})
    with dataset_lock(lock_path(project.spec("kas")), "kas"):
        data = w.tick()
    assert data.run_requests == [] and "lock" in data.skip_message
    assert w.cursor == cursor and "new.txt" not in w.partitions()
    assert [r.partition_key for r in w.tick().run_requests] == ["new.txt"]  # picked up next tick


def test_d16_the_sensor_unpacks_a_new_archive_and_its_file_becomes_a_partition(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.automation()
    w.tick()
    (project.raw("kas") / "arhiv").mkdir()
    (project.raw("kas") / "arhiv" / "z.txt.gz").write_bytes(gzip.compress(b"iz arhiva\n"))
    data = w.tick()
    assert (project.raw("kas") / "arhiv" / "z.txt").read_text() == "iz arhiva\n"
    assert [r.partition_key for r in data.run_requests] == ["arhiv/z.txt"]
    w.run(data)
    w.republish_if_requested()
    assert b"iz arhiva" in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")


def test_a_missing_raw_folder_skips_the_tick(tmp_path, instance):
    (tmp_path / "raw").mkdir()
    project = DagsterProject(tmp_path, {"nic": {"extractor": "text", "domain": "d"}})
    data = Watcher(project, instance, "nic").tick()
    assert data.run_requests == [] and "does not exist" in data.skip_message


def test_cursor_stays_small_whatever_the_number_of_shards():
    shards = [Shard(f"d{i // 1000}/f{i:06d}.txt", (), f"{i}:{i * 7919}", i) for i in range(100_000)]
    cursor = encode_cursor(bucket_digests(shards), "recipe1")
    assert len(cursor) < 1000 and len(decode_cursor(cursor, "recipe1")) == SENSOR_BUCKETS * 8
    moved = shards[:]
    moved[500] = Shard(moved[500].key, (), "other", 1)
    a, b = decode_cursor(cursor, "recipe1"), bucket_digests(moved)
    assert sum(a[i * 8:(i + 1) * 8] != b[i * 8:(i + 1) * 8] for i in range(SENSOR_BUCKETS)) == 1
    assert decode_cursor(cursor, "recipe2") is None  # another config: every bucket is looked at
    assert decode_cursor("garbage", "recipe1") is None and decode_cursor(None, "recipe1") is None


def test_editing_the_dataset_config_requests_reextraction_of_every_shard(project, instance):
    w = Watcher(project, instance)
    project.publish(instance, "kas")
    w.tick()
    assert w.tick().run_requests == []
    edited = DagsterProject(project.root, {"kas": {"extractor": "text", "domain": "news", "watch_interval": 7}})
    w2 = Watcher(edited, instance)
    w2.cursor = w.cursor
    data = w2.tick()
    assert sorted(r.partition_key for r in data.run_requests) == ["a.txt", "b.txt", "sub/c.txt"]
    assert {r.tags["slm4ie/trigger"] for r in data.run_requests} == {"changed"}


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
