"""What an extractor is handed for one input: `ExtractContext`, and for a range of a split file
the `RangeCounts` of the ranges before it (docs/splitting.md)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

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


class NeedsBefore(BaseException):
    """A speculative extraction of a range (docs/splitting.md) met what depends on the ranges before
    it: a drop or a repair (warning line numbers, the file's first 100) or a fallback id. The part is
    abandoned and the range extracted again once its `before` is known. A BaseException, so no
    reader's `except Exception` can take it for a bad record."""


class ExtractContext:
    """Per-shard context handed to an extractor: where the data is and where drops go.

    For a range of a split file, `before` holds what the earlier ranges produced. The one line
    convention: a reader numbers lines from 1 at the start of what it reads, and `file_line` adds
    `before.lines`, so warnings name the line of the whole file (an XML parse already numbers the
    file's lines: `drop_at_file_line`). `counting` is set during a count-only pass (nothing is
    logged); `carry` is the format's own state at the end of the range (`RangeCounts.carry`);
    `lines_read`, set by a reader that counted the line ends of the whole range as it read them
    (text), spares the part writer a second pass over the range for `RangeCounts.lines`;
    `speculative`: the range is read before the counts of the ranges before it are known, which
    only a range without drops can be (`NeedsBefore`)."""

    def __init__(self, dataset: str, root: Path, ledger: DropLedger | None = None, on_warning=None,
                 before: RangeCounts = FILE_START, counting: bool = False, max_document_bytes: int = 0,
                 speculative: bool = False):
        self.dataset = dataset
        # readers that can see a record's size before parsing it skip one over this (0: no cap)
        self.max_document_bytes = max_document_bytes
        self.root = root
        self.ledger = ledger if ledger is not None else DropLedger()
        self._on_warning = on_warning
        self.before = before
        self.counting = counting
        self.speculative = speculative  # `before` is not known: a drop raises NeedsBefore
        self.carry: Carry | None = None
        self.lines_read: int | None = None  # None: `Splitter.lines` counts them

    def file_line(self, line: int) -> int:
        """A line counted from the start of the range, as a line of the whole file."""
        return line + self.before.lines

    def drop(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        self.drop_at_file_line(reason, file, message, self.file_line(line) if isinstance(line, int) else line)

    def drop_at_file_line(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        """`drop` for a reader whose lines are already the file's."""
        if self.speculative:
            raise NeedsBefore(reason)
        where = f"{self.dataset}/{file.rel}" + (f":{line}" if line is not None else "")
        text = f"{where}: {message} [{reason}]"
        self.ledger.add(reason, text)
        if self._on_warning is not None:
            self._on_warning(text)
