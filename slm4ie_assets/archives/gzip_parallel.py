"""A gzip file decoded on several threads by rapidgzip (issue 41), for nodes with cores to spare.

rapidgzip finds deflate blocks from any offset and decodes chunks of the file in parallel, at
about 2.5x the CPU per byte of one zlib-ng inflater (measured: bench/unpack.py), so it is used
only from `decoders.PARALLEL_FROM["gzip"]` threads; below that `streams.GzipStream` is faster.

What it does not check is checked here, and what this cannot vouch for goes to the one-thread
decoder (`parallel_decode.SerialBackstop`): rapidgzip also decodes zlib and raw deflate data (so
the file must start with a gzip header), and it ends a file cut inside a member quietly, after
the last whole deflate block. So at its end it must have read every bit of the file, and the
gzip trailer that ends the file must hold: the CRC32 and length (mod 2**32) of the last member,
taken from the output (its last ISIZE bytes, read again through rapidgzip's index where the file
has several members), which a cut file passes with a chance of 2**-64.
"""

import os
import struct
import weakref
from typing import BinaryIO

import rapidgzip
from zlib_ng import zlib_ng

from .streams import CHUNK

RAPIDGZIP_CHUNK = 1 << 20  # compressed bytes per chunk: its cache holds dozens (225 MB at 4 threads, not 350)


def _close(rg: rapidgzip.RapidgzipFile, file: BinaryIO) -> None:
    """rapidgzip's threads must be stopped before the interpreter ends (it aborts otherwise)."""
    try:
        rg.close()
    finally:
        file.close()


class ParallelGzip:
    """`read` as a file; `end_is_sure` after the end (see the module's docstring)."""

    def __init__(self, raw: BinaryIO, threads: int):
        file = open(os.dup(raw.fileno()), "rb")  # its own: the caller may close `raw` first
        self._size = os.fstat(file.fileno()).st_size
        self._trailer = os.pread(file.fileno(), 8, self._size - 8)
        self._rg = rapidgzip.RapidgzipFile(file, parallelization=threads, chunk_size=RAPIDGZIP_CHUNK)
        self._close = weakref.finalize(self, _close, self._rg, file)
        self._total = 0
        self._crc = 0

    @staticmethod
    def suits(raw: BinaryIO) -> bool:
        """A gzip header at the start, and room for a member."""
        fd = raw.fileno()
        return os.fstat(fd).st_size >= 20 and os.pread(fd, 3, 0) == b"\x1f\x8b\x08"

    def read(self, n: int = -1) -> bytes:
        data = self._rg.read(n if n and n > 0 else CHUNK)
        self._total += len(data)
        self._crc = zlib_ng.crc32(data, self._crc)
        return data

    def end_is_sure(self) -> bool:
        if self._rg.tell_compressed() != 8 * self._size:
            return False
        crc, isize = struct.unpack("<II", self._trailer)
        if self._total % (1 << 32) == isize and self._crc == crc:
            return True  # one member, or the last one checked through the whole output
        start = self._total - isize
        while start >= 0:  # a last member of 4 GiB or more: its ISIZE is its length mod 2**32
            if self._crc_from(start) == crc:
                return True
            start -= 1 << 32
        return False

    def _crc_from(self, start: int) -> int:
        self._rg.seek(start)
        crc = 0
        while data := self._rg.read(CHUNK):
            crc = zlib_ng.crc32(data, crc)
        return crc

    def close(self) -> None:
        self._close()
