"""Issue 15 item 2: code versions, data versions and the external raw/<key> asset, through a real
sqlite instance, real runs and the raw sensor's real ticks; staleness is read back with Dagster's own
resolver (CachingStaleStatusResolver), the one the UI's "stale" badge comes from (DAGSTER_NOTES 6)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
    AssetSelection,
    DeleteDynamicPartitionsRequest,
    build_sensor_context,
    materialize,
)
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.loader import LoadingContextForTest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key, shards_key
from slm4ie_assets.dagster_layer.dagster_versions import code_version, manifest_version, part_version, raw_version
from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
from slm4ie_assets.dagster_layer.lineage import raw_key
from slm4ie_assets.dagster_layer.resources import ExtractSettings
from slm4ie_assets.definitions import build_definitions
from slm4ie_assets.store.dataset_store import DatasetStore

TEXTS = {"a.txt": "prvi a\n\ndrugi a\n", "b.txt": "prvi b\n", "sub/c.txt": "prvi c\n\ndrugi c\n\ntretji c\n"}


class Project:
    """extract.yaml, raw tree and Definitions under tmp_path; runs and ticks as Dagster does them."""

    def __init__(self, root: Path, datasets: dict):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "extract.yaml").write_text(yaml.safe_dump(
            {"input_dir": "raw", "output_dir": "out", "settle_seconds": 0, "datasets": datasets}, sort_keys=False))
        self.catalog = load_catalog(root / "extract.yaml")
        self.defs = build_definitions(self.catalog)
        self.cursor: str | None = None

    def write(self, rel: str, text: str, key: str = "kas") -> None:
        path = self.catalog.dataset(key).raw_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.stat() if path.exists() else None
        path.write_text(text)
        if old is not None:  # a stat change even within one clock tick
            os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns + 1_000_000_000))

    def run(self, instance, asset_key: AssetKey, partition_key: str | None = None, tags: dict | None = None):
        assets = [*self.defs.assets, *self.defs.asset_checks]
        resources = {"extract": ExtractSettings(max_workers=1), "extract_io": ExtractIOManager()}
        return materialize(assets, instance=instance, selection=AssetSelection.assets(asset_key),
                           partition_key=partition_key, tags=tags, resources=resources)

    def tick(self, instance, key: str = "kas"):
        """One raw sensor tick, then what the daemon does with its result: record the asset events,
        apply the partition requests (dagster/_daemon/sensor.py)."""
        sensor = self.defs.get_sensor_def(f"raw_{key}_sensor")
        data = sensor.evaluate_tick(build_sensor_context(instance_ref=instance.get_ref(), cursor=self.cursor,
                                                         definitions=self.defs))
        for event in data.asset_events:
            instance.report_runless_asset_event(event)
        for req in data.dynamic_partitions_requests or []:
            if isinstance(req, AddDynamicPartitionsRequest):
                instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            else:
                assert isinstance(req, DeleteDynamicPartitionsRequest)
                for k in req.partition_keys:
                    instance.delete_dynamic_partition(req.partitions_def_name, k)
        self.cursor = data.cursor
        return data

    def status(self, instance, asset_key: AssetKey, partition: str | None = None):
        graph = self.defs.resolve_asset_graph()
        resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        with partition_loading_context(dynamic_partitions_store=instance):
            causes = resolver.get_stale_causes(asset_key, partition)
            return resolver.get_status(asset_key, partition), [c.reason for c in causes]


def latest(instance, asset_key: AssetKey, partition: str | None = None):
    event = instance.get_latest_materialization_event(asset_key) if partition is None else next(
        iter(instance.fetch_materializations(_partition_filter(asset_key, partition), limit=1).records)).event_log_entry
    return event.asset_materialization


def data_version(materialization) -> str:
    return materialization.tags["dagster/data_version"]


def _partition_filter(asset_key: AssetKey, partition: str):
    from dagster import AssetRecordsFilter

    return AssetRecordsFilter(asset_key=asset_key, asset_partitions=[partition])


@pytest.fixture
def project(tmp_path):
    p = Project(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    for rel, text in TEXTS.items():
        p.write(rel, text)
    return p


def test_code_version_is_a_digest_of_extractor_format_and_recipe_stable_across_processes(tmp_path, project):
    spec = project.catalog.dataset("kas")
    assert project.defs.resolve_assets_def(extracted_key("kas")).code_versions_by_key[extracted_key("kas")] \
        == code_version(spec)
    assert project.defs.resolve_assets_def(shards_key("kas")).code_versions_by_key[shards_key("kas")] \
        == code_version(spec)
    script = ("import sys; from slm4ie_assets.catalog import load_catalog; "
              "from slm4ie_assets.dagster_layer.dagster_versions import code_version; "
              "print(code_version(load_catalog(sys.argv[1]).dataset('kas')))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", script, str(tmp_path / "extract.yaml")], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert other == code_version(spec) and other.startswith("text-f1-")
    other_cfg = Project(tmp_path / "o", {"kas": {"extractor": "text", "domain": "web"}})
    assert code_version(other_cfg.catalog.dataset("kas")) != code_version(spec)  # the config is in it


def test_data_version_comes_from_the_manifest_a_skip_keeps_it_and_a_raw_change_renews_it(project, instance):
    project.run(instance, extracted_key("kas"))
    spec = project.catalog.dataset("kas")
    first = latest(instance, extracted_key("kas"))
    assert data_version(first) == manifest_version(DatasetStore(spec).published_manifest())
    project.run(instance, extracted_key("kas"))
    skipped = latest(instance, extracted_key("kas"))
    assert skipped.metadata["skipped"].value is True and data_version(skipped) == data_version(first)
    project.write("b.txt", "novi b\n")
    project.run(instance, extracted_key("kas"))
    changed = latest(instance, extracted_key("kas"))
    assert data_version(changed) != data_version(first)
    assert data_version(changed) == manifest_version(DatasetStore(spec).published_manifest())


def test_the_raw_sensor_observes_raw_with_a_version_only_when_the_tree_changes(project, instance):
    spec = project.catalog.dataset("kas")
    data = project.tick(instance)
    [observation] = data.asset_events
    assert observation.asset_key == raw_key("kas")
    from slm4ie_assets.planning.shards import list_shards

    assert observation.data_version == raw_version(list_shards(spec, 1000))
    assert project.tick(instance).asset_events == []  # idle: no event
    project.write("b.txt", "novi b\n")
    [again] = project.tick(instance).asset_events
    assert again.data_version not in (None, observation.data_version)
    record = instance.fetch_observations(raw_key("kas"), limit=1).records[0]
    assert record.asset_observation.data_version == again.data_version


def test_extracted_is_stale_after_a_raw_change_and_fresh_after_the_run(project, instance):
    project.tick(instance)
    project.run(instance, extracted_key("kas"))  # first build, rebuilding 3 shards as partitions
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])
    project.tick(instance)  # nothing changed
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])
    project.write("b.txt", "novi b\n")
    project.tick(instance)
    status, causes = project.status(instance, extracted_key("kas"))
    assert status == StaleStatus.STALE and "has a new dependency data version" in causes
    project.run(instance, extracted_key("kas"))
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])
    assert project.status(instance, shards_key("kas"), "b.txt") == (StaleStatus.FRESH, [])


def test_a_shard_run_makes_extracted_stale_until_it_republishes(project, instance):
    project.tick(instance)
    project.run(instance, extracted_key("kas"))
    project.write("b.txt", "novi b\n")
    project.tick(instance)
    project.run(instance, shards_key("kas"), partition_key="b.txt")
    assert project.status(instance, shards_key("kas"), "b.txt") == (StaleStatus.FRESH, [])
    assert project.status(instance, extracted_key("kas"))[0] == StaleStatus.STALE
    project.run(instance, extracted_key("kas"))
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])


def test_shard_partition_data_versions_are_their_parts(project, instance):
    project.run(instance, extracted_key("kas"))  # records each rebuilt shard itself
    store = DatasetStore(project.catalog.dataset("kas"))
    for key in ("a.txt", "b.txt", "sub/c.txt"):
        assert data_version(latest(instance, shards_key("kas"), key)) == part_version(store.read_part_meta(key))
    project.write("b.txt", "novi b\n")
    project.run(instance, shards_key("kas"), partition_key="b.txt")  # the step's own output event
    assert data_version(latest(instance, shards_key("kas"), "b.txt")) == part_version(store.read_part_meta("b.txt"))


def test_raw_is_an_external_asset_upstream_of_shards_and_extracted(project):
    graph = project.defs.resolve_asset_graph()
    assert graph.get(raw_key("kas")).is_external and not graph.get(raw_key("kas")).is_materializable
    assert raw_key("kas") in graph.get(extracted_key("kas")).parent_keys
    assert graph.get(shards_key("kas")).parent_keys == {raw_key("kas")}


def test_observing_raw_by_hand_gives_the_version_the_sensor_reports(project, instance):
    [observation] = project.tick(instance).asset_events
    result = project.run(instance, raw_key("kas"))  # the UI's "Observe": the observe function as a run
    assert result.success
    record = instance.fetch_observations(raw_key("kas"), limit=1).records[0]
    assert record.run_id == result.run_id
    assert record.asset_observation.data_version == observation.data_version
    assert record.asset_observation.metadata["shards"].value == 3


def test_a_config_change_shows_as_a_new_code_version(tmp_path, project, instance):
    project.tick(instance)
    project.run(instance, extracted_key("kas"))
    edited = Project(tmp_path, {"kas": {"extractor": "text", "domain": "web"}})  # same raw tree, new recipe
    status, causes = edited.status(instance, extracted_key("kas"))
    assert status == StaleStatus.STALE and causes == ["has a new code version"]


def test_a_run_before_any_tick_records_the_raw_version_it_planned_from(project, instance):
    """No sensor tick (or `watch: false`): the run observes raw itself, so it is fresh afterwards and
    the next tick has nothing new to record."""
    project.run(instance, extracted_key("kas"))
    spec = project.catalog.dataset("kas")
    from slm4ie_assets.planning.shards import list_shards

    [record] = instance.fetch_observations(raw_key("kas"), limit=5).records
    assert record.asset_observation.data_version == raw_version(list_shards(spec, 1000))
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])
    assert project.tick(instance).asset_events == []
    project.write("a.txt", "nov a\n")
    project.run(instance, extracted_key("kas"))  # again before the sensor sees the change
    assert project.status(instance, extracted_key("kas")) == (StaleStatus.FRESH, [])
    assert project.status(instance, shards_key("kas"), "a.txt") == (StaleStatus.FRESH, [])
    assert project.tick(instance).asset_events == []


def test_a_raw_observation_alone_starts_no_republish_but_a_shard_run_does(project, instance, monkeypatch):
    """The raw sensor requests the runs a change needs; extracted/<key>'s eager condition ignores
    raw/<key> (plain eager would count its new observation as an update and run a second time)."""
    from dagster import AutomationCondition, evaluate_automation_conditions

    def requested(defs, cursor):
        res = evaluate_automation_conditions(defs, instance, cursor=cursor)
        return [s.key for s in res._requested_subsets], res.cursor

    project.tick(instance)
    project.run(instance, extracted_key("kas"))
    from slm4ie_assets.dagster_layer import assets as assets_module

    with monkeypatch.context() as patched:  # the same graph with plain eager on extracted/kas
        patched.setattr(assets_module, "publish_condition", lambda key: AutomationCondition.eager())
        plain = build_definitions(project.catalog)
    _, cursor = requested(project.defs, None)
    _, plain_cursor = requested(plain, None)
    project.write("b.txt", "novi b\n")
    project.tick(instance)  # records the observation (and requests a shard run, not executed yet)
    ours, cursor = requested(project.defs, cursor)
    theirs, plain_cursor = requested(plain, plain_cursor)
    assert extracted_key("kas") not in ours and extracted_key("kas") in theirs
    project.run(instance, shards_key("kas"), partition_key="b.txt")
    ours, cursor = requested(project.defs, cursor)
    assert extracted_key("kas") in ours
