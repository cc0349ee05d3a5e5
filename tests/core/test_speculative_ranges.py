"""Speculative ranges (docs/splitting.md, "Speculative ranges"): a range of a format whose records
carry their own ids is extracted before the counts of the ranges before it are known, and kept only
when nothing in it depended on them (no fallback id, drop or repair); else it is extracted again
with them. Either way the published bytes, warnings and ledger are those of one unsplit pass."""

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.range_scheduler import run_pooled
from slm4ie_assets.extractors.coleslaw import ColeslawExtractor
from slm4ie_assets.extractors.conllu import ConlluExtractor
from slm4ie_assets.extractors.discovery import discover
from slm4ie_assets.extractors.extract_context import SPECULATIVE, NeedsBefore, RangeCounts, RangeStart
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.jsonl import JsonlExtractor
from slm4ie_assets.extractors.macocu.extractor import MacocuExtractor
from slm4ie_assets.extractors.splitting import RangeStrategy
from slm4ie_assets.extractors.text import TextExtractor
from slm4ie_assets.parts.writer import write_part_counted
from slm4ie_assets.planning.shards import Shard, plan_shards, range_files
from slm4ie_assets.store.dataset_store import DatasetStore
from support.runners import ThreadRunner
from support.split_outputs import assert_same, extract


def _jsonl(n: int, bad: tuple[int, ...] = (), keyless: tuple[int, ...] = ()) -> bytes:
    rows = []
    for i in range(n):
        if i in bad:
            rows.append(b"{broken")
        elif i in keyless:
            rows.append(b'{"text": "brez id %d"}' % i)
        else:
            rows.append(b'{"doc_id": "doc-%d", "text": "besedilo %d z nekaj besedami"}' % (i, i))
    return b"\n".join(rows) + b"\n"


def _conllu(docs: int) -> bytes:
    out = []
    for d in range(docs):
        out.append(b"# newdoc id = nd%d\n# sent_id = s%d.1\n# text = Prva beseda.\n" % (d, d))
        out.append(b"1\tPrva\tprvi\tADJ\t_\t_\t0\troot\t_\t_\n2\tbeseda\tbeseda\tNOUN\t_\t_\t1\tnsubj\t_\tSpaceAfter=No\n")
        out.append(b"3\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n")
    return b"".join(out)


def test_only_formats_whose_ranges_cannot_depend_on_the_ranges_before_speculate():
    """text numbers every block by position; coleslaw and macocu hand on a carry."""
    speculate, chains = RangeStrategy.SPECULATION, RangeStrategy.CHAINS
    assert JsonlExtractor.splitter.strategy is speculate and ConlluExtractor.splitter.strategy is speculate
    assert TextExtractor.splitter.strategy is chains
    assert ColeslawExtractor.splitter.strategy is chains and MacocuExtractor.splitter.strategy is chains


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("name,files", [
    ("jsonl", {"a.jsonl": _jsonl(400)}),
    ("conllu", {"a.conllu": _conllu(150)}),
])
def test_clean_ranges_run_without_any_count_only_pass_and_publish_the_unsplit_bytes(tmp_path, workers, name,
                                                                                      files):
    whole = extract(tmp_path / "whole", name, files, 0)
    split = extract(tmp_path / "split", name, files, 1500, workers=workers)
    assert len(split.shards) > 6
    assert_same(split, whole, f"{name} x{workers}")
    assert split.stage_seconds is not None and split.stage_seconds.get("count", 0.0) == 0.0


@pytest.mark.parametrize("workers", [2, 3])
def test_ranges_with_drops_or_fallback_ids_are_extracted_again_with_their_counts(tmp_path, workers):
    """A malformed line (a drop: its warning names the file's line) and records without an id (a
    fallback id numbered over the whole file) in later ranges: the speculative attempts stop, and
    the output, the warnings and the ledger are the unsplit pass's."""
    files = {"a.jsonl": _jsonl(400, bad=(5, 230, 231), keyless=(160, 300, 399))}
    whole = extract(tmp_path / "whole", "jsonl", files, 0)
    assert len(whole.warnings) == 3 and ":231:" in whole.warnings[1] and b'"a:000397"' not in whole.text
    split = extract(tmp_path / "split", "jsonl", files, 1500, workers=workers)
    assert len(split.shards) > 6
    assert_same(split, whole, f"x{workers}")


@pytest.mark.parametrize("row", [b"{broken", b'{"text": "brez id"}', b'{"doc_id": "x", "text": "a\\ud800b"}'])
def test_a_speculative_attempt_that_needs_its_before_leaves_no_file(tmp_path, row):
    """A drop, a fallback id or a repair raises NeedsBefore; the attempt's files are all removed
    and no part is committed."""
    data = _jsonl(80) + row + b"\n"
    (tmp_path / "raw" / "d").mkdir(parents=True)
    (tmp_path / "raw" / "d" / "a.jsonl").write_bytes(data)
    (tmp_path / "extract.yaml").write_text(
        "input_dir: raw\noutput_dir: out\ndatasets:\n  d:\n    extractor: jsonl\n    domain: t\n")
    spec = load_catalog(tmp_path / "extract.yaml").dataset("d")
    whole = InputFile(spec.raw_dir / "a.jsonl", "a.jsonl")
    ranges = range_files(whole, JsonlExtractor.splitter.plan(whole, len(data), len(data) // 2))
    assert len(ranges) == 2
    store = DatasetStore(spec)
    clean = Shard("a%r0", (ranges[0],), "fp", 0)
    meta, counts = write_part_counted(spec, JsonlExtractor(), clean, store, start=SPECULATIVE)
    assert meta.docs == counts.docs > 20 and not meta.warnings
    with pytest.raises(NeedsBefore):
        write_part_counted(spec, JsonlExtractor(), Shard("a%r1", (ranges[1],), "fp", 0), store, start=SPECULATIVE)
    assert sorted(p.name for p in store.parts.iterdir()) == sorted(
        p.name for p in (store.part_paths("a%r0").text, store.part_paths("a%r0").uids, store.part_paths("a%r0").meta))


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_the_schedule_extracts_again_what_needs_its_before_and_hands_it_the_exact_sum(tmp_path, workers):
    """Through a real executor, with ranges that stop when speculative (every fourth from the
    third): each of them is extracted again with the sum of the counts of the ranges before it,
    counted or extracted, and no range is counted that was already known."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_bytes(b"".join(b"blok %05d z besedami\n\n" % i for i in range(3000)))
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=4_000)
    assert len(shards) > 12
    truth = [RangeCounts(docs=i + 1, lines=5 * i, drops=i % 3) for i in range(len(shards))]
    stops = {t for t in range(len(shards)) if t % 4 == 2}
    kept: dict[int, RangeStart] = {}
    counted: list[int] = []

    def extract(task: int, shard: Shard, start: RangeStart) -> SimpleNamespace:
        if start.speculative and task in stops:
            return SimpleNamespace(counts=None, needs_before=True)
        assert task not in kept
        kept[task] = start
        return SimpleNamespace(counts=truth[task], needs_before=False)

    def count(file: InputFile) -> RangeCounts:
        counted.append(file.range.index)
        return truth[file.range.index]

    with ThreadPoolExecutor(workers) as pool:
        runner = ThreadRunner(pool, SimpleNamespace(extract=extract, count=count))
        run_pooled(shards, runner, lambda t, r: None, workers, RangeStrategy.SPECULATION)
    assert sorted(kept) == list(range(len(shards)))
    for task, start in kept.items():
        want = RangeStart.after(sum(truth[:task], RangeCounts()))
        assert start.speculative or start == want, task
        assert task not in stops or start == want, task
    assert len(counted) == len(set(counted))
    assert kept[0] == RangeStart()  # the first range never speculates
