"""Where a MaCoCu file (top-level `<doc>` elements under one root) may be cut into byte ranges, and
the prolog every range after the first is parsed with (docs/splitting.md, ADDENDUM 4.6).

The prolog is every byte before the file's first `<doc`: the XML declaration, the DOCTYPE with its
internal subset, the root start tag and whatever else precedes the first document. A range after the
first is parsed as prolog + its own bytes, so declared entities, the DTD and the root's namespaces
are those of one pass. Planning reads the file's head (at most `HEAD_LIMIT` bytes) and small
windows near each nominal cut `k * split_bytes`, never the whole file.

A cut is placed at a `<doc` (followed by whitespace, `>` or `/`) right after a `</doc>` and
whitespace. Bytes alone cannot tell whether the parser is at depth 1 there (not inside a comment,
CDATA section, PI or a nested `<doc>`, D13): the extraction checks it (macocu.ranges: a range ends
with a synthetic close of the root, which only parses cleanly at depth 1), and a range whose end is
not such a point reads on to the end of the file, as one pass would. A file whose prolog is unusual
stays whole: no `<doc` in its head, an encoding that is not ASCII-compatible (the byte patterns and
line counts would not hold), or a prolog that does not parse on its own with an empty error log
(every range re-parses it, so it must add nothing).
"""

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from lxml import etree

from ..cuts import WINDOW, walk_nominal_cuts, windows
from ..input_file import InputFile
from ..reading import read_raw
from ..splitting import Splitter
from ..xml.events import FeedEvents
from ..xml.parser import parser_options

HEAD_LIMIT = 1 << 20  # the prolog must end in the file's first MiB
_OVERLAP = 256  # windows overlap so a cut across two reads is still seen
_TRIES = 8  # `<doc` matches tried for the prolog's end
_DOC = "doc"  # un-namespaced, as macocu reads it
_DOC_START = re.compile(rb"<doc[\t\n\r />]")
_CUT = re.compile(rb"</doc[\t\n\r ]*>[\t\n\r ]*(<doc[\t\n\r />])")
_DECLARED = re.compile(rb"\A(?:\xef\xbb\xbf)?<\?xml[^>]*?\bencoding[\t\n\r ]*=[\t\n\r ]*[\"']([A-Za-z0-9._-]+)[\"']")
# single-byte supersets of ASCII (and UTF-8): `<doc`, `</doc>` and `\n` are those bytes only there
_ASCII_BASED = re.compile(r"(utf-?8|us-ascii|ascii|iso[-_]?8859[-_]\d+|latin-?\d+|windows-125\d|cp125\d)", re.I)


@dataclass(frozen=True, slots=True)
class Prolog:
    """What precedes the first `<doc>`, re-parsed before every range after the first."""

    data: bytes
    newlines: int  # `\n` bytes in it: libxml2 counts lines by `\n` only (a lone `\r` is no line)
    close: bytes  # the root's end tag as written (`</corpus>`, `</m:corpus>`)


def read_prolog(fh: BinaryIO) -> Prolog | None:
    """The prolog of the file open as `fh` (read from offset 0), or None when it cannot be reused.
    It ends at the first `<doc` after which the prolog parses cleanly on its own (one inside a
    comment before the root is passed over)."""
    fh.seek(0)
    head = fh.read(WINDOW)
    if len(head) == WINDOW and _DOC_START.search(head) is None:
        head += fh.read(HEAD_LIMIT - WINDOW)  # a long prolog (a big internal subset): read on
    for tried, found in enumerate(_DOC_START.finditer(head)):
        if tried == _TRIES:
            return None
        data = head[: found.start()]
        if b"\x00" in data or data.startswith((b"\xfe\xff", b"\xff\xfe")):
            return None  # UTF-16/32
        declared = _DECLARED.match(data)
        if declared is not None and not _ASCII_BASED.fullmatch(declared.group(1).decode("ascii")):
            return None
        close = _root_close(data)
        if close is not None:
            return Prolog(data, data.count(b"\n"), close)
    return None


def _root_close(data: bytes) -> bytes | None:
    """The end tag of the root `data` opens, when `data` + that tag parses cleanly (no error, no
    warning, the root the only element left open by `data`) and holds no `<doc>` (it is parsed
    again before every range: a document in it would be emitted again). Parsed with the
    extraction's options and event source (xml.events; ids collected, so no DTD is read, as
    macocu's parse does)."""
    options = dict(parser_options(False, collect_ids=True), remove_comments=True, remove_pis=True)
    root = _first_event(data, dict(options, events=("start",)))
    if root is None:
        return None
    name = etree.QName(root).localname
    close = f"</{root.prefix}:{name}>" if root.prefix else f"</{name}>"
    if not close.isascii() or name == _DOC and not root.prefix:
        return None  # the bytes of a non-ASCII root name depend on the encoding
    check = FeedEvents(None, events=("end",), tag=_DOC, **options)
    try:
        for batch in check.batches(io.BytesIO(data + close.encode("ascii"))):
            if next(iter(batch), None) is not None:
                return None
    except etree.ParseError:
        return None
    return None if len(check.error_log) else close.encode("ascii")


def _first_event(data: bytes, options: dict):
    """The element of the first event of `data`'s parse, read after a feed that did not raise."""
    try:
        for batch in FeedEvents(None, **options).batches(io.BytesIO(data)):
            for _, elem in batch:
                return elem
    except etree.ParseError:
        return None
    return None


class DocSplitter(Splitter):
    """Cuts at top-level `<doc>` elements (`plan_doc_cuts`); its ranges hand on a `RangeState`."""

    cut_rule = "at a `<doc` (then whitespace, `>` or `/`) that follows a `</doc>` and whitespace"

    def plan(self, file: InputFile, size: int, split_bytes: int) -> tuple[int, ...]:
        return plan_doc_cuts(file.path, size, split_bytes)

    def lines(self, file: InputFile) -> int:
        """The range's lines as libxml2 numbers them: newline bytes only (a lone carriage return,
        a line end of ADDENDUM 3.2, starts no line for it; a CRLF is one)."""
        return sum(raw.count(b"\n") for raw in read_raw(file, 1 << 22))


def plan_doc_cuts(path: Path, size: int, split_bytes: int) -> tuple[int, ...]:
    """`(0, cut, ..., size)` for a file over `split_bytes`; `(0, size)` when it stays whole."""
    if split_bytes <= 0 or size <= split_bytes:
        return (0, size)
    try:
        with open(path, "rb") as fh:
            prolog = read_prolog(fh)
            if prolog is None:
                return (0, size)
            return walk_nominal_cuts(fh, size, split_bytes, _cut_after, not_before=len(prolog.data) + 1)
    except OSError:
        return (0, size)  # the extraction reports what cannot be read (D6)


def _cut_after(fh: BinaryIO, pos: int, limit: int) -> int | None:
    """The first `<doc` at or after `pos` (before `limit`) that follows `</doc>` and whitespace."""
    for start, data in windows(fh, pos, limit, _OVERLAP):
        for match in _CUT.finditer(data):
            if start + match.start(1) >= pos:
                return start + match.start(1)
    return None
