"""The one way every XML reader here (tei, macocu, the split-range log) gets parse events: lxml's
feed parser (XMLPullParser) fed the file in chunks, under one rule that makes what a reader keeps
independent of the lxml release (docs/decisions.md, S3 "what a parse error keeps").

The rule: events read after a `feed()` or `close()` that raised are never used, and a feed after
which the parse's log holds a fatal error counts as one that raised. lxml has changed
what it hands over around an error (6.2.0's iterparse raises before yielding the events of the
chunk the error is in; after a `close()` that raised, its feed parser reports an `end` for every
element still open, which were never closed), and nothing promises the next release keeps either.
Events read after a feed that did not raise are trustworthy: no error has happened yet, and
libxml2's push parser handles an end tag as soon as its `>` has been fed, so they are complete too.

What a raising feed costs is the events of its own piece before the error. A raising `close()`
costs nothing (every piece was fed cleanly and read). For a raising feed of a whole chunk, the
chunk's byte span is kept (`unread`), and the caller (xml.retry's driver) parses the file again
from the start with that span `careful`: there the bytes are fed in pieces that each end just after
a `>`, so every end tag is fed, and read, in a feed of its own. The piece that raises holds
nothing closed before the error: all its bytes lie before its only `>`, so whatever it would close
closes at or after the error. Errors are rare, so only a broken file pays: its bytes up to the
error parsed twice (a 22 MB file broken near its end: 1.6-1.9x the time of the sound one), the chunk
with the error in small pieces (2-5x that chunk's parse, a few milliseconds).
"""

from collections.abc import Iterator
from dataclasses import dataclass

from lxml import etree

from .parser import refuse_external

CHUNK = 1 << 16  # bytes fed at a time: the read-ahead a pass holds in its tree


@dataclass(frozen=True, slots=True)
class Span:
    """Bytes [start, end) of what a parse reads (its source, not necessarily the file)."""

    start: int
    end: int


class FeedEvents:
    """Batches of (event, element) of one parse, each read after a feed that did not raise.
    `careful`: a span fed in pieces that end after a `>`. After a ParseError, `unread` is the span
    of a whole chunk whose feed raised (None: the error's own piece was careful, or close() raised,
    so nothing closed before the error went unread)."""

    def __init__(self, careful: Span | None = None, chunk: int = CHUNK, **options):
        self.parser = refuse_external(etree.XMLPullParser(**options))
        self.careful = careful
        self.chunk = chunk
        self.unread: Span | None = None
        self.root: etree._Element | None = None  # the document element, after a clean close()

    @property
    def error_log(self):
        """This parse's own log (never lxml's thread-global one, see xml.errors.first_error)."""
        return self.parser.feed_error_log

    def batches(self, fh) -> Iterator:
        """The events after each feed; the last batch follows the clean close()."""
        parser = self.parser
        feed, read_events = parser.feed, parser.read_events
        for start, data, careful in pieces(fh.read, self.chunk, self.careful):
            try:
                feed(data)
                self._raise_if_stopped()
            except etree.ParseError:
                if not careful:
                    self.unread = Span(start, start + len(data))
                raise
            yield read_events()
        self.root = parser.close()
        yield read_events()

    def _raise_if_stopped(self) -> None:
        """A feed that did not raise may still have met a fatal error: lxml lets one kind pass (a
        reference to an undeclared entity in a file without a DTD, where libxml2 stops at it) and
        starts a new document with the next feed. A fatal error in the log ends the parse here, as
        a feed that raised: nothing is read after it, nothing more is fed."""
        fatal = self.parser.feed_error_log.filter_from_fatals()
        if fatal:
            first = fatal[0]
            raise etree.XMLSyntaxError(first.message, first.type, first.line, first.column)


def pieces(read, chunk: int, careful: Span | None) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, bytes, inside `careful`) of what `read` returns, chunk by chunk; a chunk's part
    inside `careful` is cut after every `>`."""
    offset = 0
    while True:
        data = read(chunk)
        if not data:
            return
        end = offset + len(data)
        if careful is None or end <= careful.start or offset >= careful.end:
            yield offset, data, False
        else:
            lo, hi = max(careful.start - offset, 0), min(careful.end - offset, len(data))
            if lo:
                yield offset, data[:lo], False
            yield from _after_each_gt(data, lo, hi, offset)
            if hi < len(data):
                yield offset + hi, data[hi:], False
        offset = end


def _after_each_gt(data: bytes, pos: int, end: int, offset: int) -> Iterator[tuple[int, bytes, bool]]:
    """`data[pos:end]` cut after every `>` and the NUL bytes right after it (in UTF-16LE and UTF-32LE
    they are the rest of the `>` character; anywhere else they only add one more cut)."""
    while pos < end:
        gt = data.find(b">", pos, end)
        cut = end if gt < 0 else gt + 1
        while cut < end and data[cut] == 0:
            cut += 1
        yield offset + pos, data[pos:cut], True
        pos = cut


def next_careful(unread: Span | None, careful: Span | None) -> Span | None:
    """The span to read carefully on the next parse after one that raised, or None when the error
    needs no other parse: its piece was careful, close() raised, or (a parse that should repeat the
    one before it did not) the raising chunk is not past the careful span, where a further parse
    could not end; then the chunk's events before the error are given up, never guessed."""
    if unread is None or (careful is not None and unread.start < careful.end):
        return None
    return unread
