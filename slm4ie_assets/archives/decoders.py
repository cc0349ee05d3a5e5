"""Opening the compressed stream of an archive (gzip, bzip2, xz, zstd) on as many threads as
pay, and zip's raw deflate, bzip2 and LZMA members; every decoder hands out at most CHUNK bytes
of output per read, so a bomb is stopped by the byte budget (D16) before it fills memory, and
checks for truncation: a stream that ends early is a corrupt archive (S14), never a short file.

One thread (`streams`): bzip2 always; xz and zstd files that are one block or one frame; any
codec below its PARALLEL_FROM threads. Several (issue 41): gzip through rapidgzip
(`gzip_parallel`), xz blocks and zstd frames piece by piece (`pieces`, `parallel_decode`), each
with the one-thread decoder as the judge of anything unusual, so the bytes and the errors are the
same either way. The thread count is `parallel_decode.decode_threads()`: the CPUs this process
may use, bounded by the run's max_workers (`decoding_threads`)."""

import lzma
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

from .errors import SkipArchive
from .gzip_parallel import ParallelGzip
from .parallel_decode import FastSource, OrderedPieces, SerialBackstop, decode_threads
from .pieces import decode_xz_piece, decode_zstd_piece, piece_target, xz_pieces, zstd_pieces
from .streams import CHUNK, GzipStream, Readable, ZstdFrames, ZstdStream, inflate_stream, open_serial, read_chunks

MAX_ZIP_LZMA_DICT = 512 << 20

# Threads from which a codec is decoded in parallel, by measurement on 2 cores (bench/unpack.py,
# docs/performance.md): xz blocks cost no more CPU split than whole, so 2 threads pay; two zstd
# threads spent 1.4x the CPU of one, and rapidgzip 2.5x that of one zlib-ng inflater, so they
# pay only with cores to spare.
PARALLEL_FROM = {"gzip": 4, "xz": 2, "zstd": 4}

# what this module offered before the one-thread decoders moved to `streams`, and offers still
__all__ = ["CHUNK", "MAX_ZIP_LZMA_DICT", "PARALLEL_FROM", "GzipStream", "Readable", "ZstdFrames", "ZstdStream",
           "inflate_deflate", "inflate_stream", "inflate_zip_lzma", "open_codec", "read_chunks"]


def open_codec(codec: str | None, raw: BinaryIO, threads: int | None = None) -> Readable:
    """The decoded stream of `raw` (a regular file, read from its start), on `threads` threads
    at most (default: `decode_threads()`)."""
    if codec is None:
        return raw
    fast = _parallel(codec, raw, decode_threads() if threads is None else threads)
    if fast is None:
        return open_serial(codec, raw)
    return SerialBackstop(fast, raw, lambda again: open_serial(codec, again))


def _parallel(codec: str, raw: BinaryIO, threads: int) -> FastSource | None:
    """A parallel decoder where the file and the thread count allow one, else None."""
    if threads < PARALLEL_FROM.get(codec, threads + 1):
        return None
    try:
        fd = raw.fileno()
        size = os.fstat(fd).st_size
        if raw.tell() != 0:
            return None
        if codec == "gzip":
            return ParallelGzip(raw, threads) if ParallelGzip.suits(raw) else None
        target = piece_target(size, threads)
        if codec == "xz":
            pieces = xz_pieces(fd, size, target)
            return None if pieces is None else OrderedPieces(raw, pieces, decode_xz_piece, threads)
        found = zstd_pieces(fd, size, target)
        return None if found is None else OrderedPieces(raw, found, decode_zstd_piece, threads)
    except Exception:  # noqa: BLE001  not a plain file, or rapidgzip refused it: one thread reads it
        return None


# ----------------------------------------------------------------------------- zip members


def inflate_deflate(read: Callable[[], bytes]) -> Iterator[bytes]:
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
                    raise SkipArchive("a deflate stream ends early")
                return
        out = d.decompress(data, CHUNK)
        data = d.unconsumed_tail
        if out:
            yield out


def inflate_zip_lzma(read: Callable[[], bytes]) -> Iterator[bytes]:
    head = b""
    while len(head) < 4 or len(head) < 4 + struct.unpack("<H", head[2:4])[0]:
        more = read()
        if not more:
            raise SkipArchive("an LZMA member header is cut off")
        head += more
    size = struct.unpack("<H", head[2:4])[0]
    props = head[4:4 + size]
    if size != 5 or props[0] >= 9 * 5 * 5:
        raise SkipArchive("an LZMA member has invalid properties")
    dict_size = int.from_bytes(props[1:5], "little")
    if dict_size > MAX_ZIP_LZMA_DICT:
        raise SkipArchive(f"an LZMA member asks for a {dict_size:,}-byte dictionary")
    lc, lp, pb = props[0] % 9, (props[0] // 9) % 5, props[0] // 45
    d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[
        {"id": lzma.FILTER_LZMA1, "dict_size": dict_size, "lc": lc, "lp": lp, "pb": pb}])
    # the end-of-stream marker is optional in zip; size and CRC are checked by the caller
    yield from inflate_stream(d, read, head[4 + size:], need_eof=False)
