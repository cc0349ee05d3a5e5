"""Assumed counts (docs/splitting.md, "Assumed counts"): a text range that the run also extracts
is counted without its UTF-8 check; a part whose `before` rests on such a count keeps its meta
pending until the range's own extraction proves the count, and is discarded and written again when
it does not. Published bytes, warnings and ledger stay those of one unsplit pass, and a pending
part is never current, published or left behind."""

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from slm4ie_assets.assumed_counts import Proofs, RangeCount
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.extractors.discovery import discover
from slm4ie_assets.extractors.extract_context import RangeCounts
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.jsonl import JsonlExtractor
from slm4ie_assets.extractors.text import TextExtractor, count_blocks
from slm4ie_assets.locked_parts import PartOutcome, settle_pending
from slm4ie_assets.part_writer import assume_range, write_part_counted
from slm4ie_assets.pipeline import _assumes
from slm4ie_assets.range_scheduler import run_pooled
from slm4ie_assets.shards import Shard, plan_shards, range_files
from slm4ie_assets.store import DatasetStore
from support.split_outputs import assert_same, extract


def _text(blocks: int, bad: tuple[int, ...] = ()) -> bytes:
    out = []
    for i in range(blocks):
        word = b"pokvarjen \xff\xfe blok" if i in bad else "blok z šumniki č ž".encode()
        out.append(b"%s %05d\nin druga vrstica\n\n" % (word, i))
    return b"".join(out)


def _spec(tmp_path, extractor: str = "text", data: bytes = b""):
    raw = tmp_path / "raw" / "d"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "a.txt").write_bytes(data)
    (tmp_path / "extract.yaml").write_text(
        f"input_dir: raw\noutput_dir: out\ndatasets:\n  d:\n    extractor: {extractor}\n    domain: t\n")
    return load_catalog(tmp_path / "extract.yaml").dataset("d")


def test_only_text_assumes(tmp_path):
    assert TextExtractor.splitter.assumes and not JsonlExtractor.splitter.assumes
    assert _assumes(_spec(tmp_path / "t")) and not _assumes(_spec(tmp_path / "j", "jsonl"))


def test_the_unchecked_count_equals_the_checked_one_on_valid_text_and_differs_where_bytes_are_dropped(tmp_path):
    good = tmp_path / "good.txt"
    good.write_bytes(_text(300))
    for file in range_files(InputFile(good, "good.txt"), TextExtractor.splitter.plan(
            InputFile(good, "good.txt"), good.stat().st_size, 2000)):
        assert count_blocks(file, checked=False) == count_blocks(file) is not None
    bad = tmp_path / "bad.txt"
    bad.write_bytes(_text(40, bad=(3, 7)))
    whole = InputFile(bad, "bad.txt")
    assert count_blocks(whole) is None  # the checked count leaves it to the full pass
    assert count_blocks(whole, checked=False) == (40, 120)  # two of these 40 blocks are dropped
    first = tmp_path / "first.txt"
    first.write_bytes(_text(10, bad=(0,)))
    assert count_blocks(InputFile(first, "first.txt"), checked=False) is None  # it had to read that block


def test_an_assumed_count_is_marked_as_such_and_a_cap_on_document_size_never_assumes(tmp_path):
    spec = _spec(tmp_path, data=_text(100))
    whole = InputFile(spec.raw_dir / "a.txt", "a.txt")
    file = range_files(whole, TextExtractor.splitter.plan(whole, whole.path.stat().st_size, 2000))[0]
    docs, lines = count_blocks(file)
    assert 0 < docs < 100 and lines == 3 * docs
    assert assume_range(spec, TextExtractor(), file) == RangeCount(RangeCounts(docs, lines), assumed=True)
    capped = dataclasses.replace(spec, max_document_bytes=10_000)
    assert assume_range(capped, TextExtractor(), file) == RangeCount(RangeCounts(docs, lines), assumed=False)


def test_proofs_hold_a_part_until_every_count_it_rests_on_is_proven_or_one_is_wrong(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(_text(200))
    ranges = range_files(InputFile(path, "a.txt"), TextExtractor.splitter.plan(
        InputFile(path, "a.txt"), path.stat().st_size, 1500))
    assert len(ranges) >= 4
    proofs: Proofs[str] = Proofs()
    proofs.assume(ranges[0], RangeCounts(docs=5))
    proofs.assume(ranges[1], RangeCounts(docs=6))
    assert proofs.rests_on(ranges[0]) == frozenset() and len(proofs.rests_on(ranges[3])) == 2
    proofs.hold(3, "part 3", proofs.rests_on(ranges[3]))
    proofs.hold(1, "part 1", proofs.rests_on(ranges[1]))
    assert proofs.prove(ranges[0], RangeCounts(docs=5))
    assert [(h.task, ok) for h, ok in proofs.decided()] == [(1, True)] and proofs.holding
    assert not proofs.prove(ranges[1], RangeCounts(docs=5, drops=1))
    assert [(h.task, ok) for h, ok in proofs.decided()] == [(3, False)] and not proofs.holding
    assert proofs.prove(ranges[2], RangeCounts(docs=1))  # never assumed: nothing to disprove


@pytest.mark.parametrize("workers", [2, 3])
def test_the_schedule_commits_only_parts_whose_assumed_counts_were_proven(tmp_path, workers):
    """Through a real executor: ranges counted on trust, one of those counts wrong (its range slow
    to extract), one range made current by another run (its count proven by a checked count
    instead). The ranges counted on trust are extracted lowest first. Every part reported was
    extracted with the exact sum of the ranges before it; every part that rested on the wrong count
    was discarded and extracted again."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_bytes(_text(3000))
    shards = plan_shards(TextExtractor(), discover(raw, (".txt",)), split_bytes=8_000)
    assert len(shards) > 12
    truth = [RangeCounts(docs=i + 1, lines=4 * i, drops=i % 2) for i in range(len(shards))]
    wrong, elsewhere = 1, 2
    reported: dict[int, RangeCounts] = {}
    attempts: dict[int, list[tuple[RangeCounts, bool]]] = {}
    settled: list[tuple[int, bool]] = []
    counted: list[tuple[int, bool]] = []

    def extract(task: int, before: RangeCounts, pending: bool) -> SimpleNamespace:
        attempts.setdefault(task, []).append((before, pending))
        if task == wrong:
            time.sleep(0.3)  # the parts after it are written from its wrong count meanwhile
        counts = None if task == elsewhere else truth[task]
        return SimpleNamespace(task=task, before=before, counts=counts, needs_before=False, pending=pending)

    def count(file: InputFile, trusted: bool) -> RangeCount:
        index = file.range.index
        counted.append((index, trusted))
        if trusted and index == wrong:
            return RangeCount(truth[index] + RangeCounts(docs=1), assumed=True)  # as if it held bad bytes
        return RangeCount(truth[index], assumed=trusted)

    def settle(task: int, outcome: SimpleNamespace, proven: bool) -> SimpleNamespace:
        settled.append((task, proven))
        return outcome

    def report(task: int, outcome: SimpleNamespace) -> None:
        assert task not in reported
        reported[task] = outcome.before

    with ThreadPoolExecutor(workers) as pool:
        run_pooled(shards, list(range(len(shards))), lambda t, b, p: pool.submit(extract, t, b, p),
                   lambda f, trusted: pool.submit(count, f, trusted), report, workers, assume=True, settle=settle)
    assert sorted(reported) == list(range(len(shards)))
    for task, before in reported.items():
        assert before == sum(truth[:task], RangeCounts()), task
    assert any(trusted for _i, trusted in counted)
    discarded = [task for task, proven in settled if not proven]
    assert discarded and all(task > wrong for task in discarded)
    assert all(len(attempts[task]) >= 2 for task in discarded)  # extracted again, from the real counts
    if any(i == elsewhere and trusted for i, trusted in counted):
        assert (elsewhere, False) in counted  # its extraction reported nothing: a checked count proved it


def _pending_part(tmp_path):
    spec = _spec(tmp_path, data=_text(100))
    store = DatasetStore(spec)
    shard = Shard("a", (InputFile(spec.raw_dir / "a.txt", "a.txt"),), "fp", 0)
    meta, counts = write_part_counted(spec, TextExtractor(), shard, store, pending=True)
    return spec, store, shard, PartOutcome(meta, "", counts, pending=True)


def test_a_pending_part_is_not_current_until_settled_proven(tmp_path):
    spec, store, shard, outcome = _pending_part(tmp_path)
    assert store.pending_meta(shard.key).exists() and not store.part_paths(shard.key).meta.exists()
    assert not store.part_is_current(shard)
    settled = settle_pending(spec, store, shard, outcome, proven=True)
    assert settled.meta == outcome.meta and store.part_is_current(shard)
    assert not store.pending_meta(shard.key).exists()


def test_a_part_proven_wrong_stays_uncommitted_and_clean_up_removes_it(tmp_path):
    spec, store, shard, outcome = _pending_part(tmp_path)
    assert settle_pending(spec, store, shard, outcome, proven=False).meta == outcome.meta
    assert not store.pending_meta(shard.key).exists() and not store.part_is_current(shard)
    store.cleanup()
    assert list(store.parts.iterdir()) == []


def test_a_run_killed_with_parts_pending_leaves_nothing_a_later_run_could_take_for_committed(tmp_path):
    spec, store, shard, _outcome = _pending_part(tmp_path)
    assert store.cleanup() >= 3  # the text, the uids and the pending meta
    assert list(store.parts.iterdir()) == [] and not store.part_is_current(shard)


def test_settling_leaves_another_runs_pending_meta_alone(tmp_path):
    """Another run wrote the part again after this one (its own pending meta): this run's proof
    says nothing about that run's counts, so its meta is neither committed nor removed here."""
    spec, store, shard, outcome = _pending_part(tmp_path)
    theirs = outcome.meta.to_json().replace(b'"seconds":', b'"seconds":1')
    store.pending_meta(shard.key).write_bytes(theirs)
    assert settle_pending(spec, store, shard, outcome, proven=True).meta is None
    assert store.pending_meta(shard.key).read_bytes() == theirs and not store.part_is_current(shard)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("bad", [(), (3, 150), (40, 41, 600)])
def test_split_text_counted_on_trust_publishes_the_unsplit_pass(tmp_path, workers, bad):
    """Invalid UTF-8 in ranges that were counted on trust (their blocks are dropped, so the assumed
    counts are wrong) and in later ranges: the output, the warnings and the ledger are the unsplit
    pass's, and no pending meta is left."""
    files = {"a.txt": _text(800, bad=bad)}
    whole = extract(tmp_path / "whole", "text", files, 0)
    assert len(whole.warnings) == len(bad)
    split = extract(tmp_path / "split", "text", files, 2500, workers=workers)
    assert len(split.shards) > 8
    assert_same(split, whole, f"x{workers} bad={bad}")
    assert not list((tmp_path / "split" / "out" / ".slm4ie" / "d" / "parts").glob("*.pending*"))
