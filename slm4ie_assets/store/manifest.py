"""The manifest of a published version: what `extracted/<key>` holds, read by the skip decision,
the checks, the metadata and downstream assets.

`manifest.json` lives in the version folder beside the files it describes; its keys, their order
and their values are the published format and must stay exactly as they are. A manifest written
before a field existed reads with that field's default (json_record): `lengths=None`, so that
version stays published as it is.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..utils.json_record import record_from_json
from .length_stats import LengthStats


@dataclass(frozen=True, slots=True)
class Manifest:
    """One published version (field order = key order in the file)."""

    format: int
    dataset: str
    recipe: str
    shards: tuple[tuple[str, str], ...]  # (shard key, input fingerprint), in shard order
    files: int
    docs: int
    annotated_docs: int
    tokens: int
    sentences: int
    text_bytes: int
    sidecar_bytes: int
    has_sidecar: bool
    sidecar_lines: int
    drops: dict[str, int]
    discovery_warnings: tuple[str, ...]
    repairs: dict[str, int]
    duplicate_uids: int
    duplicate_examples: tuple[str, ...]
    published_at: str  # UTC, "%Y-%m-%dT%H:%M:%SZ"
    # characters and tokens per document, merged from the parts' histograms; None (`null`) when a
    # part was written before `lengths` existed, since a sum of the other parts would look complete
    lengths: LengthStats | None = None

    def to_json(self) -> bytes:
        return orjson.dumps(self, option=orjson.OPT_INDENT_2)  # fields in declaration order

    @classmethod
    def from_json(cls, data: bytes) -> "Manifest":
        """Raises ValueError (bad JSON), KeyError or TypeError (not a manifest) on a file it cannot read."""
        return record_from_json(cls, orjson.loads(data), _CONVERT)


def _shard_pairs(pairs: list) -> tuple[tuple[str, str], ...]:
    return tuple((key, fingerprint) for key, fingerprint in pairs)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "shards": _shard_pairs, "discovery_warnings": tuple, "duplicate_examples": tuple,
    "lengths": LengthStats.from_json_or_none,
}
