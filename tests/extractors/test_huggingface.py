"""huggingface extractor: extraction-formats (huggingface), ADDENDUM 3.1, 3.3, 4.5, D1, D4, D6, D7, D18,
D20, S10, S11. Every dataset here is a real `save_to_disk` folder written with `datasets`."""

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

datasets = pytest.importorskip("datasets")
from datasets import Dataset, DatasetDict, Features, Sequence, Value  # noqa: E402

from slm4ie_assets.extractors.extract_context import ExtractContext  # noqa: E402
from slm4ie_assets.extractors.huggingface import BATCH_ROWS, HuggingfaceExtractor  # noqa: E402
from slm4ie_assets.extractors.input_file import InputFile  # noqa: E402
from support.extraction import Result, extract_raw  # noqa: E402
from support.files import ordered  # noqa: E402
from support.paths import REPO  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet_progress_bars():
    datasets.disable_progress_bars()
    yield
    datasets.enable_progress_bars()


def raw_dir(tmp_path: Path, key: str = "c4") -> Path:
    path = tmp_path / "raw" / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def extract(tmp_path: Path, key: str = "c4", workers: int = 1) -> Result:
    """Run the plain pipeline (plan, extract, publish) over raw/<key>/ as the tests left it."""
    return extract_raw(tmp_path, key, "huggingface", "web", workers=workers)


def line(text, doc_id, metadata=None) -> dict:
    out = {"text": text, "source": "c4", "domain": "web", "doc_id": doc_id, "uid": f"c4:{doc_id}"}
    if metadata:
        out["metadata"] = metadata
    return out


# ----------------------------------------------------------------------------- import cost


def test_importing_the_module_or_loading_a_catalog_does_not_import_datasets(tmp_path):
    """Loading the catalog imports every named extractor class; `datasets` (seconds to import) must
    wait until a huggingface config is actually extracted."""
    config = tmp_path / "extract.yaml"
    config.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                      "datasets": {"c4": {"extractor": "huggingface", "domain": "web"}}}))
    code = ("import sys, slm4ie_assets.extractors.huggingface\n"
            "from slm4ie_assets.catalog import load_catalog\n"
            f"load_catalog({str(config)!r})\n"
            "assert 'datasets' not in sys.modules, 'datasets imported'\n"
            "assert 'pyarrow' not in sys.modules, 'pyarrow imported'\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ----------------------------------------------------------------------------- Dataset and DatasetDict


def test_c4_like_bare_dataset_exact_lines(tmp_path):
    """extraction-formats huggingface (the C4 row) + ADDENDUM 4.5: text from `text`, `url` as natural key
    and still in metadata, the datetime as ISO-8601, metadata in column order."""
    Dataset.from_dict({
        "text": ["Dober dan, kako ste?", "Drugi."],
        "timestamp": [dt.datetime(2019, 4, 25, 12, 34, 56), dt.datetime(2020, 1, 2, 3, 4, 5, 600)],
        "url": ["https://example.com/page", "https://example.com/2"],
    }).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert ordered(r.lines) == ordered([
        line("Dober dan, kako ste?", "https://example.com/page",
             {"timestamp": "2019-04-25T12:34:56", "url": "https://example.com/page"}),
        line("Drugi.", "https://example.com/2",
             {"timestamp": "2020-01-02T03:04:05.000600", "url": "https://example.com/2"}),
    ])
    assert r.drops == {}


@pytest.mark.parametrize("working", [".~tmp~", ".rsync-partial", ".azDownload-0f3a"])
def test_a_copy_tools_working_folder_is_never_read_as_a_config(tmp_path, working):
    """A copy tool writes a config into its working folder before renaming it into place: that
    folder is never a config of its own (the settle rule waits for the rename)."""
    Dataset.from_dict({"text": ["a"]}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    Dataset.from_dict({"text": ["half"]}).save_to_disk(str(raw_dir(tmp_path) / working / "hr"))
    r = extract(tmp_path)
    assert ordered(r.lines) == ordered([line("a", "sl:00000000", {})])
    assert r.drops == {}


def test_keyless_bare_dataset_gets_config_and_row_ids(tmp_path):
    """ADDENDUM 4.5 doc_id: with no natural key a bare Dataset yields <config>:<row:08d>."""
    Dataset.from_dict({"text": ["a", "b"], "lang": ["sl", "sl"]}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert ordered(r.lines) == ordered([line("a", "sl:00000000", {"lang": "sl"}),
                                        line("b", "sl:00000001", {"lang": "sl"})])


def test_datasetdict_splits_in_stored_order_with_split_in_the_id(tmp_path):
    """ADDENDUM 4.5 Splits: insertion order from dataset_dict.json (zeta before alpha), every split
    iterated; keyless rows get <config>:<split>:<row:08d>, the row counted within its split."""
    DatasetDict({
        "zeta": Dataset.from_dict({"text": ["z0", "z1"]}),
        "alpha": Dataset.from_dict({"text": ["a0"]}),
        "mid": Dataset.from_dict({"text": ["m0"]}),
    }).save_to_disk(str(raw_dir(tmp_path) / "hr"))
    r = extract(tmp_path)
    assert ordered(r.lines) == ordered([line("z0", "hr:zeta:00000000"), line("z1", "hr:zeta:00000001"),
                                        line("a0", "hr:alpha:00000000"), line("m0", "hr:mid:00000000")])


def test_natural_key_probe_order_blank_values_fall_through_and_stay_in_metadata(tmp_path):
    """ADDENDUM 4.5 + D4/S2: NATURAL_ID_KEYS (id, _id, docid, doc_id, uid, url) probed per row, first
    present non-blank value wins (str() of it); the key column stays in metadata."""
    Dataset.from_dict({
        "url": ["u0", "u1", "u2", "u3", "", None],
        "uid": ["", "uid1", None, " ", " ", None],
        "text": ["t0", "t1", "t2", "t3", "t4", "t5"],
        "_id": [None, None, "  ", "_3", None, None],
        "id": [None, None, None, None, None, None],
    }, features=Features({"url": Value("string"), "uid": Value("string"), "text": Value("string"),
                          "_id": Value("string"), "id": Value("int64")})).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert r.ids == ["u0", "uid1", "u2", "_3", "sl:00000004", "sl:00000005"]
    assert ordered(r.metas[:2]) == ordered([{"url": "u0", "uid": ""}, {"url": "u1", "uid": "uid1"}])
    assert r.metas[4] == {"url": "", "uid": " "}
    assert r.metas[5] is None  # every column null: no metadata key at all


def test_integer_id_column_is_the_id_as_a_string_and_an_int_in_metadata(tmp_path):
    """ADDENDUM 3.3/4.5: str() of the key value; the metadata keeps the column's own type."""
    Dataset.from_dict({"id": [7, 8], "text": ["a", "b"]}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert r.ids == ["7", "8"]
    assert r.metas == [{"id": 7}, {"id": 8}]


# ----------------------------------------------------------------------------- text (D7)


def test_bad_text_rows_skipped_counted_and_still_counted_for_row_ids(tmp_path):
    """D7 (replaces Q7) + ADDENDUM 4.5: null, empty and whitespace-only text skip the row with a
    warning naming config, split and row; the row index still counts them; text is never stripped."""
    DatasetDict({"train": Dataset.from_dict({"text": ["  ena ", None, "", " \u00a0\n", "pet"]})}).save_to_disk(
        str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert r.ids == ["sl:train:00000000", "sl:train:00000004"]
    assert r.texts == ["  ena ", "pet"]
    assert r.drops == {"missing_text": 1, "empty_text": 2}
    assert "c4/sl: split 'train' row 1: text is null" in r.warnings[0]
    assert "c4/sl: split 'train' row 3: text is blank" in r.warnings[2]  # Unicode whitespace is blank (S4)


def test_non_string_text_column_is_skipped_and_counted(tmp_path):
    """D7: a non-string text is never written."""
    Dataset.from_dict({"text": [5, 6]}).save_to_disk(str(raw_dir(tmp_path) / "ints"))
    Dataset.from_dict({"text": ["ok"]}).save_to_disk(str(raw_dir(tmp_path) / "str"))
    r = extract(tmp_path)
    assert r.ids == ["str:00000000"]
    assert r.drops == {"non_string_text": 2}


def test_split_without_text_column_is_skipped_and_counted_once(tmp_path):
    """ADDENDUM 4.5 Text: always the `text` column; a split lacking it yields nothing, with a warning."""
    Dataset.from_dict({"body": ["x", "y"]}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert r.lines == []
    assert r.drops == {"missing_text": 1}
    assert "no 'text' column" in r.warnings[0] and "2 row(s)" in r.warnings[0]


def test_row_index_continues_across_batches(tmp_path):
    """Rows are read batch by batch; positional ids and skips stay exact across batch borders."""
    n = BATCH_ROWS * 2 + 3
    texts = [f"t{i}" for i in range(n)]
    texts[BATCH_ROWS + 1] = ""
    Dataset.from_dict({"text": texts}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert len(r.lines) == n - 1
    assert r.ids[BATCH_ROWS] == f"sl:{BATCH_ROWS:08d}"
    assert r.ids[BATCH_ROWS + 1] == f"sl:{BATCH_ROWS + 2:08d}"
    assert r.ids[-1] == f"sl:{n - 1:08d}" and r.texts[-1] == f"t{n - 1}"


# ----------------------------------------------------------------------------- values (D1, D20, S10, S11)


def test_dates_and_times_become_iso_8601_at_any_depth(tmp_path):
    """D20/S11 (replaces 'top level only'): datetime, date and time values become ISO-8601 strings
    wherever they sit: top level, in structs, in lists, in lists of structs; tz-aware keeps its offset;
    times are HH:MM:SS[.ffffff]."""
    plus2 = dt.timezone(dt.timedelta(hours=2))
    Dataset.from_dict({
        "text": ["a"],
        "when": [dt.datetime(2019, 4, 25, 12, 34, 56)],
        "aware": [dt.datetime(2020, 1, 1, 5, 0, tzinfo=plus2)],
        "day": [dt.date(2020, 1, 2)],
        "at": [dt.time(1, 2, 3)],
        "at_us": [dt.time(1, 2, 3, 500)],
        "nested": [{"seen": [dt.datetime(2021, 3, 4, 5, 6, 7)], "meta": {"on": dt.date(1999, 12, 31)}, "n": 1}],
        "log": [[{"t": dt.time(23, 59, 59, 999999), "what": "x"}, {"t": None, "what": "y"}]],
        "days": [[dt.date(2000, 1, 1), None]],
    }).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert ordered(r.metas[0]) == ordered({
        "when": "2019-04-25T12:34:56",
        "aware": "2020-01-01T05:00:00+02:00",
        "day": "2020-01-02",
        "at": "01:02:03",
        "at_us": "01:02:03.000500",
        "nested": {"seen": ["2021-03-04T05:06:07"], "meta": {"on": "1999-12-31"}, "n": 1},
        "log": [{"t": "23:59:59.999999", "what": "x"}, {"t": None, "what": "y"}],
        "days": ["2000-01-01", None],
    })


@pytest.mark.parametrize("column, values, kind", [
    ("blob", [b"\x00\x01", None, b"x"], "bytes"),
    ("price", [Decimal("1.50"), None, Decimal("2")], "Decimal"),
    ("took", [dt.timedelta(seconds=3), None, dt.timedelta(0)], "timedelta"),
    ("deep", [{"raw": [b"x"]}, {"raw": []}, {"raw": [b"y"]}], "bytes"),
])
def test_values_json_cannot_hold_skip_the_row_with_a_warning(tmp_path, column, values, kind):
    """S11: bytes, Decimal and timedelta (at any depth) skip the row with a warning naming the row and
    column, counted; other rows are kept and their positional ids stay pinned."""
    Dataset.from_dict({"text": ["a", "b", "c"], column: values}).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert r.ids == ["sl:00000001"]
    assert r.drops == {"unsupported_value": 2}
    assert f"row 0: column '{column}' holds a {kind} value" in r.warnings[0]


def test_nan_becomes_null_and_nulls_drop_only_at_top_level(tmp_path):
    """D1/S10: NaN is written as null (the key stays); ADDENDUM 3.3: top-level nulls are dropped,
    nested ones kept; metadata keeps column order; only `text` is excluded."""
    Dataset.from_dict({
        "score": [float("nan")], "gone": [None], "tags": [["a", None]], "text": ["t"], "s": [{"x": None, "y": 1}],
        "flag": [False], "zero": [0], "empty": [""],
    }, features=Features({"score": Value("float64"), "gone": Value("string"), "tags": Sequence(Value("string")),
                          "text": Value("string"), "s": {"x": Value("string"), "y": Value("int64")},
                          "flag": Value("bool"), "zero": Value("int32"), "empty": Value("string")})
    ).save_to_disk(str(raw_dir(tmp_path) / "sl"))
    r = extract(tmp_path)
    assert ordered(r.metas[0]) == ordered({"score": None, "tags": ["a", None], "s": {"x": None, "y": 1},
                                          "flag": False, "zero": 0, "empty": ""})


# ----------------------------------------------------------------------------- config dirs


def test_broken_config_dir_is_skipped_with_a_warning_and_the_rest_extracted(tmp_path):
    """ADDENDUM 4.5 Loading + D6: a config dir that fails to load is skipped, counted, the warning
    names the dir and the error; hidden dirs are tried too (and fail); top-level files are ignored."""
    root = raw_dir(tmp_path)
    Dataset.from_dict({"text": ["good"]}).save_to_disk(str(root / "sl"))
    (root / "broken").mkdir()
    (root / "broken" / "state.json").write_text("{not json")
    (root / ".cache").mkdir()
    (root / "README.md").write_text("not a config")
    (root / "sl.tar.gz").write_bytes(b"")
    r = extract(tmp_path)
    assert r.ids == ["sl:00000000"]
    assert [s.key for s in r.plan.shards] == [".cache", "broken", "sl"]
    assert r.drops == {"load_failed": 2}
    assert r.warnings[0].startswith("c4/.cache: datasets.load_from_disk failed (")
    assert r.warnings[1].startswith("c4/broken: datasets.load_from_disk failed (")


def test_a_link_where_a_config_dir_should_be_that_leads_nowhere_is_reported_naming_it(tmp_path):
    """D6: a broken symbolic link or a link loop among the config directories (a config that went
    missing) is counted as `unreadable_path` with a warning naming it and its target, never silently
    ignored; a link to a plain file is ignored like the file; the other configs are extracted."""
    root = raw_dir(tmp_path)
    Dataset.from_dict({"text": ["good"]}).save_to_disk(str(root / "sl"))
    (root / "hr").symlink_to(tmp_path / "moved" / "hr", target_is_directory=True)
    (root / "loop").symlink_to("loop")
    (tmp_path / "notes.txt").write_text("x")
    (root / "notes").symlink_to(tmp_path / "notes.txt")
    r = extract(tmp_path)
    assert r.ids == ["sl:00000000"]
    assert r.drops == {"unreadable_path": 2}
    assert r.warnings == [
        f"c4/hr: a symbolic link whose target does not exist (it points to {str(tmp_path / 'moved' / 'hr')!r}); "
        "not read as a config directory [unreadable_path]",
        "c4/loop: a symbolic link loop (it points to 'loop'); not read as a config directory [unreadable_path]"]


def test_truncated_arrow_file_is_a_load_failure_not_a_crash(tmp_path):
    """D6: a damaged shard file fails its config dir only."""
    root = raw_dir(tmp_path)
    Dataset.from_dict({"text": ["x" * 1000] * 50}).save_to_disk(str(root / "bad"))
    Dataset.from_dict({"text": ["fine"]}).save_to_disk(str(root / "good"))
    arrow = next((root / "bad").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 3])
    r = extract(tmp_path)
    assert r.ids == ["good:00000000"]
    assert sum(r.drops.values()) == 1 and set(r.drops) <= {"load_failed", "read_failed"}
    assert r.warnings[0].startswith("c4/bad:")


def test_list_inputs_is_one_input_per_immediate_subdirectory_sorted(tmp_path):
    """ADDENDUM 3.1: immediate subdirectories only, sorted by code point (uppercase first), hidden
    included, files ignored, nothing deeper; a symlinked directory counts as a directory."""
    for name in ("sl", "Hr", ".hidden", "a b", "sl/train"):
        (tmp_path / name).mkdir()
    (tmp_path / "file.arrow").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "sl", target_is_directory=True)
    inputs = HuggingfaceExtractor().list_inputs(tmp_path).files
    assert [f.rel for f in inputs] == [".hidden", "Hr", "a b", "link", "sl"]
    assert inputs[-1].path == tmp_path / "sl"


def test_fingerprint_is_total_size_then_a_digest_of_names_sizes_and_mtimes(tmp_path):
    """D18 shards: a config dir's fingerprint leads with the total byte size (planning/shards.py reads it) and
    changes with any file's name, size or mtime, from stat alone (equal stats with other content give
    the same fingerprint, proving no content is read)."""
    cfg = tmp_path / "sl"
    Dataset.from_dict({"text": ["abc", "def"]}).save_to_disk(str(cfg))
    ex = HuggingfaceExtractor()
    f = InputFile(cfg, "sl")
    total = sum(p.stat().st_size for p in cfg.rglob("*") if p.is_file())
    first = ex.fingerprint_of(f)
    assert str(first).split(":", 1)[0] == str(total) and first.size == total
    assert ex.fingerprint_of(f) == first

    arrow = next(cfg.glob("*.arrow"))
    st = arrow.stat()
    data = arrow.read_bytes()
    arrow.write_bytes(data[::-1])  # same size, other content, then the old mtime back
    os.utime(arrow, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ex.fingerprint_of(f) == first
    os.utime(arrow, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert ex.fingerprint_of(f) != first
    (cfg / "extra.txt").write_text("x")
    assert str(ex.fingerprint_of(f)).split(":", 1)[0] == str(total + 1) and ex.fingerprint_of(f).size == total + 1


def test_each_config_dir_is_one_shard_and_two_workers_publish_the_same_bytes(tmp_path):
    """D18: the unit is one config directory; the published output does not depend on workers."""
    root = raw_dir(tmp_path / "one")
    Dataset.from_dict({"text": ["s0", "s1"]}).save_to_disk(str(root / "sl"))
    DatasetDict({"train": Dataset.from_dict({"text": ["h0"], "url": ["u"]})}).save_to_disk(str(root / "hr"))
    two_root = raw_dir(tmp_path / "two")
    for name in ("sl", "hr"):
        os.symlink(root / name, two_root / name)
    one = extract(tmp_path / "one")
    extract(tmp_path / "two", workers=2)
    assert [s.key for s in one.plan.shards] == ["hr", "sl"]
    assert one.ids == ["u", "sl:00000000", "sl:00000001"]
    assert (tmp_path / "one/out/c4.jsonl").read_bytes() == (tmp_path / "two/out/c4.jsonl").read_bytes()


def test_extract_reads_one_config_on_its_own(tmp_path):
    """D18: a config's documents do not depend on other configs or earlier calls."""
    Dataset.from_dict({"text": ["x"]}).save_to_disk(str(tmp_path / "sl"))
    f = InputFile(tmp_path / "sl", "sl")
    ctx = ExtractContext("c4", tmp_path)
    first = [(d.text, d.doc_id, d.metadata) for d in HuggingfaceExtractor().extract(f, ctx)]
    again = [(d.text, d.doc_id, d.metadata) for d in HuggingfaceExtractor().extract(f, ctx)]
    assert first == again == [("x", "sl:00000000", {})]


# ----------------------------------------------------------------------------- pyarrow-only reading


def _varied_configs(root: Path) -> None:
    """Configs covering what `save_to_disk` writes: several shards, a DatasetDict, nested and
    temporal features, ClassLabel, nulls, a shuffled (indices-flattened) selection, an empty split."""
    from datasets import ClassLabel

    Dataset.from_dict({"text": [f"besedilo {i}" for i in range(50)], "id": list(range(50))}
                      ).save_to_disk(str(root / "a_sharded"), num_shards=3)
    DatasetDict({
        "train": Dataset.from_dict({"text": ["učna", " ", None], "url": ["u1", "u2", None]}),
        "test": Dataset.from_dict({"text": ["preizkus"], "url": ["u3"]},
                                  features=Features({"text": Value("string"), "url": Value("string")})),
    }).save_to_disk(str(root / "b_dict"))
    Dataset.from_dict({
        "text": ["ena", "dva"],
        "when": [dt.datetime(2020, 1, 2, 3, 4, 5), None],
        "nested": [{"a": [dt.date(2020, 1, 1)], "b": 1.5}, {"a": [], "b": float("nan")}],
        "label": [0, 1],
    }, features=Features({"text": Value("string"), "when": Value("timestamp[us]"),
                          "nested": {"a": Sequence(Value("date32")), "b": Value("float64")},
                          "label": ClassLabel(names=["neg", "pos"])})).save_to_disk(str(root / "c_types"))
    Dataset.from_dict({"text": [f"t{i}" for i in range(20)], "doc_id": [f"d{i}" for i in range(20)]}
                      ).shuffle(seed=3).select(range(7)).save_to_disk(str(root / "d_shuffled"))


def _extract_without_fast_path(tmp_path, monkeypatch) -> Result:
    import slm4ie_assets.extractors.huggingface as hf

    with monkeypatch.context() as m:
        m.setattr(hf, "load_folder", lambda folder: None)
        return extract(tmp_path)


def test_pyarrow_only_reading_gives_exactly_what_datasets_gives(tmp_path, monkeypatch):
    """The fast path (no `datasets` import) is taken for every ordinary `save_to_disk` folder and
    yields the same lines, drops and warnings as `datasets.load_from_disk`."""
    from slm4ie_assets.extractors.arrow_dir import load_folder

    root = raw_dir(tmp_path)
    _varied_configs(root)
    assert all(load_folder(p) is not None for p in root.iterdir())
    fast = extract(tmp_path)
    slow = _extract_without_fast_path(tmp_path, monkeypatch)
    assert ordered(fast.lines) == ordered(slow.lines)
    assert fast.drops == slow.drops and fast.warnings == slow.warnings
    assert len(fast.lines) == 50 + 2 + 2 + 7


def test_features_that_disagree_with_the_arrow_schema_are_left_to_datasets(tmp_path, monkeypatch):
    """dataset_info.json declares float32 where the Arrow data holds float64: the fast path must not
    guess; `datasets` decides (it refuses the folder), and the result is exactly its own."""
    from slm4ie_assets.extractors.arrow_dir import load_folder

    folder = raw_dir(tmp_path) / "cast"
    Dataset.from_dict({"text": ["a"], "score": [0.1]}).save_to_disk(str(folder))
    info_path = folder / "dataset_info.json"
    info = json.loads(info_path.read_text())
    info["features"]["score"]["dtype"] = "float32"
    info_path.write_text(json.dumps(info))
    assert load_folder(folder) is None
    r = extract(tmp_path)
    slow = _extract_without_fast_path(tmp_path, monkeypatch)
    assert ordered(r.lines) == ordered(slow.lines) and r.drops == slow.drops
    assert r.drops == {"load_failed": 1} and "don't match" in r.warnings[0]


@pytest.mark.parametrize("damage", ["state_key", "data_file_path", "missing_arrow", "split_list", "empty"])
def test_unusual_folders_fall_back_to_datasets(tmp_path, damage):
    """Anything the fast path does not know exactly is left to `datasets` (same result or its error)."""
    from slm4ie_assets.extractors.arrow_dir import load_folder

    root = raw_dir(tmp_path)
    if damage == "split_list":
        DatasetDict({"train": Dataset.from_dict({"text": ["x"]})}).save_to_disk(str(root / "cfg"))
        (root / "cfg" / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "train"]}))
    elif damage == "empty":  # a split with no data files: `datasets` 5.2 cannot load it either
        DatasetDict({"train": Dataset.from_dict({"text": ["x"]}),
                     "test": Dataset.from_dict({"text": []}, features=Features({"text": Value("string")}))}
                    ).save_to_disk(str(root / "cfg"))
    else:
        Dataset.from_dict({"text": ["x"]}).save_to_disk(str(root / "cfg"))
        state_path = root / "cfg" / "state.json"
        state = json.loads(state_path.read_text())
        if damage == "state_key":
            state["_indices_data_files"] = []
        elif damage == "data_file_path":
            state["_data_files"][0]["filename"] = "../elsewhere.arrow"
        else:
            state["_data_files"].append({"filename": "data-missing.arrow"})
        state_path.write_text(json.dumps(state))
    assert load_folder(root / "cfg") is None
    r = extract(tmp_path)
    if damage in ("state_key", "split_list"):
        assert r.texts == ["x"]
    else:
        assert r.texts == [] and r.drops == {"load_failed": 1}
