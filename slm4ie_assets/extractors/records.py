"""Record helpers shared by json, jsonl, coleslaw and huggingface (ADDENDUM 3.3, D4, D7)."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ..utils.type_names import a_type_name
from .extract_context import ExtractContext
from .input_file import InputFile

# Fields json and jsonl never copy into metadata: jsonl reads `paragraphs` as annotations, and
# `conll` is the reference's other annotation field.
STRUCTURAL = frozenset({"paragraphs", "conll"})

# A run of 19 ASCII digits may be an integer orjson cannot hold exactly. Found by mapping every digit
# to "0" and every other byte to " " and searching for 19 zeros: ~10x faster than a regex search.
_DIGITS_TO_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * 19


def loads(raw: bytes | str) -> Any:
    """Decode one JSON value. orjson first; the stdlib where orjson would lose or refuse data
    (integers beyond 64 bits become floats in orjson; NaN/Infinity tokens and escaped lone
    surrogates are accepted by the reference). Raises ValueError on malformed input."""
    if isinstance(raw, str):
        raw_b = raw.encode("utf-8", "surrogatepass")
    else:
        raw_b = raw
    if raw_b.translate(_DIGITS_TO_ZERO).find(_DIGIT_RUN) < 0:
        try:
            return orjson.loads(raw_b)
        except orjson.JSONDecodeError:
            pass
    text = raw if isinstance(raw, str) else raw_b.decode("utf-8")
    try:
        return json.loads(text)
    except RecursionError:  # nesting deeper than both decoders allow: malformed input, not a crash (D6)
        raise ValueError("JSON nested too deeply to decode") from None


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
        s = str(value)  # dicts and lists keep the Python repr, as the reference does
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
