"""The raw sensor's cursor: what one tick leaves for the next, written so the UI can show it.

Dagster stores the cursor with every tick and shows it on the sensor's page ("Cursor") and in each
row of its tick list. A cursor that is a JSON object with a `__class__` entry is shown by the UI as
its `field=value` pairs, so ours leads with `last_tick`, the tick's verdict in words (the skip
reason, or the run it asked for): the tick list itself only says "0 runs requested" (DAGSTER_NOTES 7).
The machine parts follow, cut into groups by spaces: one unbroken run of 700 characters widened the
page's table until the sensor's description showed as a single line cut off at the window's edge.
  - `recipe` and `buckets`: the dataset's recipe and one 8-byte digest per bucket of shards (64 buckets,
    hashed by key), about 830 characters whatever the dataset size; a changed recipe (extract.yaml
    edited) makes every bucket count as moved;
  - `look`: what planning/settling.py compares the next look with, and since when the dataset waits;
  - `requesting_ticks`: how many ticks have requested runs; it ends every run key, so new work never
    repeats a key Dagster has seen (a raw tree back in an earlier state is new work), while a tick
    that Dagster evaluates again after a crash, from the same cursor, repeats its keys and is deduplicated;
  - `requested` (a raw folder in a bucket only; absent otherwise): the digest of the work the last
    requesting tick asked a run for (planning/bucket_listing.py), so the ticks before that run has
    mirrored it do not ask again.
"""

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..planning.settling import Look
from ..planning.shards import Shard

CURSOR_CLASS = "RawSensorCursor"
SENSOR_BUCKETS = 64
DIGEST_BYTES = 8
_GROUP = 12  # base64 characters between two spaces (one bucket digest)


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def sensor_bucket(key: str) -> int:
    return zlib.crc32(_b(key)) % SENSOR_BUCKETS


def bucket_digests(shards: Iterable[Shard]) -> bytes:
    hashers = [hashlib.blake2b(digest_size=DIGEST_BYTES) for _ in range(SENSOR_BUCKETS)]
    for s in shards:
        hashers[sensor_bucket(s.key)].update(_b(f"{s.key}\0{s.fingerprint}\n"))
    return b"".join(h.digest() for h in hashers)


def moved_buckets(now: bytes, before: bytes | None) -> set[int]:
    """The buckets whose digest differs from the previous tick's (all of them without one)."""
    if before is None:
        return set(range(SENSOR_BUCKETS))
    return {i for i in range(SENSOR_BUCKETS)
            if now[i * DIGEST_BYTES:(i + 1) * DIGEST_BYTES] != before[i * DIGEST_BYTES:(i + 1) * DIGEST_BYTES]}


def _spaced(data: str) -> str:
    return " ".join(data[i:i + _GROUP] for i in range(0, len(data), _GROUP))


def _unspaced_b64(text: str) -> bytes:
    """Raises ValueError on anything but base64 cut by spaces."""
    return base64.b64decode("".join(text.split(" ")), validate=True)


@dataclass(frozen=True)
class RawCursor:
    last_tick: str = ""
    recipe: str = ""
    buckets: bytes | None = None  # None: no usable previous tick, every bucket is looked at
    look: Look = field(default_factory=Look)
    requesting_ticks: int = 0
    requested: str = ""

    def digests_for(self, recipe: str) -> bytes | None:
        """The previous tick's bucket digests, or None when the recipe changed since (every part stale)."""
        return self.buckets if recipe == self.recipe else None

    def encode(self) -> str:
        since, _, stamps = self.look.encode().partition(".")
        doc = {"__class__": CURSOR_CLASS, "last_tick": self.last_tick, "requesting_ticks": self.requesting_ticks,
               "recipe": self.recipe,
               "buckets": _spaced(base64.b64encode(self.buckets).decode("ascii")) if self.buckets else None,
               "look": f"{since}. {_spaced(stamps)}".rstrip()}
        if self.requested:
            doc["requested"] = self.requested
        return json.dumps(doc, ensure_ascii=False)

    @staticmethod
    def decode(text: str | None) -> "RawCursor":
        """The previous tick's cursor; an empty one for a missing, older or damaged cursor (the next
        tick then looks at every bucket and at every file's age, as a first tick does)."""
        try:
            doc = json.loads(text or "")
            if not isinstance(doc, dict) or doc.get("__class__") != CURSOR_CLASS:
                return RawCursor()
            buckets = _unspaced_b64(doc["buckets"]) if doc.get("buckets") else None
            since, _, stamps = str(doc.get("look", "")).partition(".")
            look = Look.decode(f"{since}.{''.join(stamps.split(' '))}")
            requesting_ticks = int(doc.get("requesting_ticks") or 0)
        except (ValueError, TypeError, KeyError):
            return RawCursor()
        if buckets is not None and len(buckets) != SENSOR_BUCKETS * DIGEST_BYTES:
            buckets = None
        return RawCursor(str(doc.get("last_tick", "")), str(doc.get("recipe", "")), buckets, look, requesting_ticks,
                         str(doc.get("requested") or ""))
