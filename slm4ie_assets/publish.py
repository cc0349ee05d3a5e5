"""Publish: the current parts, in shard order -> a complete version folder + its Manifest -> one
atomic swap of `current` (see store.py for the layout).

A failure before the swap removes the new version, so the published pair stays as it was; after
the swap the top-level links are re-pointed and the old version is removed.
"""

import errno
import os
import shutil
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import BinaryIO

from .catalog import FORMAT_VERSION, DatasetSpec
from .duplicates import duplicate_uids
from .gzipio import GzipMemberWriter, start_writeback
from .length_stats import merged_lengths
from .manifest import Manifest
from .part_meta import PartMeta, merged_drops, merged_repairs
from .shards import Shard
from .sidecar_writer import stub_lines_from_text
from .split import file_runs, ranges_sidecar_lines
from .store import MANIFEST, PARTIAL, STATE_DIR, DatasetStore, OutputWriteError, fsync_dir, write_atomic

MAX_DISCOVERY_WARNINGS = 100
# one piece of a published file: a part file, or the stub lines of a part without annotations
Source = Path | Callable[[], Iterable[bytes]]

_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EACCES}
_HAS_COPY_RANGE = hasattr(os, "copy_file_range")
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}
_COPY_CHUNK = 1 << 22


def publish(spec: DatasetSpec, shards: list[Shard], store: DatasetStore,
            discovery: list[str] | None = None) -> Manifest:
    """Concatenate the current parts in shard order into a new version and swap it in.
    `discovery` names raw entries that could not be listed or read (counted as `unreadable_path`).
    A failure before the swap removes the new version: the published pair stays as it was."""
    metas = current_metas(spec, shards, store)
    version = store.versions / f"v{time.time_ns()}-{os.getpid()}"
    try:
        manifest = _write_version(spec, shards, store, metas, version, list(discovery or ()))
        _link_top_level(spec, manifest.has_sidecar, only_new=True)
        _link(store.current, f"versions/{version.name}")  # the commit point
    except BaseException as exc:
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


def _write_version(spec: DatasetSpec, shards: list[Shard], store: DatasetStore, metas: list[PartMeta],
                   version: Path, discovery: list[str]) -> Manifest:
    """Write a complete version folder (text, sidecar, manifest), fsynced; returns the manifest."""
    version.mkdir(parents=True)
    text_path = version / spec.text_path.name
    side_path = version / spec.sidecar_path.name
    has_sidecar = any(m.has_annotations for m in metas)
    _assemble(text_path, [store.part_paths(s.key).text for s in shards])
    if has_sidecar:
        _assemble(side_path, _sidecar_sources(store, shards, metas))
    duplicates = duplicate_uids(store, metas, shards)
    docs = sum(m.docs for m in metas)
    manifest = Manifest(
        format=FORMAT_VERSION, dataset=spec.key, recipe=spec.recipe,
        shards=tuple((s.key, s.fingerprint) for s in shards), files=len({f.rel for s in shards for f in s.files}),
        docs=docs, annotated_docs=sum(m.annotated_docs for m in metas), tokens=sum(m.tokens for m in metas),
        sentences=sum(m.sentences for m in metas), text_bytes=text_path.stat().st_size,
        sidecar_bytes=side_path.stat().st_size if has_sidecar else 0, has_sidecar=has_sidecar,
        sidecar_lines=docs if has_sidecar else 0, drops=merged_drops(metas, len(discovery)),
        discovery_warnings=tuple(discovery[:MAX_DISCOVERY_WARNINGS]), repairs=merged_repairs(metas),
        duplicate_uids=duplicates.count, duplicate_examples=duplicates.examples,
        published_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        lengths=merged_lengths(m.lengths for m in metas),  # None if a part predates lengths
    )
    write_atomic(version / MANIFEST, manifest.to_json())
    fsync_dir(version)
    return manifest


def _sidecar_sources(store: DatasetStore, shards: list[Shard], metas: list[PartMeta]) -> list[Source]:
    """Each part's sidecar part, or stubs rebuilt from its text; a part without documents adds nothing.
    The ranges of a split file become one member, written as the unsplit part would have been
    (docs/splitting.md), so the sidecar bytes do not depend on splitting."""
    sources: list[Source] = []
    for group in file_runs(shards, metas):
        if len(group) > 1:
            if any(m.docs for _, m in group):
                sources.append(partial(ranges_sidecar_lines, [(store.part_paths(s.key), m) for s, m in group]))
            continue
        s, m = group[0]
        paths = store.part_paths(s.key)
        if m.has_annotations:
            sources.append(paths.annotations)
        elif m.docs:
            sources.append(partial(stub_lines_from_text, paths.text))
    return sources


def _assemble(path: Path, sources: list[Source]) -> None:
    """Write `path` as the concatenation of `sources`, durable once this returns.

    A single part file is hard-linked: parts are fsynced before their meta commits them, and never
    rewritten in place (a new part replaces the old name), so the version keeps its own bytes.
    """
    if len(sources) == 1 and isinstance(sources[0], Path):
        try:
            os.link(sources[0], path)
            return
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
    with open(path, "xb", opener=_create_0644) as out:
        for src in sources:
            if isinstance(src, Path):
                _copy_into(src, out)
                start_writeback(out.fileno())
            else:
                writer = GzipMemberWriter(out, threaded=False)
                for stub in src():
                    writer.write(stub)
                writer.close()
        out.flush()
        os.fsync(out.fileno())


def _create_0644(path: str, flags: int) -> int:
    return os.open(path, flags, 0o644)


def _copy_into(src: Path, out: BinaryIO) -> None:
    """Append a whole file to `out`, in the kernel where it can (copy_file_range: no trip through
    user space, and a reflink on file systems that share extents)."""
    out.flush()  # what was written through `out` goes first
    out_fd = out.fileno()
    with open(src, "rb", buffering=0) as fh:
        remaining = os.fstat(fh.fileno()).st_size
        in_fd = fh.fileno()
        while remaining > 0:
            try:
                n = os.copy_file_range(in_fd, out_fd, remaining) if _HAS_COPY_RANGE else 0
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                n = 0
            if n == 0:  # not supported here (or the file shrank): finish with plain reads and writes
                while chunk := fh.read(_COPY_CHUNK):
                    out.write(chunk)
                out.flush()
                return
            remaining -= n
