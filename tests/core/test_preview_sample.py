"""The fixed sample of a published dataset (issue 15 item 4): the documents with the smallest uid
hashes, found through the parts' `.uids` files, through real extractions into real folders."""

import json
import random
from array import array
from pathlib import Path

import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset, extract_parts, plan_dataset
from slm4ie_assets.store.duplicates import uid_hash
from slm4ie_assets.store.preview import SAMPLE_DOCS, sample_documents, sample_markdown, smallest_hashes

FILES = 8
PER_FILE = 15


def record(f: int, i: int) -> dict:
    rec = {"doc_id": f"d{f}-{i}", "text": f"Besedilo {f}-{i} tukaj"}
    if i % 4:  # three of four documents carry tokens
        rec["paragraphs"] = [{"sentences": [{"tokens": [
            {"form": "Besedilo", "lemma": "besedilo", "upos": "NOUN"},
            {"form": f"{f}-{i}", "lemma": f"{f}-{i}", "upos": "NUM"},
            {"form": "tukaj", "lemma": "tukaj", "upos": "ADV"}]}]}]
    return rec


def dataset(root: Path, out: str) -> tuple:
    raw = root / "raw" / "web"
    raw.mkdir(parents=True, exist_ok=True)
    for f in range(FILES):
        (raw / f"f{f}.jsonl").write_text("".join(json.dumps(record(f, i)) + "\n" for i in range(PER_FILE)))
    cfg = root / f"{out}.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": out,
                                   "datasets": {"web": {"extractor": "jsonl", "domain": "web"}}}))
    catalog = load_catalog(cfg)
    return catalog, catalog.dataset("web")


def sample_of(root: Path, out: str, workers: int):
    catalog, spec = dataset(root, out)
    report = extract_dataset(spec, catalog, force=True, workers=workers)
    return spec, report.manifest, sample_documents(spec, report.manifest)


def test_the_sample_is_the_documents_with_the_smallest_uid_hashes_whatever_the_workers(tmp_path):
    spec, manifest, one = sample_of(tmp_path, "out1", workers=1)
    _, _, two = sample_of(tmp_path, "out2", workers=2)
    _, _, again = sample_of(tmp_path, "out1", workers=1)  # a re-run (force) into the same folder
    assert one == two == again
    assert one.unsampled_shards == 0 and len(one.documents) == SAMPLE_DOCS
    uids = [json.loads(line)["uid"] for line in spec.text_path.read_text().splitlines()]
    expected = sorted(uids, key=uid_hash)[:SAMPLE_DOCS]
    assert {f"web:{d.doc_id}" for d in one.documents} == set(expected)
    # in document order, and spread over the dataset rather than its first lines
    assert [d.doc_id for d in one.documents] == [u.split(":", 1)[1] for u in uids if u in expected]
    assert len({d.shard for d in one.documents}) >= 2
    assert all(uids[d.published_line] == f"web:{d.doc_id}" for d in one.documents)
    assert any(uids.index(f"web:{d.doc_id}") >= 3 for d in one.documents)


def test_the_sample_shows_text_and_the_first_tokens_with_lemma_and_upos(tmp_path):
    spec, manifest, sample = sample_of(tmp_path, "out", workers=1)
    annotated = [d for d in sample.documents if d.token_count]
    plain = [d for d in sample.documents if not d.token_count]
    assert annotated, "the fixture's sample should hold an annotated document"
    d = annotated[0]
    f_i = d.doc_id[1:]
    assert d.text == f"Besedilo {f_i} tukaj" and d.token_count == 3
    assert [(t.form, t.lemma, t.upos) for t in d.first_tokens] == [
        ("Besedilo", "besedilo", "NOUN"), (f_i, f_i, "NUM"), ("tukaj", "tukaj", "ADV")]
    assert all(not p.first_tokens for p in plain)
    md = sample_markdown(sample, manifest.docs)
    assert f"- **{d.doc_id}**: Besedilo {f_i} tukaj" in md
    assert f"line {d.published_line + 1} of the text, shard `{d.shard}` line {d.line + 1}" in md
    assert "| form | lemma | upos |" in md and f"| {f_i} | {f_i} | NUM |" in md
    assert f"{SAMPLE_DOCS} of {FILES * PER_FILE} documents" in md


def test_a_part_re_extracted_after_the_publish_is_left_out_and_counted(tmp_path):
    catalog, spec = dataset(tmp_path, "out")
    manifest = extract_dataset(spec, catalog, force=True, workers=1).manifest
    (tmp_path / "raw/web/f0.jsonl").write_text(json.dumps(record(0, 99)) + "\n")  # f0's part goes stale
    plan = plan_dataset(spec)
    extract_parts(spec, plan.stale, workers=1)  # parts only, not published
    sample = sample_documents(spec, manifest)
    assert sample.unsampled_shards == 1
    assert sample.documents and all(d.shard != "f0.jsonl" for d in sample.documents)
    assert all(d.published_line is None for d in sample.documents)  # f0 comes first: offsets unknown


def test_smallest_hashes_agrees_with_a_sort_on_small_and_large_parts(tmp_path):
    rng = random.Random(7)
    for n in (40, 300_000):
        values = [rng.getrandbits(64) for _ in range(n)]
        values[n // 2] = values[n - 1] = min(values) - 1  # a repeated uid: each copy is a document
        path = tmp_path / f"{n}.uids"
        with open(path, "wb") as fh:
            array("Q", values).tofile(fh)
        expected = sorted((h, line) for line, h in enumerate(values))[:SAMPLE_DOCS]
        found = smallest_hashes(path, SAMPLE_DOCS)
        assert found == expected
        assert found[:2] == [(values[n - 1], n // 2), (values[n - 1], n - 1)]


def test_a_document_whose_uid_repeats_is_sampled_with_its_copies(tmp_path):
    """Three documents, two of them under one uid: the sample shows all three, not "2 of 3"."""
    raw = tmp_path / "raw" / "web"
    raw.mkdir(parents=True)
    lines = [{"doc_id": "same", "text": "Prva kopija."}, {"doc_id": "other", "text": "Drugo besedilo."},
             {"doc_id": "same", "text": "Druga kopija."}]
    (raw / "a.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                   "datasets": {"web": {"extractor": "jsonl", "domain": "web"}}}))
    catalog = load_catalog(cfg)
    spec = catalog.dataset("web")
    manifest = extract_dataset(spec, catalog, force=True, workers=1).manifest
    sample = sample_documents(spec, manifest)
    assert [d.text for d in sample.documents] == ["Prva kopija.", "Drugo besedilo.", "Druga kopija."]
    assert [d.published_line for d in sample.documents] == [0, 1, 2]
    assert sample_markdown(sample, manifest.docs).startswith("3 of 3 documents")
