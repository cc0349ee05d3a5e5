"""What the tests of publishing through the Store interface share (store/remote_publish.py,
store/lease.py): stores a child process can open again, a store that calls a hook before each of
its writes (the kill points and the commit race of the tests), versions published the POSIX way to
compare against, and the state a reader may see.

The tests are functions over a store opener, so the same test runs on a folder (DiskStore) and,
with the bucket fixture added to `STORE_KINDS`, on a bucket.
"""

from __future__ import annotations

import functools
import io
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.storage.base import Store, StoredObject
from slm4ie_assets.storage.disk import DiskStore
from slm4ie_assets.storage.urls import open_store
from slm4ie_assets.store.dataset_store import DatasetStore, read_manifest
from slm4ie_assets.store.manifest import Manifest
from slm4ie_assets.store.remote_publish import LocalVersion
from slm4ie_assets.store.remote_versions import read_published
from support.crash import jsonl_corpus
from support.files import write_config

KEY = "k"
Opener = Callable[[], Store]  # picklable: a child process opens the same store with it
STORE_KINDS = ["disk", "bucket"]


def disk_opener(tmp_path: Path) -> Opener:
    return functools.partial(DiskStore, tmp_path / "store")


def opener_for(kind: str, request: Any, tmp_path: Path) -> Opener:
    """The store of `kind` for one test: a folder under `tmp_path`, or a prefix of a fresh bucket
    on the local S3 server (its AWS_* variables set for this process and its children)."""
    if kind == "disk":
        return disk_opener(tmp_path)
    if kind == "bucket":
        bucket = request.getfixturevalue("s3_bucket")
        return functools.partial(open_store, f"{bucket.url}/store")
    raise ValueError(f"no store of kind {kind!r}")


class HookedStore:
    """A real store whose writes, creates and deletes call `before(operation, name)` first."""

    def __init__(self, store: Store, before: Callable[[str, str], None]) -> None:
        self.store, self.before = store, before

    @property
    def url(self) -> str:
        return self.store.url

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        return self.store.list(prefix)

    def stat(self, name: str) -> StoredObject:
        return self.store.stat(name)

    def read_range(self, name: str, start: int, length: int) -> bytes:
        return self.store.read_range(name, start, length)

    def open_read(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        return self.store.open_read(name, start, end)

    def write(self, name: str, source: BinaryIO, if_tag: str | None = None) -> StoredObject:
        self.before("write", name)
        return self.store.write(name, source, if_tag)

    def create(self, name: str, data: bytes) -> StoredObject:
        self.before("create", name)
        return self.store.create(name, data)

    def delete(self, name: str, if_tag: str | None = None) -> None:
        self.before("delete", name)
        self.store.delete(name, if_tag)


class NoLease:
    """A guard that lets every step pass: two racers that both believe they hold the lease (one
    lost it unknowingly), so only the create-only commit stands between them."""

    def __init__(self, holder: str) -> None:
        self.holder = holder

    def check(self) -> None:
        return None


@dataclass(frozen=True)
class PosixVersion:
    """A version published the POSIX way (the real pipeline), and its files copied out to upload."""

    name: str
    config: Path  # the extract.yaml of the project it was published in
    local: LocalVersion
    manifest: Manifest
    text: bytes  # what the POSIX publish shows at <key>.jsonl
    sidecar: bytes | None  # and at <key>.annotations.jsonl.gz


def _raw_files(name: str) -> dict[str, bytes]:
    """Versions a, b, c carry annotations (a sidecar); plain has none."""
    if name == "plain":
        lines = [orjson.dumps({"doc_id": f"p{d}", "text": f"plain {d} besedilo"}) for d in range(7)]
        return {"p.jsonl": b"\n".join(lines) + b"\n"}
    return {f"{name}{f}.jsonl": jsonl_corpus(name, f, 5 + i) for i, f in enumerate(("x", "y"))}


def posix_versions(root: Path, names: tuple[str, ...] = ("a", "b", "c", "plain")) -> dict[str, PosixVersion]:
    versions = {}
    for name in names:
        project = root / f"posix_{name}"
        for rel, data in _raw_files(name).items():
            (project / "raw" / KEY).mkdir(parents=True, exist_ok=True)
            (project / "raw" / KEY / rel).write_bytes(data)
        config = write_config(project, {KEY: {"extractor": "jsonl", "domain": "test"}})
        catalog = load_catalog(config)
        spec = catalog.dataset(KEY)
        extract_dataset(spec, catalog, workers=1)
        current = DatasetStore(spec).current.resolve()
        local = root / f"local_{name}"
        local.mkdir()
        text = shutil.copy(current / spec.text_path.name, local / spec.text_path.name)
        side = spec.sidecar_path.exists()
        sidecar = shutil.copy(current / spec.sidecar_path.name, local / spec.sidecar_path.name) if side else None
        versions[name] = PosixVersion(name, config, LocalVersion(Path(text), Path(sidecar) if sidecar else None),
                                      read_manifest(current), spec.text_path.read_bytes(),
                                      spec.sidecar_path.read_bytes() if side else None)
    return versions


def read_all(store: Store, name: str) -> bytes:
    with store.open_read(name) as stream:
        return stream.read()


def read_or_none(store: Store, name: str) -> bytes | None:
    try:
        return read_all(store, name)
    except FileNotFoundError:
        return None


def published_name(store: Store, versions: dict[str, PosixVersion]) -> str | None:
    """Which version a reader that follows the newest commit record sees, checked whole: its
    Manifest and both of its objects are that version's (None: nothing published)."""
    record = read_published(store, KEY)
    if record is None:
        return None
    text = read_all(store, record.text)
    sidecar = read_all(store, record.sidecar) if record.sidecar is not None else None
    names = [v.name for v in versions.values() if (v.text, v.sidecar, v.manifest) == (text, sidecar, record.manifest)]
    assert names, f"the published record {record.seq} ({record.version}) names a mix or a torn version"
    return names[0]


def snapshot(store: Store) -> dict[str, bytes]:
    return {o.name: read_all(store, o.name) for o in store.list("")}


def restore(store: Store, saved: dict[str, bytes]) -> None:
    """Make the store hold exactly `saved` (through the interface, so a bucket restores the same way)."""
    for obj in list(store.list("")):
        if obj.name not in saved:
            store.delete(obj.name)
    for name, data in saved.items():
        store.write(name, io.BytesIO(data))
