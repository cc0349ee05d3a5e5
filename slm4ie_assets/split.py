"""Splitting big files into byte ranges on record boundaries, and the counts that let the ranges be
extracted in parallel with the bytes of one unsplit pass (docs/splitting.md).

Planning reads only a few small windows near each nominal cut (`k * split_bytes`), never the whole
file (conllu: forward to the next `# newdoc` block, which may be far). A range is extracted with the
`RangeCounts` of the ranges before it: documents written (for `<rel>:<n>` and every D3 fallback
id), lines (for warnings), drops (for the file's first 100 warnings), documents with repairs and the
extractor's tally. Those come from the earlier ranges' own extraction when it ran first, else from a
count-only pass over each earlier range (`count_range`): the same extractor and encoder, no writing.
"""

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from zlib_ng import gzip_ng

from .catalog import DatasetSpec
from .document_encoder import Drop, encode_document
from .extractors.base import (
    DropLedger,
    ExtractContext,
    Extractor,
    FileRange,
    InputFile,
    RangeCounts,
    is_input_error,
)
from .extractors.cuts import SEARCH_LIMIT, walk_nominal_cuts, windows
from .extractors.reading import read_raw
from .sidecar_writer import stub_lines_from_text

_OVERLAP = 64  # windows overlap so a boundary across two reads is still seen

# A line end of ADDENDUM 3.2 (`\r\n`, `\n`, a lone `\r`).
_END = rb"(?:\r\n|\n|\r(?!\n))"
# Every character str.isspace() accepts except the line ends (a test holds the list to Python's), as
# UTF-8: a text line of only these is a block boundary (D9, S4).
SPACES = ("\t\x0b\x0c\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
          + "\u2028\u2029\u202f\u205f\u3000")
_SPACE = b"|".join(re.escape(c.encode()) for c in SPACES)
_BLANK_LINE = re.compile(rb"%s(?:%s)*%s" % (_END, _SPACE, _END))
# conllu (D11, S5): a blank line of spaces/tabs, then a block whose first line is a newdoc line.
_NEWDOC_BLOCK = re.compile(rb"%s[ \t]*%s(?=# *newdoc(?:[ \t\n\r\f\v]|\Z))" % (_END, _END))


def plan_cuts(split_at: str, path: Path, size: int, split_bytes: int) -> tuple[int, ...]:
    """`(0, cut, ..., size)`: where the ranges of a file of `size` bytes start and end. Each cut is
    the first record boundary at or after a nominal cut; a nominal cut without one nearby (before
    the end, for conllu) is skipped, so its range merges into the one before. Unreadable: one range."""
    if split_bytes <= 0 or size <= split_bytes:
        return (0, size)
    newdoc = split_at == "newdoc"
    try:
        with open(path, "rb") as fh:
            return walk_nominal_cuts(fh, size, split_bytes, partial(_boundary_after, split_at),
                                     search_limit=None if newdoc else SEARCH_LIMIT, stop_at_none=newdoc)
    except OSError:
        return (0, size)  # the extraction reports what cannot be read (D6)


def _boundary_after(split_at: str, fh: BinaryIO, pos: int, limit: int) -> int | None:
    """The first offset in [pos, limit] where a range may start, reading small windows."""
    for start, data in windows(fh, pos, limit, _OVERLAP):
        at_eof = start + len(data) >= limit
        cut = _cut_in(split_at, data, pos - start, at_eof)
        if cut is not None:
            return start + cut
    return None


def _cut_in(split_at: str, data: bytes, not_before: int, at_eof: bool) -> int | None:
    """A range start in `data` at or after `not_before`, seen whole (not at the window's edge,
    where a `\\r` may still be followed by a `\\n`)."""
    if split_at == "line":  # after a `\n` only: jsonl lines are read as `\n`-ended byte lines
        nl = data.find(b"\n", max(0, not_before - 1))
        return nl + 1 if nl >= 0 else None
    pattern = _BLANK_LINE if split_at == "blank_line" else _NEWDOC_BLOCK
    for m in pattern.finditer(data, max(0, not_before - 1)):
        end = m.end()
        if end < not_before:
            continue
        if at_eof:
            return end
        if end == len(data):
            return None
        if split_at == "newdoc" and data.find(b"\n", end) < 0 and data.find(b"\r", end) < 0:
            return None  # the newdoc line goes on past the window: look again in the next one
        return end
    return None


def range_files(file: InputFile, cuts: Sequence[int]) -> list[InputFile]:
    """The ranges of a file cut at `cuts` (one InputFile each, the last reading to the end)."""
    frozen = tuple(cuts)
    return [InputFile(file.path, file.rel, FileRange(i, frozen)) for i in range(len(frozen) - 1)]


def count_lines(file: InputFile) -> int:
    """Line ends in the range (ADDENDUM 3.2); cuts never fall inside a `\\r\\n`."""
    total = 0
    last_cr = False
    for raw in read_raw(file, 1 << 22):
        total += raw.count(b"\n")
        if b"\r" in raw:  # one memchr; most files have no `\r`, so one counting pass per chunk
            total += raw.count(b"\r") - raw.count(b"\r\n")
        if last_cr and raw.startswith(b"\n"):
            total -= 1
        last_cr = raw.endswith(b"\r")
    return total


def range_lines(extractor: Extractor, file: InputFile) -> int:
    """The range's contribution to later line numbers: the extractor's own count, else line ends."""
    own = extractor.lines_in_range(file)
    return count_lines(file) if own is None else own


def count_range(spec: DatasetSpec, extractor: Extractor, file: InputFile) -> RangeCounts:
    """The counts of one range without writing anything: the same documents through the same
    encoder as the part writer (so its drops and repairs count alike), the same drop ledger; or the
    extractor's `quick_count` where it has one (text)."""
    quick = None if spec.max_document_bytes else extractor.quick_count(file)  # a cap may drop documents
    if quick is not None:
        return RangeCounts(docs=quick[0], lines=quick[1])
    ledger = DropLedger(limit=0)
    ctx = ExtractContext(spec.key, spec.raw_dir, ledger, counting=True, max_document_bytes=spec.max_document_bytes)
    docs = repaired = 0
    try:
        for doc in extractor.extract(file, ctx):
            encoded = encode_document(doc, spec.key, spec.domain, "", docs, spec.max_document_bytes)
            if type(encoded) is Drop:
                ledger.add(encoded.reason, "")
                continue
            if encoded[4]:
                repaired += 1
            docs += 1
    except OSError as exc:
        if not is_input_error(exc, file):
            raise
        ledger.add("unreadable_file", "")  # as the part writer does (D6): the rest of the range is skipped
    try:
        lines = range_lines(extractor, file)
    except OSError:
        lines = 0  # unreadable: no warning of a later range names a line read after this one
    return RangeCounts(docs, lines, ledger.total, repaired, ctx.tally)


class RangeBook:
    """The counts known so far of the ranges of the split files among some shards' inputs, and
    which earlier ranges a range still waits for."""

    def __init__(self, files: Sequence[InputFile]):
        self._known: dict[str, dict[int, RangeCounts]] = {}
        self._upto: dict[str, InputFile] = {}  # per split file: its last range among `files`
        self._extracted: dict[str, set[int]] = {}  # per split file: the ranges among `files`
        for f in files:
            if f.range is not None:
                self._extracted.setdefault(f.rel, set()).add(f.range.index)
            if f.range is not None and f.range.index > 0:
                last = self._upto.get(f.rel)
                if last is None or (last.range is not None and last.range.index < f.range.index):
                    self._upto[f.rel] = f

    def to_count(self, chains: int = 1) -> list[InputFile]:
        """The ranges to count before extracting. With `chains` workers, a file's ranges run as that
        many chains, each range after the first of a chain continuing from its predecessor's own
        extraction; only the ranges before the last chain's start are counted (and every range that
        is not extracted in this run). One chain: only the ranges not extracted in this run."""
        todo = []
        for rel, last in self._upto.items():
            assert last.range is not None
            known = self._known.get(rel, {})
            extracted = self._extracted.get(rel, set())
            upto = last.range.index
            counted = -(-(upto + 1) * (max(1, chains) - 1) // max(1, chains))
            todo += [last.range_of(i) for i in range(upto)
                     if i not in known and (i < counted or i not in extracted)]
        return todo

    def missing_before(self, file: InputFile) -> list[InputFile]:
        """The earlier ranges of `file` whose counts are still unknown."""
        if file.range is None:
            return []
        known = self._known.get(file.rel, {})
        return [file.range_of(i) for i in range(file.range.index) if i not in known]

    def record(self, file: InputFile, counts: RangeCounts) -> None:
        if file.range is not None:
            self._known.setdefault(file.rel, {}).setdefault(file.range.index, counts)

    def before(self, file: InputFile) -> RangeCounts | None:
        """Where `file` continues (zeros for a whole file or a first range); None while unknown."""
        if file.range is None or file.range.index == 0:
            return RangeCounts()
        known = self._known.get(file.rel, {})
        total = RangeCounts()
        for i in range(file.range.index):
            if i not in known:
                return None
            total = total + known[i]
        return total

    def fill(self, file: InputFile, count: Callable[[InputFile], RangeCounts]) -> RangeCounts:
        """`before(file)`, counting the missing earlier ranges here, in order."""
        if file.range is None:
            return RangeCounts()
        for i in range(file.range.index):
            earlier = file.range_of(i)
            if i not in self._known.get(file.rel, {}):
                self.record(earlier, count(earlier))
        before = self.before(file)
        assert before is not None
        return before


def shard_inputs(shards: Sequence) -> Iterator[InputFile]:
    """The input files of some shards (a range shard has one)."""
    for shard in shards:
        yield from shard.files


def chains_per_file(shards: Sequence, workers: int) -> int:
    """How many chains each split file runs as. One (no count-only pass at all) when the run's files
    keep `workers` busy as they are: no file, its ranges together, holds more than 1/workers of the
    bytes (e.g. four 125 MB files split in ranges, two workers). Else `workers`, so the biggest file
    is not left to one worker (one 500 MB file)."""
    if workers <= 1:
        return 1
    sizes: dict[object, int] = {}
    for shard in shards:
        first = shard.files[0]
        unit = first.rel if first.range is not None else ("shard", shard.key)  # a file's ranges together
        sizes[unit] = sizes.get(unit, 0) + shard.size
    return 1 if max(sizes.values(), default=0) * workers <= sum(sizes.values()) else workers


class _Outcome(Protocol):
    counts: RangeCounts | None


def _next_extraction(book: RangeBook, shards: Sequence, later: list[int],
                     free: deque[int]) -> tuple[int, RangeCounts] | None:
    """The ready range furthest into its file (taken from `later`), else the next whole file or
    first range (`free`); None when nothing can start yet."""
    best = None
    for task in later:
        before = book.before(shards[task].files[0])
        if before is not None and (best is None or shards[task].files[0].range.index
                                   > shards[best[0]].files[0].range.index):
            best = (task, before)
    if best is not None:
        later.remove(best[0])
        return best
    return (free.popleft(), RangeCounts()) if free else None


def run_pooled(shards: Sequence, order: Sequence[int], submit_extract: Callable[[int, RangeCounts], Future],
               submit_count: Callable[[InputFile], Future], report: Callable[[int, Any], None],
               workers: int = 2, watch: Callable[[list[int]], None] | None = None, poll: float = 1.0) -> None:
    """Run the extraction of `shards` (task = index, in `order`) in a pool of `workers`, keeping
    one task per worker in flight so the next pick is made when a worker frees: first the count-only
    passes that let each split file run as several chains of ranges (`chains_per_file`), then
    the ready range furthest into its file (a chain goes on as soon as its predecessor is written),
    then whole files and first ranges in `order`. With `watch`, it is called every `poll` seconds
    while the pool works, with the tasks in flight (stalls.py), and may raise to stop the run."""
    book = RangeBook(list(shard_inputs(shards)))
    counts = list(book.to_count(chains_per_file(shards, workers)))
    free = deque(t for t in order if book.before(shards[t].files[0]) is not None)
    later = [t for t in order if book.before(shards[t].files[0]) is None]
    futures: dict[Future, tuple[int, InputFile]] = {}

    def fill_slots() -> None:
        while len(futures) < workers:
            if counts:
                file = counts.pop(0)
                futures[submit_count(file)] = (-1, file)
                continue
            picked = _next_extraction(book, shards, later, free)
            if picked is None:
                if not futures and later:  # an earlier range was made current by another run meanwhile
                    counts.extend({f for t in later for f in book.missing_before(shards[t].files[0])})
                    if counts:
                        continue
                return
            task, before = picked
            futures[submit_extract(task, before)] = (task, shards[task].files[0])

    try:
        fill_slots()
        while futures:
            done, _ = wait(futures, timeout=None if watch is None else poll, return_when=FIRST_COMPLETED)
            if watch is not None:
                watch([task for fut, (task, _file) in futures.items() if fut not in done])
            for fut in done:
                task, file = futures.pop(fut)
                result = fut.result()
                if task < 0:
                    book.record(file, result)
                    continue
                outcome: _Outcome = result
                if outcome.counts is not None:
                    book.record(file, outcome.counts)
                report(task, result)
            fill_slots()
    except BaseException:
        for f in futures:
            f.cancel()
        raise
    assert not later, "every range's earlier ranges were counted"


def file_runs(shards: Sequence, metas: Sequence) -> Iterator[list[tuple[Any, Any]]]:
    """(shard, meta) pairs in order, the consecutive ranges of one split file together."""
    run: list[tuple[Any, Any]] = []
    for shard, meta in zip(shards, metas, strict=True):
        first = shard.files[0]
        if run and (first.range is None or first.range.index == 0 or run[-1][0].files[0].rel != first.rel):
            yield run
            run = []
        run.append((shard, meta))
    if run:
        yield run


def ranges_sidecar_lines(parts: Sequence[tuple[Any, Any]]) -> Iterator[bytes]:
    """The sidecar lines of a split file's ranges ((part paths, meta) in order): each range's own
    lines, or stubs for a range without annotations. Written line by line into one gzip member,
    they are compressed in the same chunks as the unsplit part's, so into the same bytes."""
    for paths, meta in parts:
        if meta.has_annotations:
            with gzip_ng.open(paths.annotations, "rb") as fh:
                yield from fh
        elif meta.docs:
            yield from stub_lines_from_text(paths.text)
