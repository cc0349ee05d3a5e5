"""Shard planning and input fingerprints.

A shard is the unit of extraction and of the `shards/<key>` dynamic partitions. Up to the catalog's
`shard_group_threshold` files, a shard is one input file (one config directory for huggingface)
keyed by its relative path. Above it, a shard is a contiguous run of files in ADDENDUM 3.1 order
whose boundaries come from a hash of each path (content-defined chunking): a file whose path hash
is 0 modulo the average group size starts a new group, keyed by that file; files before the first
such file form the head group `%head` (no escaped path can contain a bare `%`). The average size is
a power of two chosen from the file count, so it only changes when the count crosses
threshold x 2^k. Adding or removing a file therefore changes only the group it falls into (and a
new boundary file splits its group in two): every other shard keeps its key and fingerprint.

Output bytes never depend on the grouping: a part holds its files' documents in file order and
parts are published in file order.

A file over `split_bytes` (extractors with a `splitter`, docs/splitting.md) becomes several range
shards keyed `<file key>%r<i>` (i = 0, 1, ...; `%r` cannot come from an escaped path), each with
the fingerprint `<file fingerprint>@<start>-<end>`. Its cuts come from stat and a few small reads
near each cut (the format's splitter); it never joins a group. Unset, `split_bytes` is a fixed size
(range_bytes): keys are Dagster partitions, so they depend on the raw tree and extract.yaml alone,
never on the host, the cores or the workers of the process that plans them.

Fingerprints come from stat alone, so planning never reads content (split files aside).
"""

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..extractors.base import Extractor, Fingerprint
from ..extractors.discovery import sort_key
from ..extractors.input_file import FileRange, InputFile
from .input_stamps import InputStamp, stamp_of

MAX_KEY_LEN = 512
DEFAULT_GROUP_THRESHOLD = 1000  # same default as Catalog.shard_group_threshold
HEAD_GROUP_KEY = "%head"
# Dagster does not validate dynamic partition keys, but `...` breaks ranges, `,` breaks lists and
# brackets break the UI's range syntax; `%` is escaped so the encoding stays reversible.
_UNSAFE = re.compile(r"[%,\[\]\x00-\x1f\x7f]")
_REFUSED = re.compile(r"[,\[\]\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Shard:
    """One unit of extraction. `fingerprint` is the string part metas and manifests persist: a
    single file's `Fingerprint` as text, or `g<n>:<digest>` over a group's paths and fingerprints."""

    key: str
    files: tuple[InputFile, ...]
    fingerprint: str
    size: int  # bytes of all its files, from their fingerprints
    # each file's full stat when planned (planning/input_stamps.py): checked again before the part commits;
    # not persisted, not compared (empty: a shard built without planning, never checked)
    stamps: tuple[InputStamp, ...] = field(default=(), compare=False)

    @property
    def order(self) -> tuple:
        return sort_key(self.files[0].rel)


def shard_key(rel: str, suffix: str = "") -> str:
    """A stable, valid partition key for a relative path (readable where the path is safe), with
    `suffix` (a range's `%r<i>`) kept whole when the path is shortened."""
    key = _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", rel)
    key = key.replace("...", "..%2E")
    if len(key) + len(suffix) > MAX_KEY_LEN:
        digest = hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        key = f"{key[: MAX_KEY_LEN - 17 - len(suffix)]}~{digest}"
    return key + suffix


def check_shard_key(key: str) -> str:
    """Refuse keys that would break Dagster's partition syntax (keys typed into the UI included)."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LEN or "..." in key or _REFUSED.search(key):
        raise ValueError(f"invalid shard key {key!r}: no ',', '[', ']', '...', control characters, "
                         f"not empty, at most {MAX_KEY_LEN} characters")
    return key


def group_size(n_files: int, threshold: int) -> int:
    """Average files per shard: 1 up to the threshold, else the smallest power of two that keeps
    the expected shard count at or under the threshold."""
    avg = 1
    while n_files > threshold * avg:
        avg *= 2
    return avg


def _path_hash(rel: str) -> int:
    return int.from_bytes(hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "little")


def _group_shard(key: str, files: list[InputFile], fps: list[Fingerprint], stamps: list[InputStamp]) -> Shard:
    h = hashlib.sha1()
    for f, fp in zip(files, fps, strict=True):
        h.update(f.rel.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
        h.update(str(fp).encode())
        h.update(b"\n")
    return Shard(key, tuple(files), f"g{len(files)}:{h.hexdigest()[:20]}", sum(fp.size for fp in fps),
                 tuple(stamps))


AUTO_RANGE = 8 * 1024**2  # split_bytes unset: 512 MiB is 64 ranges (a 64-core node busy), 300 MB 36 (issue 41)
MAX_AUTO_RANGES = 256  # a file over 2 GiB gets bigger ranges instead of more: its partitions and parts stay few


def range_bytes(split_bytes: int | None, size: int) -> int:
    """The range size for a file of `size` bytes: `split_bytes` where extract.yaml sets it (0: never
    split), else AUTO_RANGE, or size / MAX_AUTO_RANGES for a file over MAX_AUTO_RANGES of those
    (docs/splitting.md). A function of the file and extract.yaml alone, never of the host: the
    range keys are partitions every host must plan alike. Per file, so a new file in the dataset
    never re-cuts the others."""
    if split_bytes is not None:
        return split_bytes
    return max(AUTO_RANGE, -(-size // MAX_AUTO_RANGES))


def range_shards(extractor: Extractor, file: InputFile, fp: Fingerprint, split_bytes: int,
                 stamp: InputStamp | None = None) -> list[Shard]:
    """One shard for the file, or one per range when it is over `split_bytes` and its format splits."""
    stamps = () if stamp is None else (stamp,)
    splitter = extractor.splitter
    if splitter is None or split_bytes <= 0 or fp.size <= split_bytes:
        return [Shard(shard_key(file.rel), (file,), str(fp), fp.size, stamps)]
    cuts = cached_cuts(extractor, file, fp, split_bytes)
    if len(cuts) == 2:
        return [Shard(shard_key(file.rel), (file,), str(fp), fp.size, stamps)]
    def size_of(i: int) -> int:  # bytes, for progress and scheduling; rows are scaled to the file's size
        n = cuts[i + 1] - cuts[i]
        return n if splitter.unit == "bytes" else fp.size * n // max(1, cuts[-1])
    return [Shard(shard_key(file.rel, f"%r{i}"), (part,), f"{fp}@{cuts[i]}-{cuts[i + 1]}", size_of(i), stamps)
            for i, part in enumerate(range_files(file, cuts))]


def range_files(file: InputFile, cuts: Sequence[int]) -> list[InputFile]:
    """The ranges of a file cut at `cuts` (one InputFile each, the last reading to the end)."""
    frozen = tuple(cuts)
    return [InputFile(file.path, file.rel, FileRange(i, frozen)) for i in range(len(frozen) - 1)]


_CUTS: dict[tuple, tuple[int, ...]] = {}  # sensors plan every tick: reuse the cuts of an unchanged file
_CUTS_KEPT = 256


def cached_cuts(extractor: Extractor, file: InputFile, fp: Fingerprint, split_bytes: int) -> tuple[int, ...]:
    splitter = extractor.splitter
    assert splitter is not None
    key = (type(splitter), str(file.path), str(fp), split_bytes)
    cuts = _CUTS.get(key)
    if cuts is None:
        cuts = splitter.plan(file, fp.size, split_bytes)
        if len(_CUTS) >= _CUTS_KEPT:
            _CUTS.clear()
        _CUTS[key] = cuts
    return cuts


def _stamp_and_fingerprint(extractor: Extractor, file: InputFile) -> tuple[InputStamp, Fingerprint]:
    """The file's stamp (planning/input_stamps.py) and fingerprint; from one stat call when the extractor
    fingerprints as the base class does (size and mtime), which keeps planning a stat per file.
    The stamp is taken first: a change between the two shows when the part is committed."""
    stamp = stamp_of(file.path)
    if type(extractor).fingerprint_of is Extractor.fingerprint_of and len(stamp.entries) == 1:
        name, st = stamp.entries[0]
        if name == "" and st is not None:
            return stamp, Fingerprint(st[0], str(st[1]))
    return stamp, extractor.fingerprint_of(file)


def plan_shards(extractor: Extractor, files: Sequence[InputFile], group_threshold: int = DEFAULT_GROUP_THRESHOLD,
                split_bytes: int | None = 0) -> list[Shard]:
    """The dataset's shards in the publish order of ADDENDUM 3.1; `split_bytes` None: the automatic
    range size (range_bytes)."""
    files = sorted(files, key=lambda f: sort_key(f.rel))
    avg = group_size(len(files), group_threshold)
    if avg == 1:
        shards = []
        for f in files:
            stamp, fp = _stamp_and_fingerprint(extractor, f)
            shards += range_shards(extractor, f, fp, range_bytes(split_bytes, fp.size), stamp)
        return shards
    mask = avg - 1
    shards = []
    key = HEAD_GROUP_KEY
    group: list[InputFile] = []
    fps: list[Fingerprint] = []
    stamps: list[InputStamp] = []
    for f in files:
        stamp, fp = _stamp_and_fingerprint(extractor, f)
        cut = range_bytes(split_bytes, fp.size)
        alone = range_shards(extractor, f, fp, cut, stamp) if 0 < cut < fp.size else None
        if alone is not None or _path_hash(f.rel) & mask == 0:
            if group:
                shards.append(_group_shard(key, group, fps, stamps))
            key, group, fps, stamps = shard_key(f.rel), [], [], []
        if alone is not None:  # a file over split_bytes is a shard (or shards) of its own
            shards += alone
            key = ""  # the files after it start a group named by the first of them
            continue
        if not key:
            key = shard_key(f.rel)
        group.append(f)
        fps.append(fp)
        stamps.append(stamp)
    if group:
        shards.append(_group_shard(key, group, fps, stamps))
    return shards


def list_shards(spec, group_threshold: int = DEFAULT_GROUP_THRESHOLD) -> list[Shard]:
    """A dataset's shards from one listing and stat calls (no content reads, no part metas)."""
    from ..extractors.registry import make_extractor

    extractor = make_extractor(spec.extractor, spec.options)
    return plan_shards(extractor, extractor.list_inputs(spec.raw_dir).files, group_threshold, spec.split_bytes)
