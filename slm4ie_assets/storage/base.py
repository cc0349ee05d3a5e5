"""The one interface every store implements, so nothing above it asks which store it is on.

A store is a flat namespace of objects under one root (a folder, or `s3://bucket/prefix`), named by
'/'-separated paths relative to that root. Six operations are all the stage needs: list, stat, a
ranged read, a write that becomes visible whole, a create-only write (the commit point of a
publish and of a lease), and delete. A write and a conditional overwrite or delete take the tag
`stat` returned, so a store with compare-and-swap (S3's If-Match, a disk's inode and times) lets a
caller change an object only if nobody changed it since it looked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol


@dataclass(frozen=True, slots=True)
class StoredObject:
    """What a listing or a stat says about one object: enough to tell that it changed."""

    name: str  # relative to the store's root, '/'-separated
    size: int
    tag: str  # changes whenever the bytes may have: a disk's inode+mtime+ctime, a bucket's ETag
    modified_ns: int  # mtime on a disk, LastModified in a bucket (the sensors' age)
    version: str | None = None  # a versioned bucket's version id


class StoreError(Exception):
    """A store refused an operation for a reason the caller can act on; the message names the object."""


class AlreadyExists(StoreError):
    """A create-only write found the name taken: another writer got there first."""


class TagMismatch(StoreError):
    """A conditional overwrite or delete found the object changed (or gone) since it was looked at."""


class Store(Protocol):
    """The operations the stage asks of a place that holds objects."""

    @property
    def url(self) -> str:
        """The root as the user wrote it (a path or `s3://bucket/prefix`), for messages."""
        ...

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every object whose name starts with `prefix`, in name order (bytes of UTF-8)."""
        ...

    def stat(self, name: str) -> StoredObject:
        """One object's record; FileNotFoundError when there is none."""
        ...

    def read_range(self, name: str, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer only at the end); FileNotFoundError when gone."""
        ...

    def open_read(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        """A readable stream of bytes [start, end): read ahead where the store is remote."""
        ...

    def write(self, name: str, source: BinaryIO, if_tag: str | None = None) -> StoredObject:
        """Store `source`'s bytes under `name`, visible only whole; with `if_tag`, only if the
        object still has that tag (TagMismatch otherwise)."""
        ...

    def create(self, name: str, data: bytes) -> StoredObject:
        """Store `data` under `name` only if no object has that name (AlreadyExists otherwise)."""
        ...

    def delete(self, name: str, if_tag: str | None = None) -> None:
        """Remove `name` (nothing when absent); with `if_tag`, only if it still has that tag."""
        ...
