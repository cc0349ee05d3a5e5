"""A corpus put into a bucket of the local S3 server, its extract.yaml pointed there, and the bytes
a bucket publish left, hashed as tests/core/test_published_bytes.py hashes a folder's."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import yaml

from slm4ie_assets.storage.base import Store
from slm4ie_assets.storage.urls import open_store
from slm4ie_assets.store.remote_versions import read_published

from .paths import REPO

PUBLISHED_HASHES = REPO / "tests" / "core" / "published_hashes.json"
VOLATILE = ("published_at",)


def upload_tree(root: Path, location: str, skip: tuple[str, ...] = ()) -> int:
    """Every file under `root` as an object under `location` (its relative path as the name)."""
    store = open_store(location)
    count = 0
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name not in skip:
            with open(path, "rb") as source:
                store.write(path.relative_to(root).as_posix(), source)
            count += 1
    return count


def bucket_config(source: Path, tmp_path: Path, bucket_url: str, name: str = "extract.yaml") -> Path:
    """`source` (an extract.yaml) reading `<bucket>/raw` and publishing to `<bucket>/out`, its work
    folder in `tmp_path/work`."""
    doc = yaml.safe_load(source.read_text())
    doc.update(input_dir=f"{bucket_url}/raw", output_dir=f"{bucket_url}/out", work_dir=str(tmp_path / "work"))
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def object_bytes(store: Store, name: str) -> bytes | None:
    try:
        with store.open_read(name) as stream:
            return stream.read()
    except FileNotFoundError:
        return None


def bucket_hashes(output_location: str, key: str) -> dict[str, str]:
    """The same entries as test_published_bytes.published_hashes, read from the bucket: the
    top-level copies and the newest commit record's Manifest."""
    store = open_store(output_location)
    found = {}
    for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
        data = object_bytes(store, name)
        if data is not None:
            found[name] = hashlib.sha256(data).hexdigest()
    record = read_published(store, key)
    assert record is not None, f"{output_location}: nothing published for {key}"
    manifest = json.loads(record.manifest.to_json())
    for field in VOLATILE:
        manifest.pop(field)
    manifest["shards"] = [shard for shard, _fingerprint in manifest["shards"]]
    found[f"{key}/manifest.json"] = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return found


def listing(location: str) -> dict[str, str]:
    """Every object under `location` with its tag: what a run wrote shows as a difference."""
    return {obj.name: obj.tag for obj in open_store(location).list()}


def copy_examples_raw(target: Path) -> Path:
    shutil.copytree(REPO / "examples" / "data" / "raw", target, ignore=shutil.ignore_patterns("2023.txt"))
    return target
