"""coleslaw: the COLESLAW legal corpus, `*.jsonl` in four subcorpora with different schemas.

The text source is detected per record (ADDENDUM 4.4): `text` (PISRS, UradniList), `fullText`
(USRS), the court-decision parts (SodnaPraksa sp_courts), the personal-injury claim fields
(SodnaPraksa sp_claims). The subcorpus is the file's parent directory (D14/S13). Only the fields
of the chosen source leave metadata; a shadowed source stays there (D22/S12), so a record with
several sources loses nothing, and the choice is logged as a warning, never silent.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from ..schema import Document
from .base import Extractor
from .extract_context import ExtractContext
from .input_file import InputFile
from .json_objects import json_objects
from .line_splitter import LineSplitter
from .records import probe_id

log = logging.getLogger(__name__)

SP_COURTS_FIELDS = ("jedro", "izrek", "obrazlozitev")
SP_CLAIMS_FIELDS = ("skodni_dogodek", "poskodba", "telesne_bolecine", "strah",
                    "zmanjsanje_zivljenjske_aktivnosti", "dodatne_informacije")
ID_KEYS = ("doc_id", "id")
PART_SEPARATOR = "\n\n"
SHADOW_WARNINGS_PER_FILE = 20  # then one summary line per file, so a whole shadowed subcorpus cannot flood the log

# (source name, the fields it consumes, whether the fields are joined parts or one whole value)
SOURCES = (
    ("text", ("text",), False),
    ("fullText", ("fullText",), False),
    ("sp_courts", SP_COURTS_FIELDS, True),
    ("sp_claims", SP_CLAIMS_FIELDS, True),
)
_ALWAYS_EXCLUDED = frozenset({"doc_id", "subcorpus"})
_EXCLUDED_WITH = {name: _ALWAYS_EXCLUDED | set(fields) for name, fields, _ in SOURCES}


def _whole(record: dict, field: str) -> str | None:
    value = record.get(field)
    if isinstance(value, str) and value.strip():
        return value  # written unstripped, as the reference does
    return None


def _parts(record: dict, fields: tuple) -> str | None:
    kept = []
    for field in fields:
        value = record.get(field)
        if isinstance(value, str):
            value = value.strip()
            if value:
                kept.append(value)
    return PART_SEPARATOR.join(kept) if kept else None


def text_sources(record: dict) -> list[tuple[str, str]]:
    """Every present source as (name, text), in precedence order; the first one wins."""
    found = []
    for name, fields, joined in SOURCES:
        text = _parts(record, fields) if joined else _whole(record, fields[0])
        if text is not None:
            found.append((name, text))
    return found


def record_metadata(record: dict, subcorpus: str, chosen: str) -> dict:
    """`subcorpus` first, then every non-null field in record order except the chosen source's
    fields, `doc_id` and the record's own `subcorpus` (D14, D22, S12, S13)."""
    excluded = _EXCLUDED_WITH[chosen]
    meta = {"subcorpus": subcorpus}
    for key, value in record.items():
        if value is not None and key not in excluded:
            meta[key] = value
    return meta


@dataclass(frozen=True, slots=True)
class ShadowCarry:
    """What a range of a split file hands on (docs/splitting.md): records with several text sources
    so far, so only the file's first 20 are named and the summary counts the whole file."""

    shadowed: int = 0

    def __add__(self, other: "ShadowCarry") -> "ShadowCarry":
        return ShadowCarry(self.shadowed + other.shadowed)


class ColeslawExtractor(Extractor):
    name = "coleslaw"
    patterns = (".jsonl",)
    splitter = LineSplitter(carry=ShadowCarry)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        subcorpus = file.path.parent.name
        before = ctx.before.carry_of(ShadowCarry).shadowed  # a range counts on from the earlier ranges
        shadowed = before
        try:
            fh = open(file.path, "rb")
        except OSError as exc:
            ctx.drop("unreadable_file", file, f"cannot open ({exc.strerror or exc}); file skipped")
            return
        with fh:
            for lineno, record in json_objects(fh, file, ctx):
                sources = text_sources(record)
                if not sources:
                    ctx.drop("missing_text", file, "no text source (text, fullText, sp_courts or sp_claims fields "
                                                   "holding non-blank strings); record skipped", lineno)
                    continue
                chosen, text = sources[0]
                doc_id = probe_id(record, ID_KEYS)
                if len(sources) > 1:
                    shadowed += 1
                    if shadowed <= SHADOW_WARNINGS_PER_FILE and not ctx.counting:
                        log.warning("%s/%s:%d: record doc_id=%r in subcorpus %r has several text sources %r; "
                                    "chose %r, the others stay in metadata", ctx.dataset, file.rel,
                                    ctx.file_line(lineno), doc_id, subcorpus, [name for name, _ in sources], chosen)
                yield Document(text, doc_id, record_metadata(record, subcorpus, chosen))
        ctx.carry = ShadowCarry(shadowed - before)
        if shadowed > SHADOW_WARNINGS_PER_FILE and file.ends_file and not ctx.counting:
            log.warning("%s/%s: %d record(s) in subcorpus %r had several text sources (the first %d are named "
                        "above); each used the earliest and kept the others in metadata", ctx.dataset, file.rel,
                        shadowed, subcorpus, SHADOW_WARNINGS_PER_FILE)
