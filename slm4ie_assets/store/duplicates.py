"""Duplicate uids over a whole dataset, in bounded memory (D5: ids are kept, repeats are counted).

Each part stores one 64-bit hash of each document's uid (`<id>.uids`, in line order) as it is
written, so a publish counts repeats without decoding the text again; hash collisions cost nothing
but an example that is re-checked against the real uid.
"""

import bisect
from array import array
from dataclasses import dataclass
from pathlib import Path

import orjson
from xxhash import xxh3_64_intdigest

from ..planning.shards import Shard
from .dataset_store import DatasetStore
from .part_meta import PartMeta

EXAMPLES = 5
_SMALL_UID_SET = 250_000  # up to here a Python set (~30 MB) beats importing numpy (~0.25 s)


def uid_hash(u: str) -> int:
    """64-bit hash of a uid, for duplicate counting in bounded memory (collisions are re-checked).
    `PartWriter.add_documents` inlines this expression (one call less per document): keep the two
    equal; the duplicate tests find no example otherwise."""
    return xxh3_64_intdigest(u.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Duplicates:
    count: int  # documents whose uid an earlier document already used
    examples: tuple[str, ...]  # up to EXAMPLES of those uids, in document order


def duplicate_uids(store: DatasetStore, metas: list[PartMeta], shards: list[Shard],
                   limit: int = EXAMPLES) -> Duplicates:
    """Count duplicate uids from the parts' 64-bit uid hashes, in bounded memory."""
    files = [store.part_paths(s.key).uids for s in shards]
    total = sum(m.docs for m in metas)
    if total < 2:
        return Duplicates(0, ())
    if total <= _SMALL_UID_SET:
        count, hashes = _duplicates_in_a_set(files, limit)
    else:
        count, hashes = _duplicates_sorted(files, total, limit)
    return Duplicates(count, tuple(_uid_examples(store, shards, hashes)))


def _read_hashes(path: Path) -> array:
    hashes = array("Q")
    with open(path, "rb") as fh:
        hashes.frombytes(fh.read())
    return hashes


def _duplicates_in_a_set(files: list[Path], limit: int) -> tuple[int, list[int]]:
    """Same answer as `_duplicates_sorted`: the count, and the `limit` smallest repeated hashes."""
    seen: set[int] = set()
    smallest: list[int] = []  # the `limit` smallest distinct repeated hashes, sorted
    count = 0
    for f in files:
        for h in _read_hashes(f):
            if h in seen:
                count += 1
                if (len(smallest) < limit or h < smallest[-1]) and h not in smallest:
                    bisect.insort(smallest, h)
                    del smallest[limit:]
            else:
                seen.add(h)
    return count, smallest


def _duplicates_sorted(files: list[Path], total: int, limit: int) -> tuple[int, list[int]]:
    """numpy sort in passes of at most 8M hashes (64 MB), each pass one residue class."""
    import numpy as np

    passes = max(1, -(-total // (8 << 20)))
    dup_count = 0
    dup_hashes: list[int] = []
    for p in range(passes):
        chunks = []
        for f in files:
            arr = np.fromfile(f, dtype=np.uint64)
            if passes > 1:
                arr = arr[(arr % np.uint64(passes)) == np.uint64(p)]
            chunks.append(arr)
        allh = np.sort(np.concatenate(chunks))
        if allh.size < 2:
            continue
        same = allh[1:] == allh[:-1]
        dup_count += int(same.sum())
        if same.any():
            dup_hashes.extend(int(h) for h in np.unique(allh[1:][same])[:limit])
    return dup_count, sorted(dup_hashes)[:limit]


def _uid_examples(store: DatasetStore, shards: list[Shard], dup_hashes: list[int]) -> list[str]:
    """The uids behind the duplicate hashes, in document order. A part's `.uids` file holds one hash
    per line of its text, so only the lines that carry a wanted hash are decoded."""
    examples: list[str] = []
    wanted = set(dup_hashes)
    for s in shards:
        if not wanted:
            break
        paths = store.part_paths(s.key)
        first_at: dict[int, int] = {}  # line index -> hash, first occurrence of each wanted hash here
        taken: set[int] = set()
        for i, h in enumerate(_read_hashes(paths.uids)):
            if h in wanted and h not in taken:
                taken.add(h)
                first_at[i] = h
        if not first_at:
            continue
        last = max(first_at)
        with open(paths.text, "rb") as fh:
            for i, line in enumerate(fh):
                if i in first_at:
                    u = orjson.loads(line)["uid"]
                    if uid_hash(u) in wanted and u not in examples:
                        examples.append(u)
                        wanted.discard(uid_hash(u))
                if i >= last:
                    break
    return examples
