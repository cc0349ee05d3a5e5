"""Fan-out runs (D24): `max_shards_per_run` cuts a backfill of shards/<key> and the raw sensor's runs
for new shards into runs of at most that many shards, which the run queue runs side by side; the
publish waits until none of them is in progress (eager). The multi-process proof on Postgres, with
webserver and daemon as separate processes, is tests/ui/test_postgres.py."""

import json
import multiprocessing
from pathlib import Path

import jsonschema
import pytest
from dagster import AssetKey

from slm4ie_assets.catalog import DEFAULT_MAX_SHARDS_PER_RUN, CatalogError, load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key, shards_key
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.planning.shards import list_shards
from support.dagster_project import DagsterProject
from support.files import write_files
from support.paths import REPO
from support.watcher import Watcher

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
FILES = {f"f{i}.txt": f"dokument {i}\n\ndrugi {i}\n" for i in range(5)}


def _config(tmp_path, text: str):
    path = tmp_path / "extract.yaml"
    path.write_text(text)
    return path


def test_max_shards_per_run_defaults_to_one_run_and_is_set_top_level_or_per_dataset(tmp_path):
    catalog = load_catalog(_config(tmp_path, "max_shards_per_run: 8\ndatasets:\n"
                                             "  a: {extractor: text, domain: web}\n"
                                             "  b: {extractor: text, domain: web, max_shards_per_run: 0}\n"))
    assert catalog.max_shards_per_run == 8
    assert catalog.dataset("a").max_shards_per_run == 8 and catalog.dataset("b").max_shards_per_run == 0
    plain = load_catalog(_config(tmp_path, "datasets:\n  a: {extractor: text, domain: web}\n"))
    assert plain.dataset("a").max_shards_per_run == DEFAULT_MAX_SHARDS_PER_RUN == 0
    assert catalog.dataset("a").recipe == plain.dataset("a").recipe  # how runs are cut never changes bytes


@pytest.mark.parametrize("value", ["-1", "2.5", "'many'", "true"])
def test_a_bad_max_shards_per_run_is_a_located_catalog_error(tmp_path, value):
    path = _config(tmp_path, f"datasets:\n  a:\n    extractor: text\n    domain: web\n    max_shards_per_run: {value}\n"
                             f"max_shards_per_run: {value}\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    text = str(err.value)
    assert f"{path}:5: datasets.a.max_shards_per_run: expected a whole number >= 0" in text
    assert f"{path}:6: max_shards_per_run: expected a whole number >= 0" in text


def test_the_schema_knows_max_shards_per_run():
    validator = jsonschema.Draft202012Validator(json.loads((REPO / "schemas" / "extract.schema.json").read_text()))
    good = {"max_shards_per_run": 4, "datasets": {"a": {"extractor": "text", "domain": "w", "max_shards_per_run": 0}}}
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({"max_shards_per_run": -1}))
    assert list(validator.iter_errors({"datasets": {"a": {"extractor": "text", "domain": "w",
                                                          "max_shards_per_run": "x"}}}))


def test_the_backfill_policy_follows_max_shards_per_run(tmp_path):
    project = DagsterProject(tmp_path, {"fan": {"extractor": "text", "domain": "web", "max_shards_per_run": 3},
                                        "one": {"extractor": "text", "domain": "web"}})
    fan = project.defs.resolve_assets_def(shards_key("fan"))
    one = project.defs.resolve_assets_def(shards_key("one"))
    assert fan.backfill_policy is not None and fan.backfill_policy.max_partitions_per_run == 3
    assert one.backfill_policy is not None and one.backfill_policy.max_partitions_per_run is None  # single_run


def test_the_raw_sensor_cuts_new_shards_into_runs_of_at_most_max_shards_per_run(tmp_path, instance):
    """Even the first extraction fans out (no one-run `initial` extracted/<key>); the publish comes
    from the eager condition once the shard runs are done, with the bytes of a fresh full run."""
    write_files(tmp_path / "raw" / "kas", FILES)
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "web", "max_shards_per_run": 2}})
    w = Watcher(project, instance)
    assert w.automation() == []  # the automation sensor's first tick, before any shard run
    data = w.tick()
    keys = w.partitions()
    assert keys == sorted(FILES)
    assert all(r.asset_selection == [shards_key("kas")] for r in data.run_requests)
    spans = [(r.tags.get(RANGE_START), r.tags.get(RANGE_END), r.partition_key) for r in data.run_requests]
    assert spans == [("f0.txt", "f1.txt", None), ("f2.txt", "f3.txt", None), (None, None, "f4.txt")]
    assert len({r.run_key for r in data.run_requests}) == 3
    for result in w.run(data):
        assert result.success
    requested = w.automation()
    assert [k for k in requested if isinstance(k, AssetKey)] == [extracted_key("kas")]  # one publish, after all
    project.publish(instance, "kas")
    assert project.published("kas") == project.fresh("kas")
    assert w.tick().run_requests == [] and w.automation() == []


def _shard_run(config: str, key: str, first: int, end: int) -> None:
    """One fan-out run in its own process: the shards [first, end), parts only."""
    from slm4ie_assets.pipeline import ShardBatch, extract_shard_batch
    from slm4ie_assets.planning.shards import list_shards

    catalog = load_catalog(Path(config))
    spec = catalog.dataset(key)
    extract_shard_batch(ShardBatch(spec, list_shards(spec, catalog.shard_group_threshold)[first:end], force=True))


def test_concurrent_runs_over_the_ranges_of_split_files_publish_the_unsplit_bytes(tmp_path):
    """Three processes at once, each over a contiguous third of the shards (ranges of two split text
    files among whole files): a range whose earlier ranges another run extracts counts them itself,
    so the publish that follows has the bytes of one unsplit one-worker run (docs/splitting.md)."""
    files = {"a.txt": "".join(f"blok a{i}\nvrstica\n\n \n" for i in range(400)), "b.txt": "kratka\n",
             "c.txt": "".join(f"blok c{i}\n\n" for i in range(300)), "d.txt": "zadnja\n\n\nše ena\n"}
    outputs = {}
    for name, split_bytes in (("unsplit", 0), ("fanned", 700)):
        root = tmp_path / name
        write_files(root / "raw" / "kas", files)
        cfg = _config(root, f"input_dir: raw\noutput_dir: out\nsplit_bytes: {split_bytes}\nmax_workers: 1\n"
                            "datasets:\n  kas: {extractor: text, domain: web, max_shards_per_run: 4}\n")
        catalog = load_catalog(cfg)
        spec = catalog.dataset("kas")
        if split_bytes:
            n = len(list_shards(spec, catalog.shard_group_threshold))
            assert n > 12  # a.txt and c.txt are cut into many ranges
            bounds = [n * i // 3 for i in range(4)]
            ctx = multiprocessing.get_context("spawn")
            procs = [ctx.Process(target=_shard_run, args=(str(cfg), "kas", bounds[i], bounds[i + 1])) for i in range(3)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(120)
                assert p.exitcode == 0
            report = extract_dataset(spec, catalog, workers=1)
            assert report.extracted == []  # every part came from the three runs
        else:
            extract_dataset(spec, catalog, force=True, workers=1)
        outputs[name] = (root / "out" / "kas.jsonl").read_bytes()
    assert outputs["fanned"] == outputs["unsplit"]
    assert outputs["unsplit"].count(b"\n") == 400 + 1 + 300 + 2
