"""Extracting one byte range of a split MaCoCu file with the bytes of one unsplit pass
(docs/splitting.md; ADDENDUM 4.6, D6, S3, D13).

A range after the first is parsed as: the file's prolog (doc_cuts), comments holding as many
newlines as the file has before the range (range_source: every line libxml2 reports, in warnings
and inside its messages, is then the line of the whole file), the range's bytes, and the root's end
tag (not for the last range, which reads to the end of the file as one pass does). The first range
is the file's own beginning plus that end tag.

The end tag is also the check that the cut was safe: it only closes the root cleanly when the parser
is at depth 1, outside any comment, CDATA section or PI. Any error in a range that is not the last
(a cut inside a nested `<doc>`, D13, or a real parse error) makes it read on: the range is parsed
again to the end of the file without the end tag, skipping what it already delivered, so it ends as
one pass would (S3: the documents before a parse error kept, the rest of the file skipped), and the
ranges after it emit nothing.

A parse error in a chunk fed whole is read once more with that chunk careful (xml.events), in the
same run as reading on to the end of the file where that applies; the drop and the documents kept
come from the careful parse, so they never depend on what lxml delivers with the error.

The passes over a range are xml.retry's driver, the one loop the unsplit path runs too; this module
gives it the range's hooks. huge_tree: one pass switches to it at the file's first limit hit and keeps it. A range
starts with it when an earlier one switched; without a limit hit both modes read the same. What
later ranges need travels in `RangeCounts.carry` as a `RangeState`; a count-only pass, which knows
nothing of the ranges before it, reads the file before it (range_log) where its decision depends
on them (a limit hit).
"""

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import BinaryIO

from lxml import etree

from ...schema import Document
from ..extract_context import ExtractContext
from ..input_file import InputFile
from ..xml.errors import first_error, is_resource_limit
from ..xml.retry import Drop, Retrying, StreamingPass
from .doc_cuts import Prolog, read_prolog
from .range_log import combined_log, earlier_log
from .range_source import RangeSource


@dataclass(frozen=True, slots=True)
class RangeState:
    """A range's own contribution (`RangeCounts.carry`), summed over the earlier ranges."""

    yielded: int = 0  # documents the extractor yielded (S3's "kept the N document(s)")
    logged: int = 0  # libxml2 log entries of its parse: none before a range means its log is the file's
    huge: int = 0  # ranges that switched to huge_tree: the file's parse reads with it after them
    stopped: int = 0  # ranges that ended the file's parse: the ranges after them emit nothing

    def __add__(self, other: "RangeState") -> "RangeState":
        return RangeState(self.yielded + other.yielded, self.logged + other.logged, self.huge + other.huge,
                          self.stopped + other.stopped)


# a pass over a range (doc_pass.MacocuPass): (drop, the file's log before the range, ends the file); its
# `error_log` puts that earlier log first
MakePass = Callable[[Drop, list, bool], StreamingPass]


def extract_doc_range(ctx: ExtractContext, file: InputFile, make_pass: MakePass) -> Iterator[Document]:
    """The documents one pass yields from `file.range`; `ctx.carry` gets its RangeState."""
    assert file.range is not None
    before = ctx.before.carry_of(RangeState)
    ctx.carry = RangeState()
    if before.stopped:
        return  # an earlier range ended the file's parse (S3)
    try:
        fh = open(file.path, "rb")
    except OSError as exc:
        ctx.drop("unreadable_file", file, f"cannot open ({exc.strerror or exc}); file skipped")
        ctx.carry = RangeState(stopped=1)
        return
    with fh:
        yield from _RangeRetrying(ctx, file, fh, make_pass, before).range_documents()


class _RangeRetrying(Retrying):
    """The retry driver (xml.retry) over one range: bounded by the range's end, then (after an
    error) on to the end of the file; with default limits, then huge_tree. Its hooks give the
    range's bytes, the file's log where a decision needs it, and the RangeState for later ranges."""

    def __init__(self, ctx: ExtractContext, file: InputFile, fh: BinaryIO, make_pass: MakePass, before: RangeState):
        # the pass is made when the driver asks (new_pass), with the earlier log and to_end of then
        super().__init__(ctx, file, lambda drop: make_pass(drop, self.earlier or [], self.to_end),
                         huge=before.huge > 0, kept_before=before.yielded)
        assert file.range is not None
        self.fh, self.before = fh, before
        self.range = file.range
        self.to_end = self.range.is_last
        self.earlier: list | None = None  # the file's log before the range, once needed
        self.prolog = Prolog(b"", 0, b"")  # read first, by range_documents

    def range_documents(self) -> Iterator[Document]:
        """The driver's documents, once the prolog every pass re-parses is read (a file whose
        prolog no longer reads as planned has changed since it was split: the range is skipped)."""
        try:
            prolog = read_prolog(self.fh)
        except OSError as exc:
            return self.read_failed(exc)
        if prolog is None:
            self.ctx.drop("unreadable_file", self.file, "changed since it was split (no prolog); range skipped")
            self.ctx.carry = RangeState(stopped=1)
            return
        self.prolog = prolog
        yield from self.documents()

    def new_pass(self, drop: Drop) -> StreamingPass:
        if self.to_end and self.before.logged and self.earlier is None:
            self.earlier = earlier_log(self.fh, self.prolog, self.range.start)[0]
        return super().new_pass(drop)

    def open(self) -> nullcontext[RangeSource]:
        """The prolog (not for the first range), padding to the range's first line, the range's
        bytes (on to the end of the file once reading on) and the root's end tag (not then)."""
        first = self.range.index == 0
        prolog = self.prolog
        head = b"" if first else prolog.data
        pad = 0 if first else max(0, self.ctx.before.lines - prolog.newlines)
        end = None if self.to_end else self.range.end
        return nullcontext(RangeSource(self.fh, head, pad, 0 if first else self.range.start, end,
                                       b"" if self.to_end else prolog.close))

    def decision_log(self, extraction: StreamingPass, exc: etree.ParseError) -> tuple[list, bool]:
        """The log whose first error decides (xml.retry), and whether one pass would already read
        with huge_tree here. An extraction knows the latter (`RangeState.huge`) and needs the
        file's log before the range only for a limit hit (an earlier error makes it a stop). A
        count-only pass knows nothing of the ranges before it, so it reads the file before it on
        any error: after an earlier limit hit one pass reads this range with huge_tree."""
        own = extraction.error_log
        own = own if own is not None else []
        if self.earlier is not None or self.range.index == 0 or self.huge:
            return own, False
        if not self.ctx.counting:
            code, message = first_error(own, exc)[1:]
            if not (self.before.logged and is_resource_limit(code, message)):
                return own, False
        self.earlier, went_huge = earlier_log(self.fh, self.prolog, self.range.start)
        return combined_log(self.earlier, own), went_huge

    def read_on(self) -> bool:
        """Any error in a range that is not the last reads on to the end of the file, as one pass
        would; a count-only pass does not (it counts up to the error)."""
        if not self.to_end and not self.ctx.counting:
            self.to_end = True
            return True
        return False

    def reports_stop(self) -> bool:
        return self.to_end

    def finished(self, extraction: StreamingPass) -> None:
        self._state(extraction.error_log, stopped=self.to_end)

    def stopped(self) -> None:
        self._state(None, stopped=True)

    def _state(self, log, stopped: bool) -> None:
        """`ctx.carry` for the ranges after this one; `log` is the pass's (the earlier log first)."""
        logged = max(0, len(log) - len(self.earlier or [])) if log is not None else 0
        switched = self.huge and not self.before.huge  # this range turned huge_tree on
        self.ctx.carry = RangeState(self.delivered, logged, int(switched), int(stopped))
