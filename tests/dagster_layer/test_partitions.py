"""shards/<key> dynamic partitions and extracted/<key>'s partition bookkeeping (docs/architecture.md "The asset graph",
DAGSTER_NOTES 2 and 5, D2, D17, D18). Real runs on a real sqlite instance in a temp DAGSTER_HOME."""


import pytest
from dagster import AssetKey, AssetSelection

from slm4ie_assets.dagster_layer import assets as assets_module
from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name, shards_key
from slm4ie_assets.store.dataset_store import DatasetStore
from support.dagster_project import DagsterProject, output_metadata, part_meta_mtimes, touch
from support.files import write_files


def partition_events(result, asset_key: AssetKey) -> list[str]:
    out = []
    for ev in result.get_asset_materialization_events():
        m = ev.event_specific_data.materialization
        if m.asset_key == asset_key:
            out.append(m.partition)
    return out


TEXTS = {"a.txt": "prvi a\n\ndrugi a\n", "b.txt": "prvi b\n", "sub/c.txt": "prvi c\n\ndrugi c\n\ntretji c\n"}


@pytest.fixture
def project(tmp_path):
    write_files(tmp_path / "raw" / "kas", TEXTS)
    return DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})


def test_definitions_have_shards_and_extracted_assets_per_dataset(project):
    shards = project.defs.resolve_assets_def(shards_key("kas"))
    extracted = project.defs.resolve_assets_def(extracted_key("kas"))
    assert shards.partitions_def.name == partitions_name("kas") == "slm4ie_shards__kas"
    assert shards.backfill_policy.max_partitions_per_run is None  # single_run
    assert shards.group_names_by_key[shards_key("kas")] == "shards"
    assert extracted.partitions_def is None
    assert shards_key("kas") in extracted.asset_deps[extracted_key("kas")]
    assert extracted.automation_conditions_by_key[extracted_key("kas")] is not None
    for a in (shards, extracted):
        assert a.op.pool == "slm4ie_extract"
        assert a.get_io_manager_key_for_asset_key(a.key) == "extract_io"


def test_extracted_registers_partitions_in_file_order_and_records_rebuilt_shards(project, instance):
    res = project.publish(instance, "kas")
    assert instance.get_dynamic_partitions(partitions_name("kas")) == ["a.txt", "b.txt", "sub/c.txt"]
    assert sorted(partition_events(res, shards_key("kas"))) == ["a.txt", "b.txt", "sub/c.txt"]
    assert "shard_events_recorded" not in output_metadata(res, extracted_key("kas"))  # the events are the record
    assert project.published("kas") == project.fresh("kas")


def test_extracted_deletes_vanished_partitions_and_adds_new_ones(project, instance):
    project.publish(instance, "kas")
    (project.raw("kas") / "b.txt").unlink()
    write_files(project.raw("kas"), {"0.txt": "nič\n"})
    res = project.publish(instance, "kas")
    assert sorted(instance.get_dynamic_partitions(partitions_name("kas"))) == ["0.txt", "a.txt", "sub/c.txt"]
    assert partition_events(res, shards_key("kas")) == ["0.txt"]  # only the shard it rebuilt
    text, _ = project.published("kas")
    assert b"prvi b" not in text and text.startswith(b'{"text":"ni')
    assert project.published("kas") == project.fresh("kas")


def test_a_rebuild_bigger_than_the_event_limit_records_no_partition_events(project, instance, monkeypatch):
    monkeypatch.setattr(assets_module, "SHARD_EVENT_LIMIT", 2)
    res = project.publish(instance, "kas")
    assert partition_events(res, shards_key("kas")) == []
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 3


def test_materializing_one_partition_extracts_only_that_shard_without_publishing(project, instance):
    project.publish(instance, "kas")
    spec = project.spec("kas")
    before_meta = part_meta_mtimes(spec)
    before_out = project.published("kas")
    touch(project.raw("kas") / "b.txt", "novi b\n")
    res = project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key="b.txt")
    md = output_metadata(res, shards_key("kas"))
    assert (md["batch_shards"], md["batch_shards_extracted"], md["documents"], md["rebuilt"]) == (1, 1, 1, True)
    after_meta = part_meta_mtimes(spec)
    b_meta = DatasetStore(spec).part_paths("b.txt")[3].name
    assert {k for k in after_meta if after_meta[k] != before_meta[k]} == {b_meta}
    assert project.published("kas") == before_out  # publishing is extracted/kas's job
    res = project.publish(instance, "kas")
    assert output_metadata(res, extracted_key("kas"))["shards_extracted"] == 0  # the part was current
    assert b"novi b" in project.published("kas")[0]
    assert project.published("kas") == project.fresh("kas")


def test_a_current_partition_is_skipped_unless_forced(project, instance):
    project.publish(instance, "kas")
    spec = project.spec("kas")
    before = part_meta_mtimes(spec)
    res = project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key="a.txt")
    assert output_metadata(res, shards_key("kas"))["batch_shards_extracted"] == 0
    assert part_meta_mtimes(spec) == before
    res = project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key="a.txt", force=True)
    md = output_metadata(res, shards_key("kas"))
    assert md["batch_shards_extracted"] == 1 and md["force"] is True
    assert part_meta_mtimes(spec) != before


def test_a_partition_range_is_one_run_extracting_every_shard_in_the_pool(project, instance):
    write_files(project.raw("kas"), {f"new/n{i}.txt": f"novi {i}\n" for i in range(4)})
    keys = [f"new/n{i}.txt" for i in range(4)]
    instance.add_dynamic_partitions(partitions_name("kas"), keys)
    res = project.materialize(instance, AssetSelection.assets(shards_key("kas")), workers=2,
                              tags={"dagster/asset_partition_range_start": keys[0],
                                    "dagster/asset_partition_range_end": keys[-1]})
    assert sorted(partition_events(res, shards_key("kas"))) == keys
    md = output_metadata(res, shards_key("kas"))
    assert (md["batch_shards"], md["batch_shards_extracted"], md["batch_documents_extracted"]) == (4, 4, 4)
    store = DatasetStore(project.spec("kas"))
    assert all(store.read_part_meta(k).docs == 1 for k in keys)
    per_partition = {ev.event_specific_data.materialization.partition:
                     ev.event_specific_data.materialization.metadata["documents"].value
                     for ev in res.get_asset_materialization_events()}
    assert per_partition == {k: 1 for k in keys}  # each partition its own shard's count, not the batch's 4


@pytest.mark.parametrize("key, expect", [
    ("gone.txt", "gone.txt"),
    ("typed,by,hand", "invalid shard key"),
])
def test_a_partition_without_a_shard_fails_naming_the_key(project, instance, key, expect):
    instance.add_dynamic_partitions(partitions_name("kas"), [key])  # e.g. typed into the UI's "Add a partition"
    res = project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key=key,
                              raise_on_error=False)
    assert not res.success
    failure = next(e for e in res.all_events if e.event_type_value == "STEP_FAILURE")
    message = str(failure.event_specific_data.error)
    assert repr(key) in message and expect in message and "extracted/kas" in message


def test_d17_a_shard_run_removes_leftovers_of_an_interrupted_run(project, instance):
    project.publish(instance, "kas")
    store = DatasetStore(project.spec("kas"))
    junk = [store.parts / "deadbeef.jsonl.partial", store.parts / "0123abcd.jsonl"]  # partial / uncommitted
    for p in junk:
        p.write_text("half")
    touch(project.raw("kas") / "a.txt")
    project.materialize(instance, AssetSelection.assets(shards_key("kas")), partition_key="a.txt")
    assert not any(p.exists() for p in junk)


def test_strict_dataset_fails_a_shard_run_that_skips_something(tmp_path, instance):
    write_files(tmp_path / "raw" / "s", {"ok.txt": "dobro\n", "bad.txt": b"slabo \xff\n"})
    project = DagsterProject(tmp_path, {"s": {"extractor": "text", "domain": "d", "strict": True}})
    instance.add_dynamic_partitions(partitions_name("s"), ["bad.txt", "ok.txt"])
    res = project.materialize(instance, AssetSelection.assets(shards_key("s")), partition_key="ok.txt")
    assert res.success
    res = project.materialize(instance, AssetSelection.assets(shards_key("s")), partition_key="bad.txt",
                              raise_on_error=False)
    assert not res.success
    failure = next(e for e in res.all_events if e.event_type_value == "STEP_FAILURE")
    assert "strict" in str(failure.event_specific_data.error) and "bad.txt" in str(failure.event_specific_data.error)


def test_grouped_shards_are_the_partitions_and_the_output_is_unchanged(tmp_path, instance):
    write_files(tmp_path / "raw" / "g", {f"d{i:02d}/f{i:03d}.txt": f"dokument {i}\n\nše {i}\n" for i in range(60)})
    project = DagsterProject(tmp_path, {"g": {"extractor": "text", "domain": "d"}}, shard_group_threshold=10)
    project.publish(instance, "g")
    keys = instance.get_dynamic_partitions(partitions_name("g"))
    assert 4 <= len(keys) < 60  # about 60 / 8 groups
    manifest = DatasetStore(project.spec("g")).published_manifest()
    assert [k for k, _ in manifest.shards] == keys
    touch(project.raw("g") / "d33/f033.txt", "spremenjen 33\n")
    group = next(k for k, _ in reversed(manifest.shards) if k == "%head" or k <= "d33/f033.txt")
    res = project.materialize(instance, AssetSelection.assets(shards_key("g")), partition_key=group)
    assert output_metadata(res, shards_key("g"))["batch_shards_extracted"] == 1
    project.publish(instance, "g")
    assert project.published("g") == project.fresh("g")
    assert b"spremenjen 33" in project.published("g")[0]
