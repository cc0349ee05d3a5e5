"""Where one compressed file splits into pieces that decode on their own (issue 41): the blocks
of an xz file, found from its index (read from the end), and the frames of a zstd file, found by
walking its frame and block headers (jumping over the block contents). Both follow the file's own
structure from end to end; a file where anything does not add up (padding or bytes after the
last stream, a CRC that fails, a frame cut off, a single piece) gives None, and the one-thread
decoder reads it, with its own verdict (`parallel_decode.SerialBackstop`).

xz: consecutive blocks of one stream form a piece, decoded by liblzma as a stream of their own:
the stream's header, the blocks, and an index and footer made from the file's index records, so
liblzma checks each block's check, sizes and the index as it does for the whole file. Streams
joined without padding are each split so; any padding sends the file to one thread, because
Python's LZMAFile stops at padding between streams (the bytes must stay those it gives).
"""

import lzma
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from .errors import SkipArchive
from .parallel_decode import Piece, PieceFile
from .streams import ZstdFrames, ZstdStream, inflate_stream, read_chunks

MAX_PIECE = 4 << 20  # compressed bytes a piece grows to (more pieces than threads keep them busy)
MIN_PIECE = 256 << 10
MAX_XZ_INDEX = 16 << 20  # an index this long is not read whole (a real one holds ~8 bytes per block)

XZ_MAGIC = b"\xfd7zXZ\x00"
XZ_FOOTER_MAGIC = b"YZ"


def piece_target(size: int, threads: int) -> int:
    """Compressed bytes per piece: about four pieces per thread, within MIN_PIECE..MAX_PIECE."""
    return max(MIN_PIECE, min(MAX_PIECE, size // (4 * max(1, threads))))


# ----------------------------------------------------------------------------- xz


@dataclass(frozen=True, slots=True)
class XzPiece(Piece):
    """Blocks [start, end) of one xz stream, with that stream's header and index records."""

    header: bytes
    records: tuple[tuple[int, int], ...]  # (unpadded size, uncompressed size) per block


def xz_pieces(fd: int, size: int, target: int) -> list[XzPiece] | None:
    """The file's blocks grouped into pieces of about `target` compressed bytes, or None."""
    pieces: list[XzPiece] = []
    end = size
    while end > 0:
        stream = _stream_ending_at(fd, end)
        if stream is None:
            return None
        start, header, records = stream
        pieces[:0] = _group_blocks(start, header, records, target)
        end = start
    return pieces if len(pieces) > 1 else None


def _group_blocks(start: int, header: bytes, records: list[tuple[int, int]], target: int) -> list[XzPiece]:
    pieces: list[XzPiece] = []
    pos = first = start + 12
    group: list[tuple[int, int]] = []
    for record in records:
        group.append(record)
        pos += -(-record[0] // 4) * 4
        if pos - first >= target:
            pieces.append(XzPiece(first, pos, header, tuple(group)))
            first, group = pos, []
    if group:
        pieces.append(XzPiece(first, pos, header, tuple(group)))
    return pieces


def _stream_ending_at(fd: int, end: int) -> tuple[int, bytes, list[tuple[int, int]]] | None:
    """(start, header, index records) of the xz stream whose footer ends at `end`, or None."""
    if end < 32:
        return None
    footer = os.pread(fd, 12, end - 12)
    if footer[10:] != XZ_FOOTER_MAGIC or zlib.crc32(footer[4:10]) != _u32(footer, 0):
        return None
    flags = footer[8:10]
    index_size = (_u32(footer, 4) + 1) * 4
    index_start = end - 12 - index_size
    if index_size > MAX_XZ_INDEX or index_start < 12:
        return None
    records = _index_records(os.pread(fd, index_size, index_start))
    if records is None:
        return None
    start = index_start - sum(-(-unpadded // 4) * 4 for unpadded, _ in records) - 12
    if start < 0:
        return None
    header = os.pread(fd, 12, start)
    if header[:6] != XZ_MAGIC or header[6:8] != flags or zlib.crc32(flags) != _u32(header, 8):
        return None
    return start, header, records


def _index_records(index: bytes) -> list[tuple[int, int]] | None:
    """The records of an xz index (its indicator, count, records, padding and CRC32 checked)."""
    if len(index) < 8 or index[0] != 0 or zlib.crc32(index[:-4]) != _u32(index, len(index) - 4):
        return None
    try:
        count, pos = _varint(index, 1)
        records = []
        for _ in range(count):
            unpadded, pos = _varint(index, pos)
            uncompressed, pos = _varint(index, pos)
            if unpadded < 5:
                return None
            records.append((unpadded, uncompressed))
    except IndexError:
        return None
    padding = index[pos:-4]
    if len(padding) > 3 or padding.strip(b"\x00") or (pos + len(padding)) % 4:
        return None
    return records or None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """An xz multibyte integer at `pos`: (value, position after it). IndexError if malformed."""
    value = 0
    for i in range(9):
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if byte == 0 and i:
                raise IndexError("a multibyte integer with a needless zero byte")
            return value, pos + i + 1
    raise IndexError("a multibyte integer longer than nine bytes")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _u32(data: bytes, pos: int) -> int:
    return int(struct.unpack_from("<I", data, pos)[0])


def _index_and_footer(records: tuple[tuple[int, int], ...], flags: bytes) -> bytes:
    index = b"\x00" + _encode_varint(len(records)) + b"".join(
        _encode_varint(unpadded) + _encode_varint(uncompressed) for unpadded, uncompressed in records)
    index += b"\x00" * (-len(index) % 4)
    index += struct.pack("<I", zlib.crc32(index))
    backward = struct.pack("<I", len(index) // 4 - 1)
    return index + struct.pack("<I", zlib.crc32(backward + flags)) + backward + flags + XZ_FOOTER_MAGIC


def decode_xz_piece(piece: Piece, file: PieceFile) -> Iterator[bytes]:
    """The piece's blocks decoded as a stream of their own (see the module's docstring)."""
    assert isinstance(piece, XzPiece)
    parts = chain((piece.header,), iter(file.read, b""), (_index_and_footer(piece.records, piece.header[6:8]),))
    d = lzma.LZMADecompressor(lzma.FORMAT_XZ)
    yield from inflate_stream(d, lambda: next(parts, b""))
    if d.unused_data or next(parts, b""):
        raise SkipArchive("an xz piece holds bytes after its stream")


# ----------------------------------------------------------------------------- zstd


def zstd_pieces(fd: int, size: int, target: int) -> list[Piece] | None:
    """The file's frames grouped into pieces of about `target` compressed bytes, or None. A
    piece ends where a frame ends; skippable frames go with the frame after them (or the last
    piece), so every piece holds a frame."""
    ends = _zstd_frame_ends(fd, size)
    if ends is None:
        return None
    pieces: list[Piece] = []
    start = 0
    for end in ends[:-1]:  # what follows the last frame (skippable frames) goes with it
        if end - start >= target:
            pieces.append(Piece(start, end))
            start = end
    pieces.append(Piece(start, size))
    return pieces if len(pieces) > 1 else None


def _zstd_frame_ends(fd: int, size: int) -> list[int] | None:
    """Where each frame ends, by its headers; None where the walk does not end at the file's end."""
    walker = ZstdFrames()
    ends: list[int] = []
    pos = 0
    try:
        while True:
            pos += walker.take_skip()
            if walker.frames > len(ends):
                ends.append(pos)
            if pos >= size:
                break
            data = os.pread(fd, walker.needed(), pos)
            walker.feed(data)
            pos += len(data)
        if pos != size:
            return None
        walker.finish()
    except SkipArchive:
        return None
    return ends


def decode_zstd_piece(piece: Piece, file: PieceFile) -> Iterator[bytes]:
    """The piece's frames, decoded and checked as the one-thread decoder checks a whole file."""
    return read_chunks(ZstdStream(file))  # type: ignore[arg-type]  # it only calls read()


__all__ = ["XzPiece", "decode_xz_piece", "decode_zstd_piece", "piece_target", "xz_pieces", "zstd_pieces"]
