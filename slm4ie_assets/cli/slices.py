"""`--slice I/N`: the I-th of N slices of a dataset's shards, for the tasks of a batch array job.

Slices are cut from the whole shard list (largest first, dealt round-robin), not from the stale
list, so every shard belongs to exactly one slice however far the other tasks have got; `extract`
writes the stale shards of its slice and `status --slices N` names each shard's slice by the same rule.
"""

import argparse
from dataclasses import dataclass

from ..planning.shards import Shard


@dataclass(frozen=True)
class Slice:
    """The I-th of N slices (1-based), as `--slice I/N` gives it."""

    index: int
    count: int


def parse_slice(text: str) -> Slice:
    i, sep, n = text.partition("/")
    if not (sep and i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
        raise argparse.ArgumentTypeError(f"--slice wants I/N with 1 <= I <= N, not {text!r}")
    return Slice(int(i), int(n))


def slice_of(shards: list[Shard], part: Slice) -> list[Shard]:
    """The I-th of N slices: largest shards first, dealt round-robin, so slices carry similar bytes;
    returned in shard order."""
    by_size = sorted(range(len(shards)), key=lambda i: (-shards[i].size, shards[i].key))
    mine = {i for rank, i in enumerate(by_size) if rank % part.count == part.index - 1}
    return [s for i, s in enumerate(shards) if i in mine]
