"""The one-thread decoders of the compressed streams archives come in (gzip, bzip2, xz, zstd),
each read at most CHUNK bytes of output at a time, so a bomb is stopped by the byte budget before
it fills memory, and each checked for truncation: a stream that ends early is a corrupt archive
(S14), never a short file. They are also the judge of the parallel decoders (`parallel_decode`):
whatever those cannot vouch for is decoded here, so bytes and errors are these ones."""

import bz2
import lzma
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol, cast

import zstandard
from zlib_ng import zlib_ng

from .errors import SkipArchive

CHUNK = 1 << 20
_ZLIB_NG_ERROR = cast(type[Exception], zlib_ng.error)  # its stub calls it an instance


class Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


def read_chunks(stream: Readable) -> Iterator[bytes]:
    read = stream.read
    while True:
        data = read(CHUNK)
        if not data:
            return
        yield data


class ZstdFrames:
    """Follows the frame and block headers of a zstd stream (RFC 8878) as its bytes go by, so a
    stream cut off mid-frame is noticed: python-zstandard's stream_reader ends such a stream
    silently."""

    def __init__(self) -> None:
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
            self._frame_start(int.from_bytes(head, "little"))
        elif state == "skippable":
            self._skip = int.from_bytes(head, "little")
            self._state, self._need = "magic", 4
        elif state == "descriptor":
            self._descriptor(head[0])
        elif state == "header":
            self._state, self._need = "block", 3
        elif state == "block":
            self._block(int.from_bytes(head, "little"))
        else:  # checksum
            self.frames += 1
            self._state, self._need = "magic", 4

    def _frame_start(self, magic: int) -> None:
        if magic == 0xFD2FB528:
            self._state, self._need = "descriptor", 1
        elif magic & 0xFFFFFFF0 == 0x184D2A50:
            self._state, self._need = "skippable", 4
        else:
            raise SkipArchive("not zstd data (bad frame magic number)")

    def _descriptor(self, d: int) -> None:
        if d & 0x08:
            raise SkipArchive("not zstd data (reserved frame-header bit set)")
        single_segment = bool(d & 0x20)
        self._checksum = bool(d & 0x04)
        rest = (0 if single_segment else 1) + (0, 1, 2, 4)[d & 3] + ((1 if single_segment else 0), 2, 4, 8)[d >> 6]
        if rest:
            self._state, self._need = "header", rest
        else:
            self._state, self._need = "block", 3

    def _block(self, b: int) -> None:
        kind = (b >> 1) & 3
        if kind == 3:
            raise SkipArchive("not zstd data (reserved block type)")
        self._skip = 1 if kind == 1 else b >> 3
        if b & 1:
            if self._checksum:
                self._state, self._need = "checksum", 4
            else:
                self.frames += 1
                self._state, self._need = "magic", 4

    def take_skip(self) -> int:
        """Bytes that may be jumped over rather than fed (block contents, skippable frames): the
        caller seeks past them, as `pieces.zstd_pieces` does to find the frames of a file."""
        skip, self._skip = self._skip, 0
        return skip

    def needed(self) -> int:
        """Bytes the header being read still lacks."""
        return self._need - len(self._head)

    def finish(self) -> None:
        if self._state != "magic" or self._head or self._skip:
            raise SkipArchive("the zstd stream is truncated (it ends inside a frame)")
        if not self.frames:
            raise SkipArchive("the zstd stream holds no frame")


class _ZstdSource:
    """The compressed bytes on their way to the decoder, shown to the frame walker."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self.frames = ZstdFrames()

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n if n and n > 0 else CHUNK)
        if data:
            self.frames.feed(data)
        else:
            self.frames.finish()
        return data


class ZstdStream:
    """Streaming zstd decompression (all frames), bounded in memory, with truncation detected."""

    def __init__(self, raw: BinaryIO):
        self._source = _ZstdSource(raw)
        self._reader = zstandard.ZstdDecompressor().stream_reader(  # it only calls read()
            cast(BinaryIO, self._source), read_size=CHUNK, read_across_frames=True, closefd=False)
        self._ended = False

    def read(self, n: int = -1) -> bytes:
        data = self._reader.read(n if n and n > 0 else CHUNK)
        if not data and not self._ended:
            self._ended = True
            if self._source.read(CHUNK):  # normally the decoder has already asked for the end
                raise SkipArchive("zstd data continues after the decoder finished")
        return data


class GzipStream:
    """Multi-member gzip read with zlib-ng's inflate directly (about half the CPU of the standard
    library's zlib, which gzip.GzipFile adds its own work to), at most `n` bytes of output per
    read. Zero padding between and after members is allowed, as gzip does. zlib-ng's error is
    raised as zlib.error, with its text, so a bad stream is reported as before."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw
        self._d = zlib_ng.decompressobj(31)
        self._data = b""
        self._member_start = True

    def read(self, n: int = -1) -> bytes:
        try:
            return self._read(n if n and n > 0 else CHUNK)
        except _ZLIB_NG_ERROR as exc:
            raise zlib.error(*exc.args) from exc

    def _read(self, n: int) -> bytes:
        while True:
            if self._d.eof and not self._next_member():
                return b""
            if not self._data:
                self._data = self._raw.read(CHUNK)
                if not self._data:
                    tail = self._d.flush()
                    if not self._d.eof:
                        raise SkipArchive("the gzip stream is truncated (it ends inside a member)")
                    if tail:
                        return tail
                    continue
            if self._member_start:
                if self._data[:2] != b"\x1f\x8b"[:len(self._data)]:
                    raise SkipArchive("not gzip data (no gzip header where a member should start)")
                self._member_start = False
            out = self._d.decompress(self._data, n)
            self._data = self._d.unconsumed_tail
            if out:
                return out

    def _next_member(self) -> bool:
        """After a member's end: start the next one, False at the end of the data."""
        data = self._d.unused_data.lstrip(b"\x00")
        while not data:
            more = self._raw.read(CHUNK)
            if not more:
                return False
            data = more.lstrip(b"\x00")
        self._d, self._data, self._member_start = zlib_ng.decompressobj(31), data, True
        return True


def inflate_stream(d: bz2.BZ2Decompressor | lzma.LZMADecompressor, read: Callable[[], bytes],
                   first: bytes = b"", need_eof: bool = True) -> Iterator[bytes]:
    """bz2 / lzma decompressor objects, at most CHUNK bytes of output per call."""
    pending = first
    while not d.eof:
        if d.needs_input:
            data, pending = pending or read(), b""
            if not data:
                if need_eof:
                    raise SkipArchive("a compressed member ends early")
                return
        else:
            data = b""
        out = d.decompress(data, CHUNK)
        if out:
            yield out


def open_serial(codec: str, raw: BinaryIO) -> Readable:
    """The one-thread decoder of `codec` reading `raw` from where it stands."""
    if codec == "gzip":
        return GzipStream(raw)
    if codec == "xz":
        return lzma.LZMAFile(raw)
    if codec == "bz2":
        return bz2.BZ2File(raw)
    return ZstdStream(raw)
