"""Length distributions (issue 15 item 4): characters and tokens per document, counted by the part
writer while it writes, added up at publish, reported as min / nearest-rank percentiles / max."""

import json
import math
from pathlib import Path

import orjson
import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.materialization_metadata import length_distribution
from slm4ie_assets.pipeline import extract_dataset, plan_dataset
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.length_stats import (
    EMPTY,
    NO_LENGTHS,
    RELATIVE_ERROR,
    LengthCounter,
    bucket_bounds,
    length_bucket,
    merged_histogram,
    merged_lengths,
)
from slm4ie_assets.store.manifest import Manifest
from slm4ie_assets.store.part_meta import PartMeta
from slm4ie_assets.store.preview import length_rows


def publish(root: Path, key: str, extractor: str, files: dict, workers: int = 1, out: str = "out") -> Manifest:
    raw = root / "raw" / key
    raw.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (raw / name).write_text(content, encoding="utf-8")
    cfg = root / f"{out}-{key}.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": out,
                                   "datasets": {key: {"extractor": extractor, "domain": "web"}}}))
    catalog = load_catalog(cfg)
    return extract_dataset(catalog.dataset(key), catalog, force=True, workers=workers).manifest


def nearest_rank(values: list[int], q: int) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


def blocks(lengths) -> str:
    return "".join("x" * n + "\n\n" for n in lengths)


def test_characters_per_document_over_two_parts_are_exact_below_256(tmp_path):
    manifest = publish(tmp_path, "t", "text", {"a.txt": blocks(range(60, 0, -1)), "b.txt": blocks(range(61, 101))})
    chars = manifest.lengths.characters
    assert (chars.count, chars.min, chars.max) == (100, 1, 100)
    assert [chars.percentile(q) for q in (10, 50, 90, 99)] == [10, 50, 90, 99]
    assert manifest.lengths.tokens == EMPTY  # a text dataset has no tokens
    [row] = length_rows(manifest.lengths.characters, manifest.lengths.tokens)
    assert row == {"measure": "characters per document", "documents": 100, "min": 1,
                   "p10": 10, "p50": 50, "p90": 90, "p99": 99, "max": 100}


def test_long_documents_stay_within_the_stated_error_and_min_max_are_exact(tmp_path):
    lengths = [300 + 97 * i for i in range(100)] + [123_457]
    manifest = publish(tmp_path, "t", "text", {"a.txt": blocks(lengths[:50]), "b.txt": blocks(lengths[50:])})
    chars = manifest.lengths.characters
    assert (chars.count, chars.min, chars.max) == (101, 300, 123_457)
    for q in (10, 50, 90, 99):
        exact = nearest_rank(lengths, q)
        assert abs(chars.percentile(q) - exact) <= exact * RELATIVE_ERROR, (q, chars.percentile(q), exact)
    # the part writer's inlined bucket expression is length_stats.length_bucket
    counter = LengthCounter()
    for n in lengths:
        counter.add(n)
    assert chars == counter.histogram()


def test_tokens_per_annotated_document_and_the_same_numbers_for_any_worker_count(tmp_path):
    def rec(i: int, k: int | None) -> str:
        r = {"doc_id": f"d{i}", "text": " ".join(["w"] * (k or 3))}
        if k is not None:
            r["paragraphs"] = [{"sentences": [{"tokens": [{"form": "w"}] * k}]}]
        return json.dumps(r) + "\n"

    counts = list(range(1, 21))
    files = {"a.jsonl": "".join(rec(i, k) for i, k in enumerate(counts[:10])) + rec(99, None),
             "b.jsonl": "".join(rec(100 + i, k) for i, k in enumerate(counts[10:]))}
    one = publish(tmp_path, "j", "jsonl", files, workers=1, out="out1")
    two = publish(tmp_path, "j", "jsonl", files, workers=2, out="out2")
    assert one.lengths == two.lengths
    tokens = one.lengths.tokens
    assert (tokens.count, tokens.min, tokens.max) == (20, 1, 20)  # the unannotated record is not counted
    assert [tokens.percentile(q) for q in (10, 50, 90, 99)] == [2, 10, 18, 20]
    assert one.lengths.characters.count == 21
    rows = length_rows(one.lengths.characters, one.lengths.tokens)
    assert [r["measure"] for r in rows] == ["characters per document", "tokens per annotated document"]


def test_the_manifest_is_the_sum_of_the_part_metas(tmp_path):
    manifest = publish(tmp_path, "t", "text", {"a.txt": blocks([5, 500]), "b.txt": blocks([7, 70_000])})
    catalog = load_catalog(tmp_path / "out-t.yaml")
    store = DatasetStore(catalog.dataset("t"))
    metas = [store.read_part_meta(key) for key, _ in manifest.shards]
    assert [m.lengths.characters.count for m in metas] == [2, 2]
    assert merged_histogram(m.lengths.characters for m in metas) == manifest.lengths.characters
    assert Manifest.from_json(manifest.to_json()) == manifest


def test_buckets_cover_every_length_once_with_the_stated_width():
    previous_hi = -1
    for key in sorted({length_bucket(n) for n in range(0, 1 << 16)}):
        lo, hi = bucket_bounds(key)
        assert lo == previous_hi + 1  # contiguous, no overlap
        assert hi - lo + 1 == 1 if lo < 256 else (hi - lo + 1) <= lo / 128
        previous_hi = hi
    assert all(bucket_bounds(length_bucket(n))[0] <= n <= bucket_bounds(length_bucket(n))[1]
               for n in (2**40 - 1, 2**40, 2**63 + 12345))


# The previous release (4d1da5d) wrote these exact bytes, before `lengths` existed: one part meta and
# one manifest of its `text` bench dataset.
PREVIOUS_META = (b'{"format":1,"shard":"text_00.txt","files":["text_00.txt"],'
                 b'"fingerprint":"625658:1796169581722067661","recipe":"67e8e2ca93375891","docs":309,"annotated_docs":0,"tokens":0,"sentences":0,'
                 b'"text_bytes":656579,"input_bytes":625658,"has_annotations":false,"drops":{},"warnings":[],'
                 b'"repairs":{},"seconds":0.032}')
PREVIOUS_MANIFEST = (
    b'{\n  "format": 1,\n  "dataset": "text",\n  "recipe": "67e8e2ca93375891",\n  "shards": [\n    [\n'
    b'      "text_00.txt",\n      "625658:1796169581722067661"\n    ],\n    [\n      "text_01.txt",\n'
    b'      "836042:1796169581808719810"\n    ],\n    [\n      "text_02.txt",\n      "1043285:1796169581920719807"\n'
    b'    ]\n  ],\n  "files": 3,\n  "docs": 1172,\n  "annotated_docs": 0,\n  "tokens": 0,\n  "sentences": 0,\n'
    b'  "text_bytes": 2622527,\n  "sidecar_bytes": 0,\n  "has_sidecar": false,\n  "sidecar_lines": 0,\n'
    b'  "drops": {},\n  "discovery_warnings": [],\n  "repairs": {},\n  "duplicate_uids": 0,\n'
    b'  "duplicate_examples": [],\n  "published_at": "2026-12-01T23:59:56Z"\n}')


def as_previous_release(path: Path, indent: bool) -> None:
    """Rewrite a meta or manifest as the previous release wrote it: the same JSON without `lengths`."""
    d = orjson.loads(path.read_bytes())
    del d["lengths"]
    path.write_bytes(orjson.dumps(d, option=orjson.OPT_INDENT_2 if indent else 0))


def downgrade(store: DatasetStore, shard_keys, manifest: bool = True) -> None:
    for key in shard_keys:
        as_previous_release(store.part_paths(key).meta, indent=False)
    if manifest:
        as_previous_release(store.current / "manifest.json", indent=True)


def annotated(doc_id: str, k: int) -> str:
    return json.dumps({"doc_id": doc_id, "text": " ".join(["w"] * k),
                       "paragraphs": [{"sentences": [{"tokens": [{"form": "w"}] * k}]}]}) + "\n"


def test_a_meta_and_a_manifest_of_the_previous_release_load_with_lengths_none():
    meta = PartMeta.from_json(PREVIOUS_META)
    assert meta.lengths is None and (meta.shard, meta.docs, meta.seconds) == ("text_00.txt", 309, 0.032)
    manifest = Manifest.from_json(PREVIOUS_MANIFEST)
    assert manifest.lengths is None and (manifest.docs, len(manifest.shards)) == (1172, 3)
    assert merged_lengths([meta.lengths, NO_LENGTHS]) is None  # one part without lengths: no distribution
    assert PartMeta.from_json(meta.to_json()) == meta and Manifest.from_json(manifest.to_json()) == manifest


def test_parts_written_before_lengths_stay_current_and_keep_their_bytes(tmp_path):
    files = {"a.jsonl": annotated("a1", 3) + annotated("a2", 4), "b.jsonl": annotated("b1", 5)}
    manifest = publish(tmp_path, "j", "jsonl", files)
    catalog = load_catalog(tmp_path / "out-j.yaml")
    spec = catalog.dataset("j")
    store = DatasetStore(spec)
    keys = [key for key, _ in manifest.shards]
    downgrade(store, keys)
    fresh_meta = orjson.loads(store.part_paths(keys[0]).meta.read_bytes())
    assert list(fresh_meta) == list(orjson.loads(PREVIOUS_META))  # the previous release's key set and order
    published = {p: p.read_bytes() for p in (spec.text_path, spec.sidecar_path)}
    metas = {k: store.part_paths(k).meta.read_bytes() for k in keys}

    report = extract_dataset(spec, catalog, force=False, workers=1)
    assert report.skipped and report.extracted == []  # nothing is extracted again
    assert all(store.part_is_current(s) for s in plan_dataset(spec).shards)
    assert {k: store.part_paths(k).meta.read_bytes() for k in keys} == metas
    assert {p: p.read_bytes() for p in published} == published
    assert report.manifest is not None and report.manifest.lengths is None
    note = length_distribution(spec, report.manifest)
    assert note.value == ("Length distribution unavailable: 2 of 2 parts were written before lengths were "
                          "recorded. Materializing with force fills it in.")


def test_a_publish_over_parts_some_without_lengths_records_no_distribution_until_forced(tmp_path):
    files = {"a.txt": blocks([5, 6]), "b.txt": blocks([7]), "c.txt": blocks([8, 9])}
    manifest = publish(tmp_path, "t", "text", files)
    catalog = load_catalog(tmp_path / "out-t.yaml")
    spec = catalog.dataset("t")
    store = DatasetStore(spec)
    downgrade(store, [key for key, _ in manifest.shards][:2])
    (tmp_path / "raw" / "t" / "c.txt").write_text(blocks([8, 9, 10]), encoding="utf-8")  # c's part is stale

    report = extract_dataset(spec, catalog, force=False, workers=1)
    assert report.extracted == ["c.txt"] and report.manifest is not None
    assert report.manifest.lengths is None  # not a distribution of 3 of the 6 documents
    assert orjson.loads((store.current / "manifest.json").read_bytes())["lengths"] is None
    assert Manifest.from_json((store.current / "manifest.json").read_bytes()) == report.manifest
    fresh = publish(tmp_path, "t", "text", {}, out="fresh")  # the same inputs, every part new
    assert spec.text_path.read_bytes() == (tmp_path / "fresh" / "t.jsonl").read_bytes()
    note = length_distribution(spec, report.manifest)
    assert "unavailable: 2 of 3 parts were written before lengths were recorded" in note.value
    assert "force" in note.value

    forced = extract_dataset(spec, catalog, force=True, workers=1).manifest
    assert forced is not None and forced.lengths == fresh.lengths
    assert forced.lengths is not None and forced.lengths.characters.count == 6
    rows = length_distribution(spec, forced).value.records
    assert [r.data["measure"] for r in rows] == ["characters per document"]
