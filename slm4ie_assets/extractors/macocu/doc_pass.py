"""One streaming parse of a MaCoCu file: top-level `<doc>` elements of `<p>` paragraphs become
Documents (ADDENDUM 4.6; D13: a nested `<doc>` or `<p>` belongs to the outermost one, so no text is
emitted twice). Memory stays bounded by one `<doc>`: each finished element is cleared and detached
from the tree together with everything before it. Entities as in tei (xml.text): a declared one is
left out of the text and counted, an undeclared one stays verbatim and is counted per file.
"""

from collections.abc import Iterator

from lxml import etree

from ...schema import Document, TextOverCap
from ..xml.events import FeedEvents, Span
from ..xml.parser import parser_options
from ..xml.text import BIG_LINE, TextCollector, report_unexpanded
from .paragraph import Paragraph
from .range_log import combined_log

DOC_METADATA_KEYS = ("title", "crawl_date", "lang_distr", "url", "domain", "file_type", "lm_score")

_DOC = "doc"  # un-namespaced only: lxml matches a bare tag name against no-namespace elements
_P = "p"
_UNDEFINED_ENTITY = frozenset({etree.ErrorTypes.ERR_UNDECLARED_ENTITY, etree.ErrorTypes.WAR_UNDECLARED_ENTITY})


def _is_nested(elem) -> bool:
    """True when `elem` sits inside another `<doc>` (D13: the outer one takes its paragraphs)."""
    parent = elem.getparent()
    while parent is not None:
        if parent.tag == _DOC:
            return True
        parent = parent.getparent()
    return False


def _collect_paragraphs(container, parts: list, collector: TextCollector) -> None:
    """Append the stripped, non-empty text of every outermost `<p>` under `container` (D13: a
    nested `<p>` is part of the one around it), in document order. Iterative: under huge_tree the
    nesting reaches 2048, beyond Python's recursion limit."""
    stack = [iter(container)]
    while stack:
        for child in stack[-1]:
            if child.tag == _P:
                # a leaf paragraph's text is its .text; comments and PIs were removed while parsing
                text = collector.text(child) if len(child) else child.text
                if text:
                    text = text.strip()
                    if text:
                        parts.append(text)
            elif len(child):
                stack.append(iter(child))
                break
        else:
            stack.pop()


def doc_text(doc, collector: TextCollector | None = None) -> str:
    """The outermost paragraphs' texts, stripped, empties dropped, joined by newlines. Entity
    references met go to `collector.unexpanded` (unless kept verbatim, see `_Undeclared`)."""
    parts: list = []
    _collect_paragraphs(doc, parts, collector if collector is not None else TextCollector())
    return "\n".join(parts)


class _Undeclared:
    """`"&name;" in it` is true when the file's internal DTD subset declares no entity `name`:
    such references stay verbatim (libxml2 reports them, counted as `undefined_entity`)."""

    def __init__(self, elem):
        dtd = elem.getroottree().docinfo.internalDTD
        self.declared = frozenset(e.name for e in dtd.iterentities()) if dtd is not None else frozenset()

    def __contains__(self, reference: str) -> bool:
        return reference[1:-1] not in self.declared


def doc_metadata(attrib) -> dict:
    """The whitelisted `<doc>` attributes, in whitelist order, present and non-empty; strings stay strings."""
    meta = {}
    for key in DOC_METADATA_KEYS:
        value = attrib.get(key)
        if value:
            meta[key] = value
    return meta


def _release(elem) -> None:
    """Free a finished `<doc>` and every sibling before it, so the tree never grows."""
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


def _free_finished(root) -> None:
    """Free every element that has ended, and all text read by no paragraph, but a paragraph's
    insides: the elements still open are the chain of last children from the root, so every other
    child of each has ended (and a `<p>` among them was read from its end event, which came in this
    batch or an earlier one). Text outside a `<p>` is never read, so the chain's own text and the
    tail of its last child go too, the text node the parser is still appending to included (it
    then starts a new one, as `TextCollector.take` relies on). Called after each batch of events,
    it bounds a `<doc>` of any shape (a million `<div>`s, empty elements, the text between them,
    one text node of many MB) without an event per element; the open `<p>` is `take`n apart."""
    node, in_doc = root, False
    while True:
        tag = node.tag
        if tag == _DOC:
            in_doc = True
        elif tag == _P and in_doc:
            return  # its text is read by _CappedDocs.after_batch and when it ends
        if node.text and (tag != _DOC or _line_is_its_own(node)):
            node.text = None
        count = len(node)
        if not count:
            return
        if count > 1:
            del node[:-1]
        node = node[-1]
        if node.tail:
            node.tail = None
        if node.tag.__class__ is not str:
            return  # an entity reference (comments and PIs are removed while parsing)


def _line_is_its_own(elem) -> bool:
    """False from line 65,535 on, where libxml2 gives an element the line of its first child (or
    of a neighbour): a `<doc>`'s line, which an `empty_text` drop names, then depends on its leading
    text, which stays."""
    line = elem.sourceline
    return line is not None and line < BIG_LINE


class _CappedDocs:
    """What a capped pass knows of the top-level `<doc>` it reads: its paragraphs' texts while the
    document is within the cap (then `[None]`), their size with the newlines between them, and the
    outermost `<p>` still open. A `<p>` that began and ended between two batches is read whole when
    it ends, as before; one still open when a batch ends is read piecewise from then on
    (`Paragraph`), so one `<p>` of a million inline elements or one text node of many MB is held a
    batch at a time."""

    def __init__(self, cap: int, collector: TextCollector, root):
        self.cap, self.collector, self.root = cap, collector, root
        # entity references exist only under a DOCTYPE (without one, an undeclared name stops the
        # parse): then their lines are kept (TextCollector.take), at the price of open text nodes
        self.lines = root.getroottree().docinfo.internalDTD is not None
        self.depth = self.p_depth = 0  # open <doc> elements; open <p> elements inside one
        self.parts: list = []
        self.size = 0
        self.open_p = None  # the outermost <p> open, and what was taken of it (None: nothing yet)
        self.paragraph: Paragraph | None = None

    def start_doc(self) -> None:
        if not self.depth:
            self.parts, self.size, self.p_depth = [], 0, 0
        self.depth += 1

    def end_doc(self) -> bool:
        """True when the `<doc>` that ended is a top-level one (D13: a nested one is its outer's)."""
        self.depth -= 1
        return not self.depth

    def start_p(self, elem) -> None:
        self.p_depth += 1
        if self.p_depth == 1:
            self.open_p, self.paragraph = elem, None

    def end_p(self, elem) -> None:
        self.p_depth -= 1
        if self.p_depth:
            return  # a nested <p> is part of the one around it
        paragraph, self.open_p, self.paragraph = self.paragraph, None, None
        if paragraph is None:
            text = self.collector.text(elem) if len(elem) else elem.text
            text = text.strip() if text else None
            size = len(text.encode("utf-8", "surrogatepass")) if text else 0
        else:
            paragraph.add(self.collector.text(elem))  # the rest
            size, text = paragraph.size, paragraph.text()
        if size:
            self.size += size + self._newline()
            if self.size <= self.cap:
                self.parts.append(text)
            else:
                self.parts = [None]  # over the cap: counted from here on, never kept
        _release(elem)  # read: it and what came before it in its parent are let go

    def after_batch(self) -> None:
        """Free what has ended and read what the open `<p>` holds so far (it is then let go)."""
        _free_finished(self.root)
        if self.open_p is None:
            return
        if self.paragraph is None:
            self.paragraph = Paragraph(self.cap - self.size - self._newline())
        self.paragraph.add(self.collector.take(self.open_p, self.lines))

    def _newline(self) -> int:
        """The newline before a paragraph's text: none before the document's first."""
        return 1 if self.size or self.parts else 0


class MacocuPass:
    """One streaming parse of a macocu file (an xml.retry.StreamingPass)."""

    def __init__(self, drop, earlier: list | None = None, ends_file: bool = True, cap: int = 0):
        self.drop = drop  # drop(reason, message, line=None)
        self.cap = cap  # max_document_bytes: a `<doc>` lets its paragraphs go once past it (`_capped_run`)
        self.ends_file = ends_file  # the per-file `undefined_entity` count is reported at the file's end
        self.events: FeedEvents | None = None
        # a range of a split file: libxml2's log of the file before the range (ranges)
        self.earlier = earlier or []

    @property
    def error_log(self):
        own = self.events.error_log if self.events is not None else None
        return combined_log(self.earlier, own) if self.earlier else own

    @property
    def unread(self) -> Span | None:
        return self.events.unread if self.events is not None else None

    def in_progress(self) -> str | None:
        return None

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]:
        if self.cap:
            yield from self._capped_run(fh, huge, careful)
            return
        # ids collected as lxml's iterparse, which macocu read with before, always did (xml.parser)
        self.events = events = FeedEvents(careful, events=("end",), tag=_DOC, remove_comments=True,
                                          remove_pis=True, **parser_options(huge, collect_ids=True))
        collector = None
        for batch in events.batches(fh):
            for _, elem in batch:
                if _is_nested(elem):
                    continue
                if collector is None:  # the DOCTYPE is complete before the first element
                    collector = TextCollector(verbatim=_Undeclared(elem))
                doc = self._document(elem, collector)
                _release(elem)
                if doc is not None:
                    yield doc
        if not self.ends_file:
            return
        self._count_undefined()

    def _capped_run(self, fh, huge: bool, careful: Span | None) -> Iterator[Document]:
        """`run` under max_document_bytes (docs/memory.md): each outermost `<p>` of a top-level
        `<doc>` is read as the parse goes (`_CappedDocs`), its text kept only while the document's
        text is within the cap (past it, only counted), and after each batch every other element
        that has ended, and every text no paragraph reads, is freed too (`_free_finished`). The
        texts, drops and their order are `run`'s: the paragraphs `doc_text` would collect at the
        `<doc>`'s end, in the same order."""
        self.events = events = FeedEvents(careful, events=("start", "end"), tag=(_DOC, _P),
                                          remove_comments=True, remove_pis=True,
                                          **parser_options(huge, collect_ids=True))
        docs: _CappedDocs | None = None  # made at the first event: the DOCTYPE is complete by then
        for batch in events.batches(fh):
            for event, elem in batch:
                if docs is None:
                    docs = _CappedDocs(self.cap, TextCollector(verbatim=_Undeclared(elem)),
                                       elem.getroottree().getroot())
                if elem.tag == _DOC:
                    if event == "start":
                        docs.start_doc()
                    elif docs.end_doc():
                        doc = self._capped_document(elem, docs.collector, docs.parts, docs.size)
                        _release(elem)
                        if doc is not None:
                            yield doc
                elif docs.depth:  # a <p> inside a top-level <doc>
                    if event == "start":
                        docs.start_p(elem)
                    else:
                        docs.end_p(elem)
            if docs is not None:
                docs.after_batch()
        if not self.ends_file:
            return
        self._count_undefined()

    def _capped_document(self, elem, collector: TextCollector, parts: list, size: int) -> Document | None:
        """`_document` from the paragraphs `_capped_run` read; over the cap, the size only."""
        attrib = elem.attrib
        doc_id = attrib.get("id")
        if collector.unexpanded:
            report_unexpanded(collector.unexpanded, self.drop, f"<doc id={doc_id!r}>")
        if not parts:
            self.drop("empty_text", f"<doc id={doc_id!r}> has no paragraph text; skipped", elem.sourceline)
            return None
        if size > self.cap:  # the encoder drops it as it would the whole text
            return Document(TextOverCap(size, False), doc_id, doc_metadata(attrib))
        return Document("\n".join(parts), doc_id, doc_metadata(attrib))

    def _document(self, elem, collector: TextCollector) -> Document | None:
        """The Document of a closed top-level `<doc>`; None (counted) when it has no text."""
        attrib = elem.attrib
        doc_id = attrib.get("id")
        text = doc_text(elem, collector)
        if collector.unexpanded:
            report_unexpanded(collector.unexpanded, self.drop, f"<doc id={doc_id!r}>")
        if not text:
            self.drop("empty_text", f"<doc id={doc_id!r}> has no paragraph text; skipped", elem.sourceline)
            return None
        return Document(text, doc_id, doc_metadata(attrib))

    def _count_undefined(self) -> None:
        undefined = [e for e in self.error_log if e.type in _UNDEFINED_ENTITY]
        if undefined:
            first = undefined[0]
            self.drop("undefined_entity", f"{len(undefined)} undefined entity reference(s), first: "
                                          f"{first.message.strip()}; kept verbatim in text, an attribute holding "
                                          "one is empty", first.line)
