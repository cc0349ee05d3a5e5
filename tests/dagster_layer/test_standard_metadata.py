"""Issue 15 item 3: Dagster's standard metadata on extracted/<key>, owners from extract.yaml, and each
shards/<key> partition's own numbers, read back from a real sqlite instance after real runs (DAGSTER_NOTES 6)."""

import json
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, AssetRecordsFilter, AssetSelection, TableSchema, materialize

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name, shards_key
from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
from slm4ie_assets.dagster_layer.lineage import raw_key
from slm4ie_assets.dagster_layer.resources import ExtractSettings
from slm4ie_assets.definitions import build_definitions
from slm4ie_assets.store.dataset_store import DatasetStore

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
# documents per file: 2, 1, 3 (blank-line separated paragraphs of the text extractor)
TEXTS = {"a.txt": "prvi a\n\ndrugi a\n", "b.txt": "prvi b\n", "sub/c.txt": "prvi c\n\ndrugi c\n\ntretji c\n"}
DOCS = {"a.txt": 2, "b.txt": 1, "sub/c.txt": 3}


class Project:
    def __init__(self, root: Path, datasets: dict):
        (root / "extract.yaml").write_text(yaml.safe_dump(
            {"input_dir": "raw", "output_dir": "out", "datasets": datasets}, sort_keys=False))
        self.catalog = load_catalog(root / "extract.yaml")
        self.defs = build_definitions(self.catalog)

    def write(self, key: str, files: dict) -> None:
        for rel, text in files.items():
            path = self.catalog.dataset(key).raw_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def run(self, instance, asset_key: AssetKey, partition_key=None, tags=None, force=False):
        assets = [*self.defs.assets, *self.defs.asset_checks]
        resources = {"extract": ExtractSettings(force=force, max_workers=1), "extract_io": ExtractIOManager()}
        return materialize(assets, instance=instance, selection=AssetSelection.assets(asset_key),
                           partition_key=partition_key, tags=tags, resources=resources)


def partition_metadata(instance, key: str, partition: str) -> dict:
    [record] = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=shards_key(key), asset_partitions=[partition]), limit=1).records
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


@pytest.fixture
def project(tmp_path):
    p = Project(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    p.write("kas", TEXTS)
    return p


def run_range(project, instance, keys, force=False):
    instance.add_dynamic_partitions(partitions_name("kas"), [k for k in keys
                                                             if k not in instance.get_dynamic_partitions(
                                                                 partitions_name("kas"))])
    return project.run(instance, shards_key("kas"), tags={RANGE_START: keys[0], RANGE_END: keys[-1]}, force=force)


def test_a_shard_run_over_three_shards_gives_each_partition_its_own_numbers(project, instance):
    keys = ["a.txt", "b.txt", "sub/c.txt"]
    run_range(project, instance, keys)
    store = DatasetStore(project.catalog.dataset("kas"))
    for key in keys:
        md = partition_metadata(instance, "kas", key)
        meta = store.read_part_meta(key)
        assert md["documents"] == DOCS[key] == md["dagster/row_count"] == meta.docs
        assert (md["tokens"], md["text_bytes"], md["input_bytes"]) == (meta.tokens, meta.text_bytes, meta.input_bytes)
        assert md["skipped_items"] == 0 and md["drop_ledger"].records == []
        assert md["seconds"] == round(meta.seconds, 3) and md["rebuilt"] is True
        assert md["part_path"] == str(store.part_paths(key).text)
        assert (md["batch_shards"], md["batch_shards_extracted"], md["batch_documents_extracted"]) == (3, 3, 6)


def test_partitions_a_shard_run_found_current_still_report_their_own_part(project, instance):
    run_range(project, instance, ["a.txt", "b.txt", "sub/c.txt"])
    (project.catalog.dataset("kas").raw_dir / "b.txt").write_text("novi b\n\nše en\n\nin še\n\nin zadnji\n")
    run_range(project, instance, ["a.txt", "b.txt", "sub/c.txt"])
    a, b = partition_metadata(instance, "kas", "a.txt"), partition_metadata(instance, "kas", "b.txt")
    assert (a["documents"], a["rebuilt"]) == (2, False)
    assert (b["documents"], b["rebuilt"]) == (4, True)
    assert a["batch_shards_extracted"] == b["batch_shards_extracted"] == 1


def test_drops_are_per_partition(tmp_path, instance):
    p = Project(tmp_path, {"news": {"extractor": "jsonl", "domain": "news"}})
    recs = "".join(json.dumps({"doc_id": f"d{i}", "text": f"t {i}"}) + "\n" for i in range(2))
    p.write("news", {"bad.jsonl": recs + "{oops\n", "good.jsonl": recs.replace('"d', '"g')})
    instance.add_dynamic_partitions(partitions_name("news"), ["bad.jsonl", "good.jsonl"])
    p.run(instance, shards_key("news"), tags={RANGE_START: "bad.jsonl", RANGE_END: "good.jsonl"})
    bad, good = partition_metadata(instance, "news", "bad.jsonl"), partition_metadata(instance, "news", "good.jsonl")
    assert bad["skipped_items"] == 1 and [(r.data["reason"], r.data["skipped"]) for r in bad["drop_ledger"].records] \
        == [("malformed_json", 1)]
    assert good["skipped_items"] == 0 and good["documents"] == bad["documents"] == 2


def test_shards_rebuilt_by_extracted_carry_their_own_numbers(project, instance):
    project.run(instance, extracted_key("kas"))
    for key, docs in DOCS.items():
        md = partition_metadata(instance, "kas", key)
        assert md["documents"] == md["dagster/row_count"] == docs and md["rebuilt"] is True
        assert "batch_shards" not in md


def test_extracted_has_row_count_column_schemas_and_paths(tmp_path, instance):
    p = Project(tmp_path, {"news": {"extractor": "jsonl", "domain": "news"}})
    rec = {"doc_id": "a", "text": "ena", "paragraphs": [{"sentences": [{"tokens": [{"form": "ena"}]}]}]}
    p.write("news", {"f.jsonl": json.dumps(rec) + "\n" + json.dumps({"doc_id": "b", "text": "dva"}) + "\n"})
    p.run(instance, extracted_key("news"))
    event = instance.get_latest_materialization_event(extracted_key("news")).asset_materialization
    md = {k: v.value for k, v in event.metadata.items()}
    spec = p.catalog.dataset("news")
    assert md["dagster/row_count"] == 2
    assert isinstance(md["dagster/column_schema"], TableSchema)
    assert [c.name for c in md["dagster/column_schema"].columns] == ["text", "source", "domain", "doc_id", "uid",
                                                                     "metadata"]
    assert [c.name for c in md["sidecar_column_schema"].columns][:3] == ["doc_id", "uid", "forms"]
    assert md["text_path"] == str(spec.text_path) and md["sidecar_path"] == str(spec.sidecar_path)
    definition = p.defs.resolve_assets_def(extracted_key("news")).specs_by_key[extracted_key("news")]
    assert definition.metadata["dagster/column_schema"].schema.columns[0].name == "text"


# what extracted/<key>'s materialization shows: numbers and tables for people, no bookkeeping
PUBLISH_METADATA = {
    "documents", "annotated_documents", "annotated_share", "tokens", "files", "shards", "text_bytes",
    "sidecar_bytes", "empty_text_rate", "skipped_items", "drop_ledger", "duplicate_uids", "text_path",
    "dagster/row_count", "dagster/column_schema", "preview", "length_distribution", "force", "skipped",
    "shards_extracted", "shards_up_to_date", "bytes_written", "duration_seconds", "input_mb_per_second",
}


def test_the_materialization_metadata_holds_no_bookkeeping_key(project, instance):
    res = project.run(instance, extracted_key("kas"))
    [event] = [e.event_specific_data.materialization for e in res.get_asset_materialization_events()
               if e.event_specific_data.materialization.asset_key == extracted_key("kas")]
    assert set(event.metadata) == PUBLISH_METADATA
    assert event.metadata["input_mb_per_second"].value > 0  # a few bytes still read as a rate, not 0


def test_a_dataset_without_annotations_names_no_sidecar_path(project, instance):
    project.run(instance, extracted_key("kas"))
    md = instance.get_latest_materialization_event(extracted_key("kas")).asset_materialization.metadata
    assert "sidecar_path" not in md and "sidecar_column_schema" not in md and md["dagster/row_count"].value == 6


def test_owners_from_extract_yaml_reach_all_three_assets_and_bad_ones_name_the_line(tmp_path):
    p = Project(tmp_path, {"kas": {"extractor": "text", "domain": "a", "owners": ["team:corpus", "ana@example.org"]}})
    for asset_key in (extracted_key("kas"), shards_key("kas"), raw_key("kas")):
        assert list(p.defs.resolve_asset_graph().get(asset_key).owners) == ["team:corpus", "ana@example.org"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad/extract.yaml").write_text(
        "datasets:\n  kas:\n    extractor: text\n    domain: a\n    owners: [corpus]\n")
    with pytest.raises(CatalogError, match=r"extract.yaml:5: datasets.kas.owners: expected a list of owners"):
        load_catalog(tmp_path / "bad/extract.yaml")


def test_schema_accepts_owners(tmp_path):
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas/extract.schema.json").read_text())
    good = {"datasets": {"kas": {"extractor": "text", "domain": "a", "owners": ["team:x", "a@b.org"]}}}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"datasets": {"kas": {"extractor": "text", "domain": "a", "owners": ["x"]}}}, schema)
