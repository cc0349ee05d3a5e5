"""json: `*.json` holding an array of records (or one object), field names from the `metadata:`
knobs; text only (extraction-formats: json; ADDENDUM 4.3; D6, D7, D8).

A top-level array is streamed record by record (`json_stream.py`), so memory is bounded by the
largest record rather than the file (docs/memory.md); a file the stream cannot vouch for (malformed,
another top level, values the reference decodes differently) is parsed whole, as before, so the
documents, drops and warnings are the same either way."""

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..schema import Document
from .base import Extractor
from .extract_context import ExtractContext
from .input_file import InputFile
from .json_stream import stream_records
from .records import (
    FIELD_MAPPING_KEYS,
    MAX_JSON_DEPTH,
    STRUCTURAL,
    FieldMapping,
    check_text,
    loads,
    parse_field_mapping,
    probe_id,
)

_BOM = b"\xef\xbb\xbf"
_LEADING_SPACE = re.compile(rb"[ \t\r\n]*")


class JsonExtractor(Extractor):
    name = "json"
    patterns = (".json",)
    metadata_keys = FIELD_MAPPING_KEYS
    options: FieldMapping

    @classmethod
    def parse_options(cls, raw, where):
        return parse_field_mapping(raw, where)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        records: Iterable[Any] | None = stream_records(file.path)
        if records is None:
            records = _whole_file(file, ctx)
            if records is None:
                return
        fm = self.options or FieldMapping()
        id_keys = (fm.id_field,)
        for n, record in enumerate(records):
            where = f"element {n}"
            if not isinstance(record, dict):
                ctx.drop("non_object_record", file,
                         f"{where} is a JSON {type(record).__name__}, not an object; skipped")
                continue
            text = check_text(record, fm.text_field, file, ctx, where)
            if text is None:
                continue
            yield Document(text, probe_id(record, id_keys), fm.metadata(record, STRUCTURAL))


def _whole_file(file: InputFile, ctx: ExtractContext) -> Iterable | None:
    """The records of the file parsed whole (the reference reading); None when it is dropped."""
    data = Path(file.path).read_bytes()
    if data.startswith(_BOM):
        data = data[3:]
    try:
        top = loads(data, _file_depth(data))
    except UnicodeDecodeError as exc:
        ctx.drop("invalid_utf8", file, f"invalid UTF-8 ({exc.reason} at byte {exc.start}); file skipped")
        return None
    except ValueError as exc:
        ctx.drop("malformed_json", file, f"malformed JSON ({exc}); file skipped")
        return None
    if isinstance(top, dict):
        return [top]
    if isinstance(top, list):
        return top
    ctx.drop("unsupported_top_level", file,
             f"top level is a JSON {type(top).__name__}, not an array or object; file skipped")
    return None


def _file_depth(data: bytes) -> int:
    """The nesting a file may have: its records' limit (D25), plus one for an array around them."""
    first = _LEADING_SPACE.match(data).end()  # type: ignore[union-attr]  # `*` always matches
    return MAX_JSON_DEPTH + 1 if data[first:first + 1] == b"[" else MAX_JSON_DEPTH
