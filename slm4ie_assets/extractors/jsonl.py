"""jsonl: one JSON object per line, field names from the `metadata:` knobs, optional
`paragraphs` token annotations (extraction-formats: jsonl; ADDENDUM 4.2; D6, D7, D10)."""

from collections.abc import Iterator
from itertools import repeat
from typing import Any

from ..schema import Annotations, Document
from ..utils.type_names import a_type_name
from .base import Extractor
from .extract_context import ExtractContext
from .input_file import InputFile
from .json_objects import json_objects
from .line_splitter import LineSplitter
from .records import (
    FIELD_MAPPING_KEYS,
    STRUCTURAL,
    FieldMapping,
    check_text,
    nested_repr,
    parse_field_mapping,
    probe_id,
)

_item = dict.__getitem__  # raises TypeError for a token that is not an object
_get = dict.get


class BadAnnotations(ValueError):
    pass


def _raise_token_error(tokens: list) -> None:
    """The first bad token's error, in document order."""
    for t in tokens:
        if not isinstance(t, dict):
            raise BadAnnotations(f"a token is {a_type_name(t)}, not an object")
        if "form" not in t:
            raise BadAnnotations("a token has no 'form'")


def parse_paragraphs(paragraphs: Any) -> Annotations | None:
    """paragraphs[*].sentences[*].tokens[*] -> arrays; None when there is no token (a stub)."""
    ann = Annotations()
    forms, lemmas, upos, feats, space = ann.forms, ann.lemmas, ann.upos, ann.feats, ann.space_after
    if not isinstance(paragraphs, list):
        raise BadAnnotations(f"paragraphs is {a_type_name(paragraphs)}, not a list")
    for p in paragraphs:
        if not isinstance(p, dict):
            raise BadAnnotations(f"a paragraph is {a_type_name(p)}, not an object")
        sentences = p.get("sentences") or []
        if not isinstance(sentences, list):
            raise BadAnnotations("paragraph.sentences is not a list")
        for s in sentences:
            if not isinstance(s, dict):
                raise BadAnnotations(f"a sentence is {a_type_name(s)}, not an object")
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
    if not forms:
        return None
    _check_types(ann)
    return ann


_STR = frozenset({str})
_STR_OR_NULL = frozenset({str, type(None)})


def _check_types(ann: Annotations) -> None:
    """A form must be a string, a lemma, upos or feats a string or null: anything else would reach
    the sidecar and fail `valid_schema`, so the document is dropped as `bad_annotations` (D6).
    One C-level pass per column (`map(type, ...)`); the offending token is searched only on error."""
    for name, column, allowed in (("form", ann.forms, _STR), ("lemma", ann.lemmas, _STR_OR_NULL),
                                  ("upos", ann.upos, _STR_OR_NULL), ("feats", ann.feats, _STR_OR_NULL)):
        if not set(map(type, column)) <= allowed:
            i, value = next((i, v) for i, v in enumerate(column) if type(v) not in allowed)
            wanted = "a string" if allowed is _STR else "a string or null"
            shown = nested_repr(value) if isinstance(value, (list, dict)) else repr(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise BadAnnotations(f"token {i + 1}'s {name!r} is {a_type_name(value)} ({shown}), not {wanted}")


class JsonlExtractor(Extractor):
    name = "jsonl"
    patterns = (".jsonl",)
    splitter = LineSplitter()
    metadata_keys = FIELD_MAPPING_KEYS
    options: FieldMapping

    @classmethod
    def parse_options(cls, raw, where):
        return parse_field_mapping(raw, where)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        fm = self.options or FieldMapping()
        id_keys = (fm.id_field,)
        with open(file.path, "rb") as fh:
            for lineno, record in json_objects(fh, file, ctx):
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
