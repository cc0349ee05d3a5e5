"""Parts and publishing: the only code that writes under the output folder.

Layout under `<output_dir>/`:

    <key>.jsonl                  -> .slm4ie/<key>/current/<key>.jsonl          (symlink)
    <key>.annotations.jsonl.gz   -> .slm4ie/<key>/current/<key>.annotations.jsonl.gz
    .slm4ie/<key>/parts/         one part per shard: <id>.jsonl, <id>.ann.gz, <id>.uids, <id>.meta.json
    .slm4ie/<key>/versions/<v>/  a complete published pair plus manifest.json
    .slm4ie/<key>/current        -> versions/<v>   the commit point: one atomic rename swaps both files

A part is committed by its `.meta.json`, written last; a publish by the rename of `current`.
A reader therefore always sees a complete text file and the sidecar that belongs to it.
"""

import bisect
import errno
import hashlib
import os
import shutil
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import orjson
from xxhash import xxh3_64_intdigest

from .catalog import FORMAT_VERSION, DatasetSpec
from .extractors.base import DropLedger, ExtractContext, Extractor, InputFile
from .gzipio import ChunkWriter, GzipMemberWriter, fsync_file, start_writeback
from .schema import UnencodableValue, annotation_record, dumps, stub_record, text_record
from .shards import Shard

STATE_DIR = ".slm4ie"
PARTIAL = ".partial"
_UID_FLUSH = 1 << 16
NEWLINE = orjson.OPT_APPEND_NEWLINE
orjson_dumps = orjson.dumps


def uid_hash(u: str) -> int:
    """64-bit hash of a uid, for duplicate counting in bounded memory (collisions are re-checked)."""
    return xxh3_64_intdigest(u.encode("utf-8", "surrogatepass"))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OutputWriteError(OSError):
    """Writing under the output folder failed (disk full, quota, I/O error). The message names the
    dataset and the folder; what was published before stays as it was, and nothing half-written
    is left behind."""

    @classmethod
    def of(cls, spec: DatasetSpec, where: Path, exc: OSError) -> "OutputWriteError":
        message = (f"dataset {spec.key!r}: cannot write under {where}: {exc.strerror or exc}; "
                   "the published output is unchanged")
        return cls(exc.errno, message) if exc.errno is not None else cls(message)


def _is_input_error(exc: OSError, file: InputFile) -> bool:
    """True when an extractor's OSError is about reading its own input (the file, or a file inside
    a config directory), not about something else it needs (a TSV sidecar fails the dataset)."""
    if exc.filename is None:
        return True
    name = os.fsdecode(exc.filename)
    base = os.fspath(file.path)
    return name == base or name.startswith(base + os.sep)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + PARTIAL)
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class DatasetStore:
    """Paths and state of one dataset under the output folder."""

    def __init__(self, spec: DatasetSpec):
        self.spec = spec
        self.out = spec.output_dir
        self.state = self.out / STATE_DIR / spec.key
        self.parts = self.state / "parts"
        self.versions = self.state / "versions"
        self.current = self.state / "current"

    # --- parts
    def part_id(self, shard_key: str) -> str:
        return hashlib.sha1(shard_key.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def part_paths(self, shard_key: str) -> tuple[Path, Path, Path, Path]:
        base = self.parts / self.part_id(shard_key)
        return (base.with_suffix(".jsonl"), base.with_suffix(".ann.gz"), base.with_suffix(".uids"),
                base.with_suffix(".meta.json"))

    def read_part_meta(self, shard_key: str) -> dict | None:
        meta_path = self.part_paths(shard_key)[3]
        try:
            return orjson.loads(meta_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None

    def part_is_current(self, shard: Shard, meta: dict | None = None) -> bool:
        meta = meta if meta is not None else self.read_part_meta(shard.key)
        return (meta is not None and meta.get("shard") == shard.key and meta.get("fingerprint") == shard.fingerprint
                and meta.get("recipe") == self.spec.recipe)

    # --- published
    def published_manifest(self) -> dict | None:
        try:
            return orjson.loads((self.current / "manifest.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None

    def is_published(self, shards: list[Shard]) -> bool:
        manifest = self.published_manifest()
        return (manifest is not None and manifest.get("recipe") == self.spec.recipe
                and manifest.get("shards") == [[s.key, s.fingerprint] for s in shards]
                and self.spec.text_path.exists())

    def cleanup(self, keep_keys: Iterable[str] | None = None) -> int:
        """Remove what an interrupted run left behind (D17): partial files, uncommitted parts,
        unpublished versions, and parts of shards no longer planned. Returns files removed."""
        removed = 0
        if self.parts.is_dir():
            committed = {p.name[: -len(".meta.json")] for p in self.parts.glob("*.meta.json")}
            keep_ids = None if keep_keys is None else {self.part_id(k) for k in keep_keys}
            for p in self.parts.iterdir():
                pid = p.name.split(".", 1)[0]
                stale = p.name.endswith(PARTIAL) or pid not in committed or (keep_ids is not None and pid not in keep_ids)
                if stale:
                    p.unlink(missing_ok=True)
                    removed += 1
        live = os.readlink(self.current) if self.current.is_symlink() else None
        if self.versions.is_dir():
            for v in self.versions.iterdir():
                if live is None or Path(live).name != v.name:
                    shutil.rmtree(v, ignore_errors=True)
                    removed += 1
        # temporary links of a swap a kill interrupted (`_link` names them `<name>.link.partial`)
        link_tmps = [self.current.with_name("current" + PARTIAL), self.current.with_name("current.link" + PARTIAL)]
        link_tmps += [self.out / f"{p.name}.link{PARTIAL}" for p in (self.spec.text_path, self.spec.sidecar_path)]
        for p in link_tmps:
            if p.is_symlink() or p.exists():
                p.unlink()
                removed += 1
        # a kill right after the swap to a version without a sidecar leaves the old sidecar link,
        # dangling through `current` (D17: retired here even when the next run has nothing to do)
        side = self.spec.sidecar_path
        manifest = self.published_manifest()
        if (manifest is not None and not manifest.get("has_sidecar") and side.is_symlink()
                and os.readlink(side) == f"{STATE_DIR}/{self.spec.key}/current/{side.name}"):
            side.unlink()
            removed += 1
        return removed


# ----------------------------------------------------------------------------- writing one part


@dataclass
class PartResult:
    shard: str
    meta: dict
    extracted: bool  # False when the part was already current


def _stub_lines_from_text(text_path: Path, limit: int | None = None) -> Iterable[bytes]:
    with open(text_path, "rb") as fh:
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                return
            rec = orjson.loads(line)
            yield dumps(stub_record(rec["doc_id"], rec["uid"])) + b"\n"


def write_part(spec: DatasetSpec, extractor: Extractor, shard: Shard, store: DatasetStore,
               progress: Callable[[int, int], None] | None = None) -> dict:
    """Extract one shard into its part files and commit them with the meta file."""
    store.parts.mkdir(parents=True, exist_ok=True)
    text_path, ann_path, uids_path, meta_path = store.part_paths(shard.key)
    tmp_text, tmp_ann, tmp_uids = (p.with_name(p.name + PARTIAL) for p in (text_path, ann_path, uids_path))
    meta_path.unlink(missing_ok=True)  # the part is uncommitted from here on
    ledger = DropLedger()
    warnings_log: list[str] = []
    ctx = ExtractContext(spec.key, spec.raw_dir, ledger, on_warning=None)
    source, domain = spec.key, spec.domain
    docs = annotated = tokens = sentences = text_bytes = 0
    repairs: dict[str, int] = {}
    uids = array("Q")
    ann_writer = None
    ann_fh = None
    started = time.monotonic()
    failure_from_extractor = None  # an OSError raised by an extractor that is not about its own input
    try:
        with open(tmp_text, "wb") as text_file, open(tmp_uids, "wb") as uid_fh:
            text_fh = ChunkWriter(text_file, writeback=True)
            try:
                for file in shard.files:
                    emitted = 0
                    prefix = file.rel_stem
                    try:
                        for doc in extractor.extract(file, ctx):
                            text = doc.text
                            if text.__class__ is not str:
                                if not isinstance(text, str):
                                    ctx.drop("non_string_text", file,
                                             f"text is a {type(text).__name__}, not a string; document skipped")
                                    continue
                            if not text or text.isspace():
                                ctx.drop("empty_text", file, "blank text; document skipped")
                                continue
                            doc_id = doc.doc_id
                            if not doc_id or doc_id.isspace():
                                doc_id = f"{prefix}:{emitted:06d}"
                            rec = text_record(doc, source, domain, doc_id)
                            doc_uid = rec["uid"]
                            ann = doc.annotations
                            ann_line = None
                            try:
                                line = orjson_dumps(rec, option=NEWLINE)
                                if ann is not None and ann.forms:
                                    ann_line = orjson_dumps(annotation_record(doc_id, doc_uid, ann),
                                                            option=NEWLINE)
                            except (orjson.JSONEncodeError, TypeError):
                                issues: list = []
                                try:
                                    line = dumps(rec, issues) + b"\n"
                                    if ann is not None and ann.forms:
                                        ann_line = dumps(annotation_record(doc_id, doc_uid, ann), issues) + b"\n"
                                except UnencodableValue as exc:
                                    ctx.drop("unencodable", file, f"document {doc_id!r}: {exc}; skipped")
                                    continue
                                for issue in issues:
                                    repairs[issue] = repairs.get(issue, 0) + 1
                                if issues and len(warnings_log) < 100:
                                    warnings_log.append(f"{spec.key}/{file.rel}: document {doc_id!r}: "
                                                        f"{', '.join(sorted(set(issues)))} repaired (U+FFFD / null)")
                                doc_uid = orjson.loads(line)["uid"]
                            try:
                                if ann_line is not None and ann_writer is None:
                                    ann_fh = open(tmp_ann, "wb")
                                    ann_writer = GzipMemberWriter(ann_fh, writeback=True)
                                    if docs:
                                        text_fh.flush()
                                        for stub in _stub_lines_from_text(tmp_text, docs):
                                            ann_writer.write(stub)
                                text_fh.write(line)
                                text_bytes += len(line)
                                if ann_writer is not None:
                                    if ann_line is not None:
                                        ann_writer.write(ann_line)
                                        annotated += 1
                                        tokens += len(ann.forms)
                                        sentences += len(ann.sentences)
                                    else:
                                        ann_writer.write(dumps(stub_record(doc_id, doc_uid)) + b"\n")
                                uids.append(uid_hash(doc_uid))
                                if len(uids) >= _UID_FLUSH:
                                    uids.tofile(uid_fh)
                                    del uids[:]
                            except OSError as exc:
                                raise OutputWriteError.of(spec, store.parts, exc) from exc
                            docs += 1
                            emitted += 1
                            if progress is not None and docs % 5000 == 0:
                                progress(docs, text_bytes)
                    except OSError as exc:
                        if isinstance(exc, OutputWriteError) or not _is_input_error(exc, file):
                            failure_from_extractor = exc
                            raise
                        # D6: an input that cannot be read (permissions, I/O error) costs that file only
                        ctx.drop("unreadable_file", file, f"read failed ({exc.strerror or exc}); kept the {emitted} "
                                                          "document(s) read before it, skipped the rest of the file")
                uids.tofile(uid_fh)
                text_fh.close()
                if ann_writer is not None:
                    ann_writer.close()
                    fsync_file(ann_fh)  # durable before the meta commits the part (publish may hard-link it)
                    ann_fh.close()
                fsync_file(text_file)
                fsync_file(uid_fh)
            except BaseException:
                text_fh.abort()
                if ann_writer is not None:
                    ann_writer.abort()
                    try:
                        ann_fh.close()
                    except OSError:
                        pass
                for p in (tmp_text, tmp_ann, tmp_uids):
                    p.unlink(missing_ok=True)
                raise
        os.replace(tmp_text, text_path)
        os.replace(tmp_uids, uids_path)
        if ann_writer is not None:
            os.replace(tmp_ann, ann_path)
        else:
            ann_path.unlink(missing_ok=True)
    except OSError as exc:
        # the output side failed (disk full, quota, I/O error): nothing half-written stays behind
        for p in (tmp_text, tmp_ann, tmp_uids):
            p.unlink(missing_ok=True)
        if isinstance(exc, OutputWriteError) or exc is failure_from_extractor:
            raise
        raise OutputWriteError.of(spec, store.parts, exc) from exc
    meta = {
        "format": FORMAT_VERSION,
        "shard": shard.key,
        "files": [f.rel for f in shard.files],
        "fingerprint": shard.fingerprint,
        "recipe": spec.recipe,
        "docs": docs,
        "annotated_docs": annotated,
        "tokens": tokens,
        "sentences": sentences,
        "text_bytes": text_bytes,
        "input_bytes": shard.size,
        "has_annotations": ann_writer is not None,
        "drops": dict(ledger.counts),
        "warnings": (ledger.warnings + warnings_log)[:100],
        "repairs": repairs,
        "seconds": round(time.monotonic() - started, 3),
    }
    try:
        _write_atomic(meta_path, orjson.dumps(meta))
    except OSError as exc:
        meta_path.with_name(meta_path.name + PARTIAL).unlink(missing_ok=True)
        raise OutputWriteError.of(spec, store.parts, exc) from exc
    return meta


# ----------------------------------------------------------------------------- publishing


def _duplicate_uids(store: DatasetStore, metas: list[dict], shards: list[Shard], limit: int = 5) -> tuple[int, list[str]]:
    """Count duplicate uids from the parts' 64-bit uid hashes, in bounded memory."""
    files = [store.part_paths(s.key)[2] for s in shards]
    total = sum(m["docs"] for m in metas)
    if total < 2:
        return 0, []
    if total <= _SMALL_UID_SET:
        dup_count, dup_hashes = _duplicates_in_a_set(files, limit)
    else:
        dup_count, dup_hashes = _duplicates_sorted(files, total, limit)
    return dup_count, _uid_examples(store, shards, dup_hashes)


_SMALL_UID_SET = 250_000  # up to here a Python set (~30 MB) beats importing numpy (~0.25 s)


def _read_hashes(path: Path) -> array:
    hashes = array("Q")
    with open(path, "rb") as fh:
        hashes.frombytes(fh.read())
    return hashes


def _duplicates_in_a_set(files: list[Path], limit: int) -> tuple[int, list[int]]:
    """Same answer as `_duplicates_sorted`: the count, and the `limit` smallest repeated hashes."""
    seen: set[int] = set()
    smallest: list[int] = []  # the `limit` smallest distinct repeated hashes, sorted
    count = 0
    for f in files:
        for h in _read_hashes(f):
            if h in seen:
                count += 1
                if (len(smallest) < limit or h < smallest[-1]) and h not in smallest:
                    bisect.insort(smallest, h)
                    del smallest[limit:]
            else:
                seen.add(h)
    return count, smallest


def _duplicates_sorted(files: list[Path], total: int, limit: int) -> tuple[int, list[int]]:
    """numpy sort in passes of at most 8M hashes (64 MB), each pass one residue class."""
    import numpy as np

    passes = max(1, -(-total // (8 << 20)))
    dup_count = 0
    dup_hashes: list[int] = []
    for p in range(passes):
        chunks = []
        for f in files:
            arr = np.fromfile(f, dtype=np.uint64)
            if passes > 1:
                arr = arr[(arr % np.uint64(passes)) == np.uint64(p)]
            chunks.append(arr)
        allh = np.sort(np.concatenate(chunks))
        if allh.size < 2:
            continue
        same = allh[1:] == allh[:-1]
        dup_count += int(same.sum())
        if same.any():
            dup_hashes.extend(int(h) for h in np.unique(allh[1:][same])[:limit])
    return dup_count, sorted(dup_hashes)[:limit]


def _uid_examples(store: DatasetStore, shards: list[Shard], dup_hashes: list[int]) -> list[str]:
    """The uids behind the duplicate hashes, in document order. A part's `.uids` file holds one hash
    per line of its text, so only the lines that carry a wanted hash are decoded."""
    examples: list[str] = []
    wanted = set(dup_hashes)
    for s in shards:
        if not wanted:
            break
        text_path, _, uids_path, _ = store.part_paths(s.key)
        first_at: dict[int, int] = {}  # line index -> hash, first occurrence of each wanted hash here
        taken: set[int] = set()
        for i, h in enumerate(_read_hashes(uids_path)):
            if h in wanted and h not in taken:
                taken.add(h)
                first_at[i] = h
        if not first_at:
            continue
        last = max(first_at)
        with open(text_path, "rb") as fh:
            for i, line in enumerate(fh):
                if i in first_at:
                    u = orjson.loads(line)["uid"]
                    if uid_hash(u) in wanted and u not in examples:
                        examples.append(u)
                        wanted.discard(uid_hash(u))
                if i >= last:
                    break
    return examples


def _link(path: Path, target: str) -> None:
    """Make `path` a symlink to `target` (relative), replacing what is there atomically."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    tmp = path.with_name(path.name + ".link" + PARTIAL)
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, path)


_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EACCES}
_HAS_COPY_RANGE = hasattr(os, "copy_file_range")
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


def _copy_into(src: Path, out_fd: int) -> None:
    """Append a whole file to `out_fd`, in the kernel where it can (copy_file_range: no trip through
    user space, and a reflink on file systems that share extents)."""
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
                while chunk := fh.read(1 << 22):
                    _write_all(out_fd, chunk)
                return
            remaining -= n


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _assemble(path: Path, sources: list) -> None:
    """Write `path` as the concatenation of `sources` (part files, or callables giving the stub lines
    of a part without annotations), durable once this returns.

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
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        for src in sources:
            if isinstance(src, Path):
                _copy_into(src, fd)
                start_writeback(fd)
            else:
                with os.fdopen(os.dup(fd), "wb") as out:
                    writer = GzipMemberWriter(out, threaded=False)
                    for stub in src():
                        writer.write(stub)
                    writer.close()
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_version(spec: DatasetSpec, shards: list[Shard], store: DatasetStore, metas: list[dict],
                   version: Path, discovery: list[str]) -> dict:
    """Write a complete version folder (text, sidecar, manifest), fsynced; returns the manifest."""
    version.mkdir(parents=True)
    text_name = spec.text_path.name
    side_name = spec.sidecar_path.name
    has_sidecar = any(m["has_annotations"] for m in metas)
    _assemble(version / text_name, [store.part_paths(s.key)[0] for s in shards])
    if has_sidecar:
        sources: list[Path | Callable[[], Iterable[bytes]]] = []
        for s, m in zip(shards, metas):
            text_part, ann_part, _, _ = store.part_paths(s.key)
            if m["has_annotations"]:
                sources.append(ann_part)
            elif m["docs"]:
                sources.append(lambda text_part=text_part: _stub_lines_from_text(text_part))
        _assemble(version / side_name, sources)
    dup_count, dup_examples = _duplicate_uids(store, metas, shards)
    drops: dict[str, int] = {}
    repairs: dict[str, int] = {}
    if discovery:
        drops["unreadable_path"] = len(discovery)
    for m in metas:
        for k, v in m["drops"].items():
            drops[k] = drops.get(k, 0) + v
        for k, v in m.get("repairs", {}).items():
            repairs[k] = repairs.get(k, 0) + v
    manifest = {
        "format": FORMAT_VERSION,
        "dataset": spec.key,
        "recipe": spec.recipe,
        "shards": [[s.key, s.fingerprint] for s in shards],
        "files": sum(len(s.files) for s in shards),
        "docs": sum(m["docs"] for m in metas),
        "annotated_docs": sum(m["annotated_docs"] for m in metas),
        "tokens": sum(m["tokens"] for m in metas),
        "sentences": sum(m["sentences"] for m in metas),
        "text_bytes": (version / text_name).stat().st_size,
        "sidecar_bytes": (version / side_name).stat().st_size if has_sidecar else 0,
        "has_sidecar": has_sidecar,
        "sidecar_lines": sum(m["docs"] for m in metas) if has_sidecar else 0,
        "drops": drops,
        "discovery_warnings": discovery[:100],
        "repairs": repairs,
        "duplicate_uids": dup_count,
        "duplicate_examples": dup_examples,
        "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_atomic(version / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    _fsync_dir(version)
    return manifest


def publish(spec: DatasetSpec, shards: list[Shard], store: DatasetStore,
            discovery: list[str] | None = None) -> dict:
    """Concatenate the current parts in shard order into a new version and swap it in.
    `discovery` names raw entries that could not be listed or read (counted as `unreadable_path`).
    A failure before the swap removes the new version: the published pair stays as it was."""
    metas = []
    for s in shards:
        meta = store.read_part_meta(s.key)
        if not store.part_is_current(s, meta):
            raise RuntimeError(f"{spec.key}: part for shard {s.key!r} is missing or stale; extract it before publishing")
        metas.append(meta)
    version = store.versions / f"v{time.time_ns()}-{os.getpid()}"
    text_name = spec.text_path.name
    side_name = spec.sidecar_path.name
    try:
        manifest = _write_version(spec, shards, store, metas, version, list(discovery or ()))
        has_sidecar = manifest["has_sidecar"]
        # Top-level links point through `current`, so they change meaning only when it is swapped.
        rel_current = f"{STATE_DIR}/{spec.key}/current"
        spec.output_dir.mkdir(parents=True, exist_ok=True)
        for name, present in ((text_name, True), (side_name, has_sidecar)):
            path = spec.output_dir / name
            if present and not path.is_symlink():
                if path.exists():
                    continue  # a plain file from elsewhere: replaced right after the swap
                _link(path, f"{rel_current}/{name}")
        _link(store.current, f"versions/{version.name}")  # the commit point
    except BaseException as exc:
        shutil.rmtree(version, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError):
            raise OutputWriteError.of(spec, spec.output_dir, exc) from exc
        raise
    _fsync_dir(store.state)  # the swap survives a power cut once publish returns
    for name, present in ((text_name, True), (side_name, has_sidecar)):
        path = spec.output_dir / name
        if present:
            _link(path, f"{rel_current}/{name}")
        elif path.is_symlink() or path.exists():
            path.unlink()  # a stale sidecar never survives beside a new text file (D17)
    _fsync_dir(spec.output_dir)
    store.cleanup()
    return manifest
