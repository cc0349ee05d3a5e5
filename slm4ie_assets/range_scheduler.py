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
from typing import Generic, Protocol, TypeVar

from .assumed_counts import Proofs, RangeCount, RangeKey, range_key
from .extractors.extract_context import RangeCounts
from .extractors.input_file import InputFile
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

    def knows(self, file: InputFile) -> bool:
        return file.range is not None and file.range.index in self._known.get(file.rel, {})

    def correct(self, file: InputFile, counts: RangeCounts) -> None:
        """Replace an assumed count proven wrong (assumed_counts.py) by the range's real one."""
        assert file.range is not None
        self._known[file.rel][file.range.index] = counts

    def extracted_here(self, file: InputFile) -> bool:
        """The range is among the run's shards: its own extraction reports its real counts."""
        return file.range is not None and file.range.index in self._extracted.get(file.rel, set())

    def range_file(self, key: RangeKey) -> InputFile:
        rel, index = key
        return self._upto[rel].range_of(index)

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
    speculative attempt stopped, `needs_before`); `pending`: written from assumed counts, its meta
    waits (assumed_counts.py)."""

    @property
    def counts(self) -> RangeCounts | None: ...

    @property
    def needs_before(self) -> bool: ...

    @property
    def pending(self) -> bool: ...


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


SubmitExtract = Callable[[int, RangeCounts | None, bool], Future[OutcomeT]]
SubmitCount = Callable[[InputFile, bool], Future[RangeCount]]
Settle = Callable[[int, OutcomeT, bool], OutcomeT]


def run_pooled(shards: Sequence[Shard], order: Sequence[int], submit_extract: SubmitExtract[OutcomeT],
               submit_count: SubmitCount, report: Callable[[int, OutcomeT], None], workers: int = 2,
               watch: Callable[[list[int]], None] | None = None, poll: float = 1.0, speculate: bool = False,
               assume: bool = False, settle: Settle[OutcomeT] | None = None) -> None:
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
    (those not known or in flight) are queued, as without speculation.

    `assume` (the format's `Splitter.assumes`, assumed_counts.py): a range this run extracts is
    counted on trust; a part whose `before` holds such a count is submitted `pending` and handed
    to `settle` (with whether its counts were proven) before it is reported, or extracted again."""
    run = _PoolRun(shards, order, submit_extract, submit_count, workers, speculate, assume)
    try:
        run.fill_slots()
        while run.futures:
            done, _ = wait(run.futures, timeout=None if watch is None else poll, return_when=FIRST_COMPLETED)
            if watch is not None:
                watch([task for fut, (task, _file, _rests) in run.futures.items() if fut not in done])
            for fut in done:
                finished = run.finish(fut)
                if finished is not None:
                    report(*finished)
            for held, proven in run.proofs.decided():
                assert settle is not None, "a pending part needs `settle`"
                outcome = settle(held.task, held.outcome, proven)
                if proven:
                    report(held.task, outcome)
                else:
                    run.requeue(held.task)  # its `before` is right now: extracted again
            run.fill_slots()
    except BaseException:
        for f in run.futures:
            f.cancel()
        raise
    assert not run.later, "every range's earlier ranges were counted"
    assert not run.proofs.holding, "every assumed count was proven"


class _PoolRun(Generic[OutcomeT]):
    """What `run_pooled` knows and has in flight."""

    def __init__(self, shards: Sequence[Shard], order: Sequence[int], submit_extract: SubmitExtract[OutcomeT],
                 submit_count: SubmitCount, workers: int, speculate: bool, assume: bool):
        self.shards, self.workers, self.assume = shards, workers, assume
        self._submit_extract, self._submit_count = submit_extract, submit_count
        self.book = book = RangeBook(list(shard_inputs(shards)))
        self.chains = chains_per_file(shards, workers)
        self.counts = [] if speculate else list(book.to_count(self.chains))
        self.free = deque(t for t in order if speculate or book.before(shards[t].files[0]) is not None)
        self.later = [t for t in order if not speculate and book.before(shards[t].files[0]) is None]
        # a count's task is -1; the assumed counts an extraction's `before` rests on
        self.futures: dict[Future, tuple[int, InputFile, frozenset[RangeKey]]] = {}
        self.settled: set[str] = set()  # split files whose speculation stopped
        self.proofs: Proofs[OutcomeT] = Proofs()
        self.checked: set[RangeKey] = set()  # assumed counts to prove by a checked count
        self._task_of = {range_key(s.files[0]): t for t, s in enumerate(shards) if s.files[0].range is not None}
        self._queued = set(self.free) | set(self.later)  # tasks not started, or to start again

    def requeue(self, task: int) -> None:
        self.later.append(task)
        self._queued.add(task)

    def _pick(self) -> tuple[int, RangeCounts | None] | None:
        """While no range whose own count is assumed is being extracted, the lowest such range
        that is ready: one worker walks the ranges counted on trust in order, proving their counts
        as early as the chains allow (the sooner a wrong one is found, the fewer parts rest on it),
        while the others go on with `_next_extraction` (the chains)."""
        unproven = set(self.proofs.unproven())
        picked: tuple[int, RangeCounts | None] | None = None
        if unproven and not any(t >= 0 and f.range is not None and range_key(f) in unproven
                                for t, f, _r in self.futures.values()):
            proving = [t for t in (self._task_of[k] for k in unproven) if t in self._queued]
            ready = [(t, b) for t in proving if (b := self.book.before(self.shards[t].files[0])) is not None]
            if ready:
                picked = min(ready, key=lambda tb: _range_index(self.shards[tb[0]]))
                (self.later if picked[0] in self.later else self.free).remove(picked[0])
        if picked is None:
            picked = _next_extraction(self.book, self.shards, self.later, self.free)
        if picked is not None:
            self._queued.discard(picked[0])
        return picked

    def settle_file(self, rel: str) -> None:
        """A speculative range of `rel` needs its `before`: its unstarted ranges wait for their counts."""
        self.settled.add(rel)
        shards, book = self.shards, self.book
        waiting = [t for t in self.free if shards[t].files[0].rel == rel and book.before(shards[t].files[0]) is None]
        for t in waiting:
            self.free.remove(t)
            self.later.append(t)
        busy = {f.range.index for _t, f, _r in self.futures.values() if f.rel == rel and f.range is not None}
        self.counts.extend(f for f in book.to_count_in(rel, self.chains)
                           if f.range is not None and f.range.index not in busy)

    def fill_slots(self) -> None:
        while len(self.futures) < self.workers:
            if self.counts:
                file = self.counts.pop(0)
                trusted = self.assume and self.book.extracted_here(file) and range_key(file) not in self.checked
                self.futures[self._submit_count(file, trusted)] = (-1, file, frozenset())
                continue
            picked = self._pick()
            if picked is None:
                if not self.futures and (self.later or self.proofs.holding):
                    self._count_what_is_missing()
                    if self.counts:
                        continue
                return
            task, before = picked
            file = self.shards[task].files[0]
            rests = self.proofs.rests_on(file) if before is not None else frozenset()
            self.futures[self._submit_extract(task, before, bool(rests))] = (task, file, rests)

    def _count_what_is_missing(self) -> None:
        """Nothing in flight, yet ranges wait: an earlier range was made current by another run
        meanwhile (its counts never came), or an assumed count has no extraction left to prove it."""
        self.counts.extend({f for t in self.later for f in self.book.missing_before(self.shards[t].files[0])})
        for key in self.proofs.unproven():
            self.checked.add(key)
            self.counts.append(self.book.range_file(key))

    def learn(self, file: InputFile, counts: RangeCounts, real: bool) -> None:
        """A range's counts came in: recorded when new (as assumed unless `real`), else they prove
        or correct an assumed one."""
        if not self.book.knows(file):
            self.book.record(file, counts)
            if not real:
                self.proofs.assume(file, counts)
        elif real and not self.proofs.prove(file, counts):
            self.book.correct(file, counts)

    def finish(self, fut: Future) -> tuple[int, OutcomeT] | None:
        """Take in a finished task; the (task, outcome) to report now, if any."""
        task, file, rests = self.futures.pop(fut)
        result = fut.result()
        if task < 0:
            self.learn(file, result.counts, real=not result.assumed)
            return None
        if result.needs_before:  # a speculative attempt stopped: it waits for its `before`
            self.requeue(task)
            if file.rel not in self.settled:
                self.settle_file(file.rel)
            return None
        if result.counts is not None:
            self.learn(file, result.counts, real=True)
        if result.pending:
            self.proofs.hold(task, result, rests)
            return None
        return task, result
