"""The sidecar of a version by publish unit (docs/splitting.md, "Publishing a split file"): a
shard's own gzip member as it is, or the ranges of a split file as one member, written line by line
as the unsplit part would have been, at once (`sidecar_source`) or range by range while the ranges
are staged (`MemberFeed`)."""

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import BinaryIO

from zlib_ng import gzip_ng

from ..planning.shards import Shard
from ..utils.gzipio import GzipMemberWriter
from .dataset_store import DatasetStore, PartPaths
from .part_meta import PartMeta
from .sidecar_stubs import stub_lines_from_text

# one piece of a published file: a part file, or lines written into one gzip member
Source = Path | Callable[[], Iterable[bytes]]


def publish_units(shards: Sequence[Shard]) -> list[range]:
    """The shard indexes of each publish unit: one shard, or the consecutive ranges of a split file."""
    units: list[range] = []
    start = 0
    for i in range(1, len(shards) + 1):
        if i == len(shards) or not _continues(shards[i - 1], shards[i]):
            units.append(range(start, i))
            start = i
    return units


def _continues(previous: Shard, shard: Shard) -> bool:
    """`shard` is a later range of the file `previous` holds a range of."""
    first = shard.files[0]
    return first.range is not None and first.range.index > 0 and previous.files[0].rel == first.rel


def ranges_sidecar_lines(parts: Sequence[tuple[PartPaths, PartMeta]]) -> Iterator[bytes]:
    """The sidecar lines of a split file's ranges in order: each range's own lines, or stubs for a
    range without annotations. Written line by line into one gzip member, they are compressed in
    the same chunks as the unsplit part's, so into the same bytes (docs/splitting.md)."""
    for paths, meta in parts:
        if meta.has_annotations:
            with gzip_ng.open(paths.annotations, "rb") as fh:
                yield from fh
        elif meta.docs:
            yield from stub_lines_from_text(paths.text)


def is_split(shard: Shard) -> bool:
    """A range of a split file (its sidecar always goes into the file's one member)."""
    return shard.files[0].range is not None


class MemberFeed:
    """The one gzip member of a split file's sidecar, written range by range as each range is
    staged, so the publish does not recompress the whole file's annotations after its last range.
    Opened at the first line: a file whose ranges hold no document gets no member, as before."""

    def __init__(self, out: BinaryIO, first: int):
        self.next = first  # the shard index of the next range to feed
        self._out = out
        self._writer: GzipMemberWriter | None = None

    def feed(self, paths: PartPaths, meta: PartMeta) -> None:
        for line in ranges_sidecar_lines([(paths, meta)]):
            if self._writer is None:
                self._writer = GzipMemberWriter(self._out, threaded=False)
            self._writer.write(line)
        self.next += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def sidecar_source(store: DatasetStore, group: list[tuple[Shard, PartMeta]]) -> Source | None:
    """The sidecar piece of one shard, or of the ranges of one split file as one member, written
    as the unsplit part would have been (docs/splitting.md); stubs rebuilt from the text for a part
    without annotations; None for a part without documents."""
    if len(group) > 1 or is_split(group[0][0]):  # a range's own member is never published
        if not any(m.docs for _, m in group):
            return None
        return partial(ranges_sidecar_lines, [(store.part_paths(s.key), m) for s, m in group])
    s, m = group[0]
    paths = store.part_paths(s.key)
    if m.has_annotations:
        return paths.annotations
    return partial(stub_lines_from_text, paths.text) if m.docs else None


def sidecar_sources(store: DatasetStore, shards: list[Shard], metas: list[PartMeta]) -> list[Source]:
    pairs = list(zip(shards, metas, strict=True))
    sources = (sidecar_source(store, pairs[unit.start:unit.stop]) for unit in publish_units(shards))
    return [src for src in sources if src is not None]
