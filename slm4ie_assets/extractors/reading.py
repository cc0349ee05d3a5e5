"""Reading an input file (or its byte range) as bytes or as decoded text, counting invalid UTF-8.

Invalid bytes become escapes instead of errors, so a reader can drop just the affected document
and name it (D6), and `invalid_count()` tells how many were seen.
"""

import codecs
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .input_file import InputFile

_INVALID_SEEN = [0]
_surrogateescape = codecs.lookup_error("surrogateescape")


def _escape_and_count(exc: UnicodeError) -> tuple[str | bytes, int]:
    _INVALID_SEEN[0] += 1
    return _surrogateescape(exc)


codecs.register_error("slm4ie_escape", _escape_and_count)


def open_text(path: Path):
    """Strict-UTF-8 text with universal newlines, where invalid bytes become escapes that
    `invalid_count()` reports, so the reader can drop just the affected document (D6)."""
    return open(path, encoding="utf-8", errors="slm4ie_escape", newline=None)


_DECODE_CHUNK = 1 << 22


def read_raw(file: InputFile, size: int) -> Iterator[bytes]:
    """The bytes of `file` (of its range only, for a split file) in reads of at most `size`."""
    with open(file.path, "rb") as fh:
        if file.range is None:
            while raw := fh.read(size):
                yield raw
            return
        yield from read_span(fh, file.range.start, file.range.end, size)


def read_span(fh: BinaryIO, start: int, end: int | None, size: int) -> Iterator[bytes]:
    """The bytes of an open file from `start` up to `end` (None: to its end), in reads of at most `size`."""
    fh.seek(start)
    left = -1 if end is None else end - start
    while left:
        raw = fh.read(size if left < 0 else min(size, left))
        if not raw:
            return
        left = left - len(raw) if left > 0 else left
        yield raw


def read_text_chunks(file: InputFile, size: int = _DECODE_CHUNK) -> Iterator[str]:
    """The file (or its range) as decoded text chunks with universal newlines (`\r\n` and lone
    `\r` become `\n`) and a BOM at the start of the file removed (D8). Much faster than a
    text-mode file object; invalid bytes become escapes counted by `invalid_count()`, as with
    `open_text`. A range starts after a line end, so decoding it alone gives the same text."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="slm4ie_escape")
    pending_cr = False
    first = file.at_file_start
    raws = read_raw(file, size)
    while True:
        raw = next(raws, b"")
        final = not raw
        text = decoder.decode(raw, final=final)
        if first and text:
            first = False
            if text.startswith(BOM):
                text = text[1:]
        if pending_cr:
            text = "\r" + text
            pending_cr = False
        if "\r" in text:
            if not final and text.endswith("\r"):
                text = text[:-1]
                pending_cr = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if text:
            yield text
        if final:
            return


def invalid_count() -> int:
    return _INVALID_SEEN[0]


def has_escapes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


BOM = "\ufeff"
