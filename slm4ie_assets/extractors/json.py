"""json: `*.json` holding an array of records (or one object), field names from the `metadata:`
knobs; text only (extraction-formats: json; ADDENDUM 4.3; D6, D7, D8)."""

from collections.abc import Iterator

from ..schema import Document
from .base import ExtractContext, Extractor, InputFile
from .records import FIELD_MAPPING_KEYS, STRUCTURAL, FieldMapping, check_text, loads, parse_field_mapping, probe_id

_BOM = b"\xef\xbb\xbf"


class JsonExtractor(Extractor):
    name = "json"
    patterns = (".json",)
    metadata_keys = FIELD_MAPPING_KEYS
    options: FieldMapping

    @classmethod
    def parse_options(cls, raw, where):
        return parse_field_mapping(raw, where)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        fm = self.options or FieldMapping()
        data = file.path.read_bytes()
        if data.startswith(_BOM):
            data = data[3:]
        try:
            top = loads(data)
        except UnicodeDecodeError as exc:
            ctx.drop("invalid_utf8", file, f"invalid UTF-8 ({exc.reason} at byte {exc.start}); file skipped")
            return
        except ValueError as exc:
            ctx.drop("malformed_json", file, f"malformed JSON ({exc}); file skipped")
            return
        if isinstance(top, dict):
            records = [top]
        elif isinstance(top, list):
            records = top
        else:
            ctx.drop("unsupported_top_level", file,
                     f"top level is a JSON {type(top).__name__}, not an array or object; file skipped")
            return
        del data, top
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
