"""Which of the three TEI structures a file has (ADDENDUM 6.1 as amended by S7, S8, D19).

The choice depends on whether the file holds a TEI `<w>`, `<u>` or `<s>` anywhere, so it is made
before the extracting pass, cheaply:

1. A byte scan proves absence. In an ASCII-compatible encoding, an element named `w` (any prefix)
   always shows as `<w` or `:w` followed by whitespace, `/` or `>`. No such bytes: no `<w>`.
   Entity references are never expanded (xml.parser.parser_options), so no markup can hide in an
   entity's replacement text. Bytes that match may still be a comment, another namespace, ...
2. Only then an lxml pass without a tree (a parser target that sees start tags) settles it, and
   stops as soon as the answer is known: for an annotated file that is the first `<w>`.

The structures:
- ANNOTATED: a `<w>` somewhere. The extracting pass starts per-file and turns into the utterance
  path at the first `<u>` (everything before that `<u>` is outside every utterance either way).
- PLAIN_UTTERANCES (D19, S8): `<u>` and no `<s>` and no `<w>`.
- PLAIN: everything else, `<u>` with `<s>` but no `<w>` included (S8).
"""

import codecs
import re
from dataclasses import dataclass

from lxml import etree

from ..xml.errors import first_error, is_resource_limit
from ..xml.names import S, U, W
from ..xml.parser import parser_options, refuse_external

ANNOTATED = "annotated"
PLAIN_UTTERANCES = "plain_utterances"
PLAIN = "plain"

_CHUNK = 1 << 22
_FEED = 1 << 16
_ENCODING_DECL = re.compile(rb"""^<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_ASCII_PROBE = "<:wus \t\r\n/>"


@dataclass
class Presence:
    """Whether a TEI `<w>`, `<u>`, `<s>` may occur (byte scan) or occurs (lxml scan)."""

    w: bool
    u: bool
    s: bool

    def structure(self) -> str:
        if self.w:
            return ANNOTATED
        if self.u and not self.s:
            return PLAIN_UTTERANCES
        return PLAIN


def ascii_compatible(head: bytes) -> bool:
    """True when the file's encoding writes the markup characters as their ASCII bytes, one byte
    each, without state (UTF-8, ISO-8859-x, windows-125x, ...); False for UTF-16/32, EBCDIC,
    stateful or unknown encodings, where the byte scan proves nothing."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")) or head[:1] == b"\x00" or head[1:2] == b"\x00":
        return False
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if head.startswith(b"\x4c\x6f\xa7\x94"):  # "<?xm" in EBCDIC
        return False
    match = _ENCODING_DECL.match(head)
    if match is None:
        return head[:1] in (b"<", b" ", b"\t", b"\r", b"\n") or not head  # UTF-8 by default
    name = match.group(1).decode("ascii").lower()
    try:
        info = codecs.lookup(name)
    except LookupError:
        return False
    if info.name.startswith(("utf-16", "utf-32", "utf-7", "iso2022", "hz", "cp037", "cp500", "cp1140")):
        return False
    try:
        return _ASCII_PROBE.encode(info.name) == _ASCII_PROBE.encode("ascii")
    except (UnicodeError, LookupError):
        return False


def _name_pattern(lead: bytes, letters: str) -> "re.Pattern":
    """`<X` (or `:X`) then whitespace, `/` or `>`, X one of letters; a literal first byte keeps
    the regex engine on its fast prefix search."""
    return re.compile(re.escape(lead) + b"([" + letters.encode("ascii") + rb"])[ \t\r\n/>]")


def byte_scan(path) -> Presence | None:
    """Conservative presence of `w`, `u`, `s` element names from the bytes alone; None when the
    encoding is not ASCII-compatible. Stops at the first possible `<w>`."""
    missing = "wus"
    found = set()
    with open(path, "rb") as fh:
        chunk = fh.read(_CHUNK)
        if not ascii_compatible(chunk[:512]):
            return None
        tail = b""
        while chunk and "w" in missing:
            window = tail + chunk
            for lead in (b"<", b":"):
                while "w" in missing:  # once a <w> may exist, the parser has to settle the rest
                    match = _name_pattern(lead, missing).search(window)
                    if match is None:
                        break
                    letter = match.group(1).decode("ascii")
                    found.add(letter)
                    missing = missing.replace(letter, "")
            # keep enough bytes that a name split across chunks is seen whole in the next window
            tail = window[-3:]
            chunk = fh.read(_CHUNK)
    return Presence("w" in found, "u" in found, "s" in found)


class _Seen:
    """Parser target that records TEI `<w>`, `<u>`, `<s>` starts and builds no tree. `done` turns
    true as soon as the rest of the file cannot change the structure."""

    def __init__(self, maybe: Presence):
        self.w = self.u = self.s = False
        self.maybe = maybe
        self.done = False

    def start(self, tag, attrib):
        if tag == W:
            self.w = self.done = True
        elif tag == U:
            self.u = True
        elif tag == S:
            self.s = True
        else:
            return
        if not self.maybe.w and self.u and (self.s or not self.maybe.s):
            self.done = True  # no <w> is possible and <u> (with or without <s>) is settled

    def close(self):
        return None


def parse_scan(path, maybe: Presence, huge: bool) -> Presence:
    """Exact presence, from the well-formed part of the file (a parse error ends the scan; the
    extracting pass reports it). Raises ParseError only for a parser resource limit, so the
    caller can retry with huge_tree."""
    target = _Seen(maybe)
    # _Seen has only `start` and `close` on purpose: lxml calls back for what a target defines, and
    # `data`/`end` callbacks would slow the scan; the stubs' ParserTarget asks for all of them.
    parser = refuse_external(etree.XMLParser(target=target, **parser_options(huge)))  # type: ignore[call-overload]
    try:
        with open(path, "rb") as fh:
            while not target.done:
                data = fh.read(_FEED)
                if not data:
                    parser.close()
                    break
                parser.feed(data)
    except etree.ParseError as exc:
        if not huge and is_resource_limit(*first_error(parser.feed_error_log, exc)[1:]):
            raise
    return Presence(target.w, target.u, target.s)


def detect_structure(path) -> str:
    """ANNOTATED, PLAIN_UTTERANCES or PLAIN for one file."""
    maybe = byte_scan(path)
    if maybe is None:
        maybe = Presence(True, True, True)
    elif not maybe.w and not maybe.u:
        return PLAIN  # proven from the bytes: no <w>, no <u>
    try:
        found = parse_scan(path, maybe, huge=False)
    except etree.ParseError:
        found = parse_scan(path, maybe, huge=True)
    return found.structure()
