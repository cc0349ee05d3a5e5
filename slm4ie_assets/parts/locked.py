"""One part written under its shard lock: the dataset lock SHARED (so no publish, unpack or clean-up
runs meanwhile) and the shard's own lock EXCLUSIVE (so two runs never write one part at once).

Whether the part is current is decided again once the shard lock is held: the run that held it may
have just written this very part, and then there is nothing left to do (unless forced). Every
process that writes a part holds both locks itself, pool workers included. A process takes the
dataset lock once (never a second time through another descriptor: on NFS flock is emulated with
per-process POSIX locks, and releasing the inner one would drop the outer one).
"""

from contextlib import ExitStack
from dataclasses import dataclass

from ..catalog import DatasetSpec
from ..extractors.base import Extractor
from ..extractors.extract_context import AT_FILE_START, NeedsBefore, RangeCounts, RangeStart
from ..planning.shards import Shard
from ..store.dataset_store import DatasetStore, OutputWriteError
from ..store.locks import Log, dataset_lock, shard_lock
from ..store.part_meta import PartMeta
from .writer import Progress, write_part_counted


@dataclass(frozen=True, slots=True)
class PartOutcome:
    """What became of one shard's part in this run."""

    meta: PartMeta | None  # the part this run wrote; None when another run had just made it current
    waited_for: str  # the holder of the shard lock this run waited for ("" when it was free)
    counts: RangeCounts | None = None  # what the part adds to its split file's counts (docs/splitting.md)
    needs_before: bool = False  # a speculative attempt stopped: extract it again once `before` is known


def write_part_locked(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore, force: bool,
                      progress: Progress | None = None, log: Log | None = None,
                      start: RangeStart = AT_FILE_START, text_thread: bool = True) -> PartOutcome:
    """Write `shard`'s part under its shard lock, or leave it when it became current while this run
    waited. The calling process already holds the dataset lock shared (`pipeline.extract_parts`).
    A speculative attempt that needs the counts before it leaves no file (`needs_before`)."""
    with ExitStack() as held:
        try:
            waited_for = held.enter_context(shard_lock(store.shard_lock(shard.key), spec.key, shard.key, log=log))
        except OSError as exc:  # creating the lock file on a full disk; LockFileError and LockTimeout pass
            raise OutputWriteError.of(spec, store.shard_locks, exc) from exc
        if not force and store.part_is_current(shard):
            return PartOutcome(None, waited_for)
        try:
            meta, counts = write_part_counted(spec, extractor, shard, store, progress, start, text_thread)
        except NeedsBefore:
            return PartOutcome(None, waited_for, needs_before=True)
        return PartOutcome(meta, waited_for, counts)


def write_part_in_worker(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
                         force: bool, progress: Progress | None = None,
                         start: RangeStart = AT_FILE_START, text_thread: bool = True) -> PartOutcome:
    """A pool worker is a process of its own: it takes the dataset lock shared itself, so even if it
    outlives a killed parent no publish, unpack or clean-up starts before its part is done."""
    with dataset_lock(store.lock, spec.key, shared=True):
        return write_part_locked(spec, extractor, shard, store, force, progress, None, start, text_thread)


def outcome_message(spec: DatasetSpec, shard: Shard, outcome: PartOutcome, force: bool) -> str:
    """The log line of a shard whose lock was held by another run when this one reached it."""
    if outcome.meta is None:
        done = "it is current now, so this run skipped it"
    else:
        done = "rewrote it (force)" if force else "it was still stale, so this run wrote it"
    return f"{spec.key}: shard {shard.key!r} was being written by another run ({outcome.waited_for}); {done}"
