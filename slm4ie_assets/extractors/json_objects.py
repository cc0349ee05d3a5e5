"""The JSON-lines reader jsonl and coleslaw share: one JSON object per physical line (D6, D8, S4).

Each extractor opens the file itself (coleslaw counts a file it cannot open, jsonl lets the error
reach the part writer) and then reads the same objects with the same drops.
"""

from collections.abc import Iterator
from typing import BinaryIO

from .extract_context import ExtractContext
from .input_file import InputFile
from .records import loads

_BOM = b"\xef\xbb\xbf"


def _range_lines(fh: BinaryIO, file: InputFile) -> Iterator[bytes]:
    """The `\\n`-ended lines of the file, or of its range (which starts and ends after a `\\n`: the
    cut rule of `line_splitter.LineSplitter` mirrors this reader)."""
    assert file.range is not None
    fh.seek(file.range.start)
    end = file.range.end
    if end is None:
        yield from fh
        return
    left = end - file.range.start
    for raw in fh:
        yield raw
        left -= len(raw)
        if left <= 0:
            return


def physical_lines(fh: BinaryIO, file: InputFile) -> Iterator[tuple[int, bytes]]:
    """Binary lines with universal-newline numbering (`\\n`, `\\r\\n`, lone `\\r`), BOM removed (D8).
    A range of a split file numbers from 1 too; `ExtractContext.drop` adds the earlier lines."""
    lineno = 0
    first = file.at_file_start
    for raw in fh if file.range is None else _range_lines(fh, file):
        if first:
            first = False
            if raw.startswith(_BOM):
                raw = raw[3:]
        if b"\r" in raw:
            for piece in raw.splitlines():
                lineno += 1
                yield lineno, piece
        else:
            lineno += 1
            yield lineno, raw


def json_objects(fh: BinaryIO, file: InputFile, ctx: ExtractContext) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every line that holds a JSON object. A blank line, Unicode
    whitespace included (S4), is skipped silently; invalid UTF-8, malformed JSON and a value that
    is not an object are counted with their line number and skipped (D6)."""
    cap = ctx.max_document_bytes
    for lineno, raw in physical_lines(fh, file):
        if not raw.strip():
            continue
        if cap and len(raw) > cap:  # skipped unparsed: decoding costs several times the line
            ctx.drop("document_too_large", file, f"a line of {len(raw):,} bytes, over max_document_bytes "
                                                 f"({cap:,}); line skipped", lineno)
            continue
        try:
            record = loads(raw)
        except UnicodeDecodeError as exc:
            ctx.drop("invalid_utf8", file, f"invalid UTF-8 ({exc.reason} at byte {exc.start}); line skipped", lineno)
            continue
        except ValueError as exc:
            if not raw.decode("utf-8", "replace").strip():
                continue  # a line of Unicode whitespace only is blank (S4)
            ctx.drop("malformed_json", file, f"malformed JSON ({exc}); line skipped", lineno)
            continue
        if not isinstance(record, dict):
            ctx.drop("non_object_record", file, f"a JSON {type(record).__name__}, not an object; line skipped", lineno)
            continue
        yield lineno, record
