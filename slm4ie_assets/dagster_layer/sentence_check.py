"""Does a document's text say what its tokens say? Each sentence is rebuilt from its forms and
`space_after` (schema.sentence_text, the one rule of ADDENDUM 5.2 / 6.2) and looked for in the
document text, sentence by sentence, in order.

"Equal sentence by sentence" depends on how the format builds the document text:
  - JOINED (conllu 5.2, tei 6.2): the text is its sentences joined by `\\n` and nothing else. With
    `at` the start of sentence i (0 for the first, just after the `\\n` that ends sentence i-1 for
    the others), the text must continue at `at` with the rebuilt sentence, followed by `\\n` or the
    end of the text; after the last sentence the text must end. So a conllu `# text = ` that
    differs from its tokens is a mismatch, as is any text before, between or after the sentences.
  - SPACED (jsonl 4.2, and any other extractor that yields tokens): the text is the record's own
    and is never rebuilt; the rebuilt sentences must appear in it in order, separated from each
    other (and from the start and end of the text) by whitespace only, possibly none.
A mismatched sentence does not make every later one fail: matching resumes after it (JOINED: at
the end of the text line(s) it covers; SPACED: after its next occurrence within RESYNC_WINDOW
characters, else the next sentence is looked for within RESYNC_WINDOW characters of it). A
document mismatches when one of its sentences does, or when text is left after its last sentence.
"""

import re
from dataclasses import dataclass, field

from ..schema import sentence_text

JOINED_EXTRACTORS = frozenset({"conllu", "tei"})
RESYNC_WINDOW = 1000  # bounds the search after a mismatch, so a bad document costs O(its length)
EXAMPLES = 5
SHOWN_CHARS = 120
_SPACES = re.compile(r"\s*")


def joins_with_newlines(extractor: str) -> bool:
    return extractor in JOINED_EXTRACTORS


@dataclass(frozen=True, slots=True)
class SentenceMismatch:
    doc_id: str
    sentence: int  # 0-based index into the document's `sentences`; = their count for trailing text
    rebuilt: str  # "" for trailing text
    text: str  # what the document text holds there

    def describe(self, sentences: int) -> str:
        if self.sentence >= sentences:
            return f"{self.doc_id!r}: text continues after the last sentence: {_show(self.text)}"
        return (f"{self.doc_id!r} sentence {self.sentence + 1} of {sentences}: rebuilt {_show(self.rebuilt)} "
                f"vs text {_show(self.text)}")


def _show(s: str) -> str:
    return repr(s if len(s) <= SHOWN_CHARS else s[:SHOWN_CHARS] + "…")


@dataclass
class SentenceFindings:
    """Counts over the annotated documents of one published version, and the first examples."""

    documents: int = 0
    sentences: int = 0
    mismatched_documents: int = 0
    mismatched_sentences: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, doc_id: str, text: str, forms: list, space_after: list, sentences: list, joined: bool) -> None:
        bad, example = compare(text, forms, space_after, sentences, joined, doc_id)
        self.documents += 1
        self.sentences += len(sentences)
        self.mismatched_sentences += bad
        if example is not None:
            self.mismatched_documents += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append(example.describe(len(sentences)))

    @property
    def sentence_rate(self) -> float:
        return self.mismatched_sentences / self.sentences if self.sentences else 0.0

    @property
    def document_rate(self) -> float:
        return self.mismatched_documents / self.documents if self.documents else 0.0


def compare(text: str, forms: list, space_after: list, sentences: list, joined: bool,
            doc_id: str = "") -> tuple[int, SentenceMismatch | None]:
    """(mismatched sentences, the first mismatch or None) for one document; see the module doc."""
    n = len(text)
    pos = 0  # where the text after the previous sentence starts
    bad = 0
    first: SentenceMismatch | None = None
    lost = False  # SPACED: the previous sentence was not found, so this one may start further on
    for i, (start, end) in enumerate(sentences):
        rebuilt = sentence_text(forms, space_after, start, end + 1)
        if joined:
            at = pos + 1 if i and text.startswith("\n", pos) else (pos if i == 0 else -1)
            stop = at + len(rebuilt)
            ok = at >= 0 and text.startswith(rebuilt, at) and (stop == n or text.startswith("\n", stop))
        else:
            spaces = _SPACES.match(text, pos)  # `\s*` always matches
            at = spaces.end() if spaces else pos
            at = max(pos, at - (len(rebuilt) - len(rebuilt.lstrip())))  # its own leading spaces
            ok = text.startswith(rebuilt, at)
            if not ok and lost and rebuilt:
                q = text.find(rebuilt, pos, pos + len(rebuilt) + RESYNC_WINDOW)
                at, ok = (q, True) if q >= 0 else (at, False)
            stop = at + len(rebuilt)
            lost = not ok
        if ok:
            pos = stop
            continue
        bad += 1
        shown_from = at if at >= 0 else pos
        if joined:
            resume = _line_end(text, shown_from, rebuilt.count("\n"))
            found = text[shown_from:resume]
        else:
            q = text.find(rebuilt, pos, stop + RESYNC_WINDOW) if rebuilt else -1
            resume, lost = (q + len(rebuilt), False) if q >= 0 else (pos, True)
            found = text[shown_from:shown_from + len(rebuilt)]
        if first is None:
            first = SentenceMismatch(doc_id, i, rebuilt, found)
        pos = resume
    rest = text[pos:]
    if rest and (joined or not rest.isspace()):
        if first is None:
            first = SentenceMismatch(doc_id, len(sentences), "", rest.lstrip("\n") if joined else rest.strip())
    return bad, first


def _line_end(text: str, start: int, newlines: int) -> int:
    """The end of the text line that starts at `start`, after skipping `newlines` line breaks
    (a tei form may hold a newline, so a sentence may cover several lines)."""
    p = start
    for _ in range(newlines):
        q = text.find("\n", p)
        if q < 0:
            return len(text)
        p = q + 1
    q = text.find("\n", p)
    return q if q >= 0 else len(text)
