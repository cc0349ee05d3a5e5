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
from ..xml.text import TextCollector, report_unexpanded
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
    """Free every element that has ended, but a paragraph's insides: the elements still open are
    the chain of last children from the root, so every other child of each has ended (and a `<p>`
    among them was read from its end event, which came in this batch or an earlier one). Called
    after each batch of events, it bounds a `<doc>` of any shape (a million `<div>`s, empty
    elements, the text between them) without an event per element."""
    node, in_doc = root, False
    while len(node):
        tag = node.tag
        if tag == _DOC:
            in_doc = True
        elif tag == _P and in_doc:
            return  # its text is read when it ends
        if len(node) > 1:
            del node[:-1]
        node = node[-1]


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
        self.events = events = FeedEvents(careful, events=("end",), tag=_DOC, remove_comments=True, remove_pis=True,
                                          **parser_options(huge, collect_ids=True))
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
        `<doc>` is read as it ends and then freed, its text kept only while the document's text is
        within the cap (past it, only counted), and after each batch every other element that has
        ended is freed too (`_free_finished`). The texts, drops and their order are `run`'s: the
        paragraphs `doc_text` would collect at the `<doc>`'s end, in the same order."""
        self.events = events = FeedEvents(careful, events=("start", "end"), tag=(_DOC, _P), remove_comments=True,
                                          remove_pis=True, **parser_options(huge, collect_ids=True))
        collector: TextCollector | None = None
        root = None  # the document element, known from the first <doc>
        docs = p_depth = 0  # open <doc> elements; open <p> elements inside one
        parts: list = []
        size = 0
        for batch in events.batches(fh):
            for event, elem in batch:
                if elem.tag == _DOC:
                    if event == "start":
                        if collector is None:  # the DOCTYPE is complete before the first element
                            collector = TextCollector(verbatim=_Undeclared(elem))
                            root = elem.getroottree().getroot()
                        if not docs:
                            parts, size, p_depth = [], 0, 0
                        docs += 1
                        continue
                    docs -= 1
                    if docs:
                        continue  # D13: a nested <doc> belongs to the outermost one
                    assert collector is not None
                    doc = self._capped_document(elem, collector, parts, size)
                    _release(elem)
                    if doc is not None:
                        yield doc
                elif docs:  # a <p> inside a top-level <doc>
                    if event == "start":
                        p_depth += 1
                        continue
                    p_depth -= 1
                    if p_depth:
                        continue  # a nested <p> is part of the one around it
                    assert collector is not None
                    text = collector.text(elem) if len(elem) else elem.text
                    if text:
                        text = text.strip()
                        if text:
                            size += len(text.encode("utf-8", "surrogatepass")) + (1 if size or parts else 0)
                            if size <= self.cap:
                                parts.append(text)
                            else:
                                parts = [None]  # over the cap: counted from here on, never kept
                    _release(elem)  # read: it and what came before it in its parent are let go
            if root is not None:
                _free_finished(root)
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
