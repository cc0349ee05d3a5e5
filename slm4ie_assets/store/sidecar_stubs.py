"""The stub line of the sidecar (ADDENDUM 2.2, 8.4): what line n holds when document n of the text has
no annotations, so the sidecar stays line-aligned with the text.

Both writers of a sidecar need it: the part writer back-fills stubs when a part's first annotated
document opens its sidecar, and the publish rebuilds them from the text of a part that has none. It
lives in the store, below both, because it is a rule of the published files, not of one writer.
"""

from collections.abc import Iterator
from pathlib import Path

import orjson

from ..schema import dumps, stub_record


def stub_line(doc_id: str, doc_uid: str) -> bytes:
    return dumps(stub_record(doc_id, doc_uid)) + b"\n"


def stub_lines_from_text(text_path: Path, limit: int | None = None) -> Iterator[bytes]:
    """The stub lines for the first `limit` (all) lines of a text part."""
    with open(text_path, "rb") as fh:
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                return
            rec = orjson.loads(line)
            yield stub_line(rec["doc_id"], rec["uid"])
