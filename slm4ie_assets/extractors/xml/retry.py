"""What the streaming XML extractors (tei, macocu) share around one parse of a file: the huge_tree
retry and the report of what stopped the parse (D6, S3).

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
"""

from collections.abc import Callable, Iterator
from typing import Protocol

from lxml import etree

from ...schema import Document
from ..base import ExtractContext, InputFile
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


class DropGate:
    """Forwards a pass's drops to the ledger, except the first `replayed` ones: on a huge_tree
    retry the pass meets again the drops it already reported."""

    def __init__(self, ctx: ExtractContext, file: InputFile, replayed: int):
        self.ctx, self.file, self.replayed = ctx, file, replayed
        self.seen = 0

    def __call__(self, reason: str, message: str, line=None) -> None:
        self.seen += 1
        if self.seen > self.replayed:
            self.ctx.drop(reason, self.file, message, line)


def extract_with_retry(ctx: ExtractContext, file: InputFile,
                       make_pass: Callable[[DropGate], StreamingPass]) -> Iterator[Document]:
    """The documents of `file`, parsed by passes from `make_pass(drop)`: once with libxml2's default
    limits and, only when one of them refused the file, once more with huge_tree; after a parse
    error in a chunk fed whole, once more reading that chunk carefully (xml.events)."""
    delivered = 0  # documents already yielded (skipped on a retry)
    dropped = 0  # drops already reported (not repeated on a retry; a parse may stop before an earlier one's)
    huge = False
    careful: Span | None = None
    while True:
        gate = DropGate(ctx, file, dropped)
        extraction = make_pass(gate)
        produced = 0
        try:
            fh = open(file.path, "rb")
        except OSError as exc:
            if delivered:  # gone before the huge_tree retry
                _read_failed(ctx, file, exc, delivered)
            else:
                ctx.drop("unreadable_file", file, f"cannot open ({exc.strerror or exc}); file skipped")
            return
        try:
            with fh:
                for doc in extraction.run(fh, huge, careful):
                    produced += 1
                    if produced > delivered:
                        delivered = produced
                        yield doc
            return
        except etree.ParseError as exc:
            line, code, message = first_error(extraction.error_log, exc)
            if not huge and is_resource_limit(code, message):
                huge, dropped, careful = True, max(dropped, gate.seen), None
                continue
            again = next_careful(extraction.unread, careful)
            if again is not None:
                careful, dropped = again, max(dropped, gate.seen)
                continue
            ctx.drop(reason_for(code), file, stop_message(message, delivered, extraction.in_progress()), line)
            return
        except OSError as exc:
            _read_failed(ctx, file, exc, delivered)
            return


def stop_message(message: str, kept: int, lost: str | None) -> str:
    """The ledger text of a parse that stopped (S3); `kept` counts the file's documents before it."""
    return (f"{message}; kept the {kept} document(s) closed before it{'; ' + lost if lost else ''}; "
            "skipped the rest of the file")


def _read_failed(ctx: ExtractContext, file: InputFile, exc: OSError, delivered: int) -> None:
    ctx.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the {delivered} "
                                      "document(s) read before it, skipped the rest of the file")
