"""macocu: the MaCoCu monolingual XML, `<doc>` elements of `<p>` paragraphs, streamed.

ADDENDUM 4.6 with DECISIONS D6/S3 (a parse error or bad bytes keep the documents closed before
it and skip the rest of the file, counted) and D13 (a nested `<doc>` or `<p>` belongs to the
outermost one, so no text is emitted twice). Memory stays bounded by one `<doc>`: each finished
element is cleared and detached from the tree together with everything before it.

Security: no DTD is loaded, nothing is fetched from the network and entity references in text
are not expanded, so no external entity is ever read.
"""

from typing import Iterator

from lxml import etree

from ..schema import Document
from .base import ExtractContext, Extractor, InputFile

DOC_METADATA_KEYS = ("title", "crawl_date", "lang_distr", "url", "domain", "file_type", "lm_score")

_DOC = "doc"  # un-namespaced only: lxml matches a bare tag name against no-namespace elements
_P = "p"
_BAD_BYTES = frozenset({etree.ErrorTypes.ERR_INVALID_ENCODING, etree.ErrorTypes.ERR_INVALID_CHAR,
                        etree.ErrorTypes.ERR_UNKNOWN_ENCODING, etree.ErrorTypes.ERR_UNSUPPORTED_ENCODING})
_UNDEFINED_ENTITY = frozenset({etree.ErrorTypes.ERR_UNDECLARED_ENTITY, etree.ErrorTypes.WAR_UNDECLARED_ENTITY})


def _is_nested(elem) -> bool:
    """True when `elem` sits inside another `<doc>` (D13: the outer one takes its paragraphs)."""
    parent = elem.getparent()
    while parent is not None:
        if parent.tag == _DOC:
            return True
        parent = parent.getparent()
    return False


def _collect_paragraphs(container, parts: list) -> None:
    """Append the stripped, non-empty text of every outermost `<p>` under `container` (D13: a
    nested `<p>` is part of the one around it), in document order."""
    for child in container:
        if child.tag == _P:
            # a leaf paragraph's text is its .text; comments and PIs were removed while parsing
            text = "".join(child.itertext()) if len(child) else child.text
            if text:
                text = text.strip()
                if text:
                    parts.append(text)
        elif len(child):
            _collect_paragraphs(child, parts)


def doc_text(doc) -> str:
    """The outermost paragraphs' texts, stripped, empties dropped, joined by newlines."""
    parts: list = []
    _collect_paragraphs(doc, parts)
    return "\n".join(parts)


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


def _first_error(log, exc: etree.XMLSyntaxError) -> tuple[int | None, str, int]:
    """(line, message, libxml2 code) of the error that stopped the parse; lxml's own exception
    text can be generic ("no element found") while the log holds the cause."""
    for entry in log:
        if entry.level >= etree.ErrorLevels.ERROR:
            return entry.line or None, entry.message, entry.type
    return exc.lineno or None, exc.msg or str(exc), exc.code


class MacocuExtractor(Extractor):
    name = "macocu"
    patterns = (".xml",)

    @classmethod
    def parse_options(cls, raw, where):
        return None  # the reference has no knobs for macocu; `metadata:` is ignored

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        try:
            fh = open(file.path, "rb")
        except OSError as exc:
            ctx.drop("unreadable_file", file, f"cannot open ({exc.strerror or exc}); file skipped")
            return
        with fh:
            events = etree.iterparse(fh, events=("end",), tag=_DOC, resolve_entities=False, no_network=True,
                                     load_dtd=False, remove_comments=True, remove_pis=True)
            emitted = 0
            try:
                for _, elem in events:
                    if _is_nested(elem):
                        continue
                    text = doc_text(elem)
                    attrib = elem.attrib
                    doc_id = attrib.get("id")
                    if not text:
                        ctx.drop("empty_text", file, f"<doc id={doc_id!r}> has no paragraph text; skipped",
                                 elem.sourceline)
                        _release(elem)
                        continue
                    doc = Document(text, doc_id, doc_metadata(attrib))
                    _release(elem)
                    emitted += 1
                    yield doc
            except etree.XMLSyntaxError as exc:
                line, message, code = _first_error(events.error_log, exc)
                reason = "invalid_bytes" if code in _BAD_BYTES else "xml_syntax_error"
                ctx.drop(reason, file, f"{message.strip()}; kept the {emitted} document(s) closed before it, "
                                       "skipped the rest of the file", line)
                return
            except OSError as exc:
                ctx.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the {emitted} "
                                                  "document(s) read before it, skipped the rest of the file")
                return
            undefined = [e for e in events.error_log if e.type in _UNDEFINED_ENTITY]
            if undefined:
                first = undefined[0]
                ctx.drop("undefined_entity", file, f"{len(undefined)} undefined entity reference(s), first: "
                                                   f"{first.message.strip()}; kept verbatim in text, an attribute "
                                                   "holding one is empty", first.line)
