"""Shard planning and input fingerprints.

A shard is the unit of extraction and of the `shards/<key>` dynamic partitions: one input file
(one config directory for huggingface). Its key is the file's relative path, made safe for
Dagster partition keys; its fingerprint comes from stat alone, so planning never reads content.
"""

import hashlib
import re
from dataclasses import dataclass

from .extractors.base import Extractor, InputFile, sort_key

MAX_KEY_LEN = 512
# Dagster does not validate dynamic partition keys, but `...` breaks ranges, `,` breaks lists and
# brackets break the UI's range syntax; `%` is escaped so the encoding stays reversible.
_UNSAFE = re.compile(r"[%,\[\]\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Shard:
    key: str
    files: tuple[InputFile, ...]
    fingerprint: str
    size: int

    @property
    def order(self) -> tuple:
        return sort_key(self.files[0].rel)


def shard_key(rel: str) -> str:
    """A stable, valid partition key for a relative path (readable where the path is safe)."""
    key = _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", rel)
    key = key.replace("...", "..%2E")
    if len(key) > MAX_KEY_LEN:
        digest = hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        key = f"{key[: MAX_KEY_LEN - 18]}~{digest}"
    return key


def check_shard_key(key: str) -> str:
    """Refuse keys that would break Dagster's partition syntax (keys typed into the UI included)."""
    if not key or len(key) > MAX_KEY_LEN or "..." in key or _UNSAFE.sub("", key.replace("%", "")) != key.replace("%", ""):
        raise ValueError(f"invalid shard key {key!r}: no ',', '[', ']', '...', control characters, at most {MAX_KEY_LEN} characters")
    return key


def file_fingerprint(extractor: Extractor, file: InputFile) -> tuple[str, int]:
    fp = extractor.fingerprint_of(file)
    size = int(fp.split(":", 1)[0]) if fp[:1].isdigit() else 0
    return fp, size


def plan_shards(extractor: Extractor, files: list[InputFile]) -> list[Shard]:
    """One shard per input file, in the publish order of ADDENDUM 3.1."""
    shards = []
    for f in files:
        fp, size = file_fingerprint(extractor, f)
        shards.append(Shard(shard_key(f.rel), (f,), fp, size))
    shards.sort(key=lambda s: s.order)
    return shards
