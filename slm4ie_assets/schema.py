"""The unified Document schema and its two JSON line encoders (ADDENDUM 2, DECISIONS D1/D2).

Annotations are kept as parallel arrays, not per-token objects: extractors append straight into
them on the hot path and the encoder writes them out without another pass.
"""

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from .utils.recursion import recursion_room


class Token(NamedTuple):
    """One token, for readers and tests; extractors fill `Annotations` arrays directly."""

    form: str
    lemma: str | None = None
    upos: str | None = None
    feats: str | None = None
    space_after: bool = True


@dataclass(slots=True)
class Annotations:
    """Parallel per-token arrays plus inclusive [start, end] sentence spans."""

    forms: list = field(default_factory=list)
    lemmas: list = field(default_factory=list)
    upos: list = field(default_factory=list)
    feats: list = field(default_factory=list)
    space_after: list = field(default_factory=list)
    sentences: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.forms)

    def add_sentence(self, tokens) -> None:
        """Append one sentence given as an iterable of `Token`; an empty sentence adds no span."""
        start = len(self.forms)
        for t in tokens:
            self.forms.append(t.form)
            self.lemmas.append(t.lemma)
            self.upos.append(t.upos)
            self.feats.append(t.feats)
            self.space_after.append(t.space_after)
        if len(self.forms) > start:
            self.sentences.append([start, len(self.forms) - 1])

    def tokens(self) -> Iterator[Token]:
        return map(Token, self.forms, self.lemmas, self.upos, self.feats, self.space_after)


@dataclass(slots=True)
class Document:
    """What an extractor yields; `source` and `domain` are added by the writer."""

    text: Any
    doc_id: str | None = None
    metadata: dict = field(default_factory=dict)
    annotations: Annotations | None = None


@dataclass(frozen=True, slots=True)
class TextOverCap:
    """The `Document.text` of a document its extractor stopped collecting once the text passed
    `max_document_bytes` (docs/memory.md): its size in UTF-8 and whether it was blank, all the
    encoder's drop needs (the same drop, warning and fallback id as for the whole text)."""

    size: int
    blank: bool


def uid(source: str, doc_id: str) -> str:
    return f"{source}:{doc_id}"


def sentence_text(forms: list | tuple, space_after: list | tuple, start: int = 0, end: int | None = None) -> str:
    """THE sentence-rebuild rule, for the tokens forms[start:end]: each form, then one space unless
    its space_after is false or it is the last token (ADDENDUM 5.2, 6.2). conllu calls it for a
    sentence without `# text = `, tei for every sentence, so it stays one C-level join per call."""
    if end is None:
        end = len(forms)
    last = end - 1
    if last <= start:
        return forms[start] if last == start else ""
    pairs = zip(forms[start:last], space_after[start:last], strict=False)
    return "".join([f + " " if s else f for f, s in pairs]) + forms[last]


# ----------------------------------------------------------------------------- encoding


class UnencodableValue(ValueError):
    """A value JSON cannot hold (bytes, Decimal, ...): the document is dropped, not the run."""


def _repair(value: Any, issues: list) -> Any:
    """Make a value RFC 8259-encodable: NaN/inf -> null, lone surrogates -> U+FFFD (D1)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            issues.append("lone_surrogate")
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, float):
        return None if (math.isnan(value) or math.isinf(value)) else value
    if isinstance(value, dict):
        return {_repair(k, issues) if isinstance(k, str) else str(k): _repair(v, issues) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_repair(v, issues) for v in value]
    return value


# orjson's refusal of a value nested deeper than it writes (255 levels): its own count, the same on
# every call stack, so such a value is unencodable and never retried with the stdlib, whose limit
# the stack decides (D25)
_ORJSON_TOO_DEEP = "Recursion limit reached"
_REPAIR_FRAMES = 2048  # `_repair` takes two frames a level: room for any value a JSON record holds (D25)


def dumps(obj: Any, issues: list | None = None) -> bytes:
    """Encode one line (without newline). Fast path orjson; values orjson refuses (lone
    surrogates, integers beyond 64 bits) take a repaired stdlib path. Repairs are appended to
    `issues` so the caller can count them."""
    try:
        return orjson.dumps(obj)
    except (orjson.JSONEncodeError, TypeError) as exc:
        if _ORJSON_TOO_DEEP in str(exc):
            raise UnencodableValue("a value is nested too deeply to encode") from None
    with recursion_room(_REPAIR_FRAMES):
        return _dumps_repaired(obj, issues)


def _dumps_repaired(obj: Any, issues: list | None) -> bytes:
    found: list = []
    try:
        repaired = _repair(obj, found)
    except RecursionError:  # deeper than any JSON record may be (D25): dropped, not a crash (D6)
        raise UnencodableValue("a value is nested too deeply to encode") from None
    if issues is not None:
        issues.extend(found)
    try:
        return orjson.dumps(repaired)
    except (orjson.JSONEncodeError, TypeError) as exc:
        if _ORJSON_TOO_DEEP in str(exc):
            raise UnencodableValue("a value is nested too deeply to encode") from None
    try:
        # big integers: the stdlib keeps arbitrary precision (ADDENDUM 2.3)
        return json.dumps(repaired, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise UnencodableValue(str(exc)) from None
    except RecursionError:
        raise UnencodableValue("a value is nested too deeply to encode") from None


def text_record(doc: Document, source: str, domain: str, doc_id: str) -> dict:
    """The text line's object, keys in ADDENDUM 2.1 order."""
    rec = {"text": doc.text, "source": source, "domain": domain, "doc_id": doc_id, "uid": f"{source}:{doc_id}"}
    if doc.metadata:
        rec["metadata"] = doc.metadata
    return rec


def annotation_record(doc_id: str, doc_uid: str, ann: Annotations) -> dict:
    """The sidecar line's object, keys in ADDENDUM 2.2 order."""
    return {
        "doc_id": doc_id,
        "uid": doc_uid,
        "forms": ann.forms,
        "lemmas": ann.lemmas,
        "upos": ann.upos,
        "feats": ann.feats,
        "space_after": ann.space_after,
        "sentences": ann.sentences,
    }


def stub_record(doc_id: str, doc_uid: str) -> dict:
    return {"doc_id": doc_id, "uid": doc_uid}
