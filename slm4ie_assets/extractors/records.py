"""Record helpers shared by json, jsonl, coleslaw and huggingface (ADDENDUM 3.3, D4, D7, D25)."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import orjson

from ..utils.recursion import recursion_room
from ..utils.type_names import a_type_name
from .extract_context import ExtractContext
from .input_file import InputFile

# Fields json and jsonl never copy into metadata: jsonl reads `paragraphs` as annotations, and
# `conll` is the reference's other annotation field.
STRUCTURAL = frozenset({"paragraphs", "conll"})

# The deepest a JSON record may nest, its own object counted (D25): one limit for orjson, the
# stdlib, the `.json` stream and the count pass, checked on the bytes before any decoder runs. The
# decoders' own limits differ (orjson 1,024; the stdlib the recursion limit less the frames already
# on the stack), so without it the call stack decided what a record became.
MAX_JSON_DEPTH = 512

# One translation serves two checks. A run of 19 ASCII digits may be an integer orjson cannot hold
# exactly: every digit becomes "0", so 19 zeros find it (~10x faster than a regex search). Every
# `[` and `{` becomes "(", so their count bounds the nesting: a record with no more openers than
# the limit (nearly every one) needs no closer look.
_SCAN = bytes(0x30 if 0x30 <= b <= 0x39 else 0x28 if b in b"[{" else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * 19
# `nests_deeper`: brackets as parens and quotes kept, everything else deleted
_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")
_NOT_MARKS = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = [0] * 256
_STEP[0x28], _STEP[0x29] = 1, -1
_HOPS = 8  # openers found one by one before the rest of the line is counted
_PEELS = 8  # rounds of innermost pairs taken off before the exact count
_DECODER_FRAMES = 64  # the stdlib decoder's own Python frames, beyond one level of recursion per nesting


def _openers_over(scan: bytes, limit: int) -> bool:
    """Whether the translated line holds more than `limit` openers. Most records have one or two:
    a few searches (memchr) settle those at half the cost of counting the whole line."""
    find = scan.find
    at = -1
    for found in range(_HOPS):
        at = find(b"(", at + 1)
        if at < 0:
            return found > limit
    return scan.count(b"(", at + 1) + _HOPS > limit


def nests_deeper(raw: bytes, limit: int) -> bool:
    """Whether the arrays and objects of the JSON text `raw` nest deeper than `limit` (exact for
    valid JSON; what is not JSON fails to decode anyway). Brackets inside strings do not count.
    Only C-level passes over the bytes, never a recursion: escapes are taken out (a `\\"` is no
    string's end), then every character but brackets and quotes, then empty strings and pairs of
    quotes that meet (a string's end and the next one's start: nothing lies between them), and the
    few strings left that hold brackets. Each round of removing `()` lowers the depth by exactly
    one and removes most brackets of a wide record (its leaves), so a count soon bounds the rest;
    only a record still wide after `_PEELS` rounds is counted exactly."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = raw.translate(_AS_PARENS, _NOT_MARKS).replace(b'""', b"")
    if b'"' in marks:
        marks = b"".join(marks.split(b'"')[::2])
    for peeled in range(_PEELS):
        if marks.count(b"(") <= limit - peeled:
            return False
        marks = marks.replace(b"()", b"")
    return max(accumulate(map(_STEP.__getitem__, marks)), default=0) > limit - _PEELS


def loads(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode one JSON value. orjson first; the stdlib where orjson would lose or refuse data
    (integers beyond 64 bits become floats in orjson; NaN/Infinity tokens and escaped lone
    surrogates are accepted by the reference). Raises ValueError on malformed input, and on input
    nested deeper than `max_depth` (D25), whichever decoder would have read it."""
    if isinstance(raw, str):
        raw_b = raw.encode("utf-8", "surrogatepass")
    else:
        raw_b = raw
    scan = raw_b.translate(_SCAN)
    if _openers_over(scan, max_depth) and nests_deeper(raw_b, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels of arrays and objects")
    if scan.find(_DIGIT_RUN) < 0:
        try:
            return orjson.loads(raw_b)
        except orjson.JSONDecodeError:
            pass
    text = raw if isinstance(raw, str) else raw_b.decode("utf-8")
    return _stdlib_loads(text, max_depth)


def _stdlib_loads(text: str, max_depth: int) -> Any:
    """`json.loads` with room for `max_depth` levels whatever the call stack (utils/recursion.py)."""
    with recursion_room(max_depth + _DECODER_FRAMES):
        try:
            return json.loads(text)
        except RecursionError:  # cannot happen below max_depth; malformed input, never a crash (D6)
            raise ValueError("JSON nested too deeply to decode") from None


def nested_repr(value: Any) -> str:
    """`str()` of a decoded value, which recurses once per level like the stdlib decoder does: room
    for a record's deepest nesting (D25), so the call stack never turns an id into a crash."""
    with recursion_room(2 * MAX_JSON_DEPTH):
        return str(value)


def id_str(value: Any) -> str | None:
    """Python `str()` of an id candidate (ADDENDUM 3.3); None when null or blank (D4, S2)."""
    if value is None:
        return None
    if isinstance(value, str):
        s = value
    elif isinstance(value, bool):
        s = "True" if value else "False"
    elif isinstance(value, (int, float)):
        s = repr(value)
    else:
        s = nested_repr(value)  # dicts and lists keep the Python repr, as the reference does
    return s if s.strip() else None


def check_text(record: dict, field: str, file: InputFile, ctx: ExtractContext, where: int | str) -> str | None:
    """The record's text if it is a non-blank string; otherwise count why not (D7). `where` is
    the line number (jsonl) or `element <n>` (json) the warning names."""
    text = record.get(field)
    if isinstance(text, str):
        if text.strip():
            return text
        ctx.drop("empty_text", file, f"field {field!r} is blank; record skipped", where)
    elif text is None:
        ctx.drop("missing_text", file, f"no {field!r} field; record skipped", where)
    else:
        ctx.drop("non_string_text", file,
                 f"field {field!r} is {a_type_name(text)}, not a string; record skipped", where)
    return None


def probe_id(record: dict, keys: Iterable[str]) -> str | None:
    for key in keys:
        if key in record:
            found = id_str(record[key])
            if found is not None:
                return found
    return None


def project_whitelist(record: dict, keys: Iterable[str]) -> dict:
    """Mode (a): the listed keys in list order, present and non-null only."""
    out = {}
    for key in keys:
        if key in out:
            continue
        value = record.get(key)
        if value is not None:
            out[key] = value
    return out


def project_exclude(record: dict, exclude: frozenset | set) -> dict:
    """Mode (b): every other key in record order, top-level nulls dropped."""
    return {k: v for k, v in record.items() if v is not None and k not in exclude}


@dataclass(frozen=True)
class FieldMapping:
    """The json/jsonl `metadata:` knobs (extraction-formats: json and jsonl share field-mapping)."""

    text_field: str = "text"
    id_field: str = "doc_id"
    metadata_fields: tuple[str, ...] | None = None

    def metadata(self, record: dict, structural: frozenset) -> dict:
        if self.metadata_fields is not None:
            return project_whitelist(record, self.metadata_fields)
        return project_exclude(record, structural | {self.text_field, self.id_field})


FIELD_MAPPING_KEYS = ("text_field", "id_field", "metadata_fields")  # the json/jsonl `metadata:` keys
_MAPPING_KEYS = set(FIELD_MAPPING_KEYS)


def parse_field_mapping(raw: Any, where: str) -> FieldMapping:
    if raw is None:
        return FieldMapping()
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping with text_field/id_field/metadata_fields")
    unknown = sorted(set(raw) - _MAPPING_KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(_MAPPING_KEYS))})")
    kw: dict[str, Any] = {}
    for key in ("text_field", "id_field"):
        if key in raw:
            value = raw[key]
            if not isinstance(value, str) or not value:
                raise ValueError(f"{where}.{key}: expected a non-empty string, got {value!r}")
            kw[key] = value
    if "metadata_fields" in raw and raw["metadata_fields"] is not None:
        value = raw["metadata_fields"]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}.metadata_fields: expected a list of field names, got {value!r}")
        kw["metadata_fields"] = tuple(value)
    return FieldMapping(**kw)
