"""What a publish through the Store interface leaves in a store, and how a reader finds it
(docs/guarantees.md, "On a bucket"; the writer is store/remote_publish.py).

Layout under the store's root, for dataset `<key>`:

    <key>.jsonl, <key>.annotations.jsonl.gz     whole copies of the newest committed version
    .slm4ie/<key>/versions/<v>/<key>.jsonl      a version's objects (<v>: time, host, pid, random)
    .slm4ie/<key>/versions/<v>/<key>.annotations.jsonl.gz
    .slm4ie/<key>/published/<seq:012d>.json     a commit record: seq, version, objects, the Manifest
    .slm4ie/<key>/top-level.json                which commit the top-level copies hold, with their tags
    .slm4ie/<key>/lease/<generation>.json       the dataset's lease (store/lease.py)

A version becomes published when its commit record is created, create-only, under the next
sequence number: there is no rename in a bucket, so the newest commit record plays the part of the
`current` symlink. Each top-level copy is visible only whole, but the two are written one after the
other, so a reader that needs text and sidecar of one version follows the newest commit record.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..planning.shards import Shard
from ..storage.base import Store, StoredObject
from ..utils.json_record import record_from_json
from .dataset_store import MAX_DISCOVERY_WARNINGS
from .manifest import Manifest

KEEP_COMMITS = 2  # the newest two commit records and their versions stay; older ones are removed
_SEQ_NAME = re.compile(r"^(\d{12})\.json$")
_NOT_A_RECORD = (FileNotFoundError, ValueError, KeyError, TypeError)


@dataclass(frozen=True, slots=True)
class RemoteLayout:
    """The object names of one dataset in a store."""

    key: str

    @property
    def state(self) -> str:
        return f".slm4ie/{self.key}/"

    @property
    def versions(self) -> str:
        return f"{self.state}versions/"

    @property
    def published(self) -> str:
        return f"{self.state}published/"

    @property
    def top_level_record(self) -> str:
        return f"{self.state}top-level.json"

    @property
    def text(self) -> str:
        return f"{self.key}.jsonl"

    @property
    def sidecar(self) -> str:
        return f"{self.key}.annotations.jsonl.gz"

    def version_folder(self, version: str) -> str:
        return f"{self.versions}{version}/"

    def commit_name(self, seq: int) -> str:
        return f"{self.published}{seq:012d}.json"

    def seq_of(self, name: str) -> int | None:
        match = _SEQ_NAME.match(name[len(self.published):]) if name.startswith(self.published) else None
        return int(match.group(1)) if match else None

    def new_version(self) -> str:
        """A version name no other run picks: the time, this host and pid, and 48 random bits."""
        host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:64] or "host"
        return f"v{time.time_ns()}-{host}-{os.getpid()}-{secrets.token_hex(6)}"


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One published version: its sequence number, its objects and its Manifest (field order = key order)."""

    seq: int
    version: str
    text: str  # the version's text object
    sidecar: str | None  # its sidecar object, None when the version has no annotations
    manifest: Manifest
    published_by: str = ""  # the run that committed it, for the message of a run that lost the race

    def to_json(self) -> bytes:
        return orjson.dumps(self, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> CommitRecord:
        return record_from_json(cls, orjson.loads(data), _CONVERT)

    def objects(self) -> dict[str, int]:
        """The version's objects and the sizes its Manifest gives them."""
        sizes = {self.text: self.manifest.text_bytes}
        if self.sidecar is not None:
            sizes[self.sidecar] = self.manifest.sidecar_bytes
        return sizes


_CONVERT: dict[str, Callable[[Any], Any]] = {"manifest": lambda v: Manifest.from_json(orjson.dumps(v))}


@dataclass(frozen=True, slots=True)
class TopLevelRecord:
    """Which commit the top-level copies hold, and the tags they had when written."""

    seq: int
    version: str
    tags: dict[str, str]  # top-level object -> its tag; a name absent: no such object

    def to_json(self) -> bytes:
        return orjson.dumps(self, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> TopLevelRecord:
        return record_from_json(cls, orjson.loads(data), {})


def commit_objects(store: Store, layout: RemoteLayout) -> list[StoredObject]:
    """The commit records, oldest first (names sort as numbers: 12 digits)."""
    return [o for o in store.list(layout.published) if layout.seq_of(o.name) is not None]


def read_object(store: Store, obj: StoredObject) -> bytes:
    return store.read_range(obj.name, 0, obj.size)


def read_commit(store: Store, obj: StoredObject) -> CommitRecord | None:
    """A commit record, or None when it is gone or not one of ours; any other failure to read it
    is raised (clean-up must never take a record it could not read for one that is not there)."""
    try:
        return CommitRecord.from_json(read_object(store, obj))
    except _NOT_A_RECORD:
        return None


def newest_seq(store: Store, layout: RemoteLayout) -> int:
    """The newest sequence number (0 before the first publish)."""
    records = commit_objects(store, layout)
    return (layout.seq_of(records[-1].name) or 0) if records else 0


def read_published(store: Store, key: str) -> CommitRecord | None:
    """The published version a reader should use: the newest commit record whose objects are all
    there with their Manifest's sizes. An older one is returned only when a newer one names objects
    that are missing (a run that lost its lease withdraws such a record at once, docs/guarantees.md)."""
    layout = RemoteLayout(key)
    for obj in reversed(commit_objects(store, layout)):
        record = read_commit(store, obj)
        if record is not None and objects_intact(store, record):
            return record
    return None


def objects_intact(store: Store, record: CommitRecord) -> bool:
    for name, size in record.objects().items():
        try:
            if store.stat(name).size != size:
                return False
        except FileNotFoundError:
            return False
    return True


def published_matches(store: Store, key: str, recipe: str, shards: Sequence[Shard],
                      discovery: list[str] | None = None) -> bool:
    """Skip-unless-force: the published version names exactly these shards (keys and fingerprints)
    and recipe (and, given `discovery`, the same first discovery warnings), as on a disk
    (`DatasetStore.is_published`). The top-level copies are made right by `settle` either way."""
    return record_matches(read_published(store, key), recipe, shards, discovery)


def record_matches(record: CommitRecord | None, recipe: str, shards: Sequence[Shard],
                   discovery: list[str] | None = None) -> bool:
    """`published_matches` on a record the caller has already read."""
    if record is None:
        return False
    manifest = record.manifest
    return (manifest.recipe == recipe and manifest.shards == tuple((s.key, s.fingerprint) for s in shards)
            and (discovery is None or manifest.discovery_warnings == tuple(discovery[:MAX_DISCOVERY_WARNINGS])))
