"""One Document -> its text line and sidecar line, or the reason it is dropped. No I/O.

Every document of every dataset passes through `encode_document`, so the common case (a valid
document orjson encodes as it is) takes one branch-light path; repairs (D1) take the slow one.
"""

from dataclasses import dataclass
from typing import final

import orjson

from ..schema import Document, TextOverCap, UnencodableValue, annotation_record, dumps, text_record
from ..utils.type_names import a_type_name

_NEWLINE = orjson.OPT_APPEND_NEWLINE
_orjson_dumps = orjson.dumps
_NO_REPAIRS: tuple[str, ...] = ()


# (doc_id, uid, text_line, ann_line, repairs): the document's own id or the fallback
# `<rel_stem>:<index>`; the uid as written (after any repair); the text line and the sidecar line
# (None without tokens), each ending with a newline; one entry per repaired value (D1), empty on the
# fast path. A plain tuple, not a class: an object per document cost the write loop ~15% (measured).
EncodedDocument = tuple[str, str, bytes, bytes | None, tuple[str, ...]]


@final
@dataclass(frozen=True, slots=True)
class Drop:
    """A document that is not written; the caller counts it in the drop ledger (D6)."""

    reason: str
    message: str


def encode_document(doc: Document, source: str, domain: str, prefix: str, index: int,
                    max_bytes: int = 0) -> EncodedDocument | Drop:
    """`prefix` and `index` (documents of this file written so far) name a document without an id
    (ADDENDUM 4.1). A text over `max_bytes` in UTF-8 (the dataset's `max_document_bytes`; 0: no
    cap) is dropped as `document_too_large`."""
    text = doc.text
    if text.__class__ is not str and not isinstance(text, str):
        if text.__class__ is TextOverCap:  # dropped by its extractor before it was built whole
            return _over_cap(doc, text, f"{prefix}:{index:06d}", max_bytes)
        return Drop("non_string_text", f"text is {a_type_name(text)}, not a string; document skipped")
    if not text or text.isspace():
        return Drop("empty_text", "blank text; document skipped")
    doc_id = doc.doc_id
    if not doc_id or doc_id.isspace():
        doc_id = f"{prefix}:{index:06d}"
    rec = text_record(doc, source, domain, doc_id)
    doc_uid = rec["uid"]
    ann = doc.annotations
    try:
        line = _orjson_dumps(rec, option=_NEWLINE)
        ann_line = None
        if ann is not None and ann.forms:
            ann_line = _orjson_dumps(annotation_record(doc_id, doc_uid, ann), option=_NEWLINE)
    except (orjson.JSONEncodeError, TypeError):
        repaired = _encode_repaired(doc, rec, doc_id, doc_uid)
        if max_bytes and type(repaired) is not Drop and len(repaired[2]) > max_bytes:
            return _too_large(doc_id, text, max_bytes) or repaired
        return repaired
    if max_bytes and len(line) > max_bytes:  # the line is never shorter than the text's UTF-8 bytes
        return _too_large(doc_id, text, max_bytes) or (doc_id, doc_uid, line, ann_line, _NO_REPAIRS)
    return doc_id, doc_uid, line, ann_line, _NO_REPAIRS


def _over_cap(doc: Document, text: TextOverCap, fallback_id: str, max_bytes: int) -> Drop:
    """The drop `encode_document` gives the whole text, from its size alone."""
    if text.blank:
        return Drop("empty_text", "blank text; document skipped")
    doc_id = doc.doc_id if doc.doc_id and not doc.doc_id.isspace() else fallback_id
    return Drop("document_too_large", f"document {doc_id!r}: its text is {text.size:,} bytes, over "
                                      f"max_document_bytes ({max_bytes:,}); skipped")


def _too_large(doc_id: str, text: str, max_bytes: int) -> Drop | None:
    """The drop of a document whose text is over `max_bytes` in UTF-8, else None."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= max_bytes:
        return None
    return Drop("document_too_large", f"document {doc_id!r}: its text is {size:,} bytes, over "
                                      f"max_document_bytes ({max_bytes:,}); skipped")


def _encode_repaired(doc: Document, rec: dict, doc_id: str, doc_uid: str) -> EncodedDocument | Drop:
    """Values orjson refuses: lone surrogates become U+FFFD, NaN/inf null, big integers go through
    the stdlib (D1, ADDENDUM 2.3); what cannot be encoded at all drops the document."""
    issues: list[str] = []
    ann = doc.annotations
    try:
        line = dumps(rec, issues) + b"\n"
        ann_line = None
        if ann is not None and ann.forms:
            ann_line = dumps(annotation_record(doc_id, doc_uid, ann), issues) + b"\n"
    except UnencodableValue as exc:
        return Drop("unencodable", f"document {doc_id!r}: {exc}; skipped")
    return doc_id, orjson.loads(line)["uid"], line, ann_line, tuple(issues)
