"""Bucket to bucket through the pipeline (issue 42), against the local S3 server: the bundled
examples (every format) and the bench corpus publish the committed bytes of
tests/core/published_hashes.json, as a folder does; a second run writes no object; an object
replaced during a run publishes nothing and the run names it; a bomb in a bucket is refused as on
disk and costs nothing else."""

import gzip
import io
import json
import sys

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_and_publish, extract_dataset, lock_path, plan_dataset, unpack
from slm4ie_assets.planning.input_stamps import InputChanged
from slm4ie_assets.storage.urls import open_store
from slm4ie_assets.store.locks import dataset_lock
from slm4ie_assets.store.remote_versions import read_published
from support.bucket_runs import (
    PUBLISHED_HASHES,
    bucket_config,
    bucket_hashes,
    listing,
    object_bytes,
    upload_tree,
)
from support.files import write_config
from support.paths import REPO

EXAMPLES = REPO / "examples"


def _bench_corpus(tmp_path):
    sys.path.insert(0, str(REPO))
    from bench.generate import generate

    return generate(tmp_path / "bench", scale=0.005, files=2)  # the corpus test_published_bytes hashes


@pytest.mark.parametrize("corpus", ["examples", "bench"])
def test_a_bucket_publishes_the_committed_bytes_and_a_second_run_writes_nothing(s3_bucket, tmp_path, corpus):
    if corpus == "examples":
        source, raw = EXAMPLES / "extract.yaml", EXAMPLES / "data" / "raw"
    else:
        source = _bench_corpus(tmp_path)
        raw = load_catalog(source).input_dir
    upload_tree(raw, f"{s3_bucket.url}/raw", skip=("2023.txt",))  # 2023.txt: an earlier unpack's output
    catalog = load_catalog(bucket_config(source, tmp_path, s3_bucket.url))
    hashes = {}
    for spec in catalog.datasets.values():
        extract_dataset(spec, catalog, force=True, workers=2)
        hashes.update(bucket_hashes(f"{s3_bucket.url}/out", spec.key))
    assert hashes == json.loads(PUBLISHED_HASHES.read_text())[corpus]

    before = listing(s3_bucket.url)
    for spec in catalog.datasets.values():
        report = extract_dataset(spec, catalog, workers=2)
        assert report.skipped and not report.extracted, spec.key
    assert listing(s3_bucket.url) == before  # not a lease, not a copy, not a record


def _text_dataset(tmp_path, s3_bucket, files: dict[str, bytes], **dataset):
    store = open_store(f"{s3_bucket.url}/raw/t")
    for name, data in files.items():
        store.write(name, io.BytesIO(data))
    config = write_config(tmp_path, {"t": {"extractor": "text", "domain": "test", **dataset}},
                          input_dir=f"{s3_bucket.url}/raw", output_dir=f"{s3_bucket.url}/out",
                          work_dir=str(tmp_path / "work"))
    catalog = load_catalog(config)
    return catalog, catalog.datasets["t"], store


def test_an_object_replaced_during_a_run_publishes_nothing_and_is_named(s3_bucket, tmp_path):
    catalog, spec, raw = _text_dataset(tmp_path, s3_bucket, {"a.txt": b"prva\n\ndruga\n", "b.txt": b"tretja\n"})
    with dataset_lock(lock_path(spec), spec.key):
        unpack(spec, catalog)  # the mirror: what the run reads
    plan = plan_dataset(spec, workers=1)
    raw.write("a.txt", io.BytesIO(b"zamenjana\n"))  # the producer replaces it meanwhile
    with pytest.raises(InputChanged, match=r"s3://.*/raw/t/a\.txt was replaced during the run"):
        extract_and_publish(plan)
    out = open_store(f"{s3_bucket.url}/out")
    assert read_published(out, "t") is None and object_bytes(out, "t.jsonl") is None

    extract_dataset(spec, catalog)  # the next run mirrors the new object and publishes it
    texts = [json.loads(line)["text"] for line in object_bytes(out, "t.jsonl").splitlines()]
    assert texts == ["zamenjana", "tretja"]


def test_a_bomb_in_a_bucket_is_refused_as_on_disk_and_the_rest_is_published(s3_bucket, tmp_path):
    bomb = gzip.compress(b"\0" * (8 << 20))  # 8 MiB from ~8 kB: far over max_ratio 50
    catalog, spec, _raw = _text_dataset(tmp_path, s3_bucket, {"good.txt": b"dober\n", "bomb.txt.gz": bomb})
    report = extract_dataset(spec, catalog)
    out = open_store(f"{s3_bucket.url}/out")
    record = read_published(out, "t")
    assert record is not None and record.manifest.docs == 1
    assert any("bomb.txt.gz" in line and "bad_archive" in line for line in record.manifest.discovery_warnings), \
        record.manifest.discovery_warnings
    assert report.manifest is not None and report.manifest.drops == record.manifest.drops
    assert not (spec.raw_dir / "bomb.txt").exists()  # nothing of it unpacked in the mirror
