"""Length distributions (characters and tokens per document) in bounded memory, whatever the size.

The part writer counts every document into log buckets while it writes (no second read of the
output); a part's histogram is persisted in its PartMeta and the publish step adds the parts'
histograms into the manifest's. A part written before lengths were recorded has none (None), and
then neither has the manifest: a sum over the other parts would pass for the whole dataset's.

A histogram has at most ~14,600 buckets, so memory and the manifest stay small at any corpus size.

Buckets: a value below 256 has a bucket of its own (exact); a larger value keeps its 8 leading
bits, so a bucket [lo, hi] spans at most lo/128. A percentile is reported as the middle of its
bucket, clamped to the exact min and max: it is exact below 256 and otherwise within 1/256 (0.4%)
of the true nearest-rank value.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress

EXACT_BITS = 8
EXACT_BELOW = 1 << EXACT_BITS  # 256
BUCKETS = (64 - EXACT_BITS + 1) << EXACT_BITS  # room for any 64-bit length
PERCENTILES = (10, 50, 90, 99)
RELATIVE_ERROR = 1 / EXACT_BELOW  # half a bucket of width <= lo/128, relative to a value >= lo


def length_bucket(n: int) -> int:
    """The bucket key of a length. `PartWriter.add_documents` inlines this expression: keep them equal."""
    if n < EXACT_BELOW:
        return n
    shift = n.bit_length() - EXACT_BITS
    return (shift << EXACT_BITS) | (n >> shift)


def bucket_bounds(key: int) -> tuple[int, int]:
    """The smallest and largest length that falls into bucket `key` (inclusive)."""
    if key < EXACT_BELOW:
        return key, key
    shift, lead = key >> EXACT_BITS, key & (EXACT_BELOW - 1)
    return lead << shift, ((lead + 1) << shift) - 1


@dataclass(frozen=True, slots=True)
class LengthHistogram:
    """How many documents have each length, in log buckets (persisted: field order = key order)."""

    count: int
    min: int  # exact; 0 when count is 0
    max: int  # exact; 0 when count is 0
    buckets: tuple[tuple[int, int], ...]  # (bucket key, documents), ascending key, no zero counts

    @classmethod
    def from_json(cls, d: dict) -> "LengthHistogram":
        return cls(count=d["count"], min=d["min"], max=d["max"],
                   buckets=tuple((int(k), int(c)) for k, c in d["buckets"]))

    def percentile(self, q: int) -> int:
        """The nearest-rank q-th percentile (exact below 256, else within RELATIVE_ERROR)."""
        if self.count == 0:
            return 0
        rank = max(1, -(-q * self.count // 100))
        if rank == 1:
            return self.min
        if rank >= self.count:
            return self.max
        seen = 0
        for key, n in self.buckets:
            seen += n
            if seen >= rank:
                lo, hi = bucket_bounds(key)
                return min(max((lo + hi) // 2, self.min), self.max)
        return self.max


EMPTY = LengthHistogram(0, 0, 0, ())


@dataclass(frozen=True, slots=True)
class LengthStats:
    """Characters per document (every document) and tokens per annotated document."""

    characters: LengthHistogram
    tokens: LengthHistogram

    @classmethod
    def from_json(cls, d: dict) -> "LengthStats":
        return cls(characters=LengthHistogram.from_json(d["characters"]),
                   tokens=LengthHistogram.from_json(d["tokens"]))

    @classmethod
    def from_json_or_none(cls, d: dict | None) -> "LengthStats | None":
        """None for a file written before lengths were recorded (no key, or `null`)."""
        return None if d is None else cls.from_json(d)


NO_LENGTHS = LengthStats(EMPTY, EMPTY)


class LengthCounter:
    """The mutable side, filled by the part writer: `counts[length_bucket(n)] += 1` plus exact min/max."""

    __slots__ = ("counts", "min", "max")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.min = 1 << 64  # above any length until one is counted
        self.max = 0

    def add(self, n: int) -> None:
        self.counts[length_bucket(n)] += 1
        if n < self.min:
            self.min = n
        if n > self.max:
            self.max = n

    def histogram(self) -> LengthHistogram:
        if self.max < self.min:  # nothing counted
            return EMPTY
        # of ~14,600 buckets only those between the min's and the max's can be used: a part's
        # histogram costs a few hundred steps, not a walk over every bucket
        low, high = length_bucket(self.min), length_bucket(self.max) + 1
        counts = self.counts
        buckets = tuple((k, counts[k]) for k in compress(range(low, high), counts[low:high]))
        return LengthHistogram(sum(n for _, n in buckets), self.min, self.max, buckets)


def merged_histogram(histograms: Iterable[LengthHistogram]) -> LengthHistogram:
    counts: dict[int, int] = {}
    lows, highs = [], []
    for h in histograms:
        if not h.count:
            continue
        lows.append(h.min)
        highs.append(h.max)
        for key, n in h.buckets:
            counts[key] = counts.get(key, 0) + n
    if not counts:
        return EMPTY
    return LengthHistogram(sum(counts.values()), min(lows), max(highs), tuple(sorted(counts.items())))


def merged_lengths(stats: Iterable[LengthStats | None]) -> LengthStats | None:
    """The dataset's distributions from its parts' (the publish step); None when any part has none."""
    known = []
    for s in stats:
        if s is None:
            return None
        known.append(s)
    return LengthStats(merged_histogram(s.characters for s in known), merged_histogram(s.tokens for s in known))
