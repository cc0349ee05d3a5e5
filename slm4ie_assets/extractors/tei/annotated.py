"""The annotated TEI pass: per-file documents and utterance documents (ADDENDUM 6.3, 6.4; D12, D13).

The file holds a `<w>` (scan.py). It is read as per-file until the first `<u>` starts; from then
on it is an utterance file, and the sentences gathered so far lie outside every `<u>`, which is
exactly what the utterance path drops. So one pass serves both without knowing in advance.

- Per-file: every outermost `<s>` of the file (teiHeader included) in one document, doc_id the
  file stem, metadata the TSV row. It is emitted at the end of the file, so a parse error drops it.
- Utterance: every outermost `<u>` is a document of the outermost `<s>` below it (a nested `<u>`
  belongs to the outer one, D13); doc_id its xml:id (none: the writer's fallback, D3/D4);
  metadata the TSV row, then `who` and `ana` (6.3).
- Lost content is counted (D13): a sentence outside every `<u>`, a token outside every `<s>`, an
  `<s>` or `<u>` with text but no token, an unexpanded entity reference in a token.
"""

from collections.abc import Iterator

from ...schema import Annotations, Document, TextOverCap
from ..xml.events import Span
from ..xml.names import BLOCKS, CHOICE, PC, XML_ID, S, U, W
from ..xml.text import choose_reading, report_unexpanded
from .streaming import TeiPass, text_is_blank
from .tokens import DocTokens, SentenceReader


def local_name(tag) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else "?"


def utterance_metadata(row: dict, u) -> dict:
    """The TSV row, then `who` and `ana` from the `<u>` (an empty value kept; on a clash the
    `<u>` value wins and keeps the row's position)."""
    meta = dict(row)
    for key in ("who", "ana"):
        value = u.get(key)
        if value is not None:
            meta[key] = value
    return meta


def annotations_of(tokens: DocTokens) -> Annotations:
    return Annotations(tokens.forms, tokens.lemmas, tokens.upos, tokens.feats, tokens.space_after, tokens.sentences)


def document_of(tokens: DocTokens, doc_id, meta: dict) -> Document:
    """The Document of a finished DocTokens; one over max_document_bytes carries only its size, and
    the encoder drops it as it would the whole text (docs/memory.md)."""
    if tokens.over:
        return Document(TextOverCap(tokens.size, tokens.blank), doc_id, meta)
    return Document(tokens.text(), doc_id, meta, annotations_of(tokens))


class AnnotatedPass(TeiPass):
    tags = tuple(dict.fromkeys((S, U, CHOICE) + BLOCKS))

    def __init__(self, row: dict, drop, stem: str, cap: int = 0):
        super().__init__(row, drop, stem, cap)
        self.reader = SentenceReader()
        self.file_doc: DocTokens | None = DocTokens(interned=True, cap=cap)  # None once the file holds <u>
        self.u_doc: DocTokens | None = None
        self.u_id = None
        self.u_meta: dict = {}
        self.u_line = None

    def run(self, fh, huge: bool, careful: Span | None = None) -> Iterator[Document]:
        s_depth = u_depth = 0
        choices = s_choices = 0  # <choice> starts seen, in all and when the current <s> started
        choice_depth = 0  # open <choice> elements outside any <s>: their sentences wait for the choice's end
        for events in self.event_batches(fh, huge, careful):
            for event, el in events:
                tag = el.tag
                if tag == S:
                    if event == "start":
                        if not s_depth:
                            s_choices = choices
                        s_depth += 1
                        continue
                    s_depth -= 1
                    if s_depth or choice_depth:
                        continue  # a nested <s> belongs to the outermost one; one in a <choice> waits
                    self._sentence_end(el, self.u_doc if u_depth else self.file_doc, choices != s_choices)
                elif tag == U:
                    if event == "start":
                        if self.file_doc is not None:
                            self._become_utterance_file(self.file_doc)
                        if not u_depth:
                            self._open_utterance(el)
                        u_depth += 1
                        continue
                    u_depth -= 1
                    if u_depth:
                        continue  # nested: part of the outer <u>
                    if s_depth:
                        self.u_doc = None  # inside an <s>: that <s> (outside every <u>) owns its tokens
                        continue
                    doc = self._close_utterance(el)
                    if not choice_depth:
                        el.clear()
                        self.release(el)
                    if doc is not None:
                        yield doc
                elif tag == CHOICE:
                    if s_depth:
                        if event == "start":
                            choices += 1  # the sentence takes the careful path (tokens.py)
                    elif event == "start":
                        choice_depth += 1
                    else:
                        choice_depth -= 1
                        if not choice_depth:
                            self._sentences_in_choice(el, self.u_doc if u_depth else self.file_doc)
                            el.clear()
                            self.release(el)
                elif event == "end" and not s_depth and not u_depth and not choice_depth:
                    self.release(el)
        self.finish(self.root)
        if self.file_doc is not None and len(self.file_doc):
            tokens, self.file_doc = self.file_doc, None
            yield document_of(tokens, self.stem, dict(self.row))

    def _sentence_end(self, s, target: DocTokens | None, has_choice: bool) -> None:
        """An outermost `<s>` closed: its tokens join the document in progress (None: outside every `<u>`)."""
        if target is None:
            self._sentence_outside_utterance(s)
        elif not self.reader.read(s, target, has_choice) and not text_is_blank(s):
            self.drop("sentence_without_tokens", f"<s> {s.get(XML_ID)!r} has text but no <w>/<pc>; "
                                                 "its text is not in any document", s.sourceline)
        self._count_unexpanded()
        s.clear()
        self.release(s)

    # --- utterances

    def _become_utterance_file(self, file_doc: DocTokens) -> None:
        for line in file_doc.sentence_lines:
            self.drop("sentence_outside_utterance", "<s> before the first <u> of an utterance file is outside "
                                                    "every <u>; dropped", line)
        self.file_doc = None

    def _open_utterance(self, u) -> None:
        self.u_doc = DocTokens(cap=self.cap)
        self.u_id = u.get(XML_ID)
        self.u_meta = utterance_metadata(self.row, u)
        self.u_line = u.sourceline

    def _close_utterance(self, u) -> Document | None:
        tokens, self.u_doc = self.u_doc, None
        assert tokens is not None  # opened at the start of this outermost <u>
        self._count_stray_tokens(u)
        if len(tokens):
            doc_id = self.u_id if self.u_id and self.u_id.strip() else None
            return document_of(tokens, doc_id, self.u_meta)
        if not text_is_blank(u):
            self.drop("utterance_without_tokens", f"<u> {self.u_id!r} has text but no <s> with tokens; dropped",
                      self.u_line)
        return None

    def _sentence_outside_utterance(self, s) -> None:
        n = sum(1 for _ in s.iter(W, PC))
        if n:
            self.drop("sentence_outside_utterance", f"<s> {s.get(XML_ID)!r} ({n} tokens) is outside every <u>; "
                                                    "dropped", s.sourceline)

    def _sentences_in_choice(self, choice, target: DocTokens | None) -> None:
        """The outermost `<s>` of the chosen reading of a `<choice>` around sentences (D13, S6)."""
        stack = [iter((choice,))]
        while stack:
            for child in stack[-1]:
                tag = child.tag
                if tag == S:
                    if target is None:
                        self._sentence_outside_utterance(child)
                    else:
                        self.reader.read(child, target, True)
                        self._count_unexpanded()
                elif tag == W or tag == PC:
                    self._count_stray_tokens(child)
                elif tag == CHOICE:
                    chosen = choose_reading(child)
                    if chosen is not None:
                        stack.append(iter((chosen,)))
                        break
                elif tag.__class__ is str and len(child):
                    stack.append(iter(child))
                    break
            else:
                stack.pop()

    # --- lost content

    def _count_unexpanded(self) -> None:
        if self.reader.text.unexpanded:
            report_unexpanded(self.reader.text.unexpanded, self.drop, "a token", "its text is missing from the form")

    def _count_stray_tokens(self, el) -> None:
        for tok in el.iter(W, PC):
            self.drop("token_outside_sentence", f"<{local_name(tok.tag)}> {tok.text!r} is not inside any <s>; "
                                                "dropped", tok.sourceline)

    def inspect(self, el, in_body: bool) -> None:
        tag = el.tag
        if tag == S or tag == U or tag.__class__ is not str:
            return  # sentences and utterances were read (and emptied) at their end
        self._count_stray_tokens(el)

    def finish(self, root) -> None:
        if root is not None:
            self._count_stray_tokens(root)

    def in_progress(self) -> str | None:
        if self.file_doc is not None:
            return (f"the per-file document {self.stem!r} ({self.file_doc.sentence_count()} sentences read) is "
                    "dropped whole")
        if self.u_doc is not None:
            return f"utterance {self.u_id!r} (line {self.u_line}) in progress is dropped"
        return None
