"""Chunked writes on a helper thread, and reproducible gzip members (D2: mtime 0, no file name).

File writes and zlib both release the GIL, so handing megabyte chunks to a helper thread lets the
extractor keep parsing on the main thread while the previous chunk is compressed and copied into
the page cache: on two cores the output side costs the parser almost nothing.

zlib-ng level 6 (docs/performance.md, "Sidecar compression"): the sidecar must stay within 10% of gzip -9.
Measured on the shared
corpora's and bench/'s sidecars, zlib-ng 6 is 1.015-1.044x of zlib 9 at ~1.8x the speed of zlib 6
(itself 1.02-1.06x); zlib-ng 5 is faster still but 1.16x on TEI, and python-isal (levels 0-3)
gives 1.36-1.41x, so neither qualifies. The output is a standard gzip member either way.
"""

import ctypes
import os
import queue
import threading

from zlib_ng import zlib_ng

LEVEL = 6
# A split file's range parts: the publish decompresses and recompresses them into the file's one
# member (docs/splitting.md), so their own compression only has to be quick: level 1 runs ~4x as
# fast as 6 (409 against 97 MB/s on CoNLL-U annotations) for ~1.7x the part's bytes on disk.
RANGE_PART_LEVEL = 1
_CHUNK = 1 << 20
_WRITEBACK_EVERY = 1 << 20  # a part of an 8 MiB range then leaves its fsync little to wait for (issue 41)


def _load_sync_file_range():
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux: fsync alone does the work at the end
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_sync_file_range = _load_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int) -> None:
    """Ask the kernel to start writing this file's dirty pages now, without waiting: the disk
    works while we parse, and the fsync that commits the file later has little left to do."""
    if _sync_file_range is not None:
        _sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


class ChunkWriter:
    """Collect small writes into ~1 MB chunks and write them (optionally compressed) to `fh`.

    With `threaded`, chunks are written on a helper thread; an error there (a full disk) is raised
    by the next `write`, `flush` or `close` on the caller's thread.
    """

    def __init__(self, fh, threaded: bool = True, compressor=None, writeback: bool = False):
        self._fh = fh
        self._z = compressor
        self._writeback = writeback
        self._unsynced = 0
        self._buf: list[bytes] = []
        self._size = 0
        self._queue: queue.Queue | None = None
        self._thread = None
        self._error: BaseException | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._drain, daemon=True)
            self._thread.start()

    def _put(self, chunk: bytes) -> None:
        if self._z is not None:
            chunk = self._z.compress(chunk)
        self._fh.write(chunk)
        if self._writeback:
            self._unsynced += len(chunk)
            if self._unsynced >= _WRITEBACK_EVERY:
                self._unsynced = 0
                self._fh.flush()
                start_writeback(self._fh.fileno())

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    try:
                        self._put(item)
                    except BaseException as exc:  # surfaced on the caller's thread
                        self._error = exc
            finally:
                self._queue.task_done()

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, data: bytes) -> None:
        self._buf.append(data)
        self._size += len(data)
        if self._size >= _CHUNK:
            self._flush_buf()

    def _flush_buf(self) -> None:
        if not self._buf:
            return
        chunk = b"".join(self._buf) if len(self._buf) > 1 else self._buf[0]
        self._buf = []
        self._size = 0
        if self._queue is not None:
            self._raise_pending()
            self._queue.put(chunk)
        else:
            self._put(chunk)

    def flush(self) -> None:
        """Everything written so far reaches the file object (and the OS, if it is unbuffered)."""
        self._flush_buf()
        if self._queue is not None:
            self._queue.join()
            self._raise_pending()
        self._fh.flush()

    def _stop(self) -> None:
        if self._queue is not None and self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def close(self) -> None:
        """Write what is left (and end the gzip member); the file object itself stays open."""
        self._flush_buf()
        self._stop()
        self._raise_pending()
        if self._z is not None:
            self._fh.write(self._z.flush())
        self._fh.flush()

    def abort(self) -> None:
        self._buf = []
        self._error = self._error or RuntimeError("aborted")
        self._stop()


class GzipMemberWriter(ChunkWriter):
    """Write bytes into one gzip member appended to an open binary file."""

    def __init__(self, fh, level: int = LEVEL, threaded: bool = True, writeback: bool = False):
        super().__init__(fh, threaded, new_compressor(level), writeback)


def fsync_file(fh) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def new_compressor(level: int = LEVEL):
    """A gzip-framed deflate stream (wbits 31: header with mtime 0 and no name, CRC trailer)."""
    return zlib_ng.compressobj(level, zlib_ng.DEFLATED, 31)


def gzip_bytes(data: bytes, level: int = LEVEL) -> bytes:
    z = new_compressor(level)
    return z.compress(data) + z.flush()
