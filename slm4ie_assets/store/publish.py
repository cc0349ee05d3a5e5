"""Publish: the current parts, in shard order -> a complete version folder + its Manifest -> one
atomic swap of `current` (see store/dataset_store.py for the layout).

A failure before the swap removes the new version, so the published pair stays as it was; after
the swap the top-level links are re-pointed and the old version is removed.
"""

import os
import shutil
import time
from pathlib import Path

from ..catalog import FORMAT_VERSION, DatasetSpec
from ..planning.shards import Shard
from .assembly import VersionStager, assemble
from .dataset_store import (
    MANIFEST,
    MAX_DISCOVERY_WARNINGS,
    PARTIAL,
    STATE_DIR,
    DatasetStore,
    OutputWriteError,
    fsync_dir,
    write_atomic,
)
from .duplicates import duplicate_uids
from .length_stats import merged_lengths
from .manifest import Manifest
from .part_meta import PartMeta, merged_drops, merged_repairs
from .sidecar_units import sidecar_sources


def publish(spec: DatasetSpec, shards: list[Shard], store: DatasetStore, discovery: list[str] | None = None,
            stager: VersionStager | None = None, metas: list[PartMeta] | None = None) -> Manifest:
    """Concatenate the current parts in shard order into a new version and swap it in; with a
    `stager`, what it has already staged is kept (store/assembly.py). `discovery` names raw entries that
    could not be listed or read (counted as `unreadable_path`). `metas`: the current parts' metas,
    when the caller has just read and checked them under the same lock. A failure before the swap
    removes the new version (and the staged one): the published pair stays as it was."""
    metas = current_metas(spec, shards, store) if metas is None else metas
    version: Path | None = None
    try:
        version = stager.finish(metas) if stager is not None else None
        if version is None:
            version = store.versions / f"v{time.time_ns()}-{os.getpid()}"
            _assemble_version(spec, shards, store, metas, version)
        manifest = _write_manifest(spec, shards, store, metas, version, list(discovery or ()))
        _link_top_level(spec, manifest.has_sidecar, only_new=True)
        _link(store.current, f"versions/{version.name}")  # the commit point
    except BaseException as exc:
        if stager is not None:
            stager.discard()
        if version is not None:
            shutil.rmtree(version, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError):
            raise OutputWriteError.of(spec, spec.output_dir, exc) from exc
        raise
    fsync_dir(store.state)  # the swap survives a power cut once publish returns
    _link_top_level(spec, manifest.has_sidecar, only_new=False)
    fsync_dir(spec.output_dir)
    store.cleanup()
    return manifest


def current_metas(spec: DatasetSpec, shards: list[Shard], store: DatasetStore) -> list[PartMeta]:
    """The metas of the shards' parts, in shard order; every part must be current."""
    metas = []
    for s in shards:
        meta = store.read_part_meta(s.key)
        if meta is None or not store.part_is_current(s, meta):
            raise RuntimeError(f"{spec.key}: part for shard {s.key!r} is missing or stale; "
                               "extract it before publishing")
        metas.append(meta)
    return metas


def _link_top_level(spec: DatasetSpec, has_sidecar: bool, only_new: bool) -> None:
    """Top-level links point through `current`, so they change meaning only when it is swapped.
    Before the swap (`only_new`) only missing links are made; after it every link is set, a plain
    file from elsewhere is replaced, and a stale sidecar never survives beside a new text (D17)."""
    rel_current = f"{STATE_DIR}/{spec.key}/current"
    if only_new:
        spec.output_dir.mkdir(parents=True, exist_ok=True)
    for name, present in ((spec.text_path.name, True), (spec.sidecar_path.name, has_sidecar)):
        path = spec.output_dir / name
        if only_new:
            if present and not path.is_symlink() and not path.exists():
                _link(path, f"{rel_current}/{name}")
        elif present:
            _link(path, f"{rel_current}/{name}")
        elif path.is_symlink() or path.exists():
            path.unlink()


def _link(path: Path, target: str) -> None:
    """Make `path` a symlink to `target` (relative), replacing what is there atomically."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    tmp = path.with_name(path.name + ".link" + PARTIAL)
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _assemble_version(spec: DatasetSpec, shards: list[Shard], store: DatasetStore, metas: list[PartMeta],
                      version: Path) -> None:
    """The version folder's text and sidecar, all at once (nothing was staged)."""
    version.mkdir(parents=True)
    assemble(version / spec.text_path.name, [store.part_paths(s.key).text for s in shards])
    if any(m.has_annotations for m in metas):
        assemble(version / spec.sidecar_path.name, sidecar_sources(store, shards, metas))


def _write_manifest(spec: DatasetSpec, shards: list[Shard], store: DatasetStore, metas: list[PartMeta],
                    version: Path, discovery: list[str]) -> Manifest:
    """Complete the version folder (its text and sidecar are in place) with its manifest, fsynced."""
    text_path = version / spec.text_path.name
    side_path = version / spec.sidecar_path.name
    has_sidecar = any(m.has_annotations for m in metas)
    duplicates = duplicate_uids(store, metas, shards)
    docs = sum(m.docs for m in metas)
    manifest = Manifest(
        format=FORMAT_VERSION, dataset=spec.key, recipe=spec.recipe,
        shards=tuple((s.key, s.fingerprint) for s in shards), files=len({f.rel for s in shards for f in s.files}),
        docs=docs, annotated_docs=sum(m.annotated_docs for m in metas), tokens=sum(m.tokens for m in metas),
        sentences=sum(m.sentences for m in metas), text_bytes=text_path.stat().st_size,
        sidecar_bytes=side_path.stat().st_size if has_sidecar else 0, has_sidecar=has_sidecar,
        sidecar_lines=docs if has_sidecar else 0, drops=merged_drops(metas, discovery),
        discovery_warnings=tuple(discovery[:MAX_DISCOVERY_WARNINGS]), repairs=merged_repairs(metas),
        duplicate_uids=duplicates.count, duplicate_examples=duplicates.examples,
        published_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        lengths=merged_lengths(m.lengths for m in metas),  # None if a part predates lengths
    )
    write_atomic(version / MANIFEST, manifest.to_json())
    fsync_dir(version)
    fsync_dir(version.parent)  # a staged folder was renamed in
    return manifest
