"""Parts, publishing and skip-unless-force (ADDENDUM 8.2, 8.4; D2, D17, D18)."""

import gzip
import json
import os
import pickle

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.pool_worker import InProcess, PartWork
from slm4ie_assets.engine.range_scheduler import Counting, Extracting
from slm4ie_assets.engine.stage_clock import StageClock
from slm4ie_assets.engine.worker_context import WorkerContext
from slm4ie_assets.engine.worker_pool import job_name
from slm4ie_assets.extractors.extract_context import RangeStart
from slm4ie_assets.extractors.input_file import FileRange, InputFile
from slm4ie_assets.pipeline import MissingRawDir, StrictModeViolation, extract_dataset, plan_dataset
from slm4ie_assets.store.dataset_store import DatasetStore
from support.files import read_jsonl, read_sidecar, write_config, write_files

ANN = {"paragraphs": [{"sentences": [{"tokens": [{"form": "a"}, {"form": "b", "space_after": False}]}]}]}


def jl(*recs):
    return "".join(json.dumps(r) + "\n" for r in recs)


def setup(tmp_path, files, key="k", extractor="jsonl", **entry):
    write_files(tmp_path / "raw" / key, files)
    cfg = write_config(tmp_path, {key: {"extractor": extractor, "domain": "web", **entry}})
    cat = load_catalog(cfg)
    return cat, cat.dataset(key)


def test_stub_rule_across_files_leading_stubs_kept_aligned(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "s1", "text": "x"}, {"doc_id": "s2", "text": "y"}),
                                 "b.jsonl": jl({"doc_id": "r", "text": "z", **ANN}, {"doc_id": "s3", "text": "w"})})
    extract_dataset(spec, cat)
    side = read_sidecar(spec.sidecar_path)
    assert [s["doc_id"] for s in side] == ["s1", "s2", "r", "s3"]
    assert side[0] == {"doc_id": "s1", "uid": "k:s1"} and side[3] == {"doc_id": "s3", "uid": "k:s3"}
    assert [r["uid"] for r in read_jsonl(spec.text_path)] == [s["uid"] for s in side]


def test_d2_outputs_byte_reproducible_and_sidecar_header_has_mtime_zero_no_name(tmp_path):
    files = {f"f{i}.jsonl": jl({"doc_id": f"d{i}", "text": "t", **ANN}, {"doc_id": f"e{i}", "text": "u"})
             for i in range(10)}
    cat, spec = setup(tmp_path, files)
    extract_dataset(spec, cat, force=True, workers=1)
    first = (spec.text_path.read_bytes(), spec.sidecar_path.read_bytes())
    extract_dataset(spec, cat, force=True, workers=2)
    second = (spec.text_path.read_bytes(), spec.sidecar_path.read_bytes())
    assert first == second
    head = first[1][:10]
    assert head[:3] == b"\x1f\x8b\x08" and head[3] & 0x08 == 0 and head[4:8] == b"\x00\x00\x00\x00"


def test_d18_one_and_two_workers_byte_identical_for_text_datasets(tmp_path):
    files = {f"d{i % 3}/f{i}.txt": "\n\n".join(f"dok {i}.{j}" for j in range(30)) for i in range(12)}
    cat, spec = setup(tmp_path, files, extractor="text")
    extract_dataset(spec, cat, force=True, workers=1)
    one = spec.text_path.read_bytes()
    extract_dataset(spec, cat, force=True, workers=2)
    assert spec.text_path.read_bytes() == one
    assert len(read_jsonl(spec.text_path)) == 360


def test_second_run_skips_without_reading_raw_files(tmp_path):
    cat, spec = setup(tmp_path, {"a.txt": "ena\n\ndva\n"}, extractor="text")
    assert not extract_dataset(spec, cat).skipped
    raw = tmp_path / "raw/k/a.txt"
    st = raw.stat()
    raw.write_text("ENA\n\nDVA\n")  # same size, same mtime: only reading the file could notice
    os.utime(raw, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = extract_dataset(spec, cat)
    assert report.skipped
    assert [r["text"] for r in read_jsonl(spec.text_path)] == ["ena", "dva"]
    report = extract_dataset(spec, cat, force=True)  # force re-extracts
    assert not report.skipped
    assert [r["text"] for r in read_jsonl(spec.text_path)] == ["ENA", "DVA"]


def test_only_changed_shards_are_re_extracted(tmp_path):
    cat, spec = setup(tmp_path, {"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}, extractor="text")
    extract_dataset(spec, cat)
    (tmp_path / "raw/k/b.txt").write_text("bb\n")
    report = extract_dataset(spec, cat)
    assert report.extracted == ["b.txt"]
    assert [r["text"] for r in read_jsonl(spec.text_path)] == ["a", "bb", "c"]


def test_vanished_file_leaves_the_output_and_its_part_is_removed(tmp_path):
    cat, spec = setup(tmp_path, {"a.txt": "a\n", "b.txt": "b\n"}, extractor="text")
    extract_dataset(spec, cat)
    (tmp_path / "raw/k/b.txt").unlink()
    extract_dataset(spec, cat)
    assert [r["text"] for r in read_jsonl(spec.text_path)] == ["a"]
    store = DatasetStore(spec)
    assert len(list(store.parts.glob("*.meta.json"))) == 1


def test_d17_stale_sidecar_removed_when_annotations_disappear(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "r", "text": "z", **ANN})})
    extract_dataset(spec, cat)
    assert spec.sidecar_path.exists()
    (tmp_path / "raw/k/a.jsonl").write_text(jl({"doc_id": "r", "text": "z"}))
    extract_dataset(spec, cat, force=True)
    assert not spec.sidecar_path.exists() and not os.path.lexists(spec.sidecar_path)
    assert read_jsonl(spec.text_path)[0]["doc_id"] == "r"


def test_d17_leftovers_of_an_interrupted_run_are_removed_by_the_next_run(tmp_path):
    cat, spec = setup(tmp_path, {"a.txt": "a\n"}, extractor="text")
    extract_dataset(spec, cat)
    store = DatasetStore(spec)
    (store.parts / "deadbeef.jsonl.partial").write_text("half")
    (store.parts / "0123456789abcdef01234567.jsonl").write_text("uncommitted part")
    (store.versions / "v0-0").mkdir()
    (store.versions / "v0-0" / "k.jsonl").write_text("unpublished version")
    extract_dataset(spec, cat, force=True)
    names = sorted(p.name for p in store.parts.iterdir())
    assert not any("partial" in n or n.startswith("0123") for n in names)
    assert [v.name for v in store.versions.iterdir()] == [os.readlink(store.current).split("/")[-1]]


def test_published_files_point_into_the_current_version_with_a_manifest(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "r", "text": "z", **ANN})})
    extract_dataset(spec, cat)
    store = DatasetStore(spec)
    assert spec.text_path.is_symlink() and spec.text_path.resolve().parent == store.current.resolve()
    manifest = store.published_manifest()
    assert manifest.docs == 1 and manifest.has_sidecar and manifest.sidecar_lines == 1
    assert manifest.shards == (("a.jsonl", manifest.shards[0][1]),)
    assert len(gzip.decompress(spec.sidecar_path.read_bytes()).splitlines()) == 1


def test_zero_documents_give_an_empty_text_file(tmp_path):
    cat, spec = setup(tmp_path, {"a.txt": "\n\n"}, extractor="text")
    extract_dataset(spec, cat)
    assert spec.text_path.read_bytes() == b""


def test_missing_raw_folder_names_it(tmp_path):
    cfg = write_config(tmp_path, {"kas": {"extractor": "tei" if False else "text", "domain": "academic"}})
    cat = load_catalog(cfg)
    with pytest.raises(MissingRawDir, match=r"raw folder .*/raw/kas does not exist"):
        extract_dataset(cat.dataset("kas"), cat)


def test_strict_dataset_fails_on_any_skip_and_keeps_previous_output(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "a", "text": "x"})}, strict=True)
    extract_dataset(spec, cat)
    (tmp_path / "raw/k/a.jsonl").write_text(jl({"doc_id": "a", "text": "x"}) + "{broken\n")
    with pytest.raises(StrictModeViolation, match="malformed_json: 1"):
        extract_dataset(spec, cat)
    assert [r["doc_id"] for r in read_jsonl(spec.text_path)] == ["a"]


def test_duplicate_uids_counted_and_named(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "x", "text": "1"}, {"doc_id": "y", "text": "2"}),
                                 "b.jsonl": jl({"doc_id": "x", "text": "3"})})
    report = extract_dataset(spec, cat)
    assert report.manifest.duplicate_uids == 1
    assert report.manifest.duplicate_examples == ("k:x",)


def test_duplicate_counts_agree_between_the_set_and_the_sorted_paths(tmp_path, monkeypatch):
    """Both duplicate counters (a set for small datasets, a numpy sort above) count every repeat
    after the first and name the same five uids."""
    import slm4ie_assets.store.duplicates as duplicates_mod

    rows_a = [{"doc_id": f"d{i % 7}", "text": "t"} for i in range(20)]  # d0..d6 repeated
    rows_b = [{"doc_id": "d1", "text": "t"}, {"doc_id": "fresh", "text": "t"}]
    cat, spec = setup(tmp_path, {"a.jsonl": jl(*rows_a), "b.jsonl": jl(*rows_b)})
    answers = []
    for small_set in (10**9, 0):
        monkeypatch.setattr(duplicates_mod, "_SMALL_UID_SET", small_set)
        m = extract_dataset(spec, cat, force=True).manifest
        answers.append((m.duplicate_uids, m.duplicate_examples))
    assert answers[0] == answers[1]
    count, examples = answers[0]
    assert count == 20 - 7 + 1
    assert len(examples) == 5 and set(examples) < {f"k:d{i}" for i in range(7)}


def test_a_single_part_is_published_by_hard_link_and_keeps_its_bytes_when_the_part_is_redone(tmp_path):
    """One shard: the version shares the part's inode (no copy); re-extracting writes a new part
    file under the same name, so the still-published version keeps its own bytes."""
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "a", "text": "old"})})
    extract_dataset(spec, cat)
    from slm4ie_assets.pipeline import extract_parts, plan_dataset

    store = DatasetStore(spec)
    published = spec.text_path.resolve()
    part = store.part_paths(plan_dataset(spec).shards[0].key)[0]
    assert os.path.samefile(published, part)
    before = published.read_bytes()
    (tmp_path / "raw/k/a.jsonl").write_text(jl({"doc_id": "a", "text": "new text"}))
    extract_parts(spec, plan_dataset(spec).shards)  # parts only, not published
    assert not os.path.samefile(published, part)
    assert published.read_bytes() == before
    extract_dataset(spec, cat)
    assert [r["text"] for r in read_jsonl(spec.text_path)] == ["new text"]


def test_several_parts_are_concatenated_in_shard_order(tmp_path):
    files = {f"{n}.jsonl": jl({"doc_id": n, "text": n * 3}) for n in ("c", "a", "b")}
    cat, spec = setup(tmp_path, files)
    extract_dataset(spec, cat)
    assert [r["doc_id"] for r in read_jsonl(spec.text_path)] == ["a", "b", "c"]
    assert spec.text_path.resolve().stat().st_nlink == 1  # a copy, not a link to one part


def test_switching_extractor_rebuilds_parts(tmp_path):
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "a", "text": "x"})})
    extract_dataset(spec, cat)
    write_config(tmp_path, {"k": {"extractor": "jsonl", "domain": "news"}})
    cat2 = load_catalog(tmp_path / "extract.yaml")
    report = extract_dataset(cat2.dataset("k"), cat2)
    assert not report.skipped and read_jsonl(spec.text_path)[0]["domain"] == "news"


def test_staged_text_takes_current_and_fresh_parts_in_shard_order(tmp_path):
    """Several shards: the new version's text is staged while parts are extracted. An incremental
    run (one shard changed) still publishes every part, in shard order."""
    files = {f"{n}.jsonl": jl({"doc_id": n, "text": n}) for n in ("a", "b", "c", "d")}
    cat, spec = setup(tmp_path, files)
    extract_dataset(spec, cat)
    (tmp_path / "raw/k/b.jsonl").write_text(jl({"doc_id": "b2", "text": "changed"}))
    report = extract_dataset(spec, cat)
    assert len(report.extracted) == 1
    assert [r["doc_id"] for r in read_jsonl(spec.text_path)] == ["a", "b2", "c", "d"]
    assert len(list(DatasetStore(spec).versions.iterdir())) == 1


def test_a_failed_run_leaves_no_staged_version_behind(tmp_path):
    """A strict dataset that fails after its parts were staged removes the staged folder at once,
    and the published pair stays as it was."""
    files = {f"{n}.jsonl": jl({"doc_id": n, "text": n}) for n in ("a", "b", "c")}
    cat, spec = setup(tmp_path, files, strict=True)
    extract_dataset(spec, cat)
    before = spec.text_path.read_bytes()
    (tmp_path / "raw/k/c.jsonl").write_text(jl({"doc_id": "c", "text": "c"}) + "{broken\n")
    with pytest.raises(StrictModeViolation):
        extract_dataset(spec, cat)
    assert spec.text_path.read_bytes() == before
    assert len(list(DatasetStore(spec).versions.iterdir())) == 1


def test_duplicate_examples_are_found_deep_in_a_part_and_named_in_document_order(tmp_path):
    """Examples are read back through the parts' hash files: only the lines holding a repeated
    hash are decoded, and the uids come out in document order."""
    a = [{"doc_id": f"a{i}", "text": "t"} for i in range(1500)]
    b = [{"doc_id": f"b{i}", "text": "t"} for i in range(1500)] + [{"doc_id": "a1499", "text": "x"},
                                                                    {"doc_id": "a7", "text": "y"}]
    cat, spec = setup(tmp_path, {"a.jsonl": jl(*a), "b.jsonl": jl(*b)})
    m = extract_dataset(spec, cat).manifest
    assert m.duplicate_uids == 2
    assert m.duplicate_examples == ("k:a7", "k:a1499")


def test_one_unit_of_work_runs_in_process_and_in_the_pool_and_names_what_it_holds(tmp_path):
    """`PartWork` is what the scheduler's jobs run, in both paths: pickled for a pool worker it is
    its spec and force alone (never the calling process's context, clock or log), and a job of it
    is named after its dataset and shard, or the range it counts (worker_pool.WorkerDied)."""
    cat, spec = setup(tmp_path, {"a.jsonl": jl({"doc_id": "s1", "text": "x"})})
    shard = plan_dataset(spec).shards[0]
    pooled = PartWork(spec, force=True)
    here = PartWork(spec, True, InProcess(WorkerContext.in_process(None, 1.0), StageClock()))
    assert pickle.loads(pickle.dumps(pooled)) == pooled and pooled.here is None
    outcome = Extracting(0, shard, RangeStart()).run(here)
    assert outcome.meta is not None and outcome.meta.docs == 1 and here.here.clock.seconds["extract"] > 0
    assert Extracting.stage == "extract" and Counting.stage == "count"
    assert job_name("k", Extracting(0, shard, RangeStart())) == f"dataset 'k' shard {shard.key!r} (file a.jsonl)"
    ranged = InputFile(spec.raw_dir / "a.jsonl", "a.jsonl", FileRange(1, (0, 5, 9)))
    assert job_name("k", Counting(7, ranged)) == "dataset 'k' the count of 'a.jsonl' range 1"
