"""Reproducible gzip members (D2): mtime 0, no file name, so equal input gives equal bytes.

Compression runs on a helper thread: zlib releases the GIL, so the extractor keeps parsing on
the main thread while the previous megabyte is being compressed.

Level 6 (issue #7, measured on the generated sidecars of bench/): the sidecar must stay within
10% of gzip -9. zlib 6 is 1.04-1.08x of -9 at ~3x its speed; zlib 5 is already 1.13x, and
python-isal (levels 0-3, ~4x faster than zlib 6) gives 1.36-1.41x, so neither qualifies.
"""

import queue
import threading
import zlib

LEVEL = 6
_CHUNK = 1 << 20


class GzipMemberWriter:
    """Write bytes into one gzip member appended to an open binary file."""

    def __init__(self, fh, level: int = LEVEL, threaded: bool = True):
        self._fh = fh
        self._z = zlib.compressobj(level, zlib.DEFLATED, 31)
        self._buf: list[bytes] = []
        self._size = 0
        self._queue: queue.Queue | None = None
        self._thread = None
        self._error: BaseException | None = None
        if threaded:
            self._queue = queue.Queue(maxsize=4)
            self._thread = threading.Thread(target=self._drain, daemon=True)
            self._thread.start()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    self._fh.write(self._z.compress(item))
                except BaseException as exc:  # surfaced on the writer's thread at close()
                    self._error = exc

    def write(self, data: bytes) -> None:
        self._buf.append(data)
        self._size += len(data)
        if self._size >= _CHUNK:
            self._flush_buf()

    def _flush_buf(self) -> None:
        if not self._buf:
            return
        chunk = b"".join(self._buf)
        self._buf = []
        self._size = 0
        if self._queue is not None:
            if self._error is not None:
                raise self._error
            self._queue.put(chunk)
        else:
            self._fh.write(self._z.compress(chunk))

    def close(self) -> None:
        self._flush_buf()
        if self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            if self._error is not None:
                raise self._error
        self._fh.write(self._z.flush())

    def abort(self) -> None:
        if self._queue is not None and self._thread.is_alive():
            self._buf = []
            self._queue.put(None)
            self._thread.join()


def gzip_bytes(data: bytes, level: int = LEVEL) -> bytes:
    z = zlib.compressobj(level, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()
