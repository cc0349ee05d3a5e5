"""The one seam between a format and splitting (docs/splitting.md): `Extractor.splitter`.

A splitter says how a file over `split_bytes` is cut into ranges (`plan`, in `unit`s), what a range
adds to the line numbers of later ranges (`lines`), optionally a count cheaper than extracting a
range (`quick_count`), and which typed `carry` the format hands from range to range. Each format's
splitter sits in the format's module, beside the reading rule its cuts mirror.
"""

from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import ClassVar, Literal

from .cuts import SEARCH_LIMIT, first_cut, walk_nominal_cuts
from .extract_context import Carry
from .input_file import InputFile
from .reading import read_raw


class RangeStrategy(Enum):
    """How the scheduler (engine/range_scheduler.py) gives a format's ranges the counts of the ranges
    before them (docs/splitting.md, "Scheduling")."""

    CHAINS = "counted chains"  # each range waits for them: its predecessor's extraction, or count-only passes
    SPECULATION = "speculation"  # every range at once; one that turns out to need them waits for them


@dataclass(frozen=True)
class Splitter:
    """How one format cuts a file; `carry`: the type of what its ranges hand on (None: nothing
    beyond `RangeCounts`' own fields)."""

    carry: type[Carry] | None = None
    unit: ClassVar[Literal["bytes", "rows"]] = "bytes"  # what the cuts count
    # where a range starts, in words: docs/splitting.md's table of formats (a test holds the two together)
    cut_rule: ClassVar[str] = ""
    # the format's documents and ids never depend on the ranges before, but through fallback ids,
    # drops and repairs: a range may be extracted before their counts are known (docs/splitting.md)
    speculative: ClassVar[bool] = False

    @property
    def strategy(self) -> RangeStrategy:
        """Speculation where the format allows it (`speculative`) and hands on no carry (a carry is
        known only from the ranges before), else counted chains."""
        return RangeStrategy.SPECULATION if self.speculative and self.carry is None else RangeStrategy.CHAINS

    def plan(self, file: InputFile, size: int, split_bytes: int) -> tuple[int, ...]:
        """`(0, cut, ..., end)` for a file over `split_bytes`; `(0, end)`: it stays whole. Reads at
        most a few small windows near each cut; a file it cannot read stays whole (the extraction
        reports it, D6)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def lines(self, file: InputFile) -> int:
        """What the range adds to the line numbers of later ranges: its line ends (ADDENDUM 3.2)."""
        return count_line_ends(file)

    def quick_count(self, file: InputFile) -> tuple[int, int] | None:
        """(documents written, `lines`) of a range, cheaper than extracting it, or None: the
        count-only pass extracts it. Only when provably nothing in it is dropped or repaired."""
        return None


class ByteSplitter(Splitter):
    """Cuts at a byte pattern found in small windows near each nominal cut (extractors/cuts.py)."""

    overlap: ClassVar[int] = 64  # windows overlap so a boundary across two reads is still seen
    search_limit: ClassVar[int | None] = SEARCH_LIMIT  # None: look on to the end of the file
    stop_at_none: ClassVar[bool] = False  # no boundary up to the end: drop the nominal cuts left

    def cut_in(self, data: bytes, not_before: int, at_eof: bool) -> int | None:
        """A range start in the window `data` at or after `not_before`, or None."""
        raise NotImplementedError  # pragma: no cover - abstract

    def plan(self, file: InputFile, size: int, split_bytes: int) -> tuple[int, ...]:
        if split_bytes <= 0 or size <= split_bytes:
            return (0, size)
        try:
            with open(file.path, "rb") as fh:
                return walk_nominal_cuts(fh, size, split_bytes, partial(first_cut, self.cut_in, self.overlap),
                                         search_limit=self.search_limit, stop_at_none=self.stop_at_none)
        except OSError:
            return (0, size)


def count_line_ends(file: InputFile) -> int:
    """Line ends in the file or range (ADDENDUM 3.2); cuts never fall inside a `\\r\\n`."""
    total = 0
    last_cr = False
    for raw in read_raw(file, 1 << 22):
        total += raw.count(b"\n")
        if b"\r" in raw:  # one memchr; most files have no `\r`, so one counting pass per chunk
            total += raw.count(b"\r") - raw.count(b"\r\n")
        if last_cr and raw.startswith(b"\n"):
            total -= 1
        last_cr = raw.endswith(b"\r")
    return total
