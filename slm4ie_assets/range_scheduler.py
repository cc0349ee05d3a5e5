"""Which range of a split file runs when, and with which counts (docs/splitting.md).

A range is extracted with the `RangeCounts` of the ranges before it in its file. Those come from the
earlier ranges' own extraction when it ran first, else from a count-only pass over each earlier range
(`part_writer.count_range`). `RangeBook` keeps what is known; `run_pooled` keeps a pool busy with
counts first, then the ready range furthest into its file, then whole files and first ranges;
`run_serial` runs them in file order.
"""

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Protocol, TypeVar

from .extractors.base import InputFile, RangeCounts
from .shards import Shard


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
        return [f for rel in self._upto for f in self.to_count_in(rel, chains)]

    def to_count_in(self, rel: str, chains: int = 1) -> list[InputFile]:
        """`to_count` for the split file `rel` only."""
        last = self._upto.get(rel)
        if last is None:
            return []
        assert last.range is not None
        known = self._known.get(rel, {})
        extracted = self._extracted.get(rel, set())
        upto = last.range.index
        counted = -(-(upto + 1) * (max(1, chains) - 1) // max(1, chains))
        return [last.range_of(i) for i in range(upto) if i not in known and (i < counted or i not in extracted)]

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


def shard_inputs(shards: Sequence[Shard]) -> Iterator[InputFile]:
    """The input files of some shards (a range shard has one)."""
    for shard in shards:
        yield from shard.files


def chains_per_file(shards: Sequence[Shard], workers: int) -> int:
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


class Outcome(Protocol):
    """What an extraction task reports: the counts its range adds (None: another run wrote it, or a
    speculative attempt stopped, `needs_before`)."""

    @property
    def counts(self) -> RangeCounts | None: ...

    @property
    def needs_before(self) -> bool: ...


OutcomeT = TypeVar("OutcomeT", bound=Outcome)


def run_serial(shards: Sequence[Shard], extract: Callable[[int, RangeCounts], OutcomeT],
               count: Callable[[InputFile], RangeCounts], report: Callable[[int, OutcomeT], None]) -> None:
    """One worker: `shards` in order, a range continuing from the ranges just before it, and from
    count-only passes over those that are not in the run."""
    book = RangeBook(list(shard_inputs(shards)))
    for task, shard in enumerate(shards):
        outcome = extract(task, book.fill(shard.files[0], count))
        if outcome.counts is not None:
            book.record(shard.files[0], outcome.counts)
        report(task, outcome)


def _next_extraction(book: RangeBook, shards: Sequence[Shard], later: list[int],
                     free: deque[int]) -> tuple[int, RangeCounts | None] | None:
    """The ready range furthest into its file (taken from `later`), else the next whole file or
    first range (`free`), or a range to extract speculatively (`before` None: not known yet); None
    when nothing can start yet."""
    best = None
    for task in later:
        before = book.before(shards[task].files[0])
        if before is not None and (best is None or _range_index(shards[task]) > _range_index(shards[best[0]])):
            best = (task, before)
    if best is not None:
        later.remove(best[0])
        return best
    if not free:
        return None
    task = free.popleft()
    return task, book.before(shards[task].files[0])


def _range_index(shard: Shard) -> int:
    rng = shard.files[0].range
    return -1 if rng is None else rng.index


def run_pooled(shards: Sequence[Shard], order: Sequence[int],
               submit_extract: Callable[[int, RangeCounts | None], Future[OutcomeT]],
               submit_count: Callable[[InputFile], Future[RangeCounts]], report: Callable[[int, OutcomeT], None],
               workers: int = 2, watch: Callable[[list[int]], None] | None = None, poll: float = 1.0,
               speculate: bool = False) -> None:
    """Run the extraction of `shards` (task = index, in `order`) in a pool of `workers`, keeping
    one task per worker in flight so the next pick is made when a worker frees: first the count-only
    passes that let each split file run as several chains of ranges (`chains_per_file`), then
    the ready range furthest into its file (a chain goes on as soon as its predecessor is written),
    then whole files and first ranges in `order`. With `watch`, it is called every `poll` seconds
    while the pool works, with the tasks in flight (stalls.py), and may raise to stop the run.

    `speculate` (the format's `Splitter.speculates`): no count-only pass up front; every range is
    free from the start, and one whose `before` is not known yet is extracted speculatively
    (`before` None). The first range of a file that comes back `needs_before` settles that file:
    its ranges not started yet wait for their counts, and the count-only passes the chains need
    (those not known or in flight) are queued, as without speculation."""
    book = RangeBook(list(shard_inputs(shards)))
    chains = chains_per_file(shards, workers)
    counts = [] if speculate else list(book.to_count(chains))
    free = deque(t for t in order if speculate or book.before(shards[t].files[0]) is not None)
    later = [t for t in order if not speculate and book.before(shards[t].files[0]) is None]
    futures: dict[Future, tuple[int, InputFile]] = {}  # a count's task is -1
    settled: set[str] = set()  # split files whose speculation stopped

    def settle(rel: str) -> None:
        settled.add(rel)
        waiting = [t for t in free if shards[t].files[0].rel == rel and book.before(shards[t].files[0]) is None]
        for t in waiting:
            free.remove(t)
            later.append(t)
        busy = {f.range.index for _t, f in futures.values() if f.rel == rel and f.range is not None}
        counts.extend(f for f in book.to_count_in(rel, chains) if f.range is not None and f.range.index not in busy)

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
                if result.needs_before:  # a speculative attempt stopped: it waits for its `before`
                    later.append(task)
                    if file.rel not in settled:
                        settle(file.rel)
                    continue
                if result.counts is not None:
                    book.record(file, result.counts)
                report(task, result)
            fill_slots()
    except BaseException:
        for f in futures:
            f.cancel()
        raise
    assert not later, "every range's earlier ranges were counted"
