"""Tokens of one TEI `<s>` into a document's parallel arrays (ADDENDUM 6.2; D13, D21, S6, S9).

Tokens are the `<w>` and `<pc>` at any depth under the `<s>` (through `<name>`, `<seg>`, `<rs>`,
`<hi>`, ...), inside `<choice>` only the chosen reading's, and a token inside a token belongs to
the outer one. A token's form is its whole text content, unstripped.

The fast path serves sentences without `<choice>` whose tokens have no child markup: lxml finds
the tokens in C and only they reach Python. Anything else is walked in Python (`_slow_tokens`).
Per token only lxml's element proxy and the attribute strings are made; forms and lemmas are
interned through a bounded dict, and (upos, feats) are shared tuples from the morphology cache.
"""

from array import array

from ...schema import sentence_text
from ..xml.names import CHOICE, PC, W
from ..xml.text import TextCollector, choose_reading
from .morphology import UPOS_TAGS, MorphologyCache

_RIGHT = frozenset({"right", "both"})  # no space after this token
_LEFT = frozenset({"left", "both"})  # no space before this token
_INTERN_LIMIT = 200_000  # distinct strings kept; bounded, so a file of many documents stays small


class DocTokens:
    """One document's tokens as parallel arrays plus inclusive sentence spans. `interned`: forms
    and lemmas share one object per distinct string, for documents large enough to need it (a
    per-file document may hold millions of tokens; an utterance is small and short-lived)."""

    __slots__ = ("forms", "lemmas", "upos", "feats", "space_after", "sentences", "sentence_lines", "interned", "cap",
                 "size", "blank", "over", "released", "released_sentences")

    def __init__(self, interned: bool = False, cap: int = 0):
        self.interned = interned
        # under max_document_bytes (`cap`), the text is counted sentence by sentence (`size`: UTF-8 bytes
        # of text(), `blank`: all of it blank) and the tokens let go once it passes the cap (docs/memory.md)
        self.cap = cap
        self.size = self.released = self.released_sentences = 0
        self.blank = True
        self.over = False
        self.forms: list = []
        self.lemmas: list = []
        self.upos: list = []
        self.feats: list = []
        self.space_after: list = []
        self.sentences: list = []
        self.sentence_lines = array("l")  # source line of each sentence, for drop messages

    def __len__(self) -> int:
        return len(self.forms) + self.released

    def sentence_count(self) -> int:
        return len(self.sentences) + self.released_sentences

    def count_last_sentence(self) -> None:
        """Under a cap: count the sentence just added; once the text is over the cap, its tokens and
        every later sentence's are let go (the encoder drops the document from `size`, TextOverCap)."""
        start, end = self.sentences[-1]
        text = sentence_text(self.forms, self.space_after, start, end + 1)
        self.size += len(text.encode("utf-8", "surrogatepass")) + (1 if self.sentence_count() > 1 else 0)
        self.blank = self.blank and (not text or text.isspace())
        if self.over or self.size > self.cap:
            self.over = True
            self.released += len(self.forms)
            self.released_sentences += len(self.sentences)
            del self.forms[:], self.lemmas[:], self.upos[:], self.feats[:], self.space_after[:], self.sentences[:]

    def text(self) -> str:
        """Each sentence rebuilt from its tokens (schema.sentence_text), joined by newlines (ADDENDUM 6.2)."""
        forms, space = self.forms, self.space_after
        return "\n".join([sentence_text(forms, space, start, end + 1) for start, end in self.sentences])


def _same(value):
    return value


class SentenceReader:
    """Appends the tokens of `<s>` elements to a DocTokens; shared caches live across sentences."""

    def __init__(self):
        self.morph = MorphologyCache()
        self.strings: dict = {}
        self.text = TextCollector()

    def intern(self, value):
        strings = self.strings
        if len(strings) >= _INTERN_LIMIT:
            strings.clear()
        return strings.setdefault(value, value)

    def read(self, s, doc: DocTokens, has_choice: bool) -> int:
        """Append the tokens of `s`; return how many. A sentence without tokens adds no span."""
        start = len(doc.forms)
        if has_choice or not self._fast(s, doc):
            del doc.forms[start:], doc.lemmas[start:], doc.upos[start:], doc.feats[start:], doc.space_after[start:]
            self._append(self._slow_tokens(s), doc)
        end = len(doc.forms)
        if end > start:
            doc.sentences.append([start, end - 1])
            doc.sentence_lines.append(s.sourceline or 0)
            if doc.cap:
                doc.count_last_sentence()
        return end - start

    def _fast(self, s, doc: DocTokens) -> bool:
        """The fast path; False (arrays possibly half-filled) when a token has child markup."""
        space = doc.space_after
        add_form, add_lemma, add_upos, add_feats, add_space = (
            doc.forms.append, doc.lemmas.append, doc.upos.append, doc.feats.append, space.append)
        strings = self.strings
        if len(strings) >= _INTERN_LIMIT:
            strings.clear()
        intern = strings.setdefault
        interned = doc.interned
        morph = self.morph
        msd_cache, ana_cache = morph.msd_cache, morph.ana_cache
        first = len(space)
        for tok in s.iter(W, PC):
            if len(tok):
                return False
            form = tok.text or ""
            lemma = tok.get("lemma")
            msd = tok.get("msd")
            if msd:
                upos, feats = msd_cache.get(msd) or morph.from_msd(msd)
            else:
                ana = tok.get("ana")
                upos, feats = ana_cache.get(ana) or morph.from_ana(ana)
            if upos is None:
                pos = tok.get("pos")
                if pos in UPOS_TAGS:
                    upos = pos
            join = tok.get("join")
            if join is None:
                add_space(True)
            else:
                if join in _LEFT and len(space) > first:
                    space[-1] = False
                add_space(join not in _RIGHT)
            if interned:
                form = intern(form, form)
                lemma = intern(lemma, lemma)
            add_form(form)
            add_lemma(lemma)
            add_upos(upos)
            add_feats(feats)
        return True

    def _slow_tokens(self, s):
        """(token element, form) in document order, honouring <choice> and nested tokens."""
        text_of = self.text.text
        stack = [iter(s)]
        while stack:
            for child in stack[-1]:
                tag = child.tag
                if tag == W or tag == PC:
                    yield child, (text_of(child) if len(child) else (child.text or ""))
                elif tag == CHOICE:
                    chosen = choose_reading(child)
                    if chosen is not None:
                        if chosen.tag == W or chosen.tag == PC:
                            yield chosen, (text_of(chosen) if len(chosen) else (chosen.text or ""))
                        else:
                            stack.append(iter(chosen))
                            break
                elif tag.__class__ is str and len(child):
                    stack.append(iter(child))
                    break
            else:
                stack.pop()

    def _append(self, tokens, doc: DocTokens) -> None:
        resolve = self.morph.resolve
        intern = self.intern if doc.interned else _same
        first = len(doc.forms)
        for tok, form in tokens:
            lemma = tok.get("lemma")
            upos, feats = resolve(tok.get("msd"), tok.get("ana"), tok.get("pos"))
            join = tok.get("join")
            if join in _LEFT and len(doc.forms) > first:
                doc.space_after[-1] = False
            doc.forms.append(intern(form))
            doc.lemmas.append(intern(lemma))
            doc.upos.append(upos)
            doc.feats.append(feats)
            doc.space_after.append(join not in _RIGHT)
