"""What a mirror of a store into a local folder answers for, persisted between mirrors as JSON.

Each file the mirror may have written is written down BEFORE its download starts (`whole` false)
and marked whole only after it was renamed into place: after a kill at any point, every file at a
recorded name is the mirror's own (so it may replace or remove it), and only a file recorded whole
with the object's size and tag is trusted without a new download. A file the state does not name
was not written by the mirror and is never touched. The file is replaced whole (temporary name,
fsync, rename), so a kill leaves the previous state or the new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..utils.durable import fsync_dir
from ..utils.json_record import record_from_json

FORMAT = 1


class MirrorStateError(Exception):
    """The state file cannot be read, or belongs to another store; the message names it."""


@dataclass(frozen=True, slots=True)
class MirroredFile:
    """A file at `name` (relative to the local folder) that the mirror wrote or is about to write."""

    name: str
    size: int
    tag: str
    modified_ns: int  # the object's modified time, given to the file as its mtime
    version: str | None = None
    whole: bool = False  # renamed into place with these size and tag; False: planned, not trusted

    def placed(self) -> MirroredFile:
        return replace(self, whole=True)


@dataclass(frozen=True, slots=True)
class MirrorState:
    """The store the local folder mirrors and the files the mirror answers for, by name."""

    store: str
    files: dict[str, MirroredFile]


def load_state(path: Path, store_url: str) -> MirrorState:
    """The state at `path`; an empty one when there is none yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return MirrorState(store_url, {})
    try:
        doc = json.loads(text)
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT}")
        files = [record_from_json(MirroredFile, item, {}) for item in doc["files"]]
        store = str(doc["store"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MirrorStateError(f"{path}: not a readable mirror state ({exc}); the files it names cannot be told "
                               "from others: remove it and the mirrored folder to mirror afresh") from None
    if store != store_url:
        raise MirrorStateError(f"{path}: the state of a mirror of {store}, not of {store_url}: give each store "
                               "its own local folder and state file")
    return MirrorState(store, {f.name: f for f in files})


def save_state(path: Path, state: MirrorState) -> None:
    """Replace the state file whole: a kill leaves the previous one or this one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "store": state.store,
           "files": [asdict(state.files[name]) for name in sorted(state.files)]}
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w", encoding="utf-8") as out:
        json.dump(doc, out, ensure_ascii=False, separators=(",", ":"))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    fsync_dir(path.parent)


