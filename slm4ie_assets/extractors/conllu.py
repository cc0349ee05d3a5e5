"""conllu: `*.conllu` / `*.conll`, ten tab-separated columns, blank line = sentence boundary
(extraction-formats: conllu; ADDENDUM 5; D3, D4, D6, D8, D11, S4, S5).

The hottest path of the project. Text-mode universal newlines alone run at ~50-110 MB/s, so the
file is read in binary chunks cut at blank lines, newlines are normalised on the bytes, and a
chunk is decoded once. Each sentence's token rows are split with ONE `str.split` after turning
every line end into its own field; when every row has exactly ten fields the five columns we
keep are plain strided slices, appended to the `Annotations` arrays in bulk. Anything unusual
(short or long rows, comments after tokens, multiword ids) takes a row-by-row path.
"""

import re
from collections.abc import Iterator

from ..schema import Annotations, Document, TextOverCap, sentence_text
from .conllu_blocks import (
    TEXT_COMMENT,
    chunks,
    leading_comments,
    line_of,
    split_blocks,
    token_rows,
    trim,
)
from .cuts import LINE_END, pattern_cut
from .extract_context import ExtractContext
from .input_file import InputFile
from .reading import has_escapes
from .splitting import ByteSplitter
from .tsv_metadata import TsvSidecarExtractor

# under max_document_bytes, a sentence whose token rows pass this many characters is read in slices
# of rows, so its fields are never all split at once (docs/memory.md)
SLICE = 1 << 20
SPACE_CACHE_LIMIT = 100_000  # distinct MISC strings remembered before the cache is cleared

# Where a range may start (docs/splitting.md): a blank line of spaces/tabs (D11), then a block whose
# first line is a newdoc line (S5; ASCII whitespace only after it, a Unicode space just costs a cut).
_NEWDOC_BLOCK = re.compile(rb"%s[ \t]*%s(?=# *newdoc(?:[ \t\n\r\f\v]|\Z))" % (LINE_END, LINE_END))
_NOT_SET = object()  # no id seen yet in this file: the document takes the file stem (ADDENDUM 5.3)

_UNDERSCORE = {"_": None}
_underscore_get = _UNDERSCORE.get


def _nulled(values):
    """A LEMMA/UPOS/FEATS column with `_` as null (ADDENDUM 5.1); the `in` test is C-level."""
    if "_" in values:
        return map(_underscore_get, values, values)
    return values


class _SpaceAfter(dict):
    """MISC -> space_after, cached: false only when `SpaceAfter=No` is a whole `|` item (D11)."""

    def __missing__(self, misc):
        verdict = "SpaceAfter=No" not in misc.split("|") if "SpaceAfter=No" in misc else True
        if len(self) >= SPACE_CACHE_LIMIT:
            self.clear()
        self[misc] = verdict
        return verdict


def newdoc_id(line: str) -> str | None:
    """S5: the id is the text after the first `=` with one leading space dropped; None without `=`."""
    _, eq, rest = line.partition("=")
    if not eq:
        return None
    return rest[1:] if rest.startswith(" ") else rest


# ----------------------------------------------------------------------------- documents


class _Doc:
    """The document being collected. Under max_document_bytes it also counts its text (`size`: UTF-8
    bytes of its sentences joined with newlines, `blank`: all of them blank); once that passes the
    cap (`over`) its columns and texts are let go and only the counting goes on (docs/memory.md)."""

    __slots__ = ("ann", "texts", "id", "bad_id_line", "size", "sentences", "blank", "over")

    def __init__(self, doc_id):
        self.ann = Annotations()
        self.texts: list[str] = []
        self.id = doc_id
        self.bad_id_line: int | None = None  # where an id with invalid UTF-8 came from
        self.size = self.sentences = 0
        self.blank = True
        self.over = False

    def has_tokens(self) -> bool:
        return self.over or bool(self.ann.forms)

    def count(self, size: int, blank: bool, cap: int) -> bool:
        """Count a sentence's text; False once the document is over `cap` (nothing more is kept)."""
        self.size += size + (1 if self.sentences else 0)
        self.sentences += 1
        self.blank = self.blank and blank
        if not self.over and self.size > cap:
            self.release()
        return not self.over

    def release(self) -> None:
        """Over the cap: let the columns and texts go; the encoder drops the document by its size."""
        self.over = True
        self.ann, self.texts = Annotations(), []


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _is_blank(text: str) -> bool:
    return not text or text.isspace()


class _FileReader:
    """The documents of one file, block by block: where a document ends (newdoc markers, the
    sent_id heuristic) and what each sentence adds to it. The caller yields what `boundary`
    returns before it calls `sentence`, so every drop keeps its place among the documents."""

    def __init__(self, space_of, file: InputFile, ctx: ExtractContext, meta: dict):
        self.space_of = space_of
        self.file, self.ctx, self.meta = file, ctx, meta
        self.stem = file.stem
        self.cap = ctx.max_document_bytes
        self.doc = _Doc(_NOT_SET)
        self.newdoc_seen = False

    def boundary(self, comments: tuple, bad_here: bool, where: tuple, bi: int, lead: int) -> Document | None:
        """Apply a block's newdoc marker or sent_id (ADDENDUM 5.3, S5); the finished document, if any."""
        newdoc, sent = comments[3], comments[4]
        out = None
        if newdoc is not None:
            if self.doc.has_tokens():
                out = self.finish()
            doc = self.doc = _Doc(newdoc_id(newdoc[1]))
            self.newdoc_seen = True  # S5: any newdoc switches the sent_id heuristic off
            if bad_here and doc.id is not None and has_escapes(doc.id):
                doc.bad_id_line = line_of(where, bi) + lead + newdoc[0]
        elif sent is not None and not self.newdoc_seen:
            value = sent[1]
            dot = value.find(".")
            if dot >= 0:
                prefix = value[:dot]
                if self.doc.id is _NOT_SET:
                    self.doc.id = prefix  # Q10b: the sentences already seen join this document
                elif prefix != self.doc.id:
                    if self.doc.has_tokens():
                        out = self.finish()
                    self.doc = _Doc(prefix)
                if bad_here and has_escapes(prefix):
                    self.doc.bad_id_line = line_of(where, bi) + lead + sent[0]
        return out

    def sentence(self, block: str, pos: int, k: int, text: str | None, bad_here: bool, where: tuple, bi: int,
                 lead: int) -> None:
        """Add the token rows of `block` from `pos` (after `k` comment lines) on: one split for the
        whole sentence when every row has ten fields, row by row otherwise (`token_rows`). `lead`: blank
        lines trimmed from the start of the block, for line numbers."""
        if bad_here:
            n = next(n for n, line in enumerate(block.split("\n")) if has_escapes(line))
            self.ctx.drop("invalid_utf8", self.file, "invalid UTF-8 bytes; sentence skipped",
                          line_of(where, bi) + lead + n)
            return
        # Token rows, split at once: each line end becomes a field of its own, so with
        # exactly ten fields per row every 11th element is "\n".
        if self.cap and len(block) - pos > SLICE:  # read in place: a copy of the rows would double them
            self._sliced(block, pos, line_of(where, bi) + lead + k, text)
            return
        region = block[pos:] if pos else block
        nrows = region.count("\n") + 1
        f = region.replace("\n", "\t\n\t").split("\t")
        ids = "".join(f[0::11])
        if (len(f) != 11 * nrows - 1 or f[10::11].count("\n") != nrows - 1 or "\n#" in region
                or "-" in ids or "." in ids):
            cols, text = token_rows(region, line_of(where, bi) + lead + k, text, self.file, self.ctx)
            if cols is None:
                return
            forms, lemmas, upos, feats, misc = cols
        else:
            forms, lemmas, upos, feats, misc = f[1::11], f[2::11], f[3::11], f[5::11], f[9::11]
        space = list(map(self.space_of, misc))
        if self.cap:
            text = text if text else sentence_text(forms, space)
            if not self.doc.count(_utf8_len(text), _is_blank(text), self.cap):
                return
        ann = self.doc.ann
        start = len(ann.forms)
        ann.forms.extend(forms)
        ann.lemmas.extend(_nulled(lemmas))
        ann.upos.extend(_nulled(upos))
        ann.feats.extend(_nulled(feats))
        ann.space_after.extend(space)
        ann.sentences.append([start, start + len(forms) - 1])
        self.doc.texts.append(text if text else sentence_text(forms, space))

    def _columns(self, rows: str, first_line: int) -> tuple | None:
        """The five kept columns of whole rows (one split when all are regular, else `token_rows`)."""
        nrows = rows.count("\n") + 1
        f = rows.replace("\n", "\t\n\t").split("\t")
        ids = "".join(f[0::11])
        if (len(f) != 11 * nrows - 1 or f[10::11].count("\n") != nrows - 1 or "\n#" in rows or rows[:1] == "#"
                or "-" in ids or "." in ids):
            return token_rows(rows, first_line, None, self.file, self.ctx)[0]
        return f[1::11], f[2::11], f[3::11], f[5::11], f[9::11]

    def _sliced(self, region: str, pos: int, first_line: int, text: str | None) -> None:
        """`sentence` for token rows longer than SLICE under a cap: read in slices of whole rows, and
        counted only once its document passes the cap. Its `# text = ` is the last one among its
        rows if any (as in `token_rows`), else `text`; without one it is rebuilt from the forms. The rows
        are `region[pos:]`."""
        late = region.rfind("\n" + TEXT_COMMENT, pos)
        if late >= 0:
            end = region.find("\n", late + 1)
            text = region[late + 10: end if end >= 0 else len(region)]
        kept: list | None = None if self.doc.over else []
        size = spaces = 0
        blank, last_space, tokens, line = True, False, False, first_line
        while pos < len(region):
            end = region.find("\n", pos + SLICE)
            end = len(region) if end < 0 else end
            cols = self._columns(region[pos:end], line)
            line += region.count("\n", pos, end) + 1
            pos = end + 1
            if cols is None:
                continue
            forms, space = cols[0], list(map(self.space_of, cols[4]))
            tokens = True
            if not text:
                joined = "".join(forms)
                size += _utf8_len(joined)
                spaces += sum(space)
                last_space = space[-1]
                blank = blank and _is_blank(joined)
            if kept is not None:
                kept.append((forms, cols[1], cols[2], cols[3], space))
                low = _utf8_len(text) if text else size + spaces - 1  # what the text holds at least
                if self.doc.size + (1 if self.doc.sentences else 0) + low > self.cap:
                    kept = None
                    self.doc.release()
        if not tokens:
            return  # no token row: the sentence adds nothing
        full = (_utf8_len(text), _is_blank(text)) if text else (size + spaces - last_space, blank)
        if not self.doc.count(full[0], full[1], self.cap) or kept is None:
            return
        ann = self.doc.ann
        start = len(ann.forms)
        for forms, lemmas, upos, feats, space in kept:
            ann.forms.extend(forms)
            ann.lemmas.extend(_nulled(lemmas))
            ann.upos.extend(_nulled(upos))
            ann.feats.extend(_nulled(feats))
            ann.space_after.extend(space)
        ann.sentences.append([start, len(ann.forms) - 1])
        self.doc.texts.append(text if text else sentence_text(ann.forms, ann.space_after, start))

    def finish(self) -> Document | None:
        """The Document for the one collected. D4: a blank id counts as missing (None), so the
        writer applies the D3 fallback. An id holding invalid UTF-8 drops the document (D6)."""
        doc = self.doc
        if doc.bad_id_line is not None:
            self.ctx.drop("invalid_utf8", self.file, "invalid UTF-8 bytes in the document id; document skipped",
                          doc.bad_id_line)
            return None
        doc_id = doc.id
        if doc_id is _NOT_SET:
            doc_id = self.stem
        elif doc_id is not None and not doc_id.strip():
            doc_id = None
        meta = self.meta
        fresh = {k: (list(v) if isinstance(v, list) else v) for k, v in meta.items()} if meta else {}
        if doc.over:  # the encoder drops it as it would the whole text (document_too_large)
            return Document(TextOverCap(doc.size, doc.blank), doc_id, fresh)
        return Document("\n".join(doc.texts), doc_id, fresh, doc.ann)


class NewdocSplitter(ByteSplitter):
    """Cuts at a newdoc block (`_NEWDOC_BLOCK`), looking forward however far: a file without one
    stays whole, and the tail after the last one merges into the range before."""

    cut_rule = "at a `# newdoc` line (S5) that opens a block, i.e. follows a blank line of spaces/tabs (D11)"

    speculative = True  # its records carry their own ids; a fallback id, drop or repair stops it

    search_limit = None
    stop_at_none = True

    def cut_in(self, data: bytes, not_before: int, at_eof: bool) -> int | None:
        end = pattern_cut(_NEWDOC_BLOCK, data, not_before, at_eof)
        if end is None or at_eof or data.find(b"\n", end) >= 0 or data.find(b"\r", end) >= 0:
            return end
        return None  # the newdoc line goes on past the window: look again in the next one


class ConlluExtractor(TsvSidecarExtractor):
    name = "conllu"
    patterns = (".conllu", ".conll")
    splitter = NewdocSplitter()

    def __init__(self, options=None):
        super().__init__(options)
        self._space = _SpaceAfter()

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        reader = _FileReader(self._space.__getitem__, file, ctx, self.tsv_row(file, ctx))
        for text_chunk, bad, spaced, chunk_line in chunks(file):
            blocks, seps = split_blocks(text_chunk, spaced)
            where = (text_chunk, chunk_line, blocks, seps)
            for bi, block in enumerate(blocks):
                if not block:
                    continue
                lead = 0  # blank lines removed from the start of the block
                if block[0] in " \t\n" or block[-1] in " \t\n":
                    lead, block = trim(block)
                    if not block:
                        continue
                bad_here = bad and has_escapes(block)
                if block[0] == "#":
                    comments = leading_comments(block)
                    if comments[3] is not None or comments[4] is not None:
                        out = reader.boundary(comments, bad_here, where, bi, lead)
                        if out is not None:
                            yield out
                    pos, k, text = comments[0], comments[1], comments[2]
                    if pos >= len(block):
                        continue  # a comment-only block adds no sentence
                    reader.sentence(block, pos, k, text, bad_here, where, bi, lead)
                else:
                    reader.sentence(block, 0, 0, None, bad_here, where, bi, lead)
        if reader.doc.has_tokens():
            out = reader.finish()
            if out is not None:
                yield out
