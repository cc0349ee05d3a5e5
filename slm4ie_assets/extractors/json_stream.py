"""A `.json` top-level array read record by record with ijson's C backend (yajl2_c), so memory is
bounded by the largest record instead of ~7x the file (docs/memory.md).

The stream must give exactly what the whole-file reading (`records.loads`) gives, or not be used:
a first pass reads yajl's events over the whole file (its syntax, and its deepest nesting: a record
deeper than the project's limit, D25, is refused by the whole reading), and looks at the raw bytes
for what yajl reads differently from the reference decoder (a lone high surrogate escape, which yajl
turns into `?`; `\\v` and `\\f` between tokens, which yajl takes as whitespace). Anything of that,
and anything yajl refuses (NaN, numbers beyond 64 bits or a double, invalid UTF-8), makes the caller
parse the file whole, as before. Only then does the second pass yield the records.
"""

import logging
import re
from collections.abc import Iterator
from itertools import accumulate, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, BinaryIO

from .records import MAX_JSON_DEPTH

try:
    import ijson.backends.yajl2_c as _ijson

    _MISSING = ""
except ImportError as exc:  # pragma: no cover - the lock pins wheels that carry it
    _ijson = None
    _MISSING = str(exc)

_LOG = logging.getLogger(__name__)
_BOM = b"\xef\xbb\xbf"
_READ = 1 << 16  # yajl's buffer: 64 KiB measured faster than 1 MiB (docs/memory.md)
# a `\uD800`-`\uDBFF` escape not followed by a low one: yajl yields `?`, the reference keeps it
_LONE_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])")
_LOOK = 10  # bytes `_LONE_HIGH` reads from a match's start
_JSON_SPACE = b" \t\r\n"
# The whole reading refuses a record nested deeper than MAX_JSON_DEPTH (D25), whatever decodes it;
# yajl has no such limit, so the first pass sends a file deeper than that (the top-level array
# counted) to the whole reading, which drops it as `malformed_json`. It reads yajl's events without
# path prefixes (basic_parse), which cost the square of the depth: a 100,000-deep file would take
# gigabytes
MAX_DEPTH = MAX_JSON_DEPTH + 1
_NESTING = {"start_map": 1, "start_array": 1, "end_map": -1, "end_array": -1}


class _Checked:
    """The raw bytes as ijson reads them in the first pass, watched for what yajl decodes
    differently; `differs` turns True at the first such byte."""

    def __init__(self, fh: BinaryIO):
        self._fh = fh
        self._tail = b""
        self.differs = False

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        if not self.differs:
            if b"\x0b" in data or b"\x0c" in data:  # `in` is a memchr: a regex class is 10x slower
                self.differs = True
            elif b"\\u" in data or b"\\" in self._tail:
                look = self._tail + data
                last = len(look) if not data else len(look) - _LOOK  # later matches wait for more bytes
                self.differs = any(m.start() < last for m in _LONE_HIGH.finditer(look))
            self._tail = data[-_LOOK:] if len(data) >= _LOOK else (self._tail + data)[-_LOOK:]
        return data


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
            events = _ijson.basic_parse(checked, use_float=True, buf_size=_READ)
            # all in C: the running depth over the events, and its maximum
            deepest = max(accumulate(map(_NESTING.get, map(itemgetter(0), events), repeat(0))), default=0)
        except (_ijson.common.JSONError, UnicodeDecodeError, ValueError):
            return None
        if checked.differs or deepest > MAX_DEPTH:
            return None
    return _records(path)


def _records(path: Path) -> Iterator[Any]:
    with _open_after_bom(path) as fh:
        yield from _ijson.items(fh, "item", use_float=True, buf_size=_READ)
