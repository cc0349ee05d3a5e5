"""An Arrow IPC stream file read at offsets, never memory-mapped (issue 39, point 7).

A file truncated in place while it is mapped kills the process with SIGBUS at the first touch of a
missing page: with one worker that process is the run itself, and it ended with no message. Read
with `pread`, a file that shrank gives a short read, which is `ArrowFileShrank` naming the file.

The stream is indexed from its message headers alone, so planning reads no row and a range of rows
reads only its own batches. Each message is, in Arrow's IPC format: a continuation marker
(0xFFFFFFFF; absent before format 0.15), the metadata's size, the metadata (a flatbuffer `Message`
table: its header type, the header table, the body's length) and the body. A record batch's header
gives its rows and its buffers' (offset, length); their lengths add up to what pyarrow's
`get_total_buffer_size` says of the batch, which planning uses. The flatbuffer is read with
`struct` (root offset -> table -> vtable -> field), every access bounds-checked: what does not
parse, a dictionary batch, compressed buffers or a stream cut short make `StreamFile.open` return
None, and the caller reads the folder with `datasets` instead, as for any folder it cannot vouch for.
"""

import os
import struct
from dataclasses import dataclass
from pathlib import Path

_CONTINUATION = 0xFFFFFFFF
_SCHEMA, _DICTIONARY_BATCH, _RECORD_BATCH = 1, 2, 3  # MessageHeader union types
# Message: version 0, header_type 1, header 2, bodyLength 3; RecordBatch: length 0, nodes 1, buffers 2,
# compression 3
_HEADER_TYPE, _HEADER, _BODY_LENGTH = 1, 2, 3
_ROWS, _BUFFERS, _COMPRESSION = 0, 2, 3
_BUFFER = struct.Struct("<qq")  # Buffer struct: offset, length


class ArrowFileShrank(OSError):
    """An Arrow file is shorter than when it was opened (truncated or rewritten in place)."""


class NotAStream(ValueError):
    """The bytes are not an Arrow IPC stream this reader vouches for."""


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One record batch message of a stream file: where it lies and what it holds."""

    start: int  # offset of the message (its continuation marker)
    end: int  # offset just past its body
    rows: int
    nbytes: int  # the sum of its buffers' lengths


class _Table:
    """A flatbuffer table in `data` at `pos`: its fields by id, bounds-checked (NotAStream)."""

    __slots__ = ("data", "pos", "vtable", "fields")

    def __init__(self, data: bytes, pos: int):
        self.data, self.pos = data, pos
        self.vtable = pos - _unpack("<i", data, pos)
        self.fields = (_unpack("<H", data, self.vtable) - 4) // 2

    def _field(self, index: int) -> int | None:
        """The position of field `index`, or None when it is absent (its default)."""
        if index >= self.fields:
            return None
        offset = _unpack("<H", self.data, self.vtable + 4 + 2 * index)
        return self.pos + offset if offset else None

    def scalar(self, index: int, fmt: str, default: int = 0) -> int:
        at = self._field(index)
        return default if at is None else _unpack(fmt, self.data, at)

    def table(self, index: int) -> "_Table | None":
        at = self._field(index)
        return None if at is None else _Table(self.data, at + _unpack("<I", self.data, at))

    def vector(self, index: int) -> tuple[int, int]:
        """(position of the first element, count) of a vector field; (0, 0) when absent."""
        at = self._field(index)
        if at is None:
            return 0, 0
        start = at + _unpack("<I", self.data, at)
        return start + 4, _unpack("<I", self.data, start)


def _unpack(fmt: str, data: bytes, pos: int) -> int:
    if pos < 0:
        raise NotAStream(f"an offset before the metadata ({pos})")
    try:
        return struct.unpack_from(fmt, data, pos)[0]
    except struct.error as exc:
        raise NotAStream(str(exc)) from None


def _batch_figures(header: _Table) -> tuple[int, int]:
    """(rows, bytes of its buffers) of a RecordBatch header; NotAStream when its buffers are compressed."""
    if header.table(_COMPRESSION) is not None:
        raise NotAStream("compressed buffers")
    first, count = header.vector(_BUFFERS)
    if count and first + count * _BUFFER.size > len(header.data):
        raise NotAStream("buffers past the metadata")
    nbytes = sum(length for _, length in _BUFFER.iter_unpack(header.data[first:first + count * _BUFFER.size]))
    return header.scalar(_ROWS, "<q"), nbytes


class StreamFile:
    """One Arrow IPC stream file, open for reading at offsets: its schema and record batches."""

    def __init__(self, path: Path, fd: int, size: int, schema, batches: tuple[StoredBatch, ...]):
        self.path, self.name = path, path.name
        self._fd = fd
        self.size = size  # when it was indexed
        self.schema = schema
        self.batches = batches

    @classmethod
    def open(cls, path: Path) -> "StreamFile | None":
        """The file indexed, or None when it is not a stream this reader vouches for (see the module).
        OSError when it cannot be opened."""
        import pyarrow as pa

        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            schema, batches = _index(fd, size)
        except (NotAStream, pa.ArrowException):
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, size, schema, batches)

    def read(self, batch: StoredBatch):
        """The record batch, read into memory; ArrowFileShrank when the file no longer holds it."""
        import pyarrow as pa

        want = batch.end - batch.start
        data = os.pread(self._fd, want, batch.start)
        if len(data) < want:
            now = os.fstat(self._fd).st_size
            raise ArrowFileShrank(f"{self.name} shrank from {self.size:,} to {now:,} bytes while it was read "
                                  "(truncated or rewritten in place); its rows from here on are not read")
        return pa.ipc.read_record_batch(pa.ipc.read_message(pa.py_buffer(data)), self.schema)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        self.close()


def _index(fd: int, size: int):
    """(schema, batches) from the message headers; NotAStream for anything else."""
    import pyarrow as pa

    schema = None
    batches: list[StoredBatch] = []
    pos = 0
    while pos < size:
        start = pos
        head = os.pread(fd, 8, pos)  # a legacy end-of-stream marker is the file's last 4 bytes
        length = _unpack("<I", head, 0)
        prefix = 4
        if length == _CONTINUATION:
            length, prefix = _unpack("<i", head, 4), 8
        if length == 0:
            break  # the end-of-stream marker
        if length < 0:
            raise NotAStream(f"a metadata size of {length}")
        meta = _read(fd, length, pos + prefix)
        message = _Table(meta, _unpack("<I", meta, 0))
        kind = message.scalar(_HEADER_TYPE, "<B")
        body = message.scalar(_BODY_LENGTH, "<q")
        if body < 0:
            raise NotAStream(f"a body of {body} bytes")
        pos += prefix + length + body
        if pos > size:
            raise NotAStream("a message past the end of the file")
        if schema is None:
            if kind != _SCHEMA:
                raise NotAStream("no schema first")
            schema = pa.ipc.read_schema(pa.py_buffer(_read(fd, pos - start, start)))
        elif kind == _RECORD_BATCH:
            header = message.table(_HEADER)
            if header is None:
                raise NotAStream("a record batch without its header")
            rows, nbytes = _batch_figures(header)
            batches.append(StoredBatch(start, pos, rows, nbytes))
        else:
            raise NotAStream(f"a message of type {kind}")  # dictionaries: the fast path takes none
    if schema is None:
        raise NotAStream("no schema")
    return schema, tuple(batches)


def _read(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    if len(data) < n:
        raise NotAStream("the file ends inside a message")
    return data
