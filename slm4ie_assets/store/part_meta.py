"""The meta file that commits a part: what one shard produced, read back by publish, the strict check
and the Dagster layer.

The JSON is the file format under `.slm4ie/<key>/parts/<id>.meta.json`: its keys, their order and
their values must stay exactly as they are, or every existing part stops being current. A meta
written before a field existed reads with that field's default (json_record): `lengths=None`, and
the part stays current, since upgrading must not re-extract a corpus for a metadata table. So a new
field is one line here, with a default. A new part always has lengths.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ..utils.json_record import record_from_json
from .length_stats import LengthStats


@dataclass(frozen=True, slots=True)
class PartMeta:
    """One committed part (field order = key order in the file)."""

    format: int
    shard: str
    files: tuple[str, ...]  # relative paths of the shard's input files
    fingerprint: str
    recipe: str
    docs: int
    annotated_docs: int
    tokens: int
    sentences: int
    text_bytes: int
    input_bytes: int
    has_annotations: bool  # the part has an `.ann.gz` sidecar part
    drops: dict[str, int]
    warnings: tuple[str, ...]
    repairs: dict[str, int]
    seconds: float
    # characters and tokens per document, for the published distributions; None only when read from
    # a meta written before `lengths` existed (no key), never when a part is written
    lengths: LengthStats | None = None

    def to_json(self) -> bytes:
        return orjson.dumps(self)  # a dataclass serializes its fields in declaration order

    @classmethod
    def from_json(cls, data: bytes) -> "PartMeta":
        """Raises ValueError (bad JSON), KeyError or TypeError (not a part meta) on a file it cannot read."""
        return record_from_json(cls, orjson.loads(data), _CONVERT)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "files": tuple, "warnings": tuple, "lengths": LengthStats.from_json_or_none,
}

def add_counts(total: dict[str, int], counts: dict[str, int]) -> None:
    """Add `counts` into `total`; new keys are appended, so the order of first appearance is kept."""
    for reason, n in counts.items():
        total[reason] = total.get(reason, 0) + n


def discovery_reason(warning: str) -> str:
    """The reason a discovery warning (`"<key>/<entry>: <why> [reason]"`) is counted under:
    `unreadable_path` for a raw entry, `bad_archive` or `duplicate_member` for archives (D6)."""
    if warning.endswith("]") and " [" in warning:
        return warning[warning.rindex(" [") + 2:-1]
    return "unreadable_path"


def merged_drops(metas: Iterable[PartMeta], discovery: Iterable[str] = ()) -> dict[str, int]:
    """The drop ledger of several parts; what planning found (raw entries that could not be read,
    skipped archives and members) comes first (D6)."""
    drops: dict[str, int] = {}
    for warning in discovery:
        reason = discovery_reason(warning)
        drops[reason] = drops.get(reason, 0) + 1
    for meta in metas:
        add_counts(drops, meta.drops)
    return drops


def merged_repairs(metas: Iterable[PartMeta]) -> dict[str, int]:
    repairs: dict[str, int] = {}
    for meta in metas:
        add_counts(repairs, meta.repairs)
    return repairs
