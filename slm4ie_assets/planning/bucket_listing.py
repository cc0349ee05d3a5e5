"""What a bucket prefix holds that its local mirror lacks, and whether that has settled, from ONE
listing: the raw sensor's question for a dataset whose raw folder is in a bucket (D26). A tick never
downloads (it must stay cheap whatever the object sizes: Dagster times a sensor out); the run it
requests mirrors (storage/mirror.py), plans, extracts and publishes.

Changed: the mirror's state (storage/mirror_state.py) says what the local copy holds. An input
object it does not hold whole with the listed size and ETag is new or changed; an input it holds
whose object is gone was removed. Only what the mirror copies counts (`storage.mirror.mirrorable`).

Settled: planning/settling.py's rule read from what a listing shows. A visible S3 object is always
whole, but a producer writing many objects in turn has not finished until the listing holds still:
an object has settled when its size and ETag are as at the previous tick's look, or its LastModified
is at least `settle_seconds` old. Buckets have no copy tools' temporary names, but the mirror would
copy such objects and the raw folder's walk skips them, so they are leftovers by the disk's rule
(changing: they hold the dataset back; settled: named once, then ignored); the archive stage's own
temporary names are skipped.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..archives import is_temp_name
from ..extractors.discovery import escaped_name, is_arriving_name
from ..storage.base import StoredObject
from ..storage.mirror_state import MirroredFile
from ..utils.fswalk import is_copy_tool_name
from .settling import FUTURE_SLACK_NS, MAX_STAMPS, SHOWN, Arrivals, Leftover, Look, judge_leftovers, stamp

_NS = 1_000_000_000


@dataclass(frozen=True)
class ListingChanges:
    """One listing compared with the mirror's state and with the previous tick's look."""

    arriving: Arrivals  # objects not settled (`fresh`), copy tools' leftovers, the look to keep
    new: tuple[str, ...]  # input objects the mirror does not hold
    changed: tuple[str, ...]  # input objects it holds with another size or ETag (or not whole)
    removed: tuple[str, ...]  # inputs it holds whose objects are gone
    inputs: int  # input objects listed
    work: str  # digest of the listed inputs and of the mirror's: equal digests, the same run's work

    @property
    def pending(self) -> bool:
        return bool(self.new or self.changed or self.removed)

    def counts(self) -> str:
        """'2 new (a.txt, b.txt); 1 removed (c.txt)': what a run would bring in."""
        return "; ".join(f"{len(found)} {word} ({names_of(found)})" for word, found in
                         (("new", self.new), ("changed", self.changed), ("removed", self.removed)) if found)

    def reason(self, dataset: str, location: str, settle_seconds: int, wait_left: int) -> str:
        """The skip reason while objects arrive: how many, some names, and the rule."""
        found = self.arriving
        return (f"{dataset}: {len(found.fresh) + len(found.temporary)} object(s) in {location} still arriving "
                f"({found.names()}): changed since the previous tick's listing and written within the last "
                f"{settle_seconds}s (a copy tool's temporary name too); no run is requested until the listing "
                f"holds still, {wait_left}s more at most (max_settle_wait)")


def names_of(names: tuple[str, ...]) -> str:
    shown = ", ".join(escaped_name(n) for n in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def copy_tool_entry(name: str) -> str | None:
    """The copy tool's leftover an object belongs to, as the raw folder's walk would meet it: a
    working folder on its path ('a/.~tmp~/'), or its own name ('a/x.part'); None for an input or
    an archive-stage temporary name."""
    parts = name.split("/")
    for depth, part in enumerate(parts, 1):
        if is_copy_tool_name(part):
            return "/".join(parts[:depth]) + ("" if depth == len(parts) else "/")
    return name if is_arriving_name(parts[-1]) else None


def is_input(name: str) -> bool:
    return copy_tool_entry(name) is None and not is_temp_name(name.rsplit("/", 1)[-1])


def compare_listing(listing: Iterable[StoredObject], mirrored: Mapping[str, MirroredFile], settle_seconds: int,
                    previous: Look | None = None, now_ns: int | None = None) -> ListingChanges:
    """`listing`: the objects a mirror copies; `mirrored`: the mirror's state, by name."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    previous = previous or Look()
    inputs: dict[str, StoredObject] = {}
    leftovers: dict[str, list[StoredObject]] = {}
    for obj in listing:
        entry = copy_tool_entry(obj.name)
        if entry is not None:
            leftovers.setdefault(entry, []).append(obj)
        elif not is_temp_name(obj.name.rsplit("/", 1)[-1]):
            inputs[obj.name] = obj
    fresh, future, stamps = _unsettled(inputs.values(), settle_seconds, previous, now_ns)
    changing, stale, kept = judge_leftovers([_leftover(rel, objs) for rel, objs in sorted(leftovers.items())],
                                            settle_seconds, previous, now_ns)
    arriving = Arrivals(tuple(sorted(changing)), tuple(sorted(fresh)), tuple(sorted(future)),
                        Look(frozenset(stamps + kept), previous.waiting_since), tuple(sorted(stale)))
    held = {name: f for name, f in mirrored.items() if is_input(name)}
    new = tuple(sorted(name for name in inputs if name not in held))
    changed = tuple(sorted(name for name, obj in inputs.items() if name in held and
                           (not held[name].whole or (held[name].size, held[name].tag) != (obj.size, obj.tag))))
    removed = tuple(sorted(name for name in held if name not in inputs))
    return ListingChanges(arriving, new, changed, removed, len(inputs), _work(inputs, held))


def _unsettled(inputs: Iterable[StoredObject], settle_seconds: int, previous: Look,
               now_ns: int) -> tuple[list[str], list[str], list[bytes]]:
    """(not settled, of those the ones whose LastModified is ahead of the clock, the look's stamps)."""
    fresh: list[str] = []
    future: list[str] = []
    stamps: list[bytes] = []
    if settle_seconds <= 0:
        return fresh, future, stamps
    for obj in inputs:
        if now_ns - obj.modified_ns >= settle_seconds * _NS:
            continue  # settled by age
        seen = stamp(obj.name, f"{obj.size} {obj.tag}", obj.modified_ns)
        ahead = obj.modified_ns > now_ns + FUTURE_SLACK_NS  # never old enough: always kept in the look
        if ahead or len(stamps) < MAX_STAMPS:
            stamps.append(seen)
        if seen in previous.stamps:
            continue  # unchanged since the previous look
        fresh.append(obj.name)
        if ahead:
            future.append(obj.name)
    return fresh, future, stamps


def _leftover(rel: str, objects: list[StoredObject]) -> Leftover:
    """What a copy tool's object (`rel`), or working folder (`rel` ends in '/'), shows in a listing."""
    if not rel.endswith("/"):
        (obj,) = objects
        return Leftover(rel, f"{obj.size} {obj.tag}", obj.modified_ns)
    entries = sorted(f"{o.name[len(rel):]}\0{o.size} {o.tag}\0{o.modified_ns}" for o in objects)
    digest = hashlib.blake2b("\0".join(entries).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return Leftover(rel, digest, max(o.modified_ns for o in objects))


def _work(inputs: Mapping[str, StoredObject], held: Mapping[str, MirroredFile]) -> str:
    """A digest of where a run would start (the mirror's inputs) and where it would end (the listed ones)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(inputs):
        h.update(f"L\0{name}\0{inputs[name].size}\0{inputs[name].tag}\n".encode("utf-8", "surrogateescape"))
    for name in sorted(held):
        f = held[name]
        h.update(f"M\0{name}\0{f.size}\0{f.tag}\0{f.whole}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()
