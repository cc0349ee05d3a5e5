"""Which range of a split file runs when, and from where (docs/splitting.md).

A range is extracted from the `RangeCounts` of the ranges before it in its file (a `RangeStart`).
Those come from the earlier ranges' own extraction when it ran first, else from a count-only pass
over each earlier range. `RangeBook` keeps what is known. The work itself is a `RangeWork`, handed
out by name: `extract(task, shard, start)` and `count(file)` (pool_worker.PartWork). `run_pooled`
keeps a pool busy with counts first, then the ready range furthest into its file, then whole files
and first ranges, largest first; `run_serial` runs them in file order.
"""

import math
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar, cast

from ..extractors.extract_context import SPECULATIVE, RangeCounts, RangeStart
from ..extractors.input_file import InputFile
from ..extractors.splitting import RangeStrategy
from ..planning.shards import Shard

LAST_CHAIN_SHARE = 1.1  # a split file's last chain, in equal shares of its ranges (`last_chain_start`)


class RangeBook:
    """The counts known so far of the ranges of the split files among some shards' inputs, and
    which earlier ranges a range still waits for."""

    def __init__(self, files: Sequence[InputFile]):
        self._known: dict[str, dict[int, RangeCounts]] = {}
        # per split file, the sums of its known ranges from the first: [0..0], [0..1], ... (a range's
        # start is one lookup, not a sum over every range before it at each look)
        self._sums: dict[str, list[RangeCounts]] = {}
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
        """The ranges to count before extracting. With `chains` workers, a file's ranges before its
        last chain's start are counted (`last_chain_start`), so they can be extracted in any order
        by the other workers while the last chain goes on from its own extractions; and every range
        that is not extracted in this run. One chain: only the ranges not extracted in this run."""
        return [f for rel in self._upto for f in self.to_count_in(rel, chains)]

    def to_count_in(self, rel: str, chains: int = 1) -> list[InputFile]:
        """`to_count` for the split file `rel` only."""
        last = self._upto.get(rel)
        if last is None:
            return []
        assert last.range is not None
        known = self._known.get(rel, {})
        extracted = self._extracted.get(rel, set())
        counted = self.last_chain_start(rel, chains)
        return [last.range_of(i) for i in range(last.range.index)
                if i not in known and (i < counted or i not in extracted)]

    def last_chain_start(self, rel: str, chains: int) -> int:
        """The first range of the split file `rel`'s last chain (0: one chain). With `chains`
        workers the ranges before it are counted and shared by `chains - 1` of them; the last chain
        is a tenth longer than an equal share, so the counted ranges are done first and the version
        stager copies the last chain's parts while it still runs (docs/splitting.md, "Scheduling")."""
        last = self._upto.get(rel)
        if last is None or last.range is None or chains <= 1:
            return 0
        ranges = last.range.index + 1
        return max(1, ranges - math.ceil(ranges * LAST_CHAIN_SHARE / chains))

    def split_files(self) -> list[str]:
        """The split files with a range after their first among the inputs."""
        return list(self._upto)

    def missing_before(self, file: InputFile) -> list[InputFile]:
        """The earlier ranges of `file` whose counts are still unknown."""
        if file.range is None:
            return []
        known = self._known.get(file.rel, {})
        return [file.range_of(i) for i in range(file.range.index) if i not in known]

    def record(self, file: InputFile, counts: RangeCounts) -> None:
        if file.range is None:
            return
        known = self._known.setdefault(file.rel, {})
        known.setdefault(file.range.index, counts)
        sums = self._sums.setdefault(file.rel, [])
        while len(sums) in known:  # extend the run of known ranges from the first
            sums.append(known[len(sums)] if not sums else sums[-1] + known[len(sums)])

    def start(self, file: InputFile) -> RangeStart | None:
        """Where `file` starts (at the file's start for a whole file or a first range); None while
        the counts of a range before it are unknown."""
        if file.range is None or file.range.index == 0:
            return RangeStart()
        sums = self._sums.get(file.rel, ())
        index = file.range.index
        return RangeStart.after(sums[index - 1]) if len(sums) >= index else None

    def fill(self, file: InputFile, count: Callable[[InputFile], RangeCounts]) -> RangeStart:
        """`start(file)`, counting the missing earlier ranges here, in order."""
        for earlier in self.missing_before(file):
            self.record(earlier, count(earlier))
        start = self.start(file)
        assert start is not None
        return start


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
    """What an extraction reports: the counts its range adds (None: another run wrote it, or a
    speculative attempt stopped, `needs_before`)."""

    @property
    def counts(self) -> RangeCounts | None: ...

    @property
    def needs_before(self) -> bool: ...


OutcomeT = TypeVar("OutcomeT", bound=Outcome)
OutcomeT_co = TypeVar("OutcomeT_co", bound=Outcome, covariant=True)


class RangeWork(Protocol[OutcomeT_co]):
    """The unit of work the scheduler hands out, by name (pool_worker.PartWork): run where a pool
    worker or the run's own process picks it up."""

    def extract(self, task: int, shard: Shard, start: RangeStart) -> OutcomeT_co:
        """Write shard `task`'s part, its range continuing from `start`."""
        ...

    def count(self, file: InputFile) -> RangeCounts:
        """The count-only pass over one range of a split file."""
        ...


def run_serial(shards: Sequence[Shard], work: RangeWork[OutcomeT], report: Callable[[int, OutcomeT], None]) -> None:
    """One worker: `shards` in order, a range continuing from the ranges just before it, and from
    count-only passes over those that are not in the run."""
    book = RangeBook(list(shard_inputs(shards)))
    for task, shard in enumerate(shards):
        outcome = work.extract(task, shard, book.fill(shard.files[0], work.count))
        if outcome.counts is not None:
            book.record(shard.files[0], outcome.counts)
        report(task, outcome)


@dataclass(frozen=True, eq=False)
class Extracting:
    """In flight: shard `slot`'s part, its range from `start` (the slot is the task: its index in
    the run's shards, and its entry in the pool's pid table)."""

    stage: ClassVar[str] = "extract"  # the stage clock's name for it (engine/stage_clock.py)
    slot: int
    shard: Shard
    start: RangeStart

    @property
    def task(self) -> int:
        return self.slot

    @property
    def file(self) -> InputFile:
        return self.shard.files[0]

    def run(self, work: RangeWork[OutcomeT]) -> OutcomeT:
        return work.extract(self.slot, self.shard, self.start)


@dataclass(frozen=True, eq=False)
class Counting:
    """In flight: the count-only pass over a range (its slot follows the run's shards' slots)."""

    stage: ClassVar[str] = "count"
    slot: int
    file: InputFile

    def run(self, work: RangeWork) -> RangeCounts:
        return work.count(self.file)


Job = Extracting | Counting


class JobRunner(Protocol):
    """Where `run_pooled` sends its jobs, one per free worker (engine/worker_pool.py: a pool of
    processes, each job run there as `job.run(work)`)."""

    def start(self, job: Job) -> None:
        """Run `job` on a free worker."""
        ...

    def finished(self, timeout: float | None) -> list[tuple[Job, object]]:
        """The jobs done since the last call, with what each returned (waits up to `timeout`
        seconds for the first; None: until one is done). Raises what a job raised."""
        ...


def run_pooled(shards: Sequence[Shard], runner: JobRunner, report: Callable[[int, OutcomeT], None],
               workers: int = 2, strategy: RangeStrategy = RangeStrategy.CHAINS,
               watch: Callable[[list[int]], None] | None = None, poll: float = 1.0) -> None:
    """Run the extraction of `shards` (task = index) on `runner`'s `workers`, keeping one job per
    worker in flight so the next pick is made when a worker frees: first the count-only passes
    that let each split file run as several chains of ranges (`chains_per_file`), then the ready
    range furthest into its file (a chain goes on as soon as its predecessor is written), then
    whole files and first ranges, largest first. With `watch`, it is called every `poll` seconds
    while the pool works, with the extractions in flight (engine/stalls.py), and may raise to stop
    the run.

    `RangeStrategy.SPECULATION` (the format's `Splitter.strategy`): no count-only pass up front;
    every range is free from the start, and one whose counts before it are not known yet is
    extracted speculatively. The first range of a file that comes back `needs_before` settles that
    file: its ranges not started yet wait for their counts, and the count-only passes the chains
    need (those not known or in flight) are queued, as with `CHAINS`."""
    run = _PoolRun(shards, strategy, workers)
    in_flight: set[Job] = set()

    def fill_slots() -> None:
        while len(in_flight) < workers and (job := run.next_job(bool(in_flight))) is not None:
            runner.start(job)
            in_flight.add(job)

    fill_slots()
    while in_flight:
        done = runner.finished(None if watch is None else poll)
        if watch is not None:
            finished = {job for job, _ in done}
            watch([job.task for job in in_flight if job not in finished and isinstance(job, Extracting)])
        for job, result in done:
            in_flight.discard(job)
            run.running.discard(job.file)
            if isinstance(job, Counting):
                assert isinstance(result, RangeCounts)
                run.book.record(job.file, result)
                continue
            outcome = cast(OutcomeT, result)
            if outcome.needs_before:
                run.stopped(job)
                continue
            if outcome.counts is not None:
                run.book.record(job.file, outcome.counts)
            report(job.task, outcome)
        fill_slots()
    assert not run.later, "every range's earlier ranges were counted"


class _PoolRun:
    """What `run_pooled` knows (the book) and has still to start: ranges to count, shards free to
    start, shards waiting for the counts before them."""

    def __init__(self, shards: Sequence[Shard], strategy: RangeStrategy, workers: int):
        self.shards = shards
        self.book = book = RangeBook(list(shard_inputs(shards)))
        self.chains = chains_per_file(shards, workers)
        speculate = strategy is RangeStrategy.SPECULATION
        self.to_count = [] if speculate else book.to_count(self.chains)
        order = sorted(range(len(shards)), key=lambda task: -shards[task].size)  # the tail stays short
        # per split file, the ranges before its last chain (counted up front, extracted in file order)
        self.counted = {rel: book.last_chain_start(rel, self.chains) for rel in book.split_files()}
        self.free = deque(t for t in order if speculate or (book.start(shards[t].files[0]) is not None
                                                             and not self._in_counted(t)))
        self.later = [t for t in order if t not in self.free]
        self.running: set[InputFile] = set()  # the inputs of what is in flight
        self.settled: set[str] = set()  # split files whose speculation stopped
        self._count_slots: dict[InputFile, int] = {}

    def count_slot(self, file: InputFile) -> int:
        """A count's slot: after the shards' (a range counted again keeps its slot)."""
        return self._count_slots.setdefault(file, len(self.shards) + len(self._count_slots))

    def next_job(self, busy: bool) -> Extracting | Counting | None:
        """A count first, then the ready range furthest into its file (from `later`), else the next
        whole file or first range (`free`, or under speculation any range); None when nothing can
        start yet."""
        if not self.to_count:
            job = self._next_extraction()
            if job is not None:
                self.running.add(job.file)
                return job
            if busy or not self.later:
                return None
            # nothing will bring the counts ranges wait for: another run made an earlier range current
            self.to_count.extend({f for t in self.later for f in self.book.missing_before(self.shards[t].files[0])})
            if not self.to_count:
                return None
        file = self.to_count.pop(0)
        self.running.add(file)
        return Counting(self.count_slot(file), file)

    def _in_counted(self, task: int) -> bool:
        file = self.shards[task].files[0]
        return file.range is not None and file.range.index < self.counted.get(file.rel, 0)

    def _next_extraction(self) -> Extracting | None:
        """First a chain's next range (the furthest into its file: the last chain of a file is the
        critical path), then the counted ranges in file order (so the version stager can copy their
        parts as they come, not all at the publish), then whole files and first ranges."""
        ready = [t for t in self.later if self.book.start(self.shards[t].files[0]) is not None]
        chained = [t for t in ready if not self._in_counted(t)]
        if chained:
            task = max(chained, key=lambda t: _range_index(self.shards[t]))
        elif ready:
            task = min(ready, key=lambda t: _range_index(self.shards[t]))
        elif self.free:
            task = self.free.popleft()
        else:
            return None
        if task in self.later:
            self.later.remove(task)
        shard = self.shards[task]
        start = self.book.start(shard.files[0])
        return Extracting(task, shard, SPECULATIVE if start is None else start)  # None: only when speculating

    def stopped(self, job: Extracting) -> None:
        """A speculative range needs its counts: it waits for them, and so, the first time, do its
        file's ranges not started yet; the count-only passes its chains need are queued."""
        self.later.append(job.task)
        rel = job.file.rel
        if rel in self.settled:
            return
        self.settled.add(rel)
        self.counted[rel] = self.book.last_chain_start(rel, self.chains)
        waiting = [t for t in self.free if self.shards[t].files[0].rel == rel
                   and (self.book.start(self.shards[t].files[0]) is None or self._in_counted(t))]
        for t in waiting:
            self.free.remove(t)
            self.later.append(t)
        self.to_count.extend(f for f in self.book.to_count_in(rel, self.chains) if f not in self.running)


def _range_index(shard: Shard) -> int:
    rng = shard.files[0].range
    return -1 if rng is None else rng.index
