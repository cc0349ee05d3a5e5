"""A part's sidecar, and the stub rule that keeps it line-aligned with the text (ADDENDUM 2.2, 8.4).

Line n of the sidecar belongs to line n of the text. A document without tokens gets a stub line
(`{"doc_id", "uid"}`) there, but only once the sidecar exists: it is opened at the first annotated
document, with stubs back-filled for the documents before it, so a part (or a dataset) with no
annotations at all has no sidecar. The stub line itself is the store's (store/sidecar_stubs.py):
the publish rebuilds the same stubs for a part without a sidecar.
"""

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..store.sidecar_stubs import stub_line, stub_lines_from_text
from ..utils.gzipio import LEVEL, GzipMemberWriter, fsync_file


class SidecarWriter:
    """Writes the sidecar part at `path` beside a text part being written at `text_path`;
    `flush_text` makes the text written so far readable for the back-fill."""

    def __init__(self, path: Path, text_path: Path, flush_text: Callable[[], None], level: int = LEVEL):
        self.path = path
        self._level = level  # RANGE_PART_LEVEL for a range of a split file
        self._text_path = text_path
        self._flush_text = flush_text
        self._file: BinaryIO | None = None
        self.writer: GzipMemberWriter | None = None  # None until the first annotated document

    def write(self, ann_line: bytes | None, doc_id: str, doc_uid: str, docs_before: int) -> None:
        """The line of the next document: its annotations (opening the sidecar, with stubs for the
        `docs_before` documents before it, if it is the first), or a stub once the sidecar is open.
        The caller may skip the call when `ann_line` is None and `writer` is None: nothing to write."""
        writer = self.writer
        if ann_line is not None:
            (writer or self._open(docs_before)).write(ann_line)
        elif writer is not None:
            writer.write(stub_line(doc_id, doc_uid))

    def _open(self, docs_before: int) -> GzipMemberWriter:
        self._file = open(self.path, "wb")
        writer = self.writer = GzipMemberWriter(self._file, self._level, writeback=True)
        if docs_before:
            self._flush_text()
            for stub in stub_lines_from_text(self._text_path, docs_before):
                writer.write(stub)
        return writer

    def close(self) -> bool:
        """End the gzip member and make it durable (publish may hard-link it once the meta commits
        the part); returns whether there is a sidecar."""
        if self.writer is None or self._file is None:
            return False
        self.writer.close()
        fsync_file(self._file)
        self._file.close()
        return True

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
