"""The three shapes of archive (a tar, a zip, a single compressed file), read member by member
into a Staging. Only files and folders are unpacked: links (even ones that stay inside the
folder: a link target is resolved at use time, so checking it is fragile), devices, fifos and any
other member type are refused (D16)."""

import bz2
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO, cast

from .decoders import CHUNK, inflate_deflate, inflate_stream, inflate_zip_lzma, open_codec, read_chunks
from .errors import READ_ERRORS, ArchiveError, OversizedHeader, SkipArchive, WriteFailure, describe
from .names import ArchiveKind, member_parts
from .staging import Staging

MAX_TAR_METADATA = 16 << 20  # pax / GNU long-name headers, which tarfile reads into memory whole
MAX_TAR_TRAILER = 64 << 20  # decompressed bytes tolerated after a tar's end-of-archive marker

_TAR_METADATA_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                       tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


def unpack_into(path: Path, kind: ArchiveKind, staging: Staging, where: str) -> None:
    """Stage every member of the archive at `path`. What the reading libraries raise about bad
    data becomes SkipArchive (S14); refusals and write failures pass unchanged."""
    try:
        if kind.shape == "single":
            _unpack_single(path, kind.codec, path.name[:-len(kind.suffix)], staging)
        elif kind.shape == "tar":
            _unpack_tar(path, kind.codec, staging, where)
        else:
            _unpack_zip(path, staging, where)
    except (ArchiveError, SkipArchive, WriteFailure):
        raise
    except OversizedHeader as exc:
        raise ArchiveError(f"{where}: a tar metadata header of {exc.args[0]:,} bytes exceeds "
                           f"{MAX_TAR_METADATA:,} bytes") from None
    except READ_ERRORS as exc:
        # an I/O error (it has an errno) may pass; bad data (bz2 raises OSError without one) stays bad
        transient = isinstance(exc, OSError) and exc.errno is not None
        raise SkipArchive(describe(exc), not transient) from exc


def _unpack_single(path: Path, codec: str | None, out_name: str, staging: Staging) -> None:
    if out_name in ("", ".", ".."):
        raise SkipArchive(f"the name without its suffix is {out_name!r}, which cannot be a file name")
    with open(path, "rb") as raw:
        staging.file([out_name], out_name, read_chunks(open_codec(codec, raw)))


# ----------------------------------------------------------------------------- tar


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
            raise OversizedHeader(self.size)
        return super()._proc_member(tf)  # type: ignore[misc]  # tarfile's private per-member hook


def _unpack_tar(path: Path, codec: str | None, staging: Staging, where: str) -> None:
    with open(path, "rb") as raw:
        stream = open_codec(codec, raw)
        tf = tarfile.open(fileobj=cast(IO[bytes], stream), mode="r|", tarinfo=_TarInfo, bufsize=256 * 1024)
        while True:
            member = tf.next()
            if member is None:
                break
            tf.members.clear()  # type: ignore[attr-defined]  # stream mode keeps every header otherwise
            _unpack_tar_member(tf, member, staging, where)
        end = getattr(tf, "slm4ie_end", None)
        damaged = (tarfile.TruncatedHeaderError, tarfile.InvalidHeaderError)  # type: ignore[attr-defined]
        if isinstance(end, damaged):
            raise SkipArchive(f"the tar data is damaged at byte {tf.offset} ({end})")
        # An end of data right after a member (no end-of-archive blocks) is accepted, as tar does.
        if codec is not None:  # read to the end, so a truncated or damaged compressed stream shows
            extra = 0
            while True:
                data = stream.read(CHUNK)
                if not data:
                    break
                extra += len(data)
                if extra > MAX_TAR_TRAILER:
                    raise SkipArchive(f"more than {MAX_TAR_TRAILER >> 20} MiB of data follow the tar's end")


def _unpack_tar_member(tf: tarfile.TarFile, m: tarfile.TarInfo, staging: Staging, where: str) -> None:
    parts = member_parts(m.name, where)
    if m.isreg():
        data = tf.extractfile(m)
        assert data is not None  # None only for members that are not regular files
        staging.file(parts, m.name, read_chunks(data))
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


# ----------------------------------------------------------------------------- zip


def _unpack_zip(path: Path, staging: Staging, where: str) -> None:
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
                raise SkipArchive(f"member {name!r} is encrypted")
            staging.file(parts, name, zip_member_chunks(raw, info))


def zip_member_chunks(raw: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """A member's bytes from its local entry, decompressed at most CHUNK at a time (zipfile's own
    reader inflates a bzip2/lzma read whole, which a bomb turns into gigabytes), size and CRC checked."""
    name = info.filename
    raw.seek(info.header_offset)
    head = raw.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise SkipArchive(f"member {name!r} has no valid local header")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    raw.seek(info.header_offset + 30 + name_len + extra_len)
    left = info.compress_size

    def read() -> bytes:
        nonlocal left
        if left <= 0:
            return b""
        data = raw.read(min(CHUNK, left))
        if not data:
            raise SkipArchive(f"member {name!r} is cut off")
        left -= len(data)
        return data

    method = info.compress_type
    if method == zipfile.ZIP_STORED:
        chunks = iter(read, b"")
    elif method == zipfile.ZIP_DEFLATED:
        chunks = inflate_deflate(read)
    elif method == zipfile.ZIP_BZIP2:
        chunks = inflate_stream(bz2.BZ2Decompressor(), read)
    elif method == zipfile.ZIP_LZMA:
        chunks = inflate_zip_lzma(read)
    else:
        raise SkipArchive(f"member {name!r} uses compression method {method}, which is not supported")
    yield from _checked(chunks, info)


def _checked(chunks: Iterator[bytes], info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's bytes, held to the size and CRC its central directory entry gives."""
    name = info.filename
    crc = size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > info.file_size:
            raise SkipArchive(f"member {name!r} is longer than its header says ({info.file_size} bytes)")
        crc = zlib.crc32(chunk, crc)
        yield chunk
    if size != info.file_size:
        raise SkipArchive(f"member {name!r} holds {size} bytes where its header says {info.file_size}")
    if crc != info.CRC:
        raise SkipArchive(f"member {name!r} fails its CRC check")
