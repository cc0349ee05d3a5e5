"""Planning where a file over `split_bytes` is cut (docs/splitting.md): the walk over the nominal
cuts `k * split_bytes` and the small overlapping windows read near each one. Shared by every byte
splitter (`splitting.ByteSplitter`: text, jsonl/coleslaw, conllu) and macocu's `<doc>` planner;
each format supplies only how a boundary is found in a window."""

import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

WINDOW = 1 << 16  # bytes read per look near a cut
SEARCH_LIMIT = 1 << 24  # no boundary this far past a nominal cut: that cut is skipped
# A line end of ADDENDUM 3.2 (`\r\n`, `\n`, a lone `\r`), for the formats' boundary patterns.
LINE_END = rb"(?:\r\n|\n|\r(?!\n))"
# (fh, pos, limit) -> the first range start at or after pos (before limit), or None
BoundaryAfter = Callable[[BinaryIO, int, int], int | None]
# (window, not before, the window reaches the limit) -> a range start in it, or None
CutIn = Callable[[bytes, int, bool], int | None]


def walk_nominal_cuts(fh: BinaryIO, size: int, split_bytes: int, boundary_after: BoundaryAfter,
                      search_limit: int | None = SEARCH_LIMIT, not_before: int = 0,
                      stop_at_none: bool = False) -> tuple[int, ...]:
    """`(0, cut, ..., size)`: each cut the first boundary at or after a nominal cut (and after
    `not_before`), looked for up to `search_limit` bytes past it (None: to the end). A nominal cut
    without one is skipped, so its range merges into the one before; `stop_at_none` drops the
    remaining nominal cuts instead (no boundary up to the end means none after either). A nominal
    cut the previous cut already passed is skipped; a boundary at the very end is no cut."""
    cuts = [0]
    k = 1
    while k * split_bytes < size:
        nominal = max(k * split_bytes, cuts[-1] + 1, not_before)
        limit = size if search_limit is None else min(size, nominal + search_limit)
        cut = boundary_after(fh, nominal, limit)
        if cut is None and stop_at_none:
            break
        if cut is not None and cut < size:
            cuts.append(cut)
        k = max(k + 1, (cut or 0) // split_bytes + 1)
    return (*cuts, size)


def windows(fh: BinaryIO, pos: int, limit: int, overlap: int) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of the windows from just before `pos` (a boundary may begin there) up to
    `limit`, each `overlap` bytes longer than the step, so a boundary across two reads is seen."""
    start = max(0, pos - overlap)
    while start < limit:
        fh.seek(start)
        data = fh.read(min(WINDOW, limit - start) + overlap)
        if not data:
            return
        yield start, data
        start += WINDOW


def first_cut(cut_in: CutIn, overlap: int, fh: BinaryIO, pos: int, limit: int) -> int | None:
    """The first offset in [pos, limit] where `cut_in` finds a range start, reading small windows."""
    for start, data in windows(fh, pos, limit, overlap):
        at_eof = start + len(data) >= limit
        cut = cut_in(data, pos - start, at_eof)
        if cut is not None:
            return start + cut
    return None


def pattern_cut(pattern: re.Pattern[bytes], data: bytes, not_before: int, at_eof: bool) -> int | None:
    """The end of the first match of `pattern` at or after `not_before`, seen whole: not at the
    window's edge (where a `\\r` may still be followed by a `\\n`) unless the window is the last."""
    for m in pattern.finditer(data, max(0, not_before - 1)):
        end = m.end()
        if end < not_before:
            continue
        return end if at_eof or end < len(data) else None
    return None
