"""What an extractor is handed for one input: `ExtractContext`, and where it starts in its file
(`RangeStart`: for a range of a split file, the `RangeCounts` of the ranges before it, docs/splitting.md)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from .drop_ledger import DropLedger
from .input_file import InputFile


class Carry(Protocol):
    """What a format's range hands to the ranges after it beyond `RangeCounts`' own fields (coleslaw:
    `ShadowCarry`, macocu: `RangeState`): a frozen dataclass whose `+` adds two ranges' values."""

    def __add__(self, other: Any, /) -> Any: ...


C = TypeVar("C", bound=Carry)


@dataclass(frozen=True, slots=True)
class RangeCounts:
    """What ranges of one split file produced (docs/splitting.md): documents written, lines read,
    drops, documents with repairs, and the format's own `carry`. The sum over the ranges before one
    is where that range continues."""

    docs: int = 0
    lines: int = 0
    drops: int = 0
    repaired_docs: int = 0
    carry: Carry | None = None

    def __add__(self, other: "RangeCounts") -> "RangeCounts":
        carry = other.carry if self.carry is None else self.carry if other.carry is None else self.carry + other.carry
        return RangeCounts(self.docs + other.docs, self.lines + other.lines, self.drops + other.drops,
                           self.repaired_docs + other.repaired_docs, carry)

    def carry_of(self, kind: type[C]) -> C:
        """The carry as `kind`; its zero value when no earlier range handed one on."""
        carry = self.carry
        return carry if isinstance(carry, kind) else kind()


FILE_START = RangeCounts()


@dataclass(frozen=True, slots=True)
class RangeStart:
    """Where reading an input starts in its file (docs/splitting.md). `after`: past the ranges
    before it, whose summed `counts` it continues (zeros for a whole file or a first range).
    `speculative`: those counts are not known yet; numbered from zero, and whatever would depend on
    them raises NeedsBefore. `counting`: a count-only pass, from zero, keeping no warning."""

    counts: RangeCounts = FILE_START
    mode: Literal["after", "speculative", "counting"] = "after"

    @staticmethod
    def after(counts: RangeCounts) -> "RangeStart":
        return RangeStart(counts)

    @property
    def speculative(self) -> bool:
        return self.mode == "speculative"

    @property
    def counting(self) -> bool:
        return self.mode == "counting"


AT_FILE_START = RangeStart()
SPECULATIVE = RangeStart(mode="speculative")
COUNTING = RangeStart(mode="counting")


class NeedsBefore(BaseException):
    """A speculative extraction of a range (docs/splitting.md) met what depends on the ranges before
    it: a drop or a repair (warning line numbers, the file's first 100) or a fallback id. The part is
    abandoned and the range extracted again once its `before` is known. A BaseException, so no
    reader's `except Exception` can take it for a bad record."""


class FileLine(int):
    """A line number already counted from the start of the file, not of the range read (a macocu
    range is parsed behind padding that makes libxml2 number the file's lines): `ExtractContext.drop`
    adds nothing to it."""

    @staticmethod
    def of(line: int | str | None) -> "FileLine | str | None":
        return FileLine(line) if isinstance(line, int) else line


class ExtractContext:
    """Per-shard context handed to an extractor: where the data is and where drops go.

    `start` says where the input starts in its file (`RangeStart`); a reader reads what it needs
    of it as `before` (what the earlier ranges produced) and `counting` (a count-only pass: nothing
    is logged). The one line convention: a reader numbers lines from 1 at the start of what it
    reads, and `file_line` adds `before.lines`, so warnings name the line of the whole file (an XML
    parse already numbers the file's lines: it drops with a `FileLine`). What a reader hands back:
    `carry`, the format's own state at the end of the range (`RangeCounts.carry`), and `lines_read`,
    set by a reader that counted the line ends of the whole range as it read them (text), which
    spares the part writer a second pass over the range for `RangeCounts.lines`."""

    def __init__(self, dataset: str, root: Path, ledger: DropLedger | None = None, on_warning=None,
                 start: RangeStart = AT_FILE_START, max_document_bytes: int = 0):
        self.dataset = dataset
        # readers that can see a record's size before parsing it skip one over this (0: no cap)
        self.max_document_bytes = max_document_bytes
        self.root = root
        self.ledger = ledger if ledger is not None else DropLedger()
        self._on_warning = on_warning
        self.start = start
        self.carry: Carry | None = None
        self.lines_read: int | None = None  # None: `Splitter.lines` counts them

    @property
    def before(self) -> RangeCounts:
        return self.start.counts

    @property
    def counting(self) -> bool:
        return self.start.counting

    def file_line(self, line: int) -> int:
        """A line counted from the start of the range, as a line of the whole file."""
        return line + self.before.lines

    def drop(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        """Skip a record (D6): counted under `reason`, its warning naming `line` of the whole file
        (a line counted from the start of what the reader read, or a `FileLine`)."""
        if self.start.speculative:  # the earlier ranges' counts are not known: nor this warning's place
            raise NeedsBefore(reason)
        if isinstance(line, int) and not isinstance(line, FileLine):
            line = self.file_line(line)
        where = f"{self.dataset}/{file.rel}" + (f":{line}" if line is not None else "")
        text = f"{where}: {message} [{reason}]"
        self.ledger.add(reason, text)
        if self._on_warning is not None:
            self._on_warning(text)
