"""The on-disk layout of one dataset under the output folder, and its clean-up.

Layout under `<output_dir>/`:

    <key>.jsonl                  -> .slm4ie/<key>/current/<key>.jsonl          (symlink)
    <key>.annotations.jsonl.gz   -> .slm4ie/<key>/current/<key>.annotations.jsonl.gz
    .slm4ie/<key>/parts/         one part per shard: <id>.jsonl, <id>.ann.gz, <id>.uids, <id>.meta.json
    .slm4ie/<key>/versions/<v>/  a complete published pair plus manifest.json
    .slm4ie/<key>/current        -> versions/<v>   the commit point: one atomic rename swaps both files
    .slm4ie/<key>/staging/<v>/   a version being assembled while parts are extracted (store/assembly.py)
    .slm4ie/<key>/lock           the dataset lock; .slm4ie/<key>/locks/<id>.lock: one lock per shard (store/locks.py)

A part is committed by its `.meta.json`, written last; a publish by the rename of `current`.
A reader therefore always sees a complete text file and the sidecar that belongs to it. Only
`part_writer` and `publish` write here; this module names the paths and removes leftovers.
"""

import hashlib
import os
import shutil
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..catalog import DatasetSpec
from ..planning.shards import Shard
from ..utils.durable import fsync_dir
from .manifest import Manifest
from .part_meta import PartMeta

STATE_DIR = ".slm4ie"
PARTIAL = ".partial"
MANIFEST = "manifest.json"
# what reading a meta or manifest may meet instead: no file, a torn or foreign one
READ_ERRORS = (OSError, ValueError, KeyError, TypeError)
MAX_DISCOVERY_WARNINGS = 100  # kept verbatim in a manifest; the drop counts are always complete


class OutputWriteError(OSError):
    """Writing under the output folder failed (disk full, quota, I/O error). The message names the
    dataset and the folder; what was published before stays as it was, and nothing half-written
    is left behind."""

    @classmethod
    def of(cls, spec: DatasetSpec, where: Path, exc: OSError) -> "OutputWriteError":
        message = (f"dataset {spec.key!r}: cannot write under {where}: {exc.strerror or exc}; "
                   "the published output is unchanged")
        return cls(exc.errno, message) if exc.errno is not None else cls(message)


class UnsafeOutputTree(RuntimeError):
    """Clean-up met what it must not touch: one of its folders is a symbolic link (deleting inside
    it would delete in the link's target) or holds an entry it did not make. Nothing was removed;
    the message names the path and what to do."""


def partial(path: Path) -> Path:
    """Where `path` is written before the rename that makes it appear whole."""
    return path.with_name(path.name + PARTIAL)


def write_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data` whole, durably, or keeps what it held (a `.partial` may be left on error)."""
    tmp = partial(path)
    write_durable(tmp, data)
    os.replace(tmp, path)


def write_durable(path: Path, data: bytes) -> None:
    """`data` in `path`, on disk before this returns (the first half of `write_atomic`)."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def read_manifest(version: Path) -> Manifest:
    """The manifest of a version folder; raises one of READ_ERRORS when there is none to read."""
    return Manifest.from_json((version / MANIFEST).read_bytes())


class PartPaths(NamedTuple):
    text: Path  # the text lines, in document order
    annotations: Path  # the gzipped sidecar lines; only when the part has annotations
    uids: Path  # one 64-bit uid hash per text line (duplicate counting)
    meta: Path  # written last: its presence commits the part


@lru_cache(maxsize=4096)
def _part_paths(parts: Path, shard_key: str) -> PartPaths:
    """A part's four paths (a hash and four path joins, asked for a dozen times per part written)."""
    base = parts / hashlib.sha1(shard_key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return PartPaths(base.with_suffix(".jsonl"), base.with_suffix(".ann.gz"), base.with_suffix(".uids"),
                     base.with_suffix(".meta.json"))


class DatasetStore:
    """Paths and state of one dataset under the output folder."""

    def __init__(self, spec: DatasetSpec):
        self.spec = spec
        self.out = spec.output_dir
        self.state = self.out / STATE_DIR / spec.key
        self.parts = self.state / "parts"
        self.versions = self.state / "versions"
        self.staging = self.state / "staging"  # renamed into versions/ when complete
        self.current = self.state / "current"
        self.lock = self.state / "lock"
        self.shard_locks = self.state / "locks"  # apart from parts/, so no part clean-up meets them
        self.archive_state = self.state / "archives.json"  # what unpacking remembers (archives/state.py)

    # --- parts
    def part_id(self, shard_key: str) -> str:
        return hashlib.sha1(shard_key.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def part_paths(self, shard_key: str) -> PartPaths:
        return _part_paths(self.parts, shard_key)

    def shard_lock(self, shard_key: str) -> Path:
        return self.shard_locks / f"{self.part_id(shard_key)}.lock"

    def read_part_meta(self, shard_key: str) -> PartMeta | None:
        try:
            return PartMeta.from_json(self.part_paths(shard_key).meta.read_bytes())
        except READ_ERRORS:
            return None

    def part_is_current(self, shard: Shard, meta: PartMeta | None = None) -> bool:
        meta = meta if meta is not None else self.read_part_meta(shard.key)
        return (meta is not None and meta.shard == shard.key and meta.fingerprint == shard.fingerprint
                and meta.recipe == self.spec.recipe and self.part_files_intact(shard.key, meta))

    def part_files_intact(self, shard_key: str, meta: PartMeta) -> bool:
        """The part's files are there with the sizes its meta implies (text: `text_bytes`; uids: 8
        bytes a document; a sidecar part exactly when it has annotations). A part deleted, emptied
        or truncated behind the package's back is stale and extracted again, never published."""
        paths = self.part_paths(shard_key)
        try:
            if (os.stat(paths.text).st_size != meta.text_bytes
                    or os.stat(paths.uids).st_size != 8 * meta.docs):
                return False
            return not meta.has_annotations or os.stat(paths.annotations).st_size > 0
        except OSError:
            return False

    def uncommit(self, shard_keys: Iterable[str]) -> None:
        """Withdraw parts by removing their metas (the next clean-up removes their files): the parts
        a run committed from a file that then changed under it (planning/input_stamps.py). Their fingerprints
        may equal the new state's, so only their absence keeps them out of a later publish."""
        for key in shard_keys:
            self.part_paths(key).meta.unlink(missing_ok=True)

    # --- published
    def published_manifest(self) -> Manifest | None:
        try:
            return read_manifest(self.current)
        except READ_ERRORS:
            return None

    def is_published(self, shards: list[Shard], discovery: list[str] | None = None) -> bool:
        """The published manifest names exactly these shards and recipe (and, given `discovery`,
        the same first discovery warnings: an archive newly skipped must reach the ledger)."""
        manifest = self.published_manifest()
        return (manifest is not None and manifest.recipe == self.spec.recipe
                and manifest.shards == tuple((s.key, s.fingerprint) for s in shards)
                and (discovery is None or manifest.discovery_warnings == tuple(discovery[:MAX_DISCOVERY_WARNINGS]))
                and self._published_files_intact(manifest))

    def _published_files_intact(self, manifest: Manifest) -> bool:
        """The top-level text (and sidecar) still have the manifest's sizes: a published text
        emptied or cut in place is not "up to date"; the next run publishes it again."""
        try:
            if os.stat(self.spec.text_path).st_size != manifest.text_bytes:
                return False
            return not manifest.has_sidecar or os.stat(self.spec.sidecar_path).st_size == manifest.sidecar_bytes
        except OSError:
            return False

    # --- clean-up
    def cleanup(self, keep_keys: Iterable[str] | None = None) -> int:
        """Remove what an interrupted run left behind (D17): partial files, uncommitted parts,
        unpublished versions, and parts (and shard locks) of shards no longer planned. Returns files
        removed. The caller holds the dataset lock EXCLUSIVE: no part is being written then, and no
        process has a shard lock file open (they are opened only under the dataset lock, shared)."""
        keep = None if keep_keys is None else list(keep_keys)
        self.check_tree()
        self._adopt_copied_current()
        return (self._remove_stale_parts(keep) + self._remove_unpublished_versions() + self._remove_staging()
                + self._remove_swap_leftovers() + self._retire_dangling_sidecar() + self._remove_shard_locks(keep))

    def _adopt_copied_current(self) -> None:
        """`current` is a real folder when the output folder was copied with links followed
        (`cp -rL`) and put back. It is the published version, so it is kept: moved into `versions/`
        and `current` made the link to it again (a kill in between leaves no `current`, and the
        next run publishes afresh). Without this, clean-up would remove every version and each
        publish would fail to swap the link over a folder."""
        if self.current.is_symlink() or not self.current.is_dir():
            return
        self.versions.mkdir(parents=True, exist_ok=True)
        name = f"v{time.time_ns()}-{os.getpid()}"
        os.rename(self.current, self.versions / name)
        os.symlink(f"versions/{name}", self.current)
        fsync_dir(self.state)

    def retire_unpublished(self) -> int:
        """The versions a publish killed after its swap left beside `current` (and its swap's
        temporary links): garbage whenever the dataset lock is held exclusive, since a version
        appears in `versions/` and becomes `current` under one hold of it. Called before every
        unpack, so a run that then finds the dataset up to date leaves nothing behind either (D17)."""
        self.check_tree()
        self._adopt_copied_current()
        return self._remove_unpublished_versions() + self._remove_swap_leftovers() + self._retire_dangling_sidecar()

    def check_tree(self) -> None:
        """Refuse (UnsafeOutputTree) before anything is removed when `parts/`, `versions/`,
        `staging/` or `locks/` is a symbolic link, or holds an entry of a kind this package never
        makes there: a link or folder in `parts/`, a link or file in `versions/` or `staging/`.
        Clean-up never follows a link and never guesses about a stranger's file. (A link or folder
        among the shard locks is refused by the shard lock itself, naming the shard; clean-up
        only ever unlinks entries there, which never follows a link.)"""
        for folder, want_dirs in ((self.parts, False), (self.shard_locks, None), (self.versions, True),
                                  (self.staging, True)):
            if folder.is_symlink():
                raise UnsafeOutputTree(f"dataset {self.spec.key!r}: {folder} is a symbolic link; clean-up never "
                                       "deletes through links. Replace it with a real folder (to use a bigger disk, "
                                       f"make the output folder {self.out} itself the link), then run again")
            if want_dirs is None or not folder.is_dir():
                continue
            for entry in os.scandir(folder):
                ok = entry.is_dir(follow_symlinks=False) if want_dirs else entry.is_file(follow_symlinks=False)
                if not ok:
                    kind = "a symbolic link" if entry.is_symlink() else ("a file" if want_dirs else "a folder")
                    raise UnsafeOutputTree(f"dataset {self.spec.key!r}: {entry.path} is {kind}, which this package "
                                           f"never makes in {folder.name}/, so clean-up stops rather than guess. "
                                           f"Move it out of {folder} (or remove it), then run again")

    def _remove_shard_locks(self, keep_keys: list[str] | None) -> int:
        """Lock files of vanished shards, so the folder does not grow with every renamed file."""
        if keep_keys is None or not self.shard_locks.is_dir():
            return 0
        keep = {f"{self.part_id(k)}.lock" for k in keep_keys}
        removed = 0
        for p in self.shard_locks.iterdir():
            if p.name not in keep:
                try:
                    p.unlink(missing_ok=True)
                except IsADirectoryError:
                    continue  # not ours; the shard lock reports it if that shard comes back
                removed += 1
        return removed

    def _remove_stale_parts(self, keep_keys: Iterable[str] | None) -> int:
        if not self.parts.is_dir():
            return 0
        removed = 0
        committed = {p.name[: -len(".meta.json")] for p in self.parts.glob("*.meta.json")}
        keep_ids = None if keep_keys is None else {self.part_id(k) for k in keep_keys}
        for p in self.parts.iterdir():
            pid = p.name.split(".", 1)[0]
            if p.name.endswith(PARTIAL) or pid not in committed or (keep_ids is not None and pid not in keep_ids):
                p.unlink(missing_ok=True)
                removed += 1
        return removed

    def _remove_unpublished_versions(self) -> int:
        live = os.readlink(self.current) if self.current.is_symlink() else None
        if not self.versions.is_dir():
            return 0
        removed = 0
        for v in self.versions.iterdir():
            if live is None or Path(live).name != v.name:
                shutil.rmtree(v, ignore_errors=True)
                removed += 1
        return removed

    def _remove_staging(self) -> int:
        """Versions a run was assembling: a live run (holding no lock now) notices and starts over."""
        if not self.staging.is_dir():
            return 0
        removed = 0
        for v in self.staging.iterdir():
            shutil.rmtree(v, ignore_errors=True)
            removed += 1
        return removed

    def _remove_swap_leftovers(self) -> int:
        """Temporary links of a swap a kill interrupted (`publish` names them `<name>.link.partial`)."""
        link_tmps = [self.current.with_name("current" + PARTIAL), self.current.with_name("current.link" + PARTIAL)]
        link_tmps += [self.out / f"{p.name}.link{PARTIAL}" for p in (self.spec.text_path, self.spec.sidecar_path)]
        removed = 0
        for p in link_tmps:
            if p.is_symlink() or p.exists():
                p.unlink()
                removed += 1
        return removed

    def _retire_dangling_sidecar(self) -> int:
        """A kill right after the swap to a version without a sidecar leaves the old sidecar link,
        dangling through `current` (D17: retired here even when the next run has nothing to do)."""
        side = self.spec.sidecar_path
        manifest = self.published_manifest()
        if (manifest is not None and not manifest.has_sidecar and side.is_symlink()
                and os.readlink(side) == f"{STATE_DIR}/{self.spec.key}/current/{side.name}"):
            side.unlink()
            return 1
        return 0
