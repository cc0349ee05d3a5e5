"""What the next publisher removes from a store, under the dataset's lease (D17 on a bucket):
commit records older than the newest `KEEP_COMMITS`, the version folders no kept record names (a
killed run's uploads, old versions), and, where the store can list them, the multipart uploads a
killed run left unfinished under the version folders and the top-level names.

The optional abilities of a store (`StoreAbilities`) are found once, from what the store object
offers, so nothing here asks which store it is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..storage.base import Store, StoredObject
from .remote_versions import KEEP_COMMITS, RemoteLayout, commit_objects, read_commit


@runtime_checkable
class AbandonedUploads(Protocol):
    """A store whose writes can be left unfinished and still cost space (S3's multipart uploads)."""

    def abort_uploads(self, prefix: str = "", initiated_before_ns: int | None = None) -> Sequence[Any]:
        """Give up every unfinished upload under `prefix` (begun before `initiated_before_ns` when
        given) and free its parts; returns what it aborted."""
        ...


@runtime_checkable
class CopiesObjects(Protocol):
    """A store that copies an object into another name without the bytes leaving it (S3's CopyObject)."""

    def copy(self, source: str, name: str) -> StoredObject:
        """`source`'s bytes under `name`, visible only whole."""
        ...


@dataclass(frozen=True, slots=True)
class StoreAbilities:
    """What a store offers beyond the six operations of `Store`."""

    uploads: AbandonedUploads | None = None
    copier: CopiesObjects | None = None


def abilities_of(store: Store) -> StoreAbilities:
    """Found once where the store is opened for a publish, then handed down."""
    return StoreAbilities(store if isinstance(store, AbandonedUploads) else None,
                          store if isinstance(store, CopiesObjects) else None)


def clean_leftovers(store: Store, layout: RemoteLayout, abilities: StoreAbilities, keep_version: str = "") -> int:
    """Remove what no reader may need any more; returns the objects and uploads removed. Old commit
    records go first, so a kill in the middle never leaves a kept record naming a removed object."""
    records = commit_objects(store, layout)
    old, kept = records[:-KEEP_COMMITS], records[-KEEP_COMMITS:]
    named = {keep_version}
    for obj in kept:
        record = read_commit(store, obj)
        if record is not None:
            named.add(record.version)
    removed = 0
    for obj in old:
        store.delete(obj.name)
        removed += 1
    for obj in list(store.list(layout.versions)):
        version = obj.name[len(layout.versions):].split("/", 1)[0]
        if version not in named:
            store.delete(obj.name)
            removed += 1
    if abilities.uploads is not None:
        # under the lease no other writer of this dataset is uploading: every upload here is a dead run's
        for prefix in (layout.versions, layout.text, layout.sidecar):
            removed += len(abilities.uploads.abort_uploads(prefix))
    return removed
