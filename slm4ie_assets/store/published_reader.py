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
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..catalog import DatasetSpec
from ..storage.base import Store
from ..storage.disk import DiskStore
from ..storage.urls import open_store
from .dataset_store import READ_ERRORS, DatasetStore, read_manifest
from .manifest import Manifest
from .remote_versions import RemoteLayout, read_published


@dataclass(frozen=True)
class PublishedVersion:
    """One published version: its Manifest and where its objects are in `store`."""

    key: str
    manifest: Manifest
    store: Store  # holds the version's objects: the version folder, or the output bucket prefix
    text: str  # the text object's name in `store`
    sidecar: str | None  # the sidecar object's name; None when the version has none
    where: str  # the version, for messages: its folder, or its commit record's URL

    def open_text(self, start: int = 0, end: int | None = None) -> BinaryIO:
        """The text's bytes [start, end): read ahead from a bucket, ranged GETs only for what is read."""
        return self.store.open_read(self.text, start, end)

    def open_sidecar(self) -> gzip.GzipFile:
        """The sidecar's decompressed lines (FileNotFoundError when the version has none); closing it
        closes the stream it reads."""
        if self.sidecar is None:
            raise FileNotFoundError(f"{self.where}: {self.key} has no sidecar in this version")
        return _OwningGzipFile(self.store.open_read(self.sidecar))


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
    return PublishedVersion(key, record.manifest, store, record.text, record.sidecar, where)
