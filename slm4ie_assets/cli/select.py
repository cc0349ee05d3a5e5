"""Which documents `slm4ie inspect` and `stats --by` look at: `--grep`, `--where`, `--annotated`, and
a reproducible random `--sample` drawn in one pass (reservoir sampling: memory for N documents,
whatever the corpus size)."""

import argparse
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Numbered = tuple[int, dict, dict | None]  # (line in the file read, record, sidecar line or None)
_MISSING = object()
MISSING_VALUE = "(missing)"  # the group `--by` puts a document without the field in


@dataclass(frozen=True)
class Where:
    """`FIELD=VALUE`: the record's field (dotted: `metadata.year`) shows VALUE, or holds it in a list."""

    path: tuple[str, ...]
    value: str

    def matches(self, record: dict) -> bool:
        found: Any = record
        for part in self.path:
            found = found.get(part, _MISSING) if isinstance(found, dict) else _MISSING
        if found is _MISSING:
            return False
        values = found if isinstance(found, list) else [found]
        return any(as_text(v) == self.value for v in values)


def as_text(value: Any) -> str:
    """A field's value as `--where` and `--by` compare and show it (JSON spelling for null and bools)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value)


# the keys of a published line (README, "Output format"); anything else a document holds is under metadata
RECORD_FIELDS = ("uid", "doc_id", "source", "domain", "text")
FIELD_FORMS = "uid, doc_id, source, domain, text or metadata.NAME"


def field_problem(path: tuple[str, ...]) -> str | None:
    """Why `path` names no field a published document can have (None when it can): `year` for
    `metadata.year` would otherwise group every document under `(missing)` without a word."""
    if not all(path):
        return "has an empty part"
    if path[0] == "metadata":
        return "needs a NAME after metadata. (metadata.NAME)" if len(path) == 1 else None
    if path[0] in RECORD_FIELDS:
        return None if len(path) == 1 else f"{path[0]} has no parts"
    hint = f"; did you mean metadata.{'.'.join(path)}?" if len(path) == 1 else ""
    return f"is not a document field ({FIELD_FORMS}){hint}"


def parse_field(text: str) -> tuple[str, ...]:
    path = tuple(text.split("."))
    problem = field_problem(path)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return path


def parse_where(text: str) -> Where:
    field, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"wants FIELD=VALUE ({FIELD_FORMS} as FIELD), not {text!r}")
    return Where(parse_field(field), value)


def parse_regex(text: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression ({exc}): {text!r}") from None


def field_values(record: dict, path: tuple[str, ...]) -> list[str]:
    """The values `--by` groups a record under: one per list element, `(missing)` when absent."""
    found: Any = record
    for part in path:
        found = found.get(part, _MISSING) if isinstance(found, dict) else _MISSING
    if found is _MISSING:
        return [MISSING_VALUE]
    return [as_text(v) for v in found] if isinstance(found, list) and found else [as_text(found)]


@dataclass(frozen=True)
class Selection:
    grep: re.Pattern | None = None
    where: tuple[Where, ...] = ()
    annotated: bool = False

    def keeps(self, record: dict, ann: dict | None) -> bool:
        if self.annotated and (ann is None or "forms" not in ann):
            return False
        if self.grep is not None and not self.grep.search(record.get("text", "")):
            return False
        return all(w.matches(record) for w in self.where)

    def describe(self) -> str:
        parts = (["annotated"] if self.annotated else []) + ([f"matching /{self.grep.pattern}/"] if self.grep else [])
        parts += [f"with {'.'.join(w.path)}={w.value}" for w in self.where]
        return " ".join(parts)


def selected(docs: Iterable[tuple[dict, dict | None]], selection: Selection) -> Iterator[Numbered]:
    return ((number, rec, ann) for number, (rec, ann) in enumerate(docs, 1) if selection.keeps(rec, ann))


def reservoir(items: Iterable[Numbered], k: int, seed: int) -> list[Numbered]:
    """A uniform sample of `k` items in one pass (Algorithm R), the same for the same seed and input;
    returned in file order."""
    rng = random.Random(seed)
    kept: list[Numbered] = []
    for i, item in enumerate(items):
        if i < k:
            kept.append(item)
        else:
            j = rng.randrange(i + 1)
            if j < k:
                kept[j] = item
    return sorted(kept, key=lambda item: item[0])
