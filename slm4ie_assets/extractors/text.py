"""text: `*.txt`, blank-line separated blocks (CC100 convention), streamed in large chunks.

DECISIONS D9: a line that is empty or whitespace-only (Unicode whitespace, S4) ends a block; a
block's text is its lines joined with newlines, stripped. Ids are `<rel>:<n>` (ADDENDUM 4.1).
"""

import codecs
import re
from collections.abc import Iterator

from ..schema import Document
from .base import Extractor
from .cuts import LINE_END, pattern_cut
from .extract_context import ExtractContext
from .input_file import InputFile
from .reading import has_escapes, invalid_count, read_raw, read_text_chunks
from .splitting import ByteSplitter

# One or more whitespace-only lines (D9, S4: Unicode whitespace, as str.isspace) after a line end.
_SEPARATOR = re.compile(r"\n(?:[^\S\n]*\n)+")
# The same rule on the raw bytes, where a range may start (docs/splitting.md): every character
# str.isspace() accepts except the line ends (a test holds the list to Python's), as UTF-8.
SPACES = ("\t\x0b\x0c\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
          + "\u2028\u2029\u202f\u205f\u3000")
# SPACES as UTF-8, grouped by lead bytes: one character class per prefix runs about twice as fast in
# the quick count as an alternation of the 25 encodings (a test holds it to SPACES, code point by point)
_SPACE = (rb"(?:[\t\x0b\x0c\x1c-\x1f ]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f"
          rb"|\xe3\x80\x80)")
_BLANK_LINE = re.compile(rb"%s%s*%s" % (LINE_END, _SPACE, LINE_END))
# `_SEPARATOR` on the raw bytes of a file without `\r` (the quick count, `count_blocks`)
_SEPARATOR_BYTES = re.compile(rb"\n(?:%s*\n)+" % _SPACE)
_BOM = b"\xef\xbb\xbf"


class LineEnds:
    """The line ends `_blocks` read, once it has read them all (None before)."""

    count: int | None = None


def _blocks(chunks: Iterator[str], ends: LineEnds | None = None) -> Iterator[tuple[int, str, bool]]:
    """(first line number, stripped text, may hold invalid bytes) for every block.

    One regex split per decoded chunk instead of a Python loop per line: the text between two
    separators is exactly the block's lines joined with newlines. Blocks get their own line number
    only in chunks that held invalid bytes, the only time a warning needs one. The line numbers
    already count every line end before the carry, so `ends` costs one count over the last carry:
    a split file's range needs no second pass for `RangeCounts.lines` (docs/splitting.md).
    """
    carry = ""
    line = 1  # line number at the start of `carry`
    seen = invalid_count()
    dirty = False
    for chunk in chunks:
        buf = carry + chunk if carry else chunk
        dirty = dirty or invalid_count() != seen
        seen = invalid_count()
        if not dirty:
            parts = _SEPARATOR.split(buf)
            carry = parts.pop()
            for block in parts:
                yield line, block.strip(), False
            line += buf.count("\n", 0, len(buf) - len(carry))
            continue
        pos = 0
        for m in _SEPARATOR.finditer(buf):
            block = buf[pos:m.start()]
            yield line + _leading_blank_lines(block), block.strip(), True
            line += buf.count("\n", pos, m.end())
            pos = m.end()
        carry = buf[pos:]
        dirty = bool(carry) and has_escapes(carry)
    if carry:
        yield line + _leading_blank_lines(carry), carry.strip(), dirty or invalid_count() != seen
    if ends is not None:
        ends.count = line - 1 + carry.count("\n")


class Oversize:
    """A block read past `max_document_bytes` without being kept (docs/memory.md): its UTF-8 size
    after stripping and whether it held invalid bytes, all its drop warning needs."""

    __slots__ = ("size", "invalid")

    def __init__(self, size: int, invalid: bool):
        self.size, self.invalid = size, invalid


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class _BigBlock:
    """The rest of a block whose stripped start is already over the cap, read chunk by chunk: only
    its size is counted. `tail` is the whitespace after the last non-blank character (it may hold
    the start of the separator: at most one line end, since a second would end the block there),
    kept short: the rest of it waits in `held`, bytes that count only if more text follows."""

    def __init__(self, carry: str, start_line: int, invalid: bool):
        text = carry.lstrip()
        self.first_line = start_line + _leading_blank_lines(carry)
        self.lines = carry.count("\n")  # line ends read since `start_line`
        self.size = self.held = 0
        self.invalid = False
        self.tail = ""
        self._take(text, invalid)

    def _take(self, buf: str, invalid: bool) -> None:
        """`buf` (after the tail) holds no separator: count it up to its last non-blank character."""
        body = buf.rstrip()
        if body:
            self.size += self.held + _utf8_len(body)
            self.held = 0
            self.invalid = self.invalid or (invalid and has_escapes(body))
        tail = buf[len(body):]
        nl = tail.find("\n")
        self.held += _utf8_len(tail if nl < 0 else tail[:nl])
        rest = "" if nl < 0 else tail[nl + 1:]
        if len(rest) > 1:  # any run of spaces after the line end matches the separator as one does
            self.held += _utf8_len(rest[1:])
            rest = rest[:1]
        self.tail = "" if nl < 0 else "\n" + rest

    def feed(self, chunk: str, invalid: bool) -> str | None:
        """Read on; the text after the block's separator once it ends, else None."""
        buf = self.tail + chunk if self.tail else chunk
        m = _SEPARATOR.search(buf)
        if m is None:
            self.lines += chunk.count("\n")
            self._take(buf, invalid)
            return None
        self.lines += buf.count("\n", 0, m.end()) - self.tail.count("\n")
        self._take(buf[:m.start()], invalid)
        return buf[m.end():]


def _capped_blocks(chunks: Iterator[str], ends: LineEnds, cap: int) -> Iterator[tuple[int, str | Oversize, bool]]:
    """`_blocks` under `max_document_bytes`: every block gets its own first line (its drop warning
    names it, split or not), and a block whose stripped text passes the cap is not kept: it is
    read on to its end as a `_BigBlock` and yielded as an `Oversize`, so memory stays within the cap
    plus a chunk however long the block is (docs/memory.md)."""
    carry = ""
    line = 1  # line number at the start of `carry`
    seen = invalid_count()
    dirty = False
    big: _BigBlock | None = None
    for chunk in chunks:
        fresh = invalid_count() != seen
        seen = invalid_count()
        if big is not None:
            rest = big.feed(chunk, fresh)
            if rest is None:
                continue
            yield big.first_line, Oversize(big.size, big.invalid), big.invalid
            line += big.lines
            big, chunk, dirty = None, rest, fresh and has_escapes(rest)
        buf = carry + chunk if carry else chunk
        dirty = dirty or fresh
        parts = None if dirty else _SEPARATOR.split(buf)
        if parts is not None and (len(parts) < 2 or max(map(len, parts[:-1])) * 4 <= cap):
            carry = parts.pop()
            for block in parts:  # none can pass the cap: its line is never named
                yield line, block.strip(), False
            line += buf.count("\n", 0, len(buf) - len(carry))
        else:
            pos = 0
            for m in _SEPARATOR.finditer(buf):
                block = buf[pos:m.start()]
                yield line + _leading_blank_lines(block), block.strip(), dirty
                line += buf.count("\n", pos, m.end())
                pos = m.end()
            carry = buf[pos:]
            dirty = dirty and bool(carry) and has_escapes(carry)
        if len(carry) > cap and _utf8_len(carry.strip()) > cap:
            big, carry = _BigBlock(carry, line, dirty), ""
            dirty = False
    if big is not None:
        yield big.first_line, Oversize(big.size, big.invalid), big.invalid
        ends.count = line - 1 + big.lines
        return
    if carry:
        yield line + _leading_blank_lines(carry), carry.strip(), dirty or invalid_count() != seen
    ends.count = line - 1 + carry.count("\n")


_NONBLANK = re.compile(r"\S")


def count_documents(file: InputFile) -> tuple[int, int] | None:
    """(documents, line ends) of the file or range, as `TextExtractor.extract` would yield them,
    without building a block (docs/splitting.md: the count-only pass of a split file). Between two
    separators a block is never blank (the separator regex is greedy), so only the first block of
    each buffer and the last one need a look. None when the bytes hold invalid UTF-8: then which
    blocks are dropped takes the full pass."""
    seen = invalid_count()
    carry = ""
    docs = lines = 0
    for chunk in read_text_chunks(file):
        lines += chunk.count("\n")
        buf = carry + chunk if carry else chunk
        pos = 0
        for m in _SEPARATOR.finditer(buf):
            if pos or _NONBLANK.search(buf, 0, m.start()):
                docs += 1
            pos = m.end()
        carry = buf[pos:]
    if invalid_count() != seen:
        return None
    if _NONBLANK.search(carry):
        docs += 1
    return docs, lines


def count_blocks(file: InputFile, chunk: int = 1 << 22) -> tuple[int, int] | None:
    """`count_documents` on the raw bytes, about 1.3x as fast (docs/splitting.md: the count-only
    pass is most of what splitting costs): the bytes are only checked as UTF-8, never decoded into
    text, and the separators are found by `_SEPARATOR_BYTES`. A file with a `\r` (other line ends,
    which decoding turns into `\n`) is counted by `count_documents`."""
    first = file.at_file_start
    carry = b""
    docs = lines = 0
    for raw in read_raw(file, chunk):
        if first:
            first = False
            raw = raw[3:] if raw.startswith(_BOM) else raw  # D8, as read_text_chunks
        if b"\r" in raw:
            return count_documents(file)
        lines += raw.count(b"\n")
        buf = carry + raw if carry else raw
        end = buf.rfind(b"\n") + 1  # whole lines only: a UTF-8 sequence never spans a `\n`
        if not end:
            carry = buf
            continue
        pos = 0
        try:
            _check_utf8(buf, end)
            for m in _SEPARATOR_BYTES.finditer(buf, 0, end):
                # between two separators a block is never blank (the regex is greedy): only the first
                # block of a buffer (the start of the range, or the carry) needs a look
                if pos or not _blank(buf[:m.start()]):
                    docs += 1
                pos = m.end()
        except UnicodeDecodeError:  # not UTF-8
            return None  # which blocks are dropped takes the full pass
        carry = buf[pos:]
    try:
        if not _blank(carry):
            docs += 1
    except UnicodeDecodeError:
        return None
    return docs, lines


_CHECK = 1 << 18


def _check_utf8(buf: bytes, end: int) -> None:
    """Raise UnicodeDecodeError unless `buf[:end]` (whole lines) is UTF-8. Decoded a quarter MiB at a
    time, cut after a line end (a UTF-8 sequence never spans one), so the check's throwaway text stays
    in the cache: about twice as fast as one 4 MiB decode on Slovene text (1.07 against 0.56 GB/s)."""
    view = memoryview(buf)
    pos = 0
    while pos < end:
        stop = end if end - pos <= _CHECK else buf.rfind(b"\n", pos, pos + _CHECK) + 1
        if stop <= pos:  # a line longer than a slice: checked whole
            stop = end
        codecs.utf_8_decode(view[pos:stop], "strict", True)  # a check: no copy of the slice
        pos = stop


def _blank(block: bytes) -> bool:
    return not block or block.decode("utf-8").isspace()


def _leading_blank_lines(block: str) -> int:
    """Whitespace-only lines at the start of a block (only at the start of a file) shift its first line."""
    if not block[:1].isspace():
        return 0
    n = 0
    for part in block.split("\n"):
        if part and not part.isspace():
            break
        n += 1
    return n


class BlankLineSplitter(ByteSplitter):
    """Cuts right after a whitespace-only line that follows a line end (`_BLANK_LINE`)."""

    cut_rule = ("right after a whitespace-only line (D9, S4: any `str.isspace` character, NBSP and U+2028 "
                "included) that follows a line end; `text.SPACES` lists them (a test holds it to Python's)")

    def cut_in(self, data: bytes, not_before: int, at_eof: bool) -> int | None:
        return pattern_cut(_BLANK_LINE, data, not_before, at_eof)

    def quick_count(self, file: InputFile) -> tuple[int, int] | None:
        # every block `extract` yields is written: its text is a stripped non-blank string without
        # escapes, so the encoder neither drops nor repairs it
        return count_blocks(file)


class TextExtractor(Extractor):
    name = "text"
    patterns = (".txt",)
    splitter = BlankLineSplitter()

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        prefix = file.rel_stem
        # a range of a split file goes on numbering where the earlier ranges stopped: every block
        # the text extractor yields is written (its text is a stripped non-blank string)
        index = ctx.before.docs
        cap = ctx.max_document_bytes
        ends = LineEnds()
        if cap:
            yield from self._capped(file, ctx, cap, ends)
            ctx.lines_read = ends.count
            return
        for lineno, text, suspect in _blocks(read_text_chunks(file), ends):
            if not text:
                continue
            if suspect and has_escapes(text):
                ctx.drop("invalid_utf8", file, "invalid UTF-8 bytes; block skipped", lineno)
                continue
            yield Document(text, f"{prefix}:{index:06d}")
            index += 1
        ctx.lines_read = ends.count  # read to the end: what `Splitter.lines` would count (ADDENDUM 3.2)

    @staticmethod
    def _capped(file: InputFile, ctx: ExtractContext, cap: int, ends: LineEnds) -> Iterator[Document]:
        """`extract` under `max_document_bytes`: a block over it is dropped here, so ids stay dense,
        and never held whole (`_capped_blocks`); its warning names its first line."""
        prefix, index = file.rel_stem, ctx.before.docs
        for lineno, text, suspect in _capped_blocks(read_text_chunks(file), ends, cap):
            if text.__class__ is Oversize:
                assert isinstance(text, Oversize)
                size = None if text.invalid else text.size
            elif not text:
                continue
            else:
                assert isinstance(text, str)
                if suspect and has_escapes(text):
                    size = None
                elif len(text) * 4 > cap and _utf8_len(text) > cap:
                    size = _utf8_len(text)
                else:
                    yield Document(text, f"{prefix}:{index:06d}")
                    index += 1
                    continue
            if size is None:
                ctx.drop("invalid_utf8", file, "invalid UTF-8 bytes; block skipped", lineno)
            else:
                ctx.drop("document_too_large", file, f"a block of {size:,} bytes, over "
                                                     f"max_document_bytes ({cap:,}); block skipped", lineno)
