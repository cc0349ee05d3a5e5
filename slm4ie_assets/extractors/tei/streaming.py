"""What the three TEI extracting passes share: the event stream and freeing the tree behind it.

A pass is one streaming lxml parse over the file (D12: the same code at every size): start and end
events of the elements it asks for, from the feed parser every XML reader shares (xml.events: only
events read after a feed that did not raise are used, so a parse error keeps exactly what closed
before it, S3). Whatever has been handled is cleared and detached together with everything before
it, so the tree in memory never holds more than the document in progress, the path down to it and
one read-ahead chunk.
"""

from collections.abc import Callable, Iterator

from lxml import etree

from ...schema import Document
from ..xml.events import CHUNK, FeedEvents, Span
from ..xml.names import BODY
from ..xml.parser import parser_options

Drop = Callable[..., None]  # drop(reason, message, line=None)
__all__ = ["CHUNK", "Drop", "TeiPass", "text_is_blank"]


class TeiPass:
    """Base class: `run(fh, huge, careful)` yields the Documents of one open file; `in_progress()`
    names what a parse error cuts off; after a ParseError, `unread` is what xml.retry parses again
    carefully (xml.events)."""

    tags: tuple = ()

    def __init__(self, row: dict, drop: Drop, stem: str, cap: int = 0):
        self.row = row  # the file's external-TSV metadata (section 7), {} without a sidecar
        self.drop = drop
        self.stem = stem
        self.cap = cap  # max_document_bytes: annotated documents let their tokens go past it (docs/memory.md)
        self._swept: etree._Element | None = None  # the element whose ancestors release() swept last
        self.root: etree._Element | None = None  # the document element, once known
        self.events: FeedEvents | None = None

    def event_batches(self, fh, huge: bool, careful: Span | None = None):
        """Iterators of (event, element), one per clean feed (xml.events); a ParseError raises
        without any event read after it."""
        self.events = events = FeedEvents(careful, events=("start", "end"), tag=self.tags, **parser_options(huge))
        for batch in events.batches(fh):
            if events.root is not None:
                self.root = events.root
            yield batch

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]:
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def error_log(self):
        """This parse's own error log (xml.retry reads the cause of a ParseError from it)."""
        return self.events.error_log if self.events is not None else None

    @property
    def unread(self) -> Span | None:
        return self.events.unread if self.events is not None else None

    def in_progress(self) -> str | None:
        """What an error at this point drops, for the warning; None when nothing is open."""
        return None

    def finish(self, root) -> None:
        """After the last event: account for content left in the tree (only on a clean end)."""

    def inspect(self, el, in_body: bool) -> None:
        """Called for every subtree about to be freed unread; subclasses count lost content."""

    def release(self, el, bodies: int = 0) -> None:
        """Free `el`'s previous siblings and those of every ancestor, inspecting each first.
        `bodies` is the number of open `<body>` elements around `el`, so `inspect` can tell
        whether a freed subtree lies inside a body.

        Once an open element's ancestors have been swept, nothing new can appear before them
        until it closes, so the climb stops at the parent swept last time."""
        parent = el.getparent()
        if parent is None:
            return
        inspect = self.inspect
        while el.getprevious() is not None:
            inspect(parent[0], bodies > 0)
            del parent[0]
        if parent is self._swept:
            return
        self._swept = parent
        node = parent
        while True:
            if node.tag == BODY:
                bodies -= 1
            above = node.getparent()
            if above is None:
                self.root = node
                return
            while node.getprevious() is not None:
                inspect(above[0], bodies > 0)
                del above[0]
            node = above


def text_is_blank(el) -> bool:
    """True when `el` (tail included) holds no text but whitespace; comments and processing
    instructions do not count."""
    for piece in el.itertext():
        if piece.strip():
            return False
    tail = el.tail
    return not (tail and tail.strip())
