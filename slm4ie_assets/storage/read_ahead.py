"""A byte range of a remote object as a stream that fetches the next chunks while the caller works.

A remote store answers each request after a fixed delay (~140 ms per GET against moto's server,
tens of ms on a real bucket), so reading a split file with one small GET per `read()` spends its
time waiting. One background thread fetches large chunks (8 MiB by default) in order, at most
`depth` of them ahead of the reader: memory stays at (depth + 2) chunks however large the range,
and the reader and the network overlap. A fetch's error reaches the reader at the offset it
belongs to; closing the stream early stops the thread.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Fetch = Callable[[int, int], bytes]  # (start, length) -> exactly length bytes, or fewer only at the end
DEFAULT_CHUNK = 8 << 20
DEFAULT_DEPTH = 2


@dataclass(frozen=True, slots=True)
class _Chunk:
    data: bytes = b""
    error: BaseException | None = None


class _ReadAheadRaw(io.RawIOBase):
    """The raw stream under `open_read_ahead`'s buffer: chunks handed over by the fetching thread."""

    def __init__(self, fetch: Fetch, start: int, end: int, chunk: int, depth: int, name: str) -> None:
        super().__init__()
        self._chunks: queue.Queue[_Chunk | None] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._current = memoryview(b"")
        self._done = start >= end
        self._thread = threading.Thread(target=self._fetch_all, args=(fetch, start, end, chunk),
                                        name=f"read-ahead {name}", daemon=True)
        if not self._done:
            self._thread.start()

    def _fetch_all(self, fetch: Fetch, start: int, end: int, chunk: int) -> None:
        offset = start
        while offset < end and not self._stop.is_set():
            try:
                data = fetch(offset, min(chunk, end - offset))
            except BaseException as exc:  # handed to the reader, raised where it reads
                self._hand_over(_Chunk(error=exc))
                return
            if not self._hand_over(_Chunk(data)) or not data:
                return
            offset += len(data)
        self._hand_over(None)

    def _hand_over(self, item: _Chunk | None) -> bool:
        """Queue `item` unless the reader closed the stream meanwhile (False then)."""
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        while not self._current and not self._done:
            item = self._chunks.get()
            if item is None:
                self._done = True
            elif item.error is not None:
                self._done = True
                raise item.error
            else:
                self._current = memoryview(item.data)
                self._done = not item.data
        count = min(len(target), len(self._current))
        target[:count] = self._current[:count]
        self._current = self._current[count:]
        return count

    def close(self) -> None:
        self._stop.set()
        self._current = memoryview(b"")
        while True:  # let a thread blocked on a full queue see the stop
            try:
                self._chunks.get_nowait()
            except queue.Empty:
                break
        super().close()


def open_read_ahead(fetch: Fetch, start: int, end: int, *, chunk: int = DEFAULT_CHUNK,
                    depth: int = DEFAULT_DEPTH, name: str = "") -> io.BufferedReader:
    """Bytes [start, end) through `fetch`, `depth` chunks of `chunk` bytes fetched ahead on one thread;
    `read(n)` returns n bytes unless the range ends first."""
    if chunk < 1 or depth < 1:
        raise ValueError(f"read-ahead needs chunk >= 1 and depth >= 1, not {chunk} and {depth}")
    return io.BufferedReader(_ReadAheadRaw(fetch, start, end, chunk, depth, name), buffer_size=1 << 16)
