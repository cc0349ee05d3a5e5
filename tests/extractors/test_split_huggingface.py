"""huggingface configs split into ranges of rows give the bytes of one unsplit pass (docs/splitting.md,
ADDENDUM 4.5, D3, D4, D6, D7, D18, D20, S11).

Every config here is a real `save_to_disk` folder written by `datasets`, in small record batches
and several Arrow files, with natural ids, blank ids that fall through (D4), keyless rows (the
`<config>[:<split>]:<row>` ids), rows skipped for their text (D7) or for a value JSON cannot hold
(D20/S11), a DatasetDict whose middle split has no `text` column, and more than 100 warnings. Each
row boundary is put at a range edge (extractor level, every cut), then the whole pipeline runs
unsplit with one worker, split with one and with two workers: published text, manifest (but
`published_at` and the shard list) and every warning must be equal.
"""

import datetime as dt
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

datasets = pytest.importorskip("datasets")
from datasets import Dataset, DatasetDict, Features, Sequence, Value  # noqa: E402

from slm4ie_assets.catalog import load_catalog  # noqa: E402
from slm4ie_assets.extractors.arrow_dir import load_folder, plan_row_cuts  # noqa: E402
from slm4ie_assets.extractors.drop_ledger import DropLedger  # noqa: E402
from slm4ie_assets.extractors.extract_context import ExtractContext, RangeCounts  # noqa: E402
from slm4ie_assets.extractors.huggingface import HuggingfaceExtractor, RowSplitter  # noqa: E402
from slm4ie_assets.extractors.input_file import FileRange, InputFile  # noqa: E402
from slm4ie_assets.parts.writer import count_range  # noqa: E402
from slm4ie_assets.pipeline import extract_dataset  # noqa: E402

KEY = "d"
HF = HuggingfaceExtractor()


@pytest.fixture(autouse=True)
def _quiet_progress_bars():
    datasets.disable_progress_bars()
    yield
    datasets.enable_progress_bars()


def save(data, path: Path, batch_rows: int = 4, num_shards: int = 1) -> None:
    """`save_to_disk` in record batches of `batch_rows` rows (its writer batch size) and `num_shards`
    Arrow files."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(datasets.config, "DEFAULT_MAX_BATCH_SIZE", batch_rows)
        datasets.disable_progress_bars()
        data.save_to_disk(str(path), **({"num_shards": num_shards} if num_shards > 1 else {}))


def keyed_config(n: int = 37) -> Dataset:
    """Natural ids (`id`, blank ones falling through to `url`, then to `<config>:<row>`), blank,
    null and whitespace-only texts (D7), bytes in some rows (D20/S11), a timestamp (S11)."""
    texts, ids, urls, blobs = [], [], [], []
    for i in range(n):
        texts.append([f"besedilo {i}", "", None, " \u00a0\n", f"\u2003z {i}"][i % 5] if i % 3 else f"vrstica {i}")
        ids.append(None if i % 4 == 1 else ("  " if i % 4 == 2 else f"id{i}"))
        urls.append(None if i % 8 == 2 else f"https://x.si/{i}")
        blobs.append(b"\x00" if i % 7 == 6 else None)
    when = [dt.datetime(2020, 1, 1 + i % 28, i % 24) for i in range(n)]
    return Dataset.from_dict({"id": ids, "text": texts, "url": urls, "blob": blobs, "when": when},
                             features=Features({"id": Value("string"), "text": Value("string"),
                                                "url": Value("string"), "blob": Value("binary"),
                                                "when": Value("timestamp[s]")}))


def dict_config() -> DatasetDict:
    """Three splits, stored in the order train, nota, test: keyless rows get `<config>:<split>:<row>`;
    `nota` has no `text` column (counted once for the config); nested dates (D20) never skip a row."""
    train = Dataset.from_dict({
        "text": [f"učna {i}" if i % 6 else "   " for i in range(23)],
        "days": [[dt.date(2021, 1, 1 + i % 9)] * (i % 3) for i in range(23)],
        "score": [i / 3 for i in range(23)],
    }, features=Features({"text": Value("string"), "days": Sequence(Value("date32")), "score": Value("float64")}))
    nota = Dataset.from_dict({"body": [f"brez {i}" for i in range(9)]})
    test = Dataset.from_dict({"text": [f"preizkus {i}" for i in range(11)], "doc_id": [f"t{i}" if i % 2 else ""
                                                                                      for i in range(11)]})
    return DatasetDict({"train": train, "nota": nota, "test": test})


def clean_config(n: int = 30) -> Dataset:
    """No row is skipped: the ranges are counted from Arrow buffers (`quick_count`)."""
    return Dataset.from_dict({"text": [f"\u00a0čisto {i}" if i % 4 == 0 else f"čisto {i}" for i in range(n)],
                              "tags": [["a", str(i)] for i in range(n)]})


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    """raw/d/ with the three configs, several batches, several Arrow files."""
    root = tmp_path_factory.mktemp("hf_raw") / KEY
    save(keyed_config(), root / "a_keyed", batch_rows=4, num_shards=3)
    save(dict_config(), root / "b_dict", batch_rows=5)
    save(clean_config(), root / "c_clean", batch_rows=7, num_shards=2)
    return root


# ----------------------------------------------------------------------------- pipeline runs


@dataclass
class Output:
    text: bytes
    manifest: dict
    shards: list
    warnings: list


def run(raw: Path, root: Path, split_bytes: int, workers: int = 1) -> Output:
    """Extract raw/d/ through `extract_dataset` (forced) into a fresh output folder under `root`."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "extract.yaml").write_text(
        f"input_dir: {raw.parent}\noutput_dir: out\nsplit_bytes: {split_bytes}\ndatasets:\n"
        f"  {KEY}:\n    extractor: huggingface\n    domain: test\n")
    catalog = load_catalog(root / "extract.yaml")
    report = extract_dataset(catalog.dataset(KEY), catalog, force=True, workers=workers)
    out = root / "out"
    manifest = json.loads((out / ".slm4ie" / KEY / "current" / "manifest.json").read_bytes())
    manifest.pop("published_at")
    shards = manifest.pop("shards")
    return Output((out / f"{KEY}.jsonl").read_bytes(), manifest, shards, report.warnings)


def assert_same(got: Output, whole: Output, why: str) -> None:
    assert got.text == whole.text, why
    assert got.manifest == whole.manifest, why
    assert got.warnings == whole.warnings, why


def ranges_of(out: Output) -> dict[str, list[tuple[int, int]]]:
    """config -> its ranges [(start row, end row)] from the shard fingerprints `<fp>@<start>-<end>`."""
    found: dict[str, list[tuple[int, int]]] = {}
    for key, fingerprint in out.shards:
        m = re.search(r"@(\d+)-(\d+)$", fingerprint)
        if m:
            found.setdefault(key.split("%r")[0], []).append((int(m[1]), int(m[2])))
    return found


def test_unsplit_output_is_what_addendum_4_5_says(raw, tmp_path):
    """The reference run the split runs are held to: ids, drops and warnings naming rows."""
    [(_, keyed)] = load_folder(raw / "a_keyed")
    assert len(keyed.files) == 3 and len(keyed.batch_sizes()) == 10  # three Arrow files, batches of 4 rows
    whole = run(raw, tmp_path / "whole", 0)
    assert len(whole.shards) == 3 and not ranges_of(whole)
    ids = [json.loads(line)["doc_id"] for line in whole.text.splitlines()]
    assert ids[:5] == ["id0", "id3", "id4", "https://x.si/5", "https://x.si/9"]
    assert "a_keyed:00000010" in ids  # `id` blank (D4), `url` null: the row's own index
    assert "b_dict:train:00000001" in ids and "b_dict:test:00000000" in ids and "t1" in ids
    assert whole.manifest["drops"] == {"empty_text": 13, "missing_text": 6, "unsupported_value": 4}
    assert "d/b_dict: split 'nota' has no 'text' column; its 9 row(s) skipped [missing_text]" in whole.warnings
    assert "d/a_keyed: row 6: column 'blob' holds a bytes value, which JSON cannot hold; row skipped " \
           "[unsupported_value]" in whole.warnings


@pytest.mark.parametrize("workers", [1, 2])
def test_split_configs_publish_the_unsplit_bytes(raw, tmp_path, workers):
    """Every config over split_bytes becomes ranges of rows (a DatasetDict's across its splits); the
    published bytes equal the unsplit one-worker run, for few and for many ranges."""
    whole = run(raw, tmp_path / "whole", 0)
    size = min(HF.fingerprint_of(InputFile(p, p.name)).size for p in raw.iterdir())
    for split_bytes in (size // 2, size // 5, 1):
        got = run(raw, tmp_path / "split", split_bytes, workers)
        assert_same(got, whole, f"split_bytes={split_bytes}, workers={workers}")
        assert set(ranges_of(got)) == {"a_keyed", "b_dict", "c_clean"}
    assert len(ranges_of(got)["b_dict"]) > 30, "split_bytes=1: about one range per row (at most one)"


def test_more_than_100_warnings_keep_the_configs_first_100(tmp_path):
    raw = tmp_path / "raw" / KEY
    save(Dataset.from_dict({"text": ["" if i % 3 else f"t{i}" for i in range(330)]}), raw / "blank", batch_rows=16)
    whole = run(raw, tmp_path / "whole", 0)
    assert len(whole.warnings) == 100 and whole.manifest["drops"] == {"empty_text": 220}
    assert whole.warnings[-1] == "d/blank: row 149: text is blank; row skipped [empty_text]"
    size = HF.fingerprint_of(InputFile(raw / "blank", "blank")).size
    for split_bytes, workers in ((size // 7, 1), (size // 3, 2), (size // 40, 2)):
        assert_same(run(raw, tmp_path / "s", split_bytes, workers), whole, f"{split_bytes}, {workers}")


def test_the_output_does_not_depend_on_record_batches_or_arrow_files(tmp_path):
    """The same rows saved in batches of 3 and of 1000 rows, in one and in four Arrow files: other
    cuts, the same published bytes, split or not."""
    outputs = []
    for batch_rows, shards in ((3, 4), (1000, 1)):
        raw = tmp_path / f"raw{batch_rows}" / KEY
        save(keyed_config(61), raw / "a_keyed", batch_rows=batch_rows, num_shards=shards)
        size = HF.fingerprint_of(InputFile(raw / "a_keyed", "a_keyed")).size
        outputs.append(run(raw, tmp_path / "whole", 0).text)
        outputs.append(run(raw, tmp_path / "split", size // 6, 2).text)
    assert len(set(outputs)) == 1


# ----------------------------------------------------------------------------- every cut, extractor level


def documents(file: InputFile) -> tuple[list, list, dict]:
    """(text, id, metadata) of each document, the warnings and the drop counts of one input."""
    ledger = DropLedger()
    ctx = ExtractContext(KEY, Path("."), ledger)
    docs = [(d.text, d.doc_id, d.metadata) for d in HF.extract(file, ctx)]
    return docs, ledger.warnings, dict(ledger.counts)


def ranges(config: Path, cuts: tuple[int, ...]) -> list[InputFile]:
    return [InputFile(config, config.name, FileRange(i, cuts)) for i in range(len(cuts) - 1)]


@pytest.mark.parametrize("name", ["a_keyed", "b_dict", "c_clean"])
def test_every_row_boundary_at_a_range_edge(raw, name):
    """Cut at each row (and at a split's first row, where the DatasetDict changes split): the
    ranges' documents, warnings and drops, in order, are the unsplit pass's."""
    config = raw / name
    whole = documents(InputFile(config, name))
    total = sum(part.num_rows for _, part in load_folder(config))
    for cut in range(1, total):
        docs, warnings, drops = [], [], {}
        for part in ranges(config, (0, cut, total)):
            d, w, c = documents(part)
            docs += d
            warnings += w
            for reason, n in c.items():
                drops[reason] = drops.get(reason, 0) + n
        assert (docs, warnings, drops) == whole, f"cut at row {cut}"


def test_quick_count_equals_the_count_only_pass_and_is_used_where_no_row_is_skipped(raw, tmp_path):
    """`quick_count` (Arrow buffers) and the full count-only pass agree on every range they both
    count; ranges with a skipped row leave it to the full pass."""
    catalog_root = tmp_path / "c"
    catalog_root.mkdir()
    (catalog_root / "extract.yaml").write_text(f"input_dir: {raw.parent}\noutput_dir: out\ndatasets:\n"
                                               f"  {KEY}:\n    extractor: huggingface\n    domain: test\n")
    spec = load_catalog(catalog_root / "extract.yaml").dataset(KEY)
    used = {}
    for name in ("a_keyed", "b_dict", "c_clean"):
        config = raw / name
        total = sum(part.num_rows for _, part in load_folder(config))
        for wanted in ((5, 11), (1, 6, 24, 32, 40), (1,), (total - 1,)):
            cuts = (0, *(c for c in wanted if c < total), total)
            for part in ranges(config, cuts)[:-1]:
                quick = HF.splitter.quick_count(part)
                full = count_range(spec, _NoQuick(), part)
                assert full.lines == HF.splitter.lines(part) == part.range.end - part.range.start
                if quick is not None:
                    assert full == RangeCounts(docs=quick[0], lines=quick[1]), (name, cuts, part.range.index)
                used[name] = used.get(name, 0) + (quick is not None)
    assert used["c_clean"] == 7 and used["a_keyed"] == 0, used  # a_keyed: a bytes column, rows may be skipped
    # b_dict: train rows 1-5, nota rows after its first (its warning is elsewhere), test rows 0-7
    assert used["b_dict"] == 3, used


class _NoQuickRows(RowSplitter):
    def quick_count(self, file):
        return None


class _NoQuick(HuggingfaceExtractor):
    splitter = _NoQuickRows()


# ----------------------------------------------------------------------------- planning


def test_plan_cuts_rows_by_bytes_inside_batches_and_every_range_has_a_row():
    assert plan_row_cuts([(10, 100)], 100, 50) == (0, 5, 10)
    assert plan_row_cuts([(10, 100), (10, 300)], 400, 100) == (0, 10, 13, 16, 20)
    assert plan_row_cuts([(3, 30)], 10_000, 1) == (0, 1, 2, 3)  # at most one range per row
    assert plan_row_cuts([(1, 10)], 100, 1) == (0, 1)
    assert plan_row_cuts([(4, 0), (4, 0)], 100, 50) == (0, 4, 8)  # no bytes: rows weigh
    assert plan_row_cuts([(10, 100)], 100, 0) == (0, 10)


def test_plan_ranges_never_decodes_a_row(tmp_path):
    """The text bytes of every batch overwritten with invalid UTF-8 (headers intact): the rows no
    longer decode, the cuts are the same."""
    import pyarrow as pa

    config = tmp_path / "cfg"
    save(Dataset.from_dict({"text": [f"vrstica {i} " * (1 + i % 5) for i in range(60)]}), config, batch_rows=8)
    file = InputFile(config, "cfg")
    size = HF.fingerprint_of(file).size
    before = HF.splitter.plan(file, size, size // 5)
    arrow = next(config.glob("*.arrow"))
    with pa.memory_map(str(arrow)) as mapped:  # where the text bytes lie: their buffers' addresses in the map
        whole = mapped.read_buffer()  # zero-copy: the table's buffers point into it
        table = pa.ipc.open_stream(whole).read_all()
        spans = [(b.address - whole.address, b.size) for chunk in table.column("text").chunks
                 for b in chunk.buffers()[2:]]
        del table, whole
    with open(arrow, "r+b") as fh:
        for offset, length in spans:
            fh.seek(offset)
            fh.write(b"\xff" * length)
    [(_, damaged)] = load_folder(config)
    with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises for invalid UTF-8
        next(damaged.batches(1000)).column("text").to_pylist()
    assert HF.splitter.plan(file, size, size // 5) == before and len(before) == 6


def test_plan_ranges_reads_batch_headers_and_leaves_odd_configs_whole(raw, tmp_path):
    """Cuts come from the streams' batch headers; a config only `datasets` can load (features that
    disagree with the Arrow schema) or one that cannot be read stays one shard, and its extraction
    reports it (D6)."""
    config = raw / "a_keyed"
    size = HF.fingerprint_of(InputFile(config, "a_keyed")).size
    cuts = HF.splitter.plan(InputFile(config, "a_keyed"), size, -(-size // 4))
    assert len(cuts) == 5 and cuts[0] == 0 and cuts[-1] == 37 and list(cuts) == sorted(set(cuts))

    odd = tmp_path / "raw" / KEY / "cast"
    save(Dataset.from_dict({"text": ["a", "b", "c"], "score": [0.1, 0.2, 0.3]}), odd)
    info = json.loads((odd / "dataset_info.json").read_text())
    info["features"]["score"]["dtype"] = "float32"
    (odd / "dataset_info.json").write_text(json.dumps(info))
    broken = tmp_path / "raw" / KEY / "broken"
    save(Dataset.from_dict({"text": ["x"] * 50}), broken)
    arrow = next(broken.glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[:100])
    for folder in (odd, broken):
        assert len(HF.splitter.plan(InputFile(folder, folder.name), 10_000, 1)) == 2
    out = run(tmp_path / "raw" / KEY, tmp_path / "run", 1)
    assert not ranges_of(out) and out.manifest["drops"] == {"load_failed": 2}


# ----------------------------------------------------------------------------- memory


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    pytest.skip("no VmRSS in /proc/self/status")


def test_a_config_is_held_a_batch_at_a_time(tmp_path):
    """A 30 MB config read to its end holds about a batch of rows at a time (a range reads the same
    way): its files are read at offsets, a stored batch and the window of rows over it."""
    config = tmp_path / "cfg"
    save(Dataset.from_dict({"text": [f"{i} " + "besedilo " * 330 for i in range(10_000)]}), config, batch_rows=500)
    assert HF.fingerprint_of(InputFile(config, "cfg")).size > 29_000_000
    before = peak = _rss_kb()
    for i, _ in enumerate(HF.extract(InputFile(config, "cfg"), ExtractContext(KEY, tmp_path))):
        if i % 500 == 0:
            peak = max(peak, _rss_kb())
    assert peak - before < 12_000, f"{peak - before} kB held"


# ----------------------------------------------------------------------------- property

_ROW = st.tuples(st.sampled_from(["t", "", " ", None, "\u2028", "\u00a0x"]),  # text
                 st.sampled_from(["i", "", None]),  # id
                 st.booleans())  # a bytes value (D20)


@st.composite
def configs(draw) -> tuple[dict, int, int]:
    rows = draw(st.lists(_ROW, min_size=1, max_size=30))
    data = {"text": [None if t is None else f"{t}{n}" if t in ("t", "\u00a0x") else t for n, (t, _, _) in
                     enumerate(rows)],
            "id": [None if i is None else f"{i}{n}" if i else i for n, (_, i, _) in enumerate(rows)],
            "raw": [b"b" if b else None for _, _, b in rows]}
    return data, draw(st.integers(1, 9)), draw(st.integers(1, 3))


def test_property_two_workers_split_equal_one_worker_unsplit(tmp_path_factory):
    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(config=configs(), parts=st.integers(2, 12), dict_config=st.booleans())
    def check(config, parts, dict_config):
        data, batch_rows, num_shards = config
        root = tmp_path_factory.mktemp("p")
        raw = root / "raw" / KEY
        table = Dataset.from_dict(data, features=Features({"text": Value("string"), "id": Value("string"),
                                                           "raw": Value("binary")}))
        num_shards = min(num_shards, len(data["text"]))
        save(DatasetDict({"x": table, "y": table}) if dict_config else table, raw / "cfg", batch_rows,
             1 if dict_config else num_shards)
        size = HF.fingerprint_of(InputFile(raw / "cfg", "cfg")).size
        whole = run(raw, root / "whole", 0)
        assert_same(run(raw, root / "split", -(-size // parts), 2), whole, f"{parts} ranges")

    check()
