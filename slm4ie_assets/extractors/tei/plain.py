"""The unannotated TEI passes: plain paragraphs and plain utterances (ADDENDUM 6.5; D13, D19, S6-S8).

- PlainPass: every outermost `<p>` inside any `<body>` (every `<TEI>` of a `<teiCorpus>`, every
  `<text>` of a `<group>`, S7) is a document; a `<p>` in the teiHeader never is. Text: all text
  below it with one reading per `<choice>`, stripped; an empty one is skipped. doc_id its xml:id
  (none: the writer's fallback, D3); metadata the TSV row.
- PlainUtterancePass (D19, S8): every outermost `<u>` is a document like on the annotated path
  (same doc_id and metadata); text = its outermost `<seg>` texts (or, without any, its own text),
  each stripped, empties skipped, joined by newlines; `<note>` is never text. Text in a `<body>`
  outside every `<u>` is counted as dropped.
"""

from collections.abc import Iterator

from ...schema import Document
from ..xml.events import Span
from ..xml.names import BLOCKS, BODY, CHOICE, NOTE, SEG, XML_ID, P, U
from ..xml.text import TextCollector, choose_reading, report_unexpanded
from .annotated import local_name, utterance_metadata
from .streaming import TeiPass, text_is_blank


def _doc_id(value):
    return value if value and value.strip() else None


class _EntityCounting(TeiPass):
    collector: TextCollector

    def count_unexpanded(self, where: str) -> None:
        if self.collector.unexpanded:
            report_unexpanded(self.collector.unexpanded, self.drop, where)


class PlainPass(_EntityCounting):
    tags = tuple(dict.fromkeys((P, BODY) + BLOCKS))

    def __init__(self, row: dict, drop, stem: str, cap: int = 0):
        super().__init__(row, drop, stem, cap)
        self.collector = TextCollector()
        self.open_p = None

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]:
        text_of = self.collector.text
        bodies = p_depth = 0
        for events in self.event_batches(fh, huge, careful):
            for event, el in events:
                tag = el.tag
                if tag == P and (bodies or p_depth):
                    if event == "start":
                        if not p_depth:
                            self.open_p = el  # named only if a parse error cuts it off
                        p_depth += 1
                        continue
                    p_depth -= 1
                    if p_depth:
                        continue  # a nested <p> belongs to the outermost one
                    self.open_p = None
                    text = (text_of(el) if len(el) else el.text or "").strip()
                    doc_id = el.get(XML_ID)
                    if self.collector.unexpanded:
                        self.count_unexpanded(f"<p> {doc_id!r}")
                    el.clear(keep_tail=True)
                    self.release(el, bodies)
                    if text:
                        yield Document(text, _doc_id(doc_id), dict(self.row))
                elif tag == BODY:
                    if event == "start":
                        bodies += 1
                        continue
                    bodies -= 1
                    if not p_depth:
                        self.release(el, bodies)
                elif event == "end" and not p_depth:
                    self.release(el, bodies)

    def in_progress(self) -> str | None:
        p = self.open_p
        if p is not None:
            return f"paragraph {p.get(XML_ID)!r} (line {p.sourceline}) in progress is dropped"
        return None


class PlainUtterancePass(_EntityCounting):
    tags = tuple(dict.fromkeys((U, BODY) + BLOCKS))

    def __init__(self, row: dict, drop, stem: str, cap: int = 0):
        super().__init__(row, drop, stem, cap)
        self.collector = TextCollector(skip=frozenset({NOTE}))
        self.open_u: tuple[str | None, int | None, dict] | None = None  # (xml:id, line, metadata)

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]:
        bodies = u_depth = 0
        for events in self.event_batches(fh, huge, careful):
            for event, el in events:
                tag = el.tag
                if tag == U:
                    if event == "start":
                        if not u_depth:
                            self.open_u = (el.get(XML_ID), el.sourceline, utterance_metadata(self.row, el))
                        u_depth += 1
                        continue
                    u_depth -= 1
                    if u_depth:
                        continue  # a nested <u> belongs to the outermost one
                    assert self.open_u is not None  # set at the start of this outermost <u>
                    doc_id, _, meta = self.open_u
                    self.open_u = None
                    text = self.utterance_text(el)
                    self.count_unexpanded(f"<u> {doc_id!r}")
                    el.clear(keep_tail=True)
                    self.release(el, bodies)
                    if text:
                        yield Document(text, _doc_id(doc_id), meta)
                elif tag == BODY:
                    if event == "start":
                        bodies += 1
                        continue
                    bodies -= 1
                    if not u_depth:
                        self.release(el, bodies)
                elif event == "end" and not u_depth:
                    self.release(el, bodies)
        self.finish(self.root)

    def utterance_text(self, u) -> str:
        """Outermost `<seg>` texts joined by newlines, or the `<u>`'s own text when it has none."""
        text_of = self.collector.text
        segs = []
        found = False
        stack = [iter(u)]
        while stack:
            for child in stack[-1]:
                tag = child.tag
                if tag == SEG:
                    found = True
                    text = text_of(child).strip()
                    if text:
                        segs.append(text)
                elif tag == CHOICE:
                    chosen = choose_reading(child)
                    if chosen is not None and chosen.tag != NOTE:
                        stack.append(iter((chosen,)))
                        break
                elif tag.__class__ is str and tag != NOTE and len(child):
                    stack.append(iter(child))
                    break
            else:
                stack.pop()
        if found:
            return "\n".join(segs)
        return text_of(u).strip()

    def inspect(self, el, in_body: bool) -> None:
        if not in_body:
            return  # the teiHeader, <front>, <back>: never text
        tag = el.tag
        if tag == U or tag.__class__ is not str:
            tail = el.tail
            if tail and tail.strip():
                self.drop("text_outside_utterance", "text outside every <u> is not part of any document; dropped",
                          el.getparent().sourceline if el.getparent() is not None else None)
            return
        if not text_is_blank(el):
            self.drop("text_outside_utterance", f"<{local_name(tag)}> outside every <u> is not part of any "
                                                "document; dropped", el.sourceline)

    def finish(self, root) -> None:
        if root is None:
            return
        for body in root.iter(BODY):
            if any(up.tag == BODY for up in body.iterancestors()):
                continue  # a body inside a body (<floatingText>) is inspected with the outer one
            if body.text and body.text.strip():
                self.drop("text_outside_utterance", "text outside every <u> is not part of any document; dropped",
                          body.sourceline)
            for child in body:
                if child.tag != BODY:
                    self.inspect(child, True)

    def in_progress(self) -> str | None:
        if self.open_u is not None:
            return f"utterance {self.open_u[0]!r} (line {self.open_u[1]}) in progress is dropped"
        return None
