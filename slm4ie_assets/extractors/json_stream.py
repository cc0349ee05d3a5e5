"""A `.json` top-level array read record by record with ijson's C backend (yajl2_c), so memory is
bounded by the largest record instead of ~7x the file (docs/memory.md).

The stream must give exactly what the whole-file reading (`records.loads`) gives, or not be used:
a first pass lets yajl check the whole syntax without building a value (no prefix matches), and
looks at the raw bytes for what yajl reads differently from the reference decoder (a lone high
surrogate escape, which yajl turns into `?`; `\\v` and `\\f` between tokens, which yajl takes as
whitespace). Anything else it refuses (NaN, numbers beyond 64 bits or a double, invalid UTF-8) makes
the caller parse the file whole, as before. Only then does the second pass yield the records.
"""

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

try:
    import ijson.backends.yajl2_c as _ijson

    _MISSING = ""
except ImportError as exc:  # pragma: no cover - the lock pins wheels that carry it
    _ijson = None
    _MISSING = str(exc)

_LOG = logging.getLogger(__name__)
_BOM = b"\xef\xbb\xbf"
_READ = 1 << 16  # yajl's buffer: 64 KiB measured faster than 1 MiB (docs/memory.md)
_CHECK_BLOCK = 1 << 20
# a `\uD800`-`\uDBFF` escape not followed by a low one: yajl yields `?`, the reference keeps it
_LONE_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")
_LOOK = 10  # bytes `_LONE_HIGH` reads from a match's start
_JSON_SPACE = b" \t\r\n"
# orjson, the reference's decoder, refuses a file nested deeper than 1,024 levels (the top-level array
# counts), and so does the stdlib it falls back to: the first pass sends such a file to the whole
# reading (`_Depth`); a record deeper in the second pass (the file changed) stops it (`TooDeep`)
MAX_DEPTH = 1024
_NO_PREFIX = "\x00"  # matches no path: yajl parses and checks, ijson builds nothing


class TooDeep(Exception):
    """A streamed record nests deeper than `MAX_DEPTH`: the reference refuses the file as malformed."""


# bytes.translate classes for `_Depth`: one C pass, then numpy works on the few bytes that matter
_CLASSES = bytearray(256)
_CLASSES[ord('"')] = 1
_CLASSES[ord("[")] = _CLASSES[ord("{")] = 2
_CLASSES[ord("]")] = _CLASSES[ord("}")] = 3
_CLASS_TABLE = bytes(_CLASSES)
_STEP = np.array([0, 0, 1, -1], np.int64)


class _Depth:
    """The nesting depth of valid JSON read chunk by chunk, brackets inside strings left out (a
    string opens and closes at a quote not escaped by an odd run of backslashes). On malformed
    input it may be anything: yajl refuses that input anyway."""

    def __init__(self):
        self.depth = 0
        self.in_string = False
        self.backslashes = 0  # the run of backslashes that ended the last chunk

    def deepest(self, data: bytes) -> int:
        """The deepest nesting `data` reaches, continuing from the chunks before it."""
        classes = np.frombuffer(data.translate(_CLASS_TABLE), np.uint8)
        at = np.flatnonzero(classes)
        kind = classes[at]
        quotes = at[kind == 1]
        if len(quotes) and (b'\\"' in data or (self.backslashes and data[:1] == b'"')):
            keep = np.ones(len(quotes), bool)
            for i in np.flatnonzero(np.frombuffer(data, np.uint8)[np.maximum(quotes - 1, 0)] == 92):
                keep[i] = not self._escaped(data, int(quotes[i]))
            if quotes[0] == 0 and self.backslashes:
                keep[0] = not self._escaped(data, 0)
            quotes = quotes[keep]
        is_bracket = kind >= 2
        brackets = at[is_bracket]
        outside = (np.searchsorted(quotes, brackets) + self.in_string) % 2 == 0
        steps = _STEP[kind[is_bracket][outside]]
        deepest = self.depth + int(np.cumsum(steps).max(initial=0))
        self.depth += int(steps.sum())
        self.in_string = (len(quotes) + self.in_string) % 2 == 1
        run = len(data) - len(data.rstrip(b"\\"))
        self.backslashes = run + self.backslashes if run == len(data) else run
        return deepest

    def _escaped(self, data: bytes, q: int) -> bool:
        start = q
        while start and data[start - 1] == 0x5C:
            start -= 1
        run = q - start + (self.backslashes if start == 0 else 0)
        return run % 2 == 1


class _Checked:
    """The raw bytes as ijson reads them in the first pass, watched for what yajl decodes
    differently and for nesting deeper than the reference reads; `differs` turns True at the
    first such byte, and the read then ends the input, so yajl never goes deeper (its path
    prefixes cost the square of the depth)."""

    def __init__(self, fh: BinaryIO):
        self._fh = fh
        self._tail = b""
        self._depth = _Depth()
        self._block = b""  # checked bytes not yet handed to yajl
        self._at = 0
        self.differs = False

    def read(self, size: int = -1) -> bytes:
        """At most `size` checked bytes; they are read and checked a block at a time, as numpy's
        calls cost more per call than per byte at yajl's 64 KiB."""
        if self._at >= len(self._block):
            self._block, self._at = self._checked(self._fh.read(_CHECK_BLOCK)), 0
        end = len(self._block) if size < 0 else self._at + size
        data = self._block[self._at:end]
        self._at += len(data)
        return data

    def _checked(self, data: bytes) -> bytes:
        if self.differs:
            return b""
        if b"\x0b" in data or b"\x0c" in data:  # `in` is a memchr: a regex class is 10x slower
            self.differs = True
        elif b"\\u" in data or b"\\" in self._tail:
            look = self._tail + data
            last = len(look) if not data else len(look) - _LOOK  # later matches wait for more bytes
            self.differs = any(m.start() < last for m in _LONE_HIGH.finditer(look))
        if not self.differs and data:
            self.differs = self._depth.deepest(data) > MAX_DEPTH
        self._tail = data[-_LOOK:] if len(data) >= _LOOK else (self._tail + data)[-_LOOK:]
        return b"" if self.differs else data


def _open_after_bom(path: Path) -> BinaryIO:
    fh = open(path, "rb")
    if fh.read(3) != _BOM:
        fh.seek(0)
    return fh


def _is_array(fh: BinaryIO) -> bool:
    """Whether the first byte after JSON whitespace opens an array (then the position is restored)."""
    start = fh.tell()
    try:
        while chunk := fh.read(_READ):
            rest = chunk.lstrip(_JSON_SPACE)
            if rest:
                return rest.startswith(b"[")
        return False
    finally:
        fh.seek(start)


def stream_records(path: Path) -> Iterator[Any] | None:
    """The elements of the file's top-level array, one at a time; None when the file must be read
    whole (not an array, malformed, or holding what yajl reads differently, see the module)."""
    if _ijson is None:
        _LOG.warning("ijson's C backend (yajl2_c) cannot be imported (%s): .json arrays are parsed whole, "
                     "taking about 7x the file's size in memory; reinstall ijson from a wheel (`make venv`)", _MISSING)
        return None
    with _open_after_bom(path) as fh:
        if not _is_array(fh):
            return None
        checked = _Checked(fh)
        try:
            for _ in _ijson.items(checked, _NO_PREFIX, use_float=True, buf_size=_READ):
                pass
        except (_ijson.common.JSONError, UnicodeDecodeError, ValueError):
            return None
        if checked.differs:
            return None
    return _records(path)


def _records(path: Path) -> Iterator[Any]:
    with _open_after_bom(path) as fh:
        for record in _ijson.items(fh, "item", use_float=True, buf_size=_READ):
            if (record.__class__ is dict or record.__class__ is list) and _deeper_than(record, MAX_DEPTH - 1):
                raise TooDeep(path)
            yield record


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` (a dict or list) holds containers nested more than `limit` deep."""
    level = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for v in level:
            below.extend(x for x in (v.values() if v.__class__ is dict else v)
                         if x.__class__ is dict or x.__class__ is list)
        level = below
        depth += 1
    return False
