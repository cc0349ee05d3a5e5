"""extracted/<key> through Dagster with a real instance: metadata, logs, skip and force."""

import json

import pytest
from dagster import AssetKey, DagsterEventType, DagsterInstance

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.definitions import build_definitions
from support.files import write_config, write_files


@pytest.fixture
def instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    with DagsterInstance.local_temp(str(home), overrides={"telemetry": {"enabled": False}}) as inst:
        yield inst


def run(catalog, key, instance, force=False, workers=None):
    defs = build_definitions(catalog)
    job = defs.resolve_implicit_global_asset_job_def()
    config = {"force": force}
    if workers is not None:
        config["max_workers"] = workers
    return job.execute_in_process(
        instance=instance, asset_selection=[AssetKey(["extracted", key])],
        run_config={"resources": {"extract": {"config": config}}}, raise_on_error=False,
    )


def materialization(result, key):
    [event] = [e for e in result.get_asset_materialization_events()
               if e.asset_key == AssetKey(["extracted", key])]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_materialization_reports_counts_ledger_and_warnings_naming_file_and_line(tmp_path, instance):
    recs = [{"doc_id": "a", "text": "ena", "paragraphs": [{"sentences": [{"tokens": [{"form": "ena"}]}]}]},
            {"doc_id": "b", "text": "dva"}]
    write_files(tmp_path / "raw/news", {"f.jsonl": "".join(json.dumps(r) + "\n" for r in recs) + "{oops\n"})
    cat = load_catalog(write_config(tmp_path, {"news": {"extractor": "jsonl", "domain": "news"}}))
    result = run(cat, "news", instance)
    assert result.success
    md = materialization(result, "news")
    assert md["documents"] == 2 and md["annotated_documents"] == 1 and md["tokens"] == 1
    assert md["files"] == 1 and md["shards_extracted"] == 1 and md["skipped"] is False
    assert md["skipped_items"] == 1
    assert [(r.data["reason"], r.data["skipped"]) for r in md["drop_ledger"].records] == [("malformed_json", 1)]
    assert "**a**: ena" in md["preview"]
    assert md["bytes_written"] == ((tmp_path / "out/news.jsonl").stat().st_size
                                   + (tmp_path / "out/news.annotations.jsonl.gz").stat().st_size)
    warnings = [e.message for e in instance.all_logs(result.run_id) if e.level == 30]
    assert any("news/f.jsonl:3" in w and "malformed" in w for w in warnings), warnings


def test_second_materialization_is_skipped_and_force_re_extracts(tmp_path, instance):
    write_files(tmp_path / "raw/t", {"a.txt": "x\n\ny\n"})
    cat = load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "web"}}))
    assert materialization(run(cat, "t", instance), "t")["skipped"] is False
    md = materialization(run(cat, "t", instance), "t")
    assert md["skipped"] is True and md["documents"] == 2 and md["shards_extracted"] == 0
    md = materialization(run(cat, "t", instance, force=True), "t")
    assert md["skipped"] is False and md["force"] is True and md["shards_extracted"] == 1


def test_missing_raw_folder_fails_the_materialization_with_its_name(tmp_path, instance):
    cat = load_catalog(write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}}))
    result = run(cat, "kas", instance)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    error, messages = failure.step_failure_data.error, []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    assert any(f"raw folder {tmp_path / 'raw' / 'kas'} does not exist" in m for m in messages), messages


def test_asset_definitions_carry_description_metadata_and_group(tmp_path):
    cat = load_catalog(write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}}))
    defs = build_definitions(cat)
    asset_def = defs.resolve_assets_def(AssetKey(["extracted", "kas"]))
    spec = next(iter(asset_def.specs))
    assert spec.group_name == "extracted"
    assert spec.metadata["extractor"] == "text" and spec.metadata["domain"] == "academic"
    # the paths are metadata (the description is one plain line: tests/dagster_layer/test_ui_text.py)
    assert spec.metadata["raw_dir"].value == str(tmp_path / "raw" / "kas") and "kas" in spec.metadata["about"]
    assert spec.metadata["text_path"].value == str(tmp_path / "out" / "kas.jsonl")


def test_load_input_hands_downstream_the_version_folder_so_a_republish_cannot_mix_the_pair(tmp_path, instance,
                                                                                          monkeypatch):
    """A downstream step gets the paths inside the version that was current when its input was
    loaded, not the top-level links: after a republish its text, sidecar and manifest still belong
    together (an open file keeps the old bytes; a path opened later fails instead of mixing)."""
    from dagster import build_input_context

    from slm4ie_assets.catalog import CONFIG_ENV
    from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager

    def records(tag):
        return "".join(json.dumps({"doc_id": f"{tag}{i}", "text": f"{tag} {i}",
                                   "paragraphs": [{"sentences": [{"tokens": [{"form": tag}]}]}]}) + "\n"
                       for i in range(3))

    write_files(tmp_path / "raw/news", {"f.jsonl": records("old")})
    config = write_config(tmp_path, {"news": {"extractor": "jsonl", "domain": "news"}})
    monkeypatch.setenv(CONFIG_ENV, str(config))
    cat = load_catalog(config)
    assert run(cat, "news", instance).success
    published = ExtractIOManager().load_input(build_input_context(asset_key=AssetKey(["extracted", "news"])))
    version = tmp_path / "out" / ".slm4ie" / "news" / "versions" / published.version
    assert published.text_path == version / "news.jsonl" and not published.text_path.is_symlink()
    assert published.sidecar_path == version / "news.annotations.jsonl.gz"
    assert published.text_path.read_bytes() == (tmp_path / "out/news.jsonl").read_bytes()
    assert published.manifest.docs == 3

    with open(published.text_path, "rb") as text:  # a downstream step reading while the dataset republishes
        write_files(tmp_path / "raw/news", {"f.jsonl": records("new")})
        assert run(cat, "news", instance).success
        assert b'"old0"' in text.read()
    assert b'"new0"' in (tmp_path / "out/news.jsonl").read_bytes()
    assert not published.sidecar_path.exists()  # gone with its version, never the new one in its place
    again = ExtractIOManager().load_input(build_input_context(asset_key=AssetKey(["extracted", "news"])))
    assert again.version != published.version and b'"new0"' in again.text_path.read_bytes()


def test_load_input_of_a_dataset_never_published_names_it(tmp_path, monkeypatch):
    from dagster import build_input_context

    from slm4ie_assets.catalog import CONFIG_ENV
    from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager

    monkeypatch.setenv(CONFIG_ENV, str(write_config(tmp_path, {"news": {"extractor": "jsonl", "domain": "news"}})))
    with pytest.raises(FileNotFoundError, match="dataset 'news' has not been published yet"):
        ExtractIOManager().load_input(build_input_context(asset_key=AssetKey(["extracted", "news"])))
