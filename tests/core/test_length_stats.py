"""Length distributions (issue 15 item 4): characters and tokens per document, counted by the part
writer while it writes, added up at publish, reported as min / nearest-rank percentiles / max."""

import json
import math
from pathlib import Path

import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.length_stats import (
    EMPTY,
    RELATIVE_ERROR,
    LengthCounter,
    bucket_bounds,
    bucket_of,
    merged_histogram,
)
from slm4ie_assets.manifest import Manifest
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.preview import length_rows
from slm4ie_assets.store import DatasetStore


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
    # the part writer's inlined bucket expression is length_stats.bucket_of
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
    for key in sorted({bucket_of(n) for n in range(0, 1 << 16)}):
        lo, hi = bucket_bounds(key)
        assert lo == previous_hi + 1  # contiguous, no overlap
        assert hi - lo + 1 == 1 if lo < 256 else (hi - lo + 1) <= lo / 128
        previous_hi = hi
    assert all(bucket_bounds(bucket_of(n))[0] <= n <= bucket_bounds(bucket_of(n))[1]
               for n in (2**40 - 1, 2**40, 2**63 + 12345))
