"""The one retry driver of the streaming XML extractors (tei, macocu): the passes over one file, or
over one range of a split macocu file, until one ends (D6, S3).

Parser limits: libxml2's defaults (text nodes up to 10 MB, nesting up to 256) apply first. A file
that hits one is parsed again with huge_tree (text nodes up to 1 GB, nesting up to 2048), resuming
after the documents and drops already delivered, so the output does not depend on the retry.
Entity amplification (billion laughs) is refused either way (errors.is_resource_limit).

A parse error or bytes invalid for the declared encoding keep the documents closed before it, drop
the one in progress and skip the rest of the file, with one drop naming the file and line. What
"closed before it" means never depends on what lxml hands over with the error (xml.events): when a
whole chunk's feed raised, the file is parsed once more, that chunk carefully, resuming after the
documents and drops already delivered as the huge_tree retry does, and the drop comes from that
parse. So a broken file's bytes up to the error are parsed twice; a sound file's once.

`Retrying` is that loop, written once. It reads a whole file; a macocu range (macocu.ranges)
overrides its hooks: the bytes a pass reads, the log that decides, reading on to the end of the
file, and the state it hands to the ranges after it.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from lxml import etree

from ...schema import Document
from ..extract_context import ExtractContext, FileLine
from ..input_file import InputFile
from .errors import first_error, is_resource_limit, reason_for
from .events import Span, next_careful


class StreamingPass(Protocol):
    """One parse of one file (xml.events), reading the span `careful` in small pieces. `run` yields
    its Documents; after a ParseError, `error_log` is that parse's own log (never lxml's
    thread-global one), `unread` the chunk whose events before the error were not read (None:
    none) and `in_progress()` names what the error cut off (None: nothing open)."""

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]: ...

    @property
    def error_log(self): ...

    @property
    def unread(self) -> Span | None: ...

    def in_progress(self) -> str | None: ...


class ByteSource(Protocol):
    """What a pass reads: an open file, or a macocu range's bytes (macocu.range_source)."""

    def read(self, size: int = -1, /) -> bytes: ...


Drop = Callable[..., None]  # drop(reason, message, line=None), as a pass reports
Line = int | str | None


class DropGate:
    """Forwards a pass's drops to the ledger, except the first `replayed` ones: on a retry the pass
    meets again the drops it already reported. A parse numbers the file's lines (a macocu range's
    too: its padding, macocu.range_source), so they go to the ledger as they are."""

    def __init__(self, ctx: ExtractContext, file: InputFile, replayed: int):
        self.ctx, self.file, self.replayed = ctx, file, replayed
        self.seen = 0

    def __call__(self, reason: str, message: str, line: Line = None) -> None:
        self.seen += 1
        if self.seen > self.replayed:
            self.ctx.drop(reason, self.file, message, FileLine.of(line))


class Retrying:
    """The passes over one file until one ends: cleanly, at a parse error it cannot retry (S3's
    stop, one drop), or at a read error. A retry (huge_tree, a careful re-read, or reading on)
    skips the documents and drops already delivered.

    Hooks, for a source that is not the whole file (a macocu range): `new_pass`, `open`,
    `decision_log`, `read_on`, `reports_stop`, `finished` and `stopped`. `kept_before` counts the
    file's documents before the source."""

    def __init__(self, ctx: ExtractContext, file: InputFile, make_pass: Callable[[Drop], StreamingPass],
                 huge: bool = False, kept_before: int = 0):
        self.ctx, self.file, self.make_pass = ctx, file, make_pass
        self.huge = huge
        self.careful: Span | None = None  # of the source a pass reads (xml.events)
        self.delivered = 0  # documents already yielded (skipped on a retry)
        self.kept_before = kept_before

    def documents(self) -> Iterator[Document]:
        dropped = 0  # drops already reported (not repeated on a retry)
        while True:
            gate = DropGate(self.ctx, self.file, dropped)
            extraction = self.new_pass(gate)
            try:
                source = self.open()
            except OSError as exc:
                self.open_failed(exc)
                return
            try:
                with source as fh:
                    yield from self._new_documents(extraction.run(fh, self.huge, self.careful))
            except etree.ParseError as exc:
                if not self.retry_after(extraction, exc):
                    return
                dropped = max(dropped, gate.seen)  # a parse may stop before the drops of an earlier one
                continue
            except OSError as exc:
                self.read_failed(exc)
                return
            self.finished(extraction)
            return

    def _new_documents(self, documents: Iterator[Document]) -> Iterator[Document]:
        """The documents of one pass after those an earlier pass delivered."""
        produced = 0
        for doc in documents:
            produced += 1
            if produced > self.delivered:
                self.delivered = produced
                yield doc

    def retry_after(self, extraction: StreamingPass, exc: etree.ParseError) -> bool:
        """What a parse error does: a huge_tree retry (only at a limit it lifts), reading the chunk
        with the error carefully, reading on (a range), or the stop of the file (S3, one drop)."""
        log, went_huge = self.decision_log(extraction, exc)
        line, code, message = first_error(log, exc)
        if not self.huge and (went_huge or is_resource_limit(code, message)):
            self.huge, self.careful = True, None
            return True
        again = next_careful(extraction.unread, self.careful)
        if again is not None:
            self.careful = again  # the same bytes come first when reading on: the span stays valid
        if self.read_on() or again is not None:
            return True
        if self.reports_stop():
            kept = self.kept_before + self.delivered
            self.ctx.drop(reason_for(code), self.file,
                          stop_message(message, kept, extraction.in_progress()), FileLine.of(line))
        self.stopped()
        return False

    def read_failed(self, exc: OSError) -> None:
        """A read error ends the file: what was delivered is kept, the rest skipped (D6)."""
        self.ctx.drop("unreadable_file", self.file,
                      f"read failed ({exc.strerror or exc}); kept the {self.kept_before + self.delivered} "
                      "document(s) read before it, skipped the rest of the file")
        self.stopped()

    def open_failed(self, exc: OSError) -> None:
        if self.delivered:  # gone before a retry
            self.read_failed(exc)
        else:
            self.ctx.drop("unreadable_file", self.file, f"cannot open ({exc.strerror or exc}); file skipped")

    # hooks: a whole file

    def new_pass(self, drop: Drop) -> StreamingPass:
        return self.make_pass(drop)

    def open(self) -> AbstractContextManager[ByteSource]:
        """The bytes of one pass, opened anew for each."""
        return open(self.file.path, "rb")

    def decision_log(self, extraction: StreamingPass, exc: etree.ParseError) -> tuple[object, bool]:
        """The log whose first error decides, and whether one pass would read with huge_tree here."""
        return extraction.error_log, False

    def read_on(self) -> bool:
        """After an error: whether to parse again on to the end of the file (done already here)."""
        return False

    def reports_stop(self) -> bool:
        """Whether this source reports a stop: it reads to the end of the file."""
        return True

    def finished(self, extraction: StreamingPass) -> None:
        """After a pass that ended cleanly."""

    def stopped(self) -> None:
        """After a stop (a parse error or a read error)."""


def extract_with_retry(ctx: ExtractContext, file: InputFile,
                       make_pass: Callable[[Drop], StreamingPass]) -> Iterator[Document]:
    """The documents of `file`, parsed by passes from `make_pass(drop)`: once with libxml2's default
    limits and, only when one of them refused the file, once more with huge_tree; after a parse
    error in a chunk fed whole, once more reading that chunk carefully (xml.events)."""
    yield from Retrying(ctx, file, make_pass).documents()


def stop_message(message: str, kept: int, lost: str | None) -> str:
    """The ledger text of a parse that stopped (S3); `kept` counts the file's documents before it."""
    return (f"{message}; kept the {kept} document(s) closed before it{'; ' + lost if lost else ''}; "
            "skipped the rest of the file")
