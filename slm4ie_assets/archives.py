"""Safe, atomic, idempotent unpacking of the archives under raw/<key>/ (D16, S14).

Runs before any extractor, so extractors only ever see plain files. Every archive at any depth is
unpacked in place next to itself, and archives that come out of archives are unpacked in the same
run, until nothing new appears. One archive's outputs are written under temporary names that match
no extractor and are renamed into place together once the whole archive has been read: a failure
leaves nothing half-written, and a previous good version stays until the new one is complete. A
state file outside the raw tree remembers what each archive produced (with the size and mtime of
every output), so an unchanged archive whose outputs are intact is not unpacked again, and files a
newer version no longer holds are removed. It also remembers failures that lie in an archive's own
bytes, so an unchanged corrupt archive or bomb is reported again without being read again (the
sensor calls this every tick).

Refused with `ArchiveError` (the dataset fails): member paths that are absolute, contain `..`, or
pass through a symlink; links, devices, fifos and any other non-regular member (links are refused
even when they point inside the folder: a link target is resolved at use time, so checking it is
fragile, and corpora have no need for them); an expansion beyond `ArchiveLimits`, counted on the
bytes actually written, never on header claims. Skipped with a warning (S14): an archive that
cannot be read (corrupt, truncated, unsupported) or whose members clash with the tree.

Symlinks in the raw tree are not followed. A linked directory could loop or lead out of the raw
tree (the discovery rule of ADDENDUM 3.1). A linked archive may live outside raw/<key>/ or be a
second name for an archive unpacked elsewhere: its content is not the dataset folder's own, and its
change detection would depend on a file the dataset does not hold. Each one is named in a warning.

The caller holds the dataset lock: leftover temporary files of an interrupted run are removed at
the start of the next one.
"""

import bz2
import errno
import json
import lzma
import os
import queue
import re
import secrets
import stat
import struct
import tarfile
import threading
import time
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

import zstandard

from .catalog import ArchiveLimits
from .extractors.base import sort_key

Log = Callable[[str], None]

CHUNK = 1 << 20
STATE_FORMAT = 1
MAX_ROUNDS = 32  # nesting depth; a deeper chain is taken for archives that recreate each other
MAX_TAR_METADATA = 16 << 20  # pax / GNU long-name headers, which tarfile reads into memory whole
MAX_TAR_TRAILER = 64 << 20  # decompressed bytes tolerated after a tar's end-of-archive marker
MAX_ZIP_LZMA_DICT = 512 << 20
PROGRESS_EVERY = 10.0  # seconds between progress lines for one large archive
SAVE_EVERY = 30.0  # seconds between intermediate state-file saves

TEMP_MARK = ".slm4ie-tmp-"
_TEMP_NAME = re.compile(r"\..*\.slm4ie-tmp-[0-9a-f]{16}", re.DOTALL)

_TAR_SUFFIXES = ((".tar.gz", "gzip"), (".tgz", "gzip"), (".tar.xz", "xz"), (".tar.bz2", "bz2"),
                 (".tar.zst", "zstd"), (".tar.zstd", "zstd"), (".tar", None))
_SINGLE_SUFFIXES = ((".gz", "gzip"), (".xz", "xz"), (".bz2", "bz2"), (".zst", "zstd"))

_TAR_METADATA_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                       tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
_PLACEMENT_ERRNOS = (errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ELOOP)


class ArchiveError(ValueError):
    """An archive that must not be unpacked (unsafe member, expansion beyond the limits):
    fails the dataset, naming the archive and member. `about_archive` is False when the cause lies
    in the tree around it (a symlinked folder), so an unchanged archive is tried again."""

    def __init__(self, message: str, about_archive: bool = True):
        super().__init__(message)
        self.about_archive = about_archive


class _Skip(Exception):
    """An archive that cannot be unpacked as it is: skipped with a warning (S14). `about_archive`
    as for ArchiveError: a clash with existing files is not remembered, corrupt data is."""

    def __init__(self, reason: str, about_archive: bool = True):
        super().__init__(reason)
        self.about_archive = about_archive


class _WriteFailure(OSError):
    """The raw tree cannot be written (disk full, permissions): fails the run, unlike a bad archive."""


class _OversizedHeader(Exception):
    pass


# the reading side of an archive raises these when the archive itself is bad
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zstandard.ZstdError, tarfile.TarError,
                zipfile.BadZipFile, zipfile.LargeZipFile, struct.error, ValueError, NotImplementedError)


def archive_kind(name: str) -> tuple[str, str | None, str] | None:
    """(`tar` | `zip` | `single`, codec, suffix) for an archive file name, else None (D16)."""
    for suffix, codec in _TAR_SUFFIXES:
        if name.endswith(suffix):
            return "tar", codec, suffix
    if name.endswith(".zip"):
        return "zip", None, ".zip"
    for suffix, codec in _SINGLE_SUFFIXES:
        if name.endswith(suffix):
            return "single", codec, suffix
    return None


def temp_name(final_name: str) -> str:
    """Hidden, unique, and ending in random hex, so no extractor suffix (or archive suffix) matches."""
    head = os.fsdecode(os.fsencode(final_name)[:100])
    return f".{head}{TEMP_MARK}{secrets.token_hex(8)}"


def is_temp_name(name: str) -> bool:
    return _TEMP_NAME.fullmatch(name) is not None


def member_parts(name: str, where: str, windows_separators: bool = False) -> list[str]:
    """The path components of a member, or ArchiveError when it would leave the archive's folder."""
    path = name.replace("\\", "/") if windows_separators else name
    if "\x00" in path:
        raise ArchiveError(f"{where}: member {name!r} has a NUL byte in its name")
    if path.startswith("/") or (windows_separators and re.match(r"[A-Za-z]:", path)):
        raise ArchiveError(f"{where}: member {name!r} has an absolute path; members must stay inside "
                           f"the archive's folder")
    parts = [p for p in path.split("/") if p and p != "."]
    if ".." in parts:
        raise ArchiveError(f"{where}: member {name!r} climbs out of the archive's folder with '..'")
    return parts


# ----------------------------------------------------------------------------- staged outputs


class _Staging:
    """One archive's outputs: streamed into temporary files, renamed into place together by
    `commit`, or all removed (with the folders made for them) by `rollback`."""

    def __init__(self, archive: Path, folder_rel: str, where: str, budget: int, budget_note: str,
                 warn: Callable[[str], None], log: Log | None = None):
        self.archive = archive
        self.folder = archive.parent
        self.folder_rel = folder_rel
        self.where = where
        self.budget = budget
        self.budget_note = budget_note
        self.written = 0
        self._warn = warn
        self._log = log
        self._pending: dict[tuple[str, ...], Path] = {}
        self._created: list[Path] = []
        self._dirs: set[tuple[str, ...]] = {()}
        self._last_progress = time.monotonic()

    def rel(self, parts: Iterable[str]) -> str:
        tail = "/".join(parts)
        return f"{self.folder_rel}/{tail}" if self.folder_rel else tail

    def directory(self, parts: list[str], name: str) -> None:
        self._ensure_dir(tuple(parts), name)

    def _ensure_dir(self, parts: tuple[str, ...], name: str) -> Path:
        if parts in self._dirs:
            return self.folder.joinpath(*parts)
        path = self.folder
        for i, part in enumerate(parts, 1):
            path = path / part
            sub = parts[:i]
            if sub in self._dirs:
                continue
            if sub in self._pending:
                raise _Skip(f"member {name!r} needs {self.rel(sub)} to be a folder, but the archive "
                            f"also holds a file of that name")  # a property of the archive itself
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                try:
                    os.mkdir(path)
                except OSError as exc:
                    self._os_failure(exc, path, name)
                self._created.append(path)
            else:
                if stat.S_ISLNK(st.st_mode):
                    raise ArchiveError(f"{self.where}: member {name!r} would be written through the "
                                       f"symbolic link {self.rel(sub)}; links are not followed", False)
                if not stat.S_ISDIR(st.st_mode):
                    raise _Skip(f"member {name!r} needs {self.rel(sub)} to be a folder, but a file is there",
                                False)
            self._dirs.add(sub)
        return path

    def file(self, parts: list[str], name: str, chunks: Iterable[bytes]) -> None:
        if not parts:
            raise ArchiveError(f"{self.where}: member {name!r} has an empty path")
        key = tuple(parts)
        parent = self._ensure_dir(key[:-1], name)
        final = parent / key[-1]
        if key in self._dirs:
            raise _Skip(f"member {name!r} is a file, but the archive also uses {self.rel(key)} as a folder")
        if final == self.archive:
            raise _Skip(f"member {name!r} would overwrite the archive itself")
        try:
            st = os.lstat(final)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode):
                raise _Skip(f"member {name!r} would replace the folder {self.rel(key)}", False)
        tmp = parent / temp_name(key[-1])
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            self._os_failure(exc, tmp, name)
        writer = _ChunkWriter(fd)
        try:
            earlier = self._pending.pop(key, None)
            self._pending[key] = tmp  # registered before the first byte, so rollback always finds it
            if earlier is not None:
                earlier.unlink(missing_ok=True)
                self._warn(f"{self.where}: member {name!r} appears more than once; the last copy is kept")
            try:
                for chunk in chunks:  # errors raised here come from reading the archive
                    self.written += len(chunk)
                    if self.written > self.budget:
                        raise ArchiveError(f"{self.where}: unpacks to more than {self.budget:,} bytes "
                                           f"(limit {self.budget_note}; reached in member {name!r}); raise "
                                           f"archives.max_ratio / archives.max_bytes in the config if the "
                                           f"archive is trusted")
                    writer.write(chunk)
                    self._progress()
            except _WriterStopped:
                pass
        finally:
            failure = writer.close()
        if failure is not None:
            self._os_failure(failure, tmp, name)

    def _progress(self) -> None:
        now = time.monotonic()
        if self._log is not None and now - self._last_progress >= PROGRESS_EVERY:
            self._last_progress = now
            self._log(f"{self.where}: {self.written / 1e6:.0f} MB unpacked so far")

    def _os_failure(self, exc: OSError, path: Path, name: str):
        if exc.errno in _PLACEMENT_ERRNOS:
            raise _Skip(f"member {name!r} cannot be placed at {path}: {exc.strerror}", False) from exc
        raise _WriteFailure(exc.errno, f"{self.where}: cannot write {path}: {exc.strerror}") from exc

    def commit(self) -> dict[str, list[int]]:
        """Rename every staged file into place; {output rel: [size, mtime_ns]}."""
        outputs: dict[str, list[int]] = {}
        for key, tmp in list(self._pending.items()):
            final = tmp.parent / key[-1]
            try:
                os.replace(tmp, final)
                st = os.lstat(final)
            except OSError as exc:
                raise _WriteFailure(exc.errno, f"{self.where}: cannot move {tmp} to {final}: "
                                               f"{exc.strerror}") from exc
            del self._pending[key]
            outputs[self.rel(key)] = [st.st_size, st.st_mtime_ns]
        self._created.clear()
        return outputs

    def rollback(self) -> None:
        for tmp in self._pending.values():
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
        self._pending.clear()
        for path in reversed(self._created):
            try:
                os.rmdir(path)
            except OSError:
                pass
        self._created.clear()


class _ChunkWriter:
    """Writes a file's chunks; from the second chunk on, on a helper thread, so decompression and
    disk writes overlap (both release the GIL). A small file never starts a thread."""

    def __init__(self, fd: int):
        self._fh = open(fd, "wb", buffering=0)
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._failure: OSError | None = None
        self._chunks = 0

    def write(self, chunk: bytes) -> None:
        if self._failure is not None:
            raise _WriterStopped
        self._chunks += 1
        if self._chunks == 1:
            self._write_all(chunk)
            return
        if self._queue is None:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._drain, name="slm4ie-unpack-writer", daemon=True)
            self._thread.start()
        self._queue.put(chunk)

    def _write_all(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        try:
            while view:
                view = view[self._fh.write(view):]
        except OSError as exc:
            self._failure = exc

    def _drain(self) -> None:
        while True:
            chunk = self._queue.get()
            if chunk is None:
                return
            if self._failure is None:
                self._write_all(chunk)

    def close(self) -> OSError | None:
        """Finish writing; the write error, if any (raised by the caller, which knows the member)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        try:
            self._fh.close()
        except OSError as exc:
            self._failure = self._failure or exc
        return self._failure


class _WriterStopped(Exception):
    """A write failed on the helper thread; `close()` reports it."""


# ----------------------------------------------------------------------------- decompression


def _read_chunks(stream) -> Iterator[bytes]:
    read = stream.read
    while True:
        data = read(CHUNK)
        if not data:
            return
        yield data


class _ZstdFrames:
    """Follows the frame and block headers of a zstd stream (RFC 8878) as its bytes go by, so a
    stream cut off mid-frame is noticed: python-zstandard's stream_reader ends such a stream
    silently."""

    def __init__(self):
        self._state = "magic"
        self._need = 4
        self._head = bytearray()
        self._skip = 0
        self._checksum = False
        self.frames = 0

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n:
            if self._skip:
                step = min(self._skip, n - i)
                self._skip -= step
                i += step
                continue
            step = min(self._need - len(self._head), n - i)
            self._head += data[i:i + step]
            i += step
            if len(self._head) == self._need:
                head = bytes(self._head)
                self._head.clear()
                self._advance(head)

    def _advance(self, head: bytes) -> None:
        state = self._state
        if state == "magic":
            magic = int.from_bytes(head, "little")
            if magic == 0xFD2FB528:
                self._state, self._need = "descriptor", 1
            elif magic & 0xFFFFFFF0 == 0x184D2A50:
                self._state, self._need = "skippable", 4
            else:
                raise _Skip("not zstd data (bad frame magic number)")
        elif state == "skippable":
            self._skip = int.from_bytes(head, "little")
            self._state, self._need = "magic", 4
        elif state == "descriptor":
            d = head[0]
            if d & 0x08:
                raise _Skip("not zstd data (reserved frame-header bit set)")
            single_segment = bool(d & 0x20)
            self._checksum = bool(d & 0x04)
            rest = (0 if single_segment else 1) + (0, 1, 2, 4)[d & 3] + ((1 if single_segment else 0), 2, 4, 8)[d >> 6]
            if rest:
                self._state, self._need = "header", rest
            else:
                self._state, self._need = "block", 3
        elif state == "header":
            self._state, self._need = "block", 3
        elif state == "block":
            b = int.from_bytes(head, "little")
            kind = (b >> 1) & 3
            if kind == 3:
                raise _Skip("not zstd data (reserved block type)")
            self._skip = 1 if kind == 1 else b >> 3
            if b & 1:
                if self._checksum:
                    self._state, self._need = "checksum", 4
                else:
                    self.frames += 1
                    self._state, self._need = "magic", 4
        else:  # checksum
            self.frames += 1
            self._state, self._need = "magic", 4

    def finish(self) -> None:
        if self._state != "magic" or self._head or self._skip:
            raise _Skip("the zstd stream is truncated (it ends inside a frame)")
        if not self.frames:
            raise _Skip("the zstd stream holds no frame")


class _ZstdSource:
    def __init__(self, raw):
        self._raw = raw
        self.frames = _ZstdFrames()

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n if n and n > 0 else CHUNK)
        if data:
            self.frames.feed(data)
        else:
            self.frames.finish()
        return data


class _ZstdStream:
    """Streaming zstd decompression (all frames), bounded in memory, with truncation detected."""

    def __init__(self, raw):
        self._source = _ZstdSource(raw)
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            self._source, read_size=CHUNK, read_across_frames=True, closefd=False)
        self._ended = False

    def read(self, n: int = -1) -> bytes:
        data = self._reader.read(n if n and n > 0 else CHUNK)
        if not data and not self._ended:
            self._ended = True
            if self._source.read(CHUNK):  # normally the decoder has already asked for the end
                raise _Skip("zstd data continues after the decoder finished")
        return data


class _GzipStream:
    """Multi-member gzip read with zlib directly (about 15% less CPU than gzip.GzipFile), at most
    `n` bytes of output per read. Zero padding between and after members is allowed, as gzip does."""

    def __init__(self, raw):
        self._raw = raw
        self._d = zlib.decompressobj(31)
        self._data = b""
        self._member_start = True

    def read(self, n: int = -1) -> bytes:
        n = n if n and n > 0 else CHUNK
        while True:
            if self._d.eof:
                data = self._d.unused_data.lstrip(b"\x00")
                while not data:
                    more = self._raw.read(CHUNK)
                    if not more:
                        return b""
                    data = more.lstrip(b"\x00")
                self._d, self._data, self._member_start = zlib.decompressobj(31), data, True
            if not self._data:
                self._data = self._raw.read(CHUNK)
                if not self._data:
                    tail = self._d.flush()
                    if not self._d.eof:
                        raise _Skip("the gzip stream is truncated (it ends inside a member)")
                    if tail:
                        return tail
                    continue
            if self._member_start:
                if self._data[:2] != b"\x1f\x8b"[:len(self._data)]:
                    raise _Skip("not gzip data (no gzip header where a member should start)")
                self._member_start = False
            out = self._d.decompress(self._data, n)
            self._data = self._d.unconsumed_tail
            if out:
                return out


def _open_codec(codec: str | None, raw):
    if codec is None:
        return raw
    if codec == "gzip":
        return _GzipStream(raw)
    if codec == "xz":
        return lzma.LZMAFile(raw)
    if codec == "bz2":
        return bz2.BZ2File(raw)
    return _ZstdStream(raw)


def _inflate_deflate(read: Callable[[], bytes]) -> Iterator[bytes]:
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    data = b""
    while not d.eof:
        if not data:
            data = read()
            if not data:
                tail = d.flush()  # at most one pending match once the input is used up
                if tail:
                    yield tail
                if not d.eof:
                    raise _Skip("a deflate stream ends early")
                return
        out = d.decompress(data, CHUNK)
        data = d.unconsumed_tail
        if out:
            yield out


def _inflate_stream(d, read: Callable[[], bytes], first: bytes = b"", need_eof: bool = True) -> Iterator[bytes]:
    """bz2 / lzma decompressor objects, at most CHUNK bytes of output per call."""
    pending = first
    while not d.eof:
        if d.needs_input:
            data, pending = pending or read(), b""
            if not data:
                if need_eof:
                    raise _Skip("a compressed member ends early")
                return
        else:
            data = b""
        out = d.decompress(data, CHUNK)
        if out:
            yield out


def _inflate_zip_lzma(read: Callable[[], bytes]) -> Iterator[bytes]:
    head = b""
    while len(head) < 4 or len(head) < 4 + struct.unpack("<H", head[2:4])[0]:
        more = read()
        if not more:
            raise _Skip("an LZMA member header is cut off")
        head += more
    size = struct.unpack("<H", head[2:4])[0]
    props = head[4:4 + size]
    if size != 5 or props[0] >= 9 * 5 * 5:
        raise _Skip("an LZMA member has invalid properties")
    dict_size = int.from_bytes(props[1:5], "little")
    if dict_size > MAX_ZIP_LZMA_DICT:
        raise _Skip(f"an LZMA member asks for a {dict_size:,}-byte dictionary")
    lc, lp, pb = props[0] % 9, (props[0] // 9) % 5, props[0] // 45
    d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[
        {"id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": lc, "lp": lp, "pb": pb}])
    # the end-of-stream marker is optional in zip; size and CRC are checked by the caller
    yield from _inflate_stream(d, read, head[4 + size:], need_eof=False)


# ----------------------------------------------------------------------------- the three shapes


def _unpack_single(path: Path, codec: str, out_name: str, staging: _Staging) -> None:
    if out_name in ("", ".", ".."):
        raise _Skip(f"the name without its suffix is {out_name!r}, which cannot be a file name")
    with open(path, "rb") as raw:
        staging.file([out_name], out_name, _read_chunks(_open_codec(codec, raw)))


class _TarInfo(tarfile.TarInfo):
    """Refuses oversized metadata headers, which tarfile would read into memory whole, and notes
    on the TarFile why the member list ended."""

    @classmethod
    def fromtarfile(cls, tf):
        try:
            return super().fromtarfile(tf)
        except tarfile.HeaderError as exc:
            tf.slm4ie_end = exc
            raise

    def _proc_member(self, tf):
        if self.type in _TAR_METADATA_TYPES and self.size > MAX_TAR_METADATA:
            raise _OversizedHeader(self.size)
        return super()._proc_member(tf)


def _unpack_tar(path: Path, codec: str | None, staging: _Staging, where: str) -> None:
    with open(path, "rb") as raw:
        stream = _open_codec(codec, raw)
        tf = tarfile.open(fileobj=stream, mode="r|", tarinfo=_TarInfo, bufsize=256 * 1024)
        while True:
            member = tf.next()
            if member is None:
                break
            tf.members.clear()  # stream mode keeps every header otherwise
            _unpack_tar_member(tf, member, staging, where)
        end = getattr(tf, "slm4ie_end", None)
        if isinstance(end, (tarfile.TruncatedHeaderError, tarfile.InvalidHeaderError)):
            raise _Skip(f"the tar data is damaged at byte {tf.offset} ({end})")
        # An end of data right after a member (no end-of-archive blocks) is accepted, as tar does.
        if codec is not None:  # read to the end, so a truncated or damaged compressed stream shows
            extra = 0
            while True:
                data = stream.read(CHUNK)
                if not data:
                    break
                extra += len(data)
                if extra > MAX_TAR_TRAILER:
                    raise _Skip(f"more than {MAX_TAR_TRAILER >> 20} MiB of data follow the tar's end")


def _unpack_tar_member(tf: tarfile.TarFile, m: tarfile.TarInfo, staging: _Staging, where: str) -> None:
    parts = member_parts(m.name, where)
    if m.isreg():
        staging.file(parts, m.name, _read_chunks(tf.extractfile(m)))
    elif m.isdir():
        staging.directory(parts, m.name)
    elif m.issym() or m.islnk():
        kind = "symbolic" if m.issym() else "hard"
        raise ArchiveError(f"{where}: member {m.name!r} is a {kind} link to {m.linkname!r}; links are "
                           f"refused, even ones that stay inside the folder")
    elif m.ischr() or m.isblk():
        raise ArchiveError(f"{where}: member {m.name!r} is a device file; only files and folders are unpacked")
    elif m.isfifo():
        raise ArchiveError(f"{where}: member {m.name!r} is a fifo; only files and folders are unpacked")
    else:
        raise ArchiveError(f"{where}: member {m.name!r} has the unsupported tar type {m.type!r}; only "
                           f"files and folders are unpacked")


def _unpack_zip(path: Path, staging: _Staging, where: str) -> None:
    with open(path, "rb") as raw:
        with zipfile.ZipFile(raw) as zf:
            infos = zf.infolist()
        for info in infos:
            name = info.filename
            unix = info.create_system == 3  # elsewhere (MS-DOS, NTFS, ...) a backslash separates folders
            parts = member_parts(name, where, windows_separators=not unix)
            mode = info.external_attr >> 16
            fmt = stat.S_IFMT(mode) if unix else 0
            if fmt == stat.S_IFLNK:
                raise ArchiveError(f"{where}: member {name!r} is a symbolic link; links are refused, even "
                                   f"ones that stay inside the folder")
            if fmt not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise ArchiveError(f"{where}: member {name!r} is a special file (mode {mode:o}); only files "
                                   f"and folders are unpacked")
            if name.endswith("/") or (not unix and name.endswith("\\")) or fmt == stat.S_IFDIR:
                staging.directory(parts, name)
                continue
            if info.flag_bits & 0x1:
                raise _Skip(f"member {name!r} is encrypted")
            staging.file(parts, name, _zip_member_chunks(raw, info))


def _zip_member_chunks(raw, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """A member's bytes from its local entry, decompressed at most CHUNK at a time (zipfile's own
    reader inflates a bzip2/lzma read whole, which a bomb turns into gigabytes), size and CRC checked."""
    name = info.filename
    raw.seek(info.header_offset)
    head = raw.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise _Skip(f"member {name!r} has no valid local header")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    raw.seek(info.header_offset + 30 + name_len + extra_len)
    left = info.compress_size

    def read() -> bytes:
        nonlocal left
        if left <= 0:
            return b""
        data = raw.read(min(CHUNK, left))
        if not data:
            raise _Skip(f"member {name!r} is cut off")
        left -= len(data)
        return data

    method = info.compress_type
    if method == zipfile.ZIP_STORED:
        chunks = iter(read, b"")
    elif method == zipfile.ZIP_DEFLATED:
        chunks = _inflate_deflate(read)
    elif method == zipfile.ZIP_BZIP2:
        chunks = _inflate_stream(bz2.BZ2Decompressor(), read)
    elif method == zipfile.ZIP_LZMA:
        chunks = _inflate_zip_lzma(read)
    else:
        raise _Skip(f"member {name!r} uses compression method {method}, which is not supported")
    crc = size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > info.file_size:
            raise _Skip(f"member {name!r} is longer than its header says ({info.file_size} bytes)")
        crc = zlib.crc32(chunk, crc)
        yield chunk
    if size != info.file_size:
        raise _Skip(f"member {name!r} holds {size} bytes where its header says {info.file_size}")
    if crc != info.CRC:
        raise _Skip(f"member {name!r} fails its CRC check")


def _describe(exc: BaseException) -> str:
    text = str(exc) or "no details"
    kind = type(exc)
    package = kind.__module__.split(".")[0].lstrip("_")
    name = kind.__name__ if package == "builtins" else f"{package}.{kind.__name__}"
    return f"cannot be read: {name}: {text}"


# ----------------------------------------------------------------------------- the run


def unpack_archives(raw_dir: Path, state_file: Path, limits: ArchiveLimits = ArchiveLimits(),
                    log: Log | None = None) -> dict:
    """Unpack every archive under `raw_dir` that is new or changed, nested ones included (D16, S14).

    Returns {"unpacked": [rel], "up_to_date": [rel], "skipped": [{"path": rel, "reason": str}],
    "outputs": {rel archive: [rel output]}, "warnings": [str]}; paths are posix, relative to raw_dir.
    Raises ArchiveError for an unsafe archive; what was unpacked before it stays (and is recorded).
    """
    return _Run(Path(raw_dir), Path(state_file), limits, log).run()


class _Run:
    def __init__(self, raw_dir: Path, state_file: Path, limits: ArchiveLimits, log: Log | None):
        self.raw_dir = raw_dir
        self.state_file = state_file
        self.limits = limits
        self._log = log
        self.report: dict = {"unpacked": [], "up_to_date": [], "skipped": [], "outputs": {}, "warnings": []}
        self.state: dict[str, dict] = {}  # archive -> its fingerprint and outputs
        self.failed: dict[str, dict] = {}  # archive -> fingerprint, limits and reason of its last failure
        self._dirty = False
        self._seen: set[tuple[str, int, int]] = set()
        self._written_by: dict[str, str] = {}  # output -> archive that wrote it in this run
        self._claims: dict[str, str] = {}  # output -> an archive whose recorded outputs hold it
        self._last_save = time.monotonic()

    # -- reporting

    def where(self, rel: str) -> str:
        return f"{self.raw_dir.name}/{rel}"

    def warn(self, message: str) -> None:
        self.report["warnings"].append(message)
        if self._log is not None:
            self._log(f"WARNING {message}")

    def info(self, message: str) -> None:
        if self._log is not None:
            self._log(message)

    # -- the loop

    def run(self) -> dict:
        self.state, self.failed = self._load_state()
        self._claims = {out: rel for rel, entry in self.state.items() for out in entry["outputs"]}
        todo = self._scan()  # a raw folder that cannot be listed fails here, before the state is touched
        try:
            rounds = 0
            while todo:
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise ArchiveError(f"{self.raw_dir.name}: archives still produce new archives after "
                                       f"{MAX_ROUNDS} rounds (archives that recreate each other?): "
                                       f"{', '.join(todo[:5])}")
                produced: list[str] = []
                for rel in todo:
                    produced.extend(self._handle(rel))
                    if self._dirty and time.monotonic() - self._last_save >= SAVE_EVERY:
                        self._save_state()
                todo = sorted(set(produced), key=sort_key)
        finally:
            self._forget_vanished()
            if self._dirty or not self.state_file.exists():
                self._save_state()
        r = self.report
        if r["unpacked"] or r["skipped"]:
            self.info(f"{self.raw_dir.name}: archives: {len(r['unpacked'])} unpacked, "
                      f"{len(r['up_to_date'])} up to date, {len(r['skipped'])} skipped")
        return r

    def _scan(self) -> list[str]:
        """Every archive in the tree (hidden folders included, linked ones not entered); leftover
        temporary files of an interrupted run are removed on the way."""
        found: list[str] = []
        stack = [("", str(self.raw_dir))]
        while stack:
            prefix, dirpath = stack.pop()
            try:
                entries = list(os.scandir(dirpath))
            except OSError as exc:
                if not prefix:
                    raise
                self.warn(f"{self.where(prefix.rstrip('/'))}: folder cannot be listed, archives in it are "
                          f"not unpacked: {exc.strerror or exc}")
                continue
            for entry in entries:
                rel = prefix + entry.name
                try:
                    if entry.is_symlink():
                        if archive_kind(entry.name):
                            self.warn(f"{self.where(rel)}: a symbolic link to an archive is not followed, "
                                      f"so it is not unpacked (put the archive itself in the folder)")
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((rel + "/", entry.path))
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                if is_temp_name(entry.name):
                    try:
                        os.unlink(entry.path)
                        self.warn(f"{self.where(rel)}: removed a temporary file left by an interrupted run")
                    except OSError as exc:
                        self.warn(f"{self.where(rel)}: cannot remove a leftover temporary file: {exc.strerror}")
                    continue
                if archive_kind(entry.name):
                    found.append(rel)
        return sorted(found, key=sort_key)

    def _handle(self, rel: str) -> list[str]:
        """Unpack one archive unless it is current; returns the archives among its new outputs."""
        path = self.raw_dir / rel
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return []
        if not stat.S_ISREG(st.st_mode):
            return []
        fingerprint = (rel, st.st_size, st.st_mtime_ns)
        if fingerprint in self._seen:
            return []
        self._seen.add(fingerprint)
        previous = self.state.get(rel)
        if previous is not None and self._is_current(previous, st):
            self.report["up_to_date"].append(rel)
            self.report["outputs"][rel] = list(previous["outputs"])
            return []
        where = self.where(rel)
        failure = self.failed.get(rel)
        if failure is not None and failure["key"] == self._failure_key(st):
            # the same bytes failed before: say so again without reading (and, for a bomb, writing) them
            if failure["refused"]:
                raise ArchiveError(f"{failure['reason']} (unchanged since it was refused)")
            self._skipped(rel, failure["reason"], " (unchanged since the last try)")
            return []
        kind = archive_kind(path.name)
        started = time.monotonic()
        try:
            outputs = self._unpack(path, rel, kind, st.st_size, where)
        except _Skip as exc:
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=False)
            self._skipped(rel, str(exc))
            return []
        except ArchiveError as exc:
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=True)
            raise
        if self.failed.pop(rel, None) is not None:
            self._dirty = True
        seconds = time.monotonic() - started
        total = sum(size for size, _ in outputs.values())
        self.info(f"{where}: unpacked {len(outputs)} file(s), {total / 1e6:.1f} MB in {seconds:.1f}s "
                  f"({total / 1e6 / max(seconds, 1e-6):.0f} MB/s)")
        self.state[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "outputs": outputs}
        self._dirty = True
        if rel in self.report["up_to_date"]:  # rewritten by another archive after it was checked
            self.report["up_to_date"].remove(rel)
        if rel not in self.report["unpacked"]:
            self.report["unpacked"].append(rel)
        self.report["outputs"][rel] = list(outputs)
        self._note_overlaps(rel, outputs)
        if previous is not None:
            self._remove_stale(rel, previous["outputs"], outputs)
        return [out for out in outputs if archive_kind(out.rpartition("/")[2])]

    def _skipped(self, rel: str, reason: str, note: str = "") -> None:
        self.report["skipped"].append({"path": rel, "reason": reason})
        self.warn(f"{self.where(rel)}: skipped, {reason}{note}")

    def _failure_key(self, st: os.stat_result) -> list:
        """What must stay the same for a failure to hold: the archive (its ctime too, so a chmod
        retries an unreadable one) and the limits."""
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, self.limits.max_ratio, self.limits.max_bytes]

    def _remember_failure(self, rel: str, st: os.stat_result, reason: str, refused: bool) -> None:
        self.failed[rel] = {"key": self._failure_key(st), "refused": refused, "reason": reason}
        self._dirty = True

    def _unpack(self, path: Path, rel: str, kind: tuple, size: int, where: str) -> dict[str, list[int]]:
        shape, codec, suffix = kind
        if size == 0:
            raise _Skip("the file is empty (0 bytes)")
        budget, note = self._budget(size)
        staging = _Staging(path, rel.rpartition("/")[0], where, budget, note, self.warn, self._log)
        self.info(f"{where}: unpacking ({size / 1e6:.1f} MB)")
        try:
            try:
                if shape == "single":
                    _unpack_single(path, codec, path.name[:-len(suffix)], staging)
                elif shape == "tar":
                    _unpack_tar(path, codec, staging, where)
                else:
                    _unpack_zip(path, staging, where)
            except (ArchiveError, _Skip, _WriteFailure):
                raise
            except _OversizedHeader as exc:
                raise ArchiveError(f"{where}: a tar metadata header of {exc.args[0]:,} bytes exceeds "
                                   f"{MAX_TAR_METADATA:,} bytes") from None
            except _READ_ERRORS as exc:
                # an I/O error (it has an errno) may pass; bad data (bz2 raises OSError without one) stays bad
                transient = isinstance(exc, OSError) and exc.errno is not None
                raise _Skip(_describe(exc), not transient) from exc
            return staging.commit()
        except BaseException:
            staging.rollback()
            raise

    def _budget(self, size: int) -> tuple[int, str]:
        by_ratio = int(self.limits.max_ratio * size)
        if by_ratio < self.limits.max_bytes:
            return by_ratio, f"max_ratio {self.limits.max_ratio:g} x {size:,} archive bytes"
        return self.limits.max_bytes, f"max_bytes {self.limits.max_bytes:,}"

    # -- state

    def _is_current(self, entry: dict, st: os.stat_result) -> bool:
        if entry["size"] != st.st_size or entry["mtime_ns"] != st.st_mtime_ns:
            return False
        for out, (size, mtime_ns) in entry["outputs"].items():
            try:
                ost = os.lstat(self.raw_dir / out)
            except OSError:
                return False
            if not stat.S_ISREG(ost.st_mode) or ost.st_size != size or ost.st_mtime_ns != mtime_ns:
                return False
        return True

    def _note_overlaps(self, rel: str, outputs: dict) -> None:
        clashes = []
        for out in outputs:
            other = self._written_by.get(out) or self._claims.get(out)
            if other is not None and other != rel and out in self.state.get(other, {}).get("outputs", {}):
                clashes.append((out, other))
            self._written_by[out] = rel
            self._claims[out] = rel
        if clashes:
            shown = ", ".join(f"{out} (also from {other})" for out, other in clashes[:3])
            more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
            self.warn(f"{self.where(rel)}: overwrote files another archive also produces: {shown}{more}; "
                      f"the archives will keep replacing each other's copy")

    def _remove_stale(self, rel: str, old: dict, new: dict) -> None:
        """Files an earlier version of the archive produced and this one does not: removed when
        nothing else claims them and they are exactly as unpacked (cascading into archives among them)."""
        work = [(rel, out, rec) for out, rec in old.items() if out not in new]
        removed, kept = [], []
        while work:
            owner, out, (size, mtime_ns) = work.pop()
            if any(out in e["outputs"] for a, e in self.state.items() if a not in (owner, out)):
                continue
            path = self.raw_dir / out
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size != size or st.st_mtime_ns != mtime_ns:
                kept.append(out)
                continue
            path.unlink()
            removed.append(out)
            inner = self.state.pop(out, None)
            if inner is not None:
                self._dirty = True
                work.extend((out, o, r) for o, r in inner["outputs"].items())
        if removed:
            self.warn(f"{self.where(rel)}: removed {len(removed)} file(s) that an earlier version of the "
                      f"archive produced and this one does not: {', '.join(sorted(removed)[:5])}"
                      f"{' ...' if len(removed) > 5 else ''}")
        if kept:
            self.warn(f"{self.where(rel)}: {len(kept)} file(s) from an earlier version of the archive were "
                      f"changed since and are left in place: {', '.join(sorted(kept)[:5])}")

    def _forget_vanished(self) -> None:
        seen = {rel for rel, _, _ in self._seen}
        for table in (self.state, self.failed):
            for rel in list(table):
                if rel in seen:
                    continue
                try:
                    gone = not stat.S_ISREG(os.lstat(self.raw_dir / rel).st_mode)
                except FileNotFoundError:
                    gone = True
                except OSError:
                    gone = False
                if gone:
                    del table[rel]
                    self._dirty = True

    def _load_state(self) -> tuple[dict[str, dict], dict[str, dict]]:
        try:
            text = self.state_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}, {}
        except (OSError, UnicodeDecodeError) as exc:
            self.warn(f"{self.state_file}: archive state cannot be read ({exc}); every archive is unpacked again")
            return {}, {}
        try:
            doc = json.loads(text)
            if doc.get("format") != STATE_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {STATE_FORMAT}")
            entries = {rel: _checked_entry(e) for rel, e in doc["archives"].items()}
            failed = {rel: _checked_failure(f) for rel, f in doc["failed"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.warn(f"{self.state_file}: archive state is not valid ({exc}); every archive is unpacked again")
            return {}, {}
        return entries, failed

    def _save_state(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        doc = {"format": STATE_FORMAT,
               "archives": {rel: self.state[rel] for rel in sorted(self.state, key=sort_key)},
               "failed": {rel: self.failed[rel] for rel in sorted(self.failed, key=sort_key)}}
        tmp = self.state_file.with_name(f".{self.state_file.name}.{secrets.token_hex(8)}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, separators=(",", ":"))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_file)
        finally:
            tmp.unlink(missing_ok=True)
        self._dirty = False
        self._last_save = time.monotonic()


def _checked_entry(entry: dict) -> dict:
    size, mtime_ns, outputs = entry["size"], entry["mtime_ns"], entry["outputs"]
    if not (isinstance(size, int) and isinstance(mtime_ns, int) and isinstance(outputs, dict)):
        raise ValueError("an entry lacks size, mtime_ns or outputs")
    for out, rec in outputs.items():
        if not (isinstance(rec, list) and len(rec) == 2 and all(isinstance(v, int) for v in rec)):
            raise ValueError(f"output {out!r} has no [size, mtime_ns]")
    return {"size": size, "mtime_ns": mtime_ns, "outputs": outputs}


def _checked_failure(failure: dict) -> dict:
    key, refused, reason = failure["key"], failure["refused"], failure["reason"]
    if not (isinstance(key, list) and len(key) == 5 and isinstance(refused, bool) and isinstance(reason, str)):
        raise ValueError("a failure entry lacks key, refused or reason")
    return {"key": key, "refused": refused, "reason": reason}
