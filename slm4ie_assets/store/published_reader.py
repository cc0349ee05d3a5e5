"""The published version of a dataset as its readers get it, wherever it was published.

`slm4ie inspect` and `stats`, `slm4ie status` and the asset checks ask `published_version(spec)`
and read the one version it names: its Manifest, its text and its sidecar, which always belong
together. They never ask where the version lives. For a plain output folder it is the version
folder `current` points to, resolved once (a publish meanwhile swaps `current` but never changes
that folder; once the folder is removed, a stream already open stays readable). For
`output_dir: s3://...` it is the newest intact commit record in the bucket
(store/remote_versions.py) and the version objects it names, never the top-level copies, which a
later publish rewrites one after the other and a hand can change. The local work folder plays no
part there, so a bucket's version reads the same from any host, and after work_dir is lost.

A whole pass (the checks) streams each object with the store's read-ahead. A reader that may stop
after a page (`inspect`) asks for `page=True`: from a bucket it then starts with one small ranged
read and reads 4x more each time, handing over to the read-ahead stream only past a few MiB, so
five documents cost a GET of 64 KiB, not the 8 MiB chunks (up to three) the read-ahead fetches
before the reader stops. A local file is read the same way either way (an open file costs nothing
ahead, and it stays readable when a publish removes its folder).
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..catalog import DatasetSpec
from ..storage.base import Store
from ..storage.disk import DiskStore
from ..storage.urls import open_store
from .dataset_store import READ_ERRORS, DatasetStore, read_manifest
from .manifest import Manifest
from .remote_versions import RemoteLayout, read_published

FIRST_RANGED_READ = 64 << 10  # a page of documents, or the first sidecar lines, in one small GET
LAST_RANGED_READ = 4 << 20  # ranged reads grow to this, then the store's read-ahead takes over


@dataclass(frozen=True)
class PublishedVersion:
    """One published version: its Manifest and where its objects are in `store`."""

    key: str
    manifest: Manifest
    store: Store  # holds the version's objects: the version folder, or the output bucket prefix
    text: str  # the text object's name in `store`
    sidecar: str | None  # the sidecar object's name; None when the version has none
    where: str  # the version, for messages: its folder, or its commit record's URL
    first_read: int | None = None  # a remote store's: the first ranged read of a page (None: stream at once)

    def open_text(self, page: bool = False) -> BinaryIO:
        """The text's bytes; `page`: the reader may stop early (small ranged reads first)."""
        return self._open(self.text, page)

    def open_sidecar(self, page: bool = False) -> gzip.GzipFile:
        """The sidecar's decompressed lines (FileNotFoundError when the version has none); closing it
        closes the stream it reads."""
        if self.sidecar is None:
            raise FileNotFoundError(f"{self.where}: {self.key} has no sidecar in this version")
        return _OwningGzipFile(self._open(self.sidecar, page))

    def _open(self, name: str, page: bool) -> BinaryIO:
        if not page or self.first_read is None:
            return self.store.open_read(name)
        return io.BufferedReader(_GrowingReads(self.store, name, self.first_read), buffer_size=1 << 16)


class _GrowingReads(io.RawIOBase):
    """An object read by ranged reads that grow 4x from `first`, then, past LAST_RANGED_READ, by the
    store's own stream: a page costs a few small GETs, a whole pass little more than `open_read`."""

    def __init__(self, store: Store, name: str, first: int) -> None:
        super().__init__()
        self._store, self._name, self._next = store, name, first
        self._offset = 0
        self._pending = memoryview(b"")
        self._stream: BinaryIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        if not self._pending:
            if self._stream is None and self._next > LAST_RANGED_READ:
                self._stream = self._store.open_read(self._name, self._offset)
            if self._stream is not None:
                data = self._stream.read(len(target))
            else:
                data = self._store.read_range(self._name, self._offset, self._next)
                self._next *= 4
            self._offset += len(data)
            self._pending = memoryview(data)
        count = min(len(target), len(self._pending))
        target[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        super().close()


class _OwningGzipFile(gzip.GzipFile):
    """A GzipFile over a stream that it closes with itself (`gzip.open(path)` does that for a path;
    `GzipFile(fileobj=...)` leaves the stream open, and a bucket's stream holds a thread)."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source  # first: a failed __init__ still closes it
        super().__init__(fileobj=source, mode="rb")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._source.close()


def published_version(spec: DatasetSpec) -> PublishedVersion | None:
    """The version of `spec` a reader should read now; None before the first publish. The one place
    readers are told a bucket output from a folder (as `publish_targets.publish_target` is writers')."""
    if spec.output_location is None:
        return _folder_version(spec)
    return bucket_version(spec.key, open_store(spec.output_location, spec.storage_options.given()))


def _folder_version(spec: DatasetSpec) -> PublishedVersion | None:
    """The folder `current` points to, resolved once, with its manifest."""
    try:
        folder = Path(os.path.realpath(DatasetStore(spec).current, strict=True))
        manifest = read_manifest(folder)
    except READ_ERRORS:
        return None
    sidecar = spec.sidecar_path.name
    return PublishedVersion(spec.key, manifest, DiskStore(folder), spec.text_path.name,
                            sidecar if (folder / sidecar).exists() else None, str(folder))


def bucket_version(key: str, store: Store) -> PublishedVersion | None:
    """The newest commit record in `store` whose objects are whole, and the objects it names."""
    record = read_published(store, key)
    if record is None:
        return None
    where = f"{store.url.rstrip('/')}/{RemoteLayout(key).commit_name(record.seq)}"
    return PublishedVersion(key, record.manifest, store, record.text, record.sidecar, where, FIRST_RANGED_READ)
