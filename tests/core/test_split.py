"""Splitting big files (docs/splitting.md): the `split_bytes` setting, range planning from stat and a
few small reads near each cut, stable range keys, and the counts a range is extracted with when the
ranges before it are not extracted in the same run (count-only passes, serial and pooled)."""

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slm4ie_assets.extractors.text as text_module
from slm4ie_assets.catalog import DEFAULT_SPLIT_BYTES, CatalogError, load_catalog
from slm4ie_assets.engine.range_scheduler import chains_per_file, run_pooled
from slm4ie_assets.extractors.coleslaw import ShadowCarry
from slm4ie_assets.extractors.conllu import ConlluExtractor
from slm4ie_assets.extractors.discovery import discover
from slm4ie_assets.extractors.extract_context import ExtractContext, RangeCounts, RangeStart
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.jsonl import JsonlExtractor
from slm4ie_assets.extractors.registry import EXTRACTORS, get_extractor_class, make_extractor
from slm4ie_assets.extractors.splitting import Splitter, count_line_ends
from slm4ie_assets.extractors.text import SPACES, TextExtractor, count_blocks, count_documents
from slm4ie_assets.parts.writer import count_range, write_part_counted
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.planning.shards import (
    AUTO_RANGE,
    MAX_AUTO_RANGES,
    Shard,
    check_shard_key,
    plan_shards,
    range_bytes,
    range_files,
)
from slm4ie_assets.store.dataset_store import DatasetStore
from support.runners import ThreadRunner

REPO = Path(__file__).resolve().parents[2]


def write_config(root: Path, text: str) -> Path:
    path = root / "extract.yaml"
    path.write_text(text)
    return path


def published(root: Path, key: str = "d") -> tuple[bytes, bytes | None, dict]:
    out = root / "out"
    sidecar = out / f"{key}.annotations.jsonl.gz"
    manifest = json.loads((out / ".slm4ie" / key / "current" / "manifest.json").read_bytes())
    manifest.pop("published_at")
    manifest.pop("shards")
    return (out / f"{key}.jsonl").read_bytes(), sidecar.read_bytes() if sidecar.exists() else None, manifest


def dataset(root: Path, extractor: str, files: dict[str, bytes], split_bytes: int):
    shutil.rmtree(root, ignore_errors=True)
    for name, data in files.items():
        (root / "raw" / "d" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "raw" / "d" / name).write_bytes(data)
    catalog = load_catalog(write_config(root, f"input_dir: raw\noutput_dir: out\nsplit_bytes: {split_bytes}\n"
                                              f"datasets:\n  d:\n    extractor: {extractor}\n    domain: t\n"))
    return catalog.dataset("d"), catalog


# ----------------------------------------------------------------------------- the setting


def test_split_bytes_top_level_and_per_dataset_and_unset_means_the_automatic_size(tmp_path):
    catalog = load_catalog(write_config(tmp_path, "split_bytes: 1000\nmax_workers: 3\ndatasets:\n"
                                                  "  a: {extractor: text, domain: web}\n"
                                                  "  b: {extractor: text, domain: web, split_bytes: 0}\n"))
    assert catalog.split_bytes == 1000
    assert catalog.dataset("a").split_bytes == 1000 and catalog.dataset("b").split_bytes == 0
    plain = load_catalog(write_config(tmp_path, "datasets:\n  a: {extractor: text, domain: web}\n"))
    assert plain.dataset("a").split_bytes is DEFAULT_SPLIT_BYTES is None
    assert catalog.dataset("a").recipe == plain.dataset("a").recipe  # the same bytes: not in the recipe


@pytest.mark.parametrize("split_bytes,size,expected", [
    (None, 300_000_000, AUTO_RANGE),  # 8 MiB: 36 ranges, on any host
    (None, 8 * 10**6, AUTO_RANGE),  # a file up to 8 MiB stays whole
    (None, MAX_AUTO_RANGES * AUTO_RANGE, AUTO_RANGE),  # up to 2 GiB: 8 MiB ranges
    (None, 50 * 10**9, 195_312_500),  # beyond: MAX_AUTO_RANGES ranges, bigger ones
    (1000, 8 * 10**9, 1000),  # extract.yaml's value wins
    (0, 8 * 10**9, 0),
])
def test_the_automatic_range_size_follows_the_file_alone(split_bytes, size, expected):
    assert range_bytes(split_bytes, size) == expected


def test_automatic_ranges_cut_a_big_file_and_leave_a_small_one_whole(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    block = b"ena dva tri\n\n" * 1000
    with open(raw / "big.txt", "wb") as fh:
        for _ in range(9000):  # 117 MB
            fh.write(block)
    (raw / "small.txt").write_bytes(block)
    files = discover(raw, (".txt",))
    shards = plan_shards(TextExtractor(), files, split_bytes=None)
    assert [s.key for s in shards if "small" in s.key] == ["small.txt"]
    big = [s for s in shards if "big" in s.key]
    assert [round(s.size / AUTO_RANGE, 3) for s in big] == [1] * 13 + [0.947]  # 8 MiB each, the rest last
    assert len(plan_shards(TextExtractor(), files, split_bytes=0)) == 2


@pytest.mark.parametrize("value", ["-1", "1.5", "'big'", "true"])  # null: sized automatically
def test_a_bad_split_bytes_is_a_located_catalog_error(tmp_path, value):
    path = write_config(tmp_path, f"datasets:\n  a:\n    extractor: text\n    domain: web\n    split_bytes: {value}\n"
                                  f"split_bytes: {value}\n")
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    text = str(err.value)
    assert f"{path}:5: datasets.a.split_bytes: expected a whole number of bytes >= 0" in text
    assert f"{path}:6: split_bytes: expected a whole number of bytes >= 0" in text


def test_the_schema_accepts_split_bytes_and_refuses_a_negative_one():
    schema = json.loads((REPO / "schemas" / "extract.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    good = {"split_bytes": 0, "datasets": {"a": {"extractor": "text", "domain": "w", "split_bytes": 1 << 20}}}
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({"split_bytes": -1}))
    assert list(validator.iter_errors({"datasets": {"a": {"extractor": "text", "domain": "w", "split_bytes": "x"}}}))


# ----------------------------------------------------------------------------- planning


def test_a_format_splits_only_through_its_own_splitter_whose_carry_adds():
    """The one seam: no rule by name, no per-format override on the extractor; each carry is a
    dataclass whose zero is neutral."""
    splitting = {}
    for name in EXTRACTORS:
        cls = get_extractor_class(name)
        assert not {"split_at", "range_unit", "plan_ranges", "lines_in_range", "quick_count"} & set(dir(cls)), name
        if cls.splitter is not None:
            assert isinstance(cls.splitter, Splitter) and cls.splitter.unit in ("bytes", "rows"), name
            splitting[name] = cls.splitter.carry
            if cls.splitter.carry is not None:
                assert cls.splitter.carry() + cls.splitter.carry() == cls.splitter.carry(), name
    assert sorted(splitting) == ["coleslaw", "conllu", "huggingface", "jsonl", "macocu", "text"]
    assert {k for k, carry in splitting.items() if carry is not None} == {"coleslaw", "macocu"}


def _text_file(tmp_path: Path, blocks: int) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    path = raw / "sub dir" / "big,file.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"".join(b"blok %06d ima nekaj besed\nin drugo vrstico\n\n" % i for i in range(blocks)))
    return raw


def test_range_shards_have_stable_keys_and_cut_after_a_blank_line(tmp_path):
    raw = _text_file(tmp_path, 2000)
    data = (raw / "sub dir" / "big,file.txt").read_bytes()
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=10_000)
    again = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=10_000)
    ranges = -(-len(data) // 10_000)  # one per started 10_000 bytes: every nominal cut has a blank line nearby
    assert [s.key for s in shards] == [s.key for s in again] == [f"sub dir/big%2Cfile.txt%r{i}" for i in range(ranges)]
    assert [s.fingerprint for s in shards] == [s.fingerprint for s in again]
    for s in shards:
        check_shard_key(s.key)
        rng = s.files[0].range
        assert rng is not None and s.fingerprint.endswith(f"@{rng.cuts[rng.index]}-{rng.cuts[rng.index + 1]}")
        start = rng.cuts[rng.index]
        assert start == 0 or data[start - 2:start] == b"\n\n"  # a range starts after a blank line
    cuts = shards[0].files[0].range.cuts
    assert cuts[0] == 0 and cuts[-1] == len(data) and sum(s.size for s in shards) == len(data)
    assert all(10_000 * k <= cuts[k] < 10_000 * k + 100 for k in range(1, len(cuts) - 1))
    assert len(plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=0)) == 1
    assert len(plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=len(data))) == 1


def _bytes_read() -> int:
    return int(re.search(r"rchar: (\d+)", Path("/proc/self/io").read_text()).group(1))


def test_planning_reads_only_small_windows_near_each_cut(tmp_path):
    raw = _text_file(tmp_path, 400_000)  # ~17 MB
    size = (raw / "sub dir" / "big,file.txt").stat().st_size
    before = _bytes_read()
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=1 << 20)
    read = _bytes_read() - before
    assert len(shards) == size // (1 << 20) + 1
    assert read < 2 * len(shards) * (1 << 16) < size / 4


def test_a_file_just_over_split_bytes_and_lines_too_long_to_cut(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.jsonl").write_bytes(b'{"text": "a"}\n' * 10)  # 140 bytes, 14 per line
    assert [s.key for s in plan_shards(JsonlExtractor(), discover(raw, (".jsonl",)), split_bytes=126)] == \
        ["a.jsonl%r0", "a.jsonl%r1"]
    for split in (127, 139):  # the first line end after the nominal cut is the end of the file: one range
        assert [s.key for s in plan_shards(JsonlExtractor(), discover(raw, (".jsonl",)), split_bytes=split)] == \
            ["a.jsonl"]
    (raw / "a.jsonl").write_bytes(b'{"text": "' + b"x" * 500 + b'"}')  # no line end after the cut
    assert [s.key for s in plan_shards(JsonlExtractor(), discover(raw, (".jsonl",)), split_bytes=100)] == ["a.jsonl"]


def test_conllu_cuts_only_before_a_newdoc_block_and_merges_the_tail(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    row = "1\tw\tw\tX\t_\t_\t0\troot\t_\t_"
    blocks = [f"# newdoc id = a\n{row}"] + [row] * 300 + [f"# newdoc id = b\n{row}"] + [row] * 300
    data = "\n\n".join(blocks).encode()
    (raw / "x.conllu").write_bytes(data)
    shards = plan_shards(ConlluExtractor(), discover(raw, (".conllu", ".conll")), split_bytes=1000)
    cuts = shards[0].files[0].range.cuts
    assert len(shards) == 2 and data[cuts[1]:].startswith(b"# newdoc id = b")  # the search went far forward


# ----------------------------------------------------------------------------- count-only passes


def _jsonl(n: int) -> bytes:
    rows = [b'{"text": "t%d"}' % i if i % 3 else b'{"doc_id": "i%d", "text": "t%d"}' % (i, i) for i in range(n)]
    rows[5] = b"{broken"
    return b"\n".join(rows) + b"\n"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_stale_later_range_is_extracted_with_counts_of_the_ranges_before_it(tmp_path, workers):
    files = {"a.jsonl": _jsonl(300)}
    spec, catalog = dataset(tmp_path / "whole", "jsonl", files, 0)
    whole_warnings = extract_dataset(spec, catalog, force=True, workers=1).warnings
    whole = published(tmp_path / "whole")
    assert whole_warnings == ["d/a.jsonl:6: malformed JSON (Expecting property name enclosed in double quotes: "
                              "line 1 column 2 (char 1)); "
                              "line skipped [malformed_json]"]
    spec, catalog = dataset(tmp_path / "split", "jsonl", files, 700)
    report = extract_dataset(spec, catalog, force=True, workers=workers)
    assert len(report.extracted) > 4 and published(tmp_path / "split") == whole
    store = DatasetStore(spec)
    later = report.extracted[-3:]  # only these become stale: the ranges before them are counted, not written
    for key in later:
        store.part_paths(key).meta.unlink()
    shutil.rmtree(tmp_path / "whole")
    report = extract_dataset(spec, catalog, force=False, workers=workers)
    assert report.extracted == later
    assert published(tmp_path / "split") == whole
    metas = [store.read_part_meta(key) for key in [s[0] for s in json.loads(
        (tmp_path / "split" / "out" / ".slm4ie" / "d" / "current" / "manifest.json").read_bytes())["shards"]]]
    assert [w for m in metas for w in m.warnings] == whole_warnings


@pytest.mark.parametrize("name", ["jsonl", "coleslaw"])
def test_a_count_only_pass_counts_exactly_what_writing_the_range_records(tmp_path, name):
    """`count_range` runs the part writer's own accounting with no output: its documents, drops,
    repairs, lines and the format's carry equal what writing each range returns."""
    rows = [b"{broken" if i % 7 == 3 else b'{"text": "t\\ud800%d", "fullText": "f"}' % i if i % 5 == 1
            else b'{"text": "t%d"}' % i for i in range(80)]
    data = b"\n".join(rows) + b"\n"
    spec, _ = dataset(tmp_path, name, {"sub/a.jsonl": data}, 0)
    extractor, whole = make_extractor(name, None), InputFile(spec.raw_dir / "sub" / "a.jsonl", "sub/a.jsonl")
    files = range_files(whole, extractor.splitter.plan(whole, len(data), 300))
    assert len(files) > 4
    total = RangeCounts()
    for file in files[:-1]:
        shard = Shard(f"a%r{file.range.index}", (file,), "fp", 0)
        written = write_part_counted(spec, extractor, shard, DatasetStore(spec))[1]
        assert count_range(spec, extractor, file) == written, file.range.index
        total = total + written
    assert total.drops and total.repaired_docs and total.lines == data[:files[-1].range.start].count(b"\n")
    assert (total.carry_of(ShadowCarry).shadowed > 0) == (name == "coleslaw")


def test_the_text_cut_knows_every_whitespace_character_python_knows():
    assert set(SPACES) == {chr(c) for c in range(0x110000) if chr(c).isspace()} - {"\n", "\r"}


def test_the_byte_class_of_spaces_matches_exactly_their_utf8_forms():
    """text._SPACE (written by lead bytes, for speed) matches a character's UTF-8 bytes exactly when
    the character is in SPACES, for every code point."""
    one = re.compile(text_module._SPACE)
    wrong = [hex(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000
             and bool(one.fullmatch(chr(c).encode())) != (chr(c) in SPACES)]
    assert not wrong


_LINE = st.one_of(st.sampled_from(["", " ", "\u00a0", "\x0c", "\u2028", "b\xffd", "x"]),
                  st.text(alphabet="ab \u00a0\u2003", max_size=6))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\r\n", "\r", ""])), max_size=30),
       bom=st.booleans(), cut=st.integers(0, 400), chunk=st.sampled_from([3, 5, 64, 1 << 22]),
       only_lf=st.booleans())
def test_the_quick_text_count_equals_what_the_extraction_yields(tmp_path, lines, bom, cut, chunk, only_lf):
    """Both quick counts: on decoded text (`count_documents`) and on the raw bytes read in chunks of
    every size (`count_blocks`, what the splitter uses); and the line ends the extraction counts as
    it reads (`ExtractContext.lines_read`, what a written range hands on) equal `Splitter.lines`."""
    data = ("\ufeff" if bom else "").encode() + "".join(a + b for a, b in lines).encode("utf-8", "surrogateescape")
    data = data.replace("\xff".encode(), b"\xff")
    if only_lf:  # the bytes path of count_blocks (a `\r` sends it to count_documents)
        data = data.replace(b"\r", b"")
    path = tmp_path / "x.txt"
    path.write_bytes(data)
    cuts = TextExtractor.splitter.plan(InputFile(path, "x.txt"), len(data), max(1, cut))
    for file in range_files(InputFile(path, "x.txt"), cuts):
        ctx = ExtractContext("d", tmp_path)
        docs = sum(1 for _ in TextExtractor().extract(file, ctx))
        assert ctx.lines_read == count_line_ends(file)
        quick = count_documents(file)
        assert count_blocks(file, chunk) == quick
        if ctx.ledger.total:
            assert quick is None  # a dropped block needs the full pass
        else:
            assert quick == (docs, count_line_ends(file))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b" ", b"\xc2\xa0", b"\xff", b"\xef\xbb\xbf",
                                        b"\xe2\x80\xa8", b"\x0c"]), max_size=40),
       chunk=st.sampled_from([1, 2, 3, 7, 64]))
def test_the_line_ends_text_counts_while_reading_equal_a_separate_count(tmp_path, pieces, chunk):
    """`_blocks` counts the line ends it read in decoded chunks of any size, `\r\n` split between
    two of them included: exactly `count_line_ends` on the bytes (ADDENDUM 3.2)."""
    path = tmp_path / "x.txt"
    path.write_bytes(b"".join(pieces))
    file, ends = InputFile(path, "x.txt"), text_module.LineEnds()
    for _ in text_module._blocks(text_module.read_text_chunks(file, chunk), ends):
        pass
    assert ends.count == count_line_ends(file)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_pool_schedule_hands_every_range_the_sum_of_the_ranges_before_it(tmp_path, workers):
    """Through a real executor: ranges continue from counts or from their predecessors' extraction;
    the third range from the end reports no counts (another run made its part current), so it is
    counted when the range after it would wait for it."""
    raw = _text_file(tmp_path, 3000)
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=10_000)
    truth = [RangeCounts(docs=i + 1, lines=7 * i, drops=i % 2) for i in range(len(shards))]
    seen: dict[int, RangeCounts] = {}
    counted: list[int] = []

    def extract(task: int, shard: Shard, start: RangeStart) -> SimpleNamespace:
        assert shard is shards[task] and not start.speculative
        seen[task] = start.counts
        counts = None if task == len(shards) - 3 else truth[task]
        return SimpleNamespace(counts=counts, needs_before=False)

    def count(file: InputFile) -> RangeCounts:
        counted.append(file.range.index)
        return truth[file.range.index]

    with ThreadPoolExecutor(workers) as pool:
        runner = ThreadRunner(pool, SimpleNamespace(extract=extract, count=count))
        run_pooled(shards, runner, lambda t, r: None, workers)
    expected = RangeCounts()
    for task in range(len(shards)):
        assert seen[task] == expected, task
        expected = expected + truth[task]
    assert len(counted) == len(set(counted)) and len(shards) - 3 in counted
    assert workers == 1 or len(counted) < len(shards) - 1  # chains: not every range is counted


def test_split_files_that_keep_the_workers_busy_run_one_chain_each_without_count_passes(tmp_path):
    """Four equal split files, two workers: each file is one chain, so no range is counted (a
    count-only pass would only add work); one big file among small ones still gets two chains."""
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("a", "b", "c", "d"):
        (raw / f"{name}.txt").write_bytes(b"".join(b"blok %05d z besedami\n\n" % i for i in range(1500)))
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=10_000)
    assert len({s.files[0].rel for s in shards}) == 4 and len(shards) > 8
    assert chains_per_file(shards, 2) == 1 and chains_per_file(shards, 1) == 1
    assert chains_per_file(shards, 5) == 5  # a quarter of the bytes each: five workers would idle
    big = [s for s in shards if s.files[0].rel in ("a.txt", "b.txt")]
    assert chains_per_file(big, 2) == 1 and chains_per_file([s for s in shards if s.files[0].rel == "a.txt"], 2) == 2
    counted: list[InputFile] = []
    seen: dict[int, RangeCounts] = {}
    truth = {t: RangeCounts(docs=t + 1, lines=3 * t) for t in range(len(shards))}

    def extract(task: int, shard: Shard, start: RangeStart) -> SimpleNamespace:
        seen[task] = start.counts
        return SimpleNamespace(counts=truth[task], needs_before=False)

    with ThreadPoolExecutor(2) as pool:
        run_pooled(shards, ThreadRunner(pool, SimpleNamespace(extract=extract, count=counted.append)),
                   lambda t, r: None, 2)
    assert counted == []
    for task, shard in enumerate(shards):
        earlier = [t for t, s in enumerate(shards) if s.files[0].rel == shard.files[0].rel
                   and s.files[0].range.index < shard.files[0].range.index]
        want = RangeCounts()
        for t in earlier:
            want = want + truth[t]
        assert seen[task] == want


def test_two_chains_extract_the_counted_ranges_in_file_order_and_the_last_chain_runs_longer(tmp_path):
    """Issue 41: the ranges before the last chain were extracted backwards (the ready range furthest
    into the file went first), so the first range came last and the version stager could copy no
    part before the end: the whole output was copied after the last part. Now the counted ranges go
    in file order and the last chain holds a tenth more than half, so they are done (and staged)
    first, and fewer ranges are counted."""
    raw = _text_file(tmp_path, 3000)
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=10_000)
    n = len(shards)
    order: list[int] = []
    counted: list[int] = []

    def extract(task: int, shard: Shard, start: RangeStart) -> SimpleNamespace:
        order.append(task)
        return SimpleNamespace(counts=RangeCounts(docs=1, lines=2), needs_before=False)

    def count(file: InputFile) -> RangeCounts:
        counted.append(file.range.index)
        return RangeCounts(docs=1, lines=2)

    with ThreadPoolExecutor(1) as pool:  # one thread: the picks in order, two slots as two workers keep
        run_pooled(shards, ThreadRunner(pool, SimpleNamespace(extract=extract, count=count)),
                   lambda t, r: None, 2)
    first_chain = [t for t in order if t < len(counted)]
    assert n > 10 and sorted(counted) == list(range(len(counted))) and len(counted) < n / 2
    assert first_chain == sorted(first_chain) == list(range(len(counted)))
    assert [t for t in order if t >= len(counted)] == list(range(len(counted), n))  # the last chain, in order


@pytest.mark.parametrize("bad_at", [None, 10, 300_000, 700_000, -5])
def test_the_quick_text_count_checks_utf8_a_slice_at_a_time_with_lines_longer_than_a_slice(tmp_path, bad_at):
    """text._check_utf8 checks a quarter MiB at a time, cut after a line end: an invalid byte in any
    slice, or inside a line longer than a slice, still makes the count give way to the full pass."""
    blocks = [("vrstica z besedami čšž " * 20 + "\n") * 3 for _ in range(400)]
    long_line = ("dolga vrstica " * 30_000).encode()  # 420 KB without a line end
    data = bytearray(b"\n".join(b.encode() for b in blocks[:200]) + b"\n" + long_line + b"\n\n"
                     + b"\n".join(b.encode() for b in blocks[200:]))
    if bad_at is not None:
        data[bad_at] = 0xFF
    path = tmp_path / "x.txt"
    path.write_bytes(bytes(data))
    file = InputFile(path, "x.txt")
    assert len(data) > 3 * text_module._CHECK
    assert count_blocks(file) == count_documents(file)
    assert (count_blocks(file) is None) == (bad_at is not None)
