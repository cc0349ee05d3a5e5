"""jsonl: one JSON object per line, field names from the `metadata:` knobs, optional
`paragraphs` token annotations (extraction-formats: jsonl; ADDENDUM 4.2; D6, D7, D10)."""

from itertools import repeat
from typing import Any, Iterator

from ..schema import Annotations, Document
from .base import ExtractContext, Extractor, InputFile
from .records import FieldMapping, loads, parse_field_mapping, probe_id

_item = dict.__getitem__  # raises TypeError for a token that is not an object
_get = dict.get
STRUCTURAL = frozenset({"paragraphs", "conll"})
_BOM = b"\xef\xbb\xbf"


def physical_lines(fh) -> Iterator[tuple[int, bytes]]:
    """Binary lines with universal-newline numbering (`\\n`, `\\r\\n`, lone `\\r`), BOM removed (D8)."""
    lineno = 0
    first = True
    for raw in fh:
        if first:
            first = False
            if raw.startswith(_BOM):
                raw = raw[3:]
        if b"\r" in raw:
            for part in raw.splitlines():
                lineno += 1
                yield lineno, part
        else:
            lineno += 1
            yield lineno, raw


def check_text(record: dict, field: str, file: InputFile, ctx: ExtractContext, lineno: int) -> str | None:
    """The record's text if it is a non-blank string; otherwise count why not (D7)."""
    text = record.get(field)
    if isinstance(text, str):
        if text.strip():
            return text
        ctx.drop("empty_text", file, f"field {field!r} is blank; record skipped", lineno)
    elif text is None:
        ctx.drop("missing_text", file, f"no {field!r} field; record skipped", lineno)
    else:
        ctx.drop("non_string_text", file, f"field {field!r} is a {type(text).__name__}, not a string; record skipped", lineno)
    return None


class BadAnnotations(ValueError):
    pass


def _raise_token_error(tokens: list) -> None:
    """The first bad token's error, in document order."""
    for t in tokens:
        if not isinstance(t, dict):
            raise BadAnnotations(f"a token is a {type(t).__name__}, not an object")
        if "form" not in t:
            raise BadAnnotations("a token has no 'form'")


def parse_paragraphs(paragraphs: Any) -> Annotations | None:
    """paragraphs[*].sentences[*].tokens[*] -> arrays; None when there is no token (a stub)."""
    ann = Annotations()
    forms, lemmas, upos, feats, space = ann.forms, ann.lemmas, ann.upos, ann.feats, ann.space_after
    if not isinstance(paragraphs, list):
        raise BadAnnotations(f"paragraphs is a {type(paragraphs).__name__}, not a list")
    for p in paragraphs:
        if not isinstance(p, dict):
            raise BadAnnotations(f"a paragraph is a {type(p).__name__}, not an object")
        sentences = p.get("sentences") or []
        if not isinstance(sentences, list):
            raise BadAnnotations("paragraph.sentences is not a list")
        for s in sentences:
            if not isinstance(s, dict):
                raise BadAnnotations(f"a sentence is a {type(s).__name__}, not an object")
            tokens = s.get("tokens") or []
            if not isinstance(tokens, list):
                raise BadAnnotations("sentence.tokens is not a list")
            start = len(forms)
            # One C-level map per column instead of a Python loop per token: once the forms are
            # read, every token is known to be an object with a form.
            n = len(tokens)
            try:
                sentence_forms = list(map(_item, tokens, repeat("form", n)))
            except (TypeError, KeyError):
                _raise_token_error(tokens)
                raise
            forms.extend(sentence_forms)
            lemmas.extend(map(_get, tokens, repeat("lemma", n)))
            upos.extend(map(_get, tokens, repeat("upos", n)))
            feats.extend(map(_get, tokens, repeat("feats", n)))
            space.extend([v is not False for v in map(_get, tokens, repeat("space_after", n), repeat(True, n))])
            if len(forms) > start:
                ann.sentences.append([start, len(forms) - 1])
    return ann if forms else None


class JsonlExtractor(Extractor):
    name = "jsonl"
    patterns = (".jsonl",)
    options: FieldMapping

    @classmethod
    def parse_options(cls, raw, where):
        return parse_field_mapping(raw, where)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        fm = self.options or FieldMapping()
        id_keys = (fm.id_field,)
        with open(file.path, "rb") as fh:
            for lineno, raw in physical_lines(fh):
                if not raw.strip():
                    continue
                try:
                    record = loads(raw)
                except UnicodeDecodeError as exc:
                    ctx.drop("invalid_utf8", file, f"invalid UTF-8 ({exc.reason} at byte {exc.start}); line skipped", lineno)
                    continue
                except ValueError as exc:
                    if not raw.decode("utf-8", "replace").strip():
                        continue  # Unicode-whitespace-only line: blank, skipped silently
                    ctx.drop("malformed_json", file, f"malformed JSON ({exc}); line skipped", lineno)
                    continue
                if not isinstance(record, dict):
                    ctx.drop("non_object_record", file, f"a JSON {type(record).__name__}, not an object; line skipped", lineno)
                    continue
                text = check_text(record, fm.text_field, file, ctx, lineno)
                if text is None:
                    continue
                annotations = None
                paragraphs = record.get("paragraphs")
                if paragraphs is not None:
                    try:
                        annotations = parse_paragraphs(paragraphs)
                    except BadAnnotations as exc:
                        ctx.drop("bad_annotations", file, f"{exc}; record skipped", lineno)
                        continue
                yield Document(text, probe_id(record, id_keys), fm.metadata(record, STRUCTURAL), annotations)
