"""Reading a CoNLL-U file into sentence blocks (ADDENDUM 3.2, 5.1-5.3; D8, D11, S4, S5): binary chunks cut
at blank lines with newlines normalised on the bytes, a chunk's blocks, the comment lines opening a
block, and a sentence's token rows read one by one. `conllu.py` turns the blocks into documents.
"""

import re
from collections.abc import Iterator

from .extract_context import ExtractContext
from .input_file import InputFile
from .reading import read_raw

READ_SIZE = 1 << 20
_UTF8_BOM = b"\xef\xbb\xbf"
# D11/S4: a line of only spaces or tabs is a sentence boundary like an empty line.
_BOUNDARY_BYTES = re.compile(rb"\n(?:[ \t]*\n)+")
_BOUNDARY_SPLIT = re.compile(r"(\n(?:[ \t]*\n)+)")
_LEADING_BLANK = re.compile(r"(?:[ \t]*\n)+")
_TRAILING_BLANK = re.compile(r"(?:\n[ \t]*)+\Z")
# S5: `#`, optional spaces, `newdoc`, then whitespace or end of line.
_NEWDOC = re.compile(r"# *newdoc(?:\s|$)")
TEXT_COMMENT = "# text = "
_SENT_ID = "# sent_id = "


def _decode(data: bytes) -> tuple[str, bool]:
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), True


def chunks(file: InputFile) -> Iterator[tuple[str, bool, bool, int]]:
    """(text, holds escaped invalid UTF-8, has a blank line of spaces/tabs, first line number):
    runs of whole sentence blocks cut at a blank line, so no block straddles two chunks.
    Newlines are normalised on the bytes (ADDENDUM 3.2: `\\r\\n` and a lone `\\r` end a line; `\\f`,
    `\\v`, U+0085, U+2028 do not) and a BOM at the start of the file is removed (D8). A range of a
    split file (it starts at a `# newdoc` line) numbers its lines from 1 too."""
    carry = b""
    line = 1
    first = file.at_file_start
    skip_lf = False  # the previous read ended in CR: a LF opening this read belongs to it
    for chunk in read_raw(file, READ_SIZE):
        if first:
            first = False
            if chunk.startswith(_UTF8_BOM):
                chunk = chunk[3:]
        if skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        skip_lf = False
        if b"\r" in chunk:
            skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # the carry holds no boundary we still need: search from its last line end only
        start = max(0, carry.rfind(b"\n")) if carry else 0
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n\n", start)
        if cut >= 0:
            after = cut + 2
        else:
            last = None
            for last in _BOUNDARY_BYTES.finditer(data, start):  # noqa: B007 - the last match is the one kept
                pass
            if last is None:
                carry = data  # no boundary yet: the block goes on
                continue
            cut, after = last.start(), last.end()
        body = data[:cut]
        yield _decode(body) + (b"\n " in body or b"\n\t" in body, line)
        line += data.count(b"\n", 0, after)
        carry = data[after:]
    if carry:
        yield _decode(carry) + (b"\n " in carry or b"\n\t" in carry, line)


def split_blocks(text: str, spaced: bool) -> tuple[list[str], list[str] | None]:
    """The sentence blocks of a chunk, plus the separators when a blank line held spaces/tabs."""
    if not spaced:
        return text.split("\n\n"), None
    parts = _BOUNDARY_SPLIT.split(text)
    return parts[0::2], parts[1::2]


def line_of(chunk: tuple, index: int) -> int:
    """Line number of block `index` of a chunk, computed only when a warning needs it."""
    text, first_line, blocks, seps = chunk
    offset = sum(map(len, blocks[:index]))
    offset += 2 * index if seps is None else sum(map(len, seps[:index]))
    return first_line + text.count("\n", 0, offset)


# ----------------------------------------------------------------------------- blocks


def trim(block: str) -> tuple[int, str]:
    """Blank lines at the start or the end of a block (only at the edges of a file or chunk):
    (lines removed from the start, the rest); the rest is "" when nothing but blanks was left."""
    lead = 0
    if block[0] in " \t\n":
        m = _LEADING_BLANK.match(block)
        if m is not None:
            lead = block.count("\n", 0, m.end())
            block = block[m.end():]
        if not block.strip(" \t"):
            return lead, ""
    if block[-1] in " \t\n":
        m = _TRAILING_BLANK.search(block)
        if m is not None:
            block = block[: m.start()]
    return lead, block


def leading_comments(block: str) -> tuple:
    """The comment lines opening a block (ADDENDUM 5.2, 5.3; S5): (offset of the first token row,
    comment lines read, the `# text = ` value, (index, line) of the first newdoc marker, (index,
    value) of the first `# sent_id = `); None for what is absent."""
    pos = k = 0
    text = newdoc = sent = None
    may_newdoc = "newdoc" in block
    while block.startswith("#", pos):
        nl = block.find("\n", pos)
        if nl < 0:
            nl = len(block)
        if block.startswith(TEXT_COMMENT, pos):
            text = block[pos + 9: nl]
        elif may_newdoc and newdoc is None and _NEWDOC.match(block, pos, nl):
            newdoc = (k, block[pos:nl])
        elif sent is None and block.startswith(_SENT_ID, pos):
            sent = (k, block[pos + 12: nl])
        pos = nl + 1
        k += 1
    return pos, k, text, newdoc, sent


def token_rows(region: str, first_line: int, text: str | None, file: InputFile,
          ctx: ExtractContext) -> tuple[tuple | None, str | None]:
    """Row by row: rows of at least 10 fields (fields beyond the 10th ignored); multiword
    tokens and empty nodes skipped silently; a `# text = ` after the tokens still counts
    (ADDENDUM 5.1, 5.2); short rows counted (D6). Returns the five kept columns (None when
    no token row is left) and the sentence's `# text` value."""
    rows = []
    for n, line in enumerate(region.split("\n")):
        if line.startswith("#"):
            if line.startswith(TEXT_COMMENT):
                text = line[9:]
            continue
        fields = line.split("\t")
        if len(fields) < 10:
            ctx.drop("malformed_row", file, f"{len(fields)} tab-separated field(s), expected 10; row skipped",
                     first_line + n)
            continue
        tid = fields[0]
        if "-" in tid or "." in tid:
            continue  # multiword token (1-2) or empty node (1.1): legitimate CoNLL-U
        rows.append(fields)
    if not rows:
        return None, text
    cols = list(zip(*rows, strict=False))  # rows may hold more than ten fields
    return (cols[1], cols[2], cols[3], cols[5], cols[9]), text
