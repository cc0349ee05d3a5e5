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


def parse_where(text: str) -> Where:
    field, sep, value = text.partition("=")
    path = tuple(field.split("."))
    if not sep or not all(path):
        raise argparse.ArgumentTypeError(f"wants FIELD=VALUE (FIELD may be metadata.NAME), not {text!r}")
    return Where(path, value)


def parse_field(text: str) -> tuple[str, ...]:
    path = tuple(text.split("."))
    if not all(path):
        raise argparse.ArgumentTypeError(f"wants a field name such as metadata.year, not {text!r}")
    return path


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
        return ["(missing)"]
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
