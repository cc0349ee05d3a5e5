"""Decoding one compressed file on several threads (issue 41), with the one-thread decoders of
`streams` as the judge.

A file whose pieces decode independently (the frames of a multi-frame zstd file, the blocks of a
multi-block xz file: `pieces`) is decoded piece by piece on up to `threads` threads and handed out
in order. Each piece holds at most PIECE_READ_AHEAD decoded bytes that the reader has not taken,
and at most `threads` pieces are under way, so memory is bounded by the thread count, never by the
file, and a bomb stopped by the byte budget (D16) has been decoded at most that far beyond it.

`SerialBackstop` makes the parallel decoders safe to be wrong about the unusual: when one raises,
or ends where it cannot vouch for the end, the one-thread decoder reads the file again from its
start, passes over the bytes already handed out (checking that they are the same) and goes on
from there. So the bytes, and the error of a damaged file with its wording, are always those of
the one-thread path; the parallel path only makes the common case fast.
"""

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from zlib_ng import zlib_ng

from ..utils.cpus import usable_cpus
from .errors import SkipArchive
from .streams import CHUNK, Readable

PIECE_READ_AHEAD = 32 << 20  # decoded bytes a piece may hold before the reader takes them

_THREAD_LIMIT: ContextVar[int] = ContextVar("slm4ie_archive_threads", default=0)


def decode_threads() -> int:
    """Threads one archive may be decoded on: the CPUs this process may use, and no more than
    the limit `decoding_threads` set (the run's max_workers); all usable CPUs where none is set."""
    limit = _THREAD_LIMIT.get()
    cpus = usable_cpus()
    return max(1, min(cpus, limit)) if limit > 0 else cpus


@contextmanager
def decoding_threads(limit: int) -> Iterator[None]:
    """Archives unpacked inside this block are decoded on at most `limit` threads (0: no limit
    but the CPUs)."""
    token = _THREAD_LIMIT.set(limit)
    try:
        yield
    finally:
        _THREAD_LIMIT.reset(token)


# ----------------------------------------------------------------------------- pieces in order


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes [start, end) of the file, decodable without the bytes before them."""

    start: int
    end: int


class PieceFile:
    """A piece's compressed bytes as a file to read from start to end, with pread, so threads
    share the descriptor without sharing an offset."""

    def __init__(self, fd: int, piece: Piece):
        self._fd = fd
        self._pos = piece.start
        self._end = piece.end

    def read(self, n: int = -1) -> bytes:
        want = min(n if n and n > 0 else CHUNK, self._end - self._pos)
        if want <= 0:
            return b""
        data = os.pread(self._fd, want, self._pos)
        if not data:
            raise SkipArchive("the file ended early while its pieces were read (it shrank?)", False)
        self._pos += len(data)
        return data


DecodePiece = Callable[[Piece, PieceFile], Iterator[bytes]]  # a piece's decoded bytes, CHUNK at most each


@dataclass
class _Shared:
    """What the reader and the worker threads share, under `cond`. The workers hold this and
    never the reader object, so a reader that is dropped (a budget breach left it unread) is
    collected and its finalizer stops them."""

    count: int
    window: int  # pieces under way at most, the one being read included
    cond: threading.Condition = field(default_factory=threading.Condition)
    chunks: dict[int, deque[bytes]] = field(default_factory=dict)
    held: dict[int, int] = field(default_factory=dict)  # decoded bytes not yet taken, per piece
    done: set[int] = field(default_factory=set)
    errors: dict[int, BaseException] = field(default_factory=dict)
    next_piece: int = 0
    reading: int = 0
    stopped: bool = False

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.chunks.clear()
            self.cond.notify_all()


def _work(shared: _Shared, pieces: Sequence[Piece], decode: DecodePiece, fd: int) -> None:
    cond = shared.cond
    while True:
        with cond:
            while not shared.stopped and shared.next_piece < shared.count and \
                    shared.next_piece >= shared.reading + shared.window:
                cond.wait()
            if shared.stopped or shared.next_piece >= shared.count:
                return
            index = shared.next_piece
            shared.next_piece += 1
            shared.chunks[index], shared.held[index] = deque(), 0
        try:
            for chunk in decode(pieces[index], PieceFile(fd, pieces[index])):
                with cond:
                    while not shared.stopped and shared.held[index] >= PIECE_READ_AHEAD:
                        cond.wait()
                    if shared.stopped:
                        return
                    shared.chunks[index].append(chunk)
                    shared.held[index] += len(chunk)
                    cond.notify_all()
        except Exception as exc:  # handed to the reader, which falls back to the one-thread decoder
            with cond:
                shared.errors[index] = exc
        with cond:
            shared.done.add(index)
            cond.notify_all()


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class OrderedPieces:
    """The decoded bytes of `pieces`, in order, decoded on `threads` threads (see the module's
    docstring for the memory bound). Errors of a piece are raised when the reader reaches it."""

    def __init__(self, raw: BinaryIO, pieces: Sequence[Piece], decode: DecodePiece, threads: int):
        fd = os.dup(raw.fileno())  # the workers' own: the caller may close `raw` before they stop
        self._shared = shared = _Shared(len(pieces), max(2, threads))
        self._chunk = b""
        self._pos = 0
        workers = [threading.Thread(target=_work, args=(shared, pieces, decode, fd), daemon=True,
                                    name=f"slm4ie-decode-{i}") for i in range(min(threads, len(pieces)))]
        self._close = weakref.finalize(self, _stop_and_join, shared, workers, fd)
        for worker in workers:
            worker.start()

    def read(self, n: int = -1) -> bytes:
        n = n if n and n > 0 else CHUNK
        if self._pos >= len(self._chunk):
            self._chunk, self._pos = self._next_chunk(), 0
        chunk, pos = self._chunk, self._pos
        if pos == 0 and n >= len(chunk):
            self._pos = len(chunk)
            return chunk
        self._pos = pos + n
        return chunk[pos:pos + n]

    def end_is_sure(self) -> bool:
        """Every piece was checked whole by its decoder, and the pieces were found by walking
        the file's own structure from end to end (`pieces`)."""
        return True

    def _next_chunk(self) -> bytes:
        shared = self._shared
        with shared.cond:
            while True:
                index = shared.reading
                if index >= shared.count:
                    return b""
                queue = shared.chunks.get(index)
                if queue:
                    chunk = queue.popleft()
                    shared.held[index] -= len(chunk)
                    shared.cond.notify_all()
                    return chunk
                if index in shared.errors:
                    raise shared.errors[index]
                if index in shared.done:
                    shared.reading += 1
                    shared.chunks.pop(index, None)
                    shared.held.pop(index, None)
                    shared.cond.notify_all()
                    continue
                shared.cond.wait()

    def close(self) -> None:
        self._close()


def _stop_and_join(shared: _Shared, workers: list[threading.Thread], fd: int) -> None:
    shared.stop()
    for worker in workers:
        if worker.ident is not None and worker is not threading.current_thread():  # started, not this one
            worker.join()
    _close_fd(fd)


# ----------------------------------------------------------------------------- the judge


class FastSource(Readable, Protocol):
    """A parallel decoder: `read` as usual; `end_is_sure` once it returned b"", True where it can
    vouch that the file ended as a whole compressed stream; `close` stops its threads."""

    def end_is_sure(self) -> bool: ...

    def close(self) -> None: ...


class SerialBackstop:
    """The parallel decoder's bytes, handed over to the one-thread decoder on an error or an end
    the parallel one cannot vouch for (see the module's docstring). `fell_back` says whether it
    was (the tests look: a well-formed file must never need it)."""

    def __init__(self, fast: FastSource, raw: BinaryIO, serial: Callable[[BinaryIO], Readable]):
        self._fast: FastSource | None = fast
        self._raw = raw
        self._serial_factory = serial
        self._serial: Readable | None = None
        self._given = 0
        self._crc = 0
        self._ended = False  # the parallel decoder reached an end it vouched for
        self.fell_back = False

    def read(self, n: int = -1) -> bytes:
        fast = self._fast
        if self._ended:
            return b""
        if fast is not None:
            try:
                data = fast.read(n)
                if data or fast.end_is_sure():
                    self._given += len(data)
                    self._crc = zlib_ng.crc32(data, self._crc)
                    self._ended = not data
                    return data
            except Exception:  # noqa: BLE001  the one-thread decoder decides what is wrong
                pass
            self._take_over()
        assert self._serial is not None
        return self._serial.read(n)

    def _take_over(self) -> None:
        """Read the file again with the one-thread decoder, up to where the parallel one stopped."""
        assert self._fast is not None
        self._fast.close()
        self._fast = None
        self.fell_back = True
        self._raw.seek(0)
        serial = self._serial_factory(self._raw)
        left, crc = self._given, 0
        while left:
            data = serial.read(min(left, CHUNK))  # the one-thread decoder's own errors pass
            if not data:
                break
            left -= len(data)
            crc = zlib_ng.crc32(data, crc)
        if left or crc != self._crc:
            raise SkipArchive("the parallel and the one-thread decoder disagree about the bytes "
                              "(please report this archive)", False)
        self._serial = serial

    def close(self) -> None:
        if self._fast is not None:
            self._fast.close()
