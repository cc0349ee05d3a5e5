"""What unpacking remembers between runs (the state file, outside the raw tree) and what one run
reports. The state file's JSON is a contract with every existing deployment: `to_json` writes, and
`from_json` accepts, the format-1 document, so state written before stays valid; the keys added
since (`dropped`, `found`, `blocker`, `journal`) are written only when set, and a reader that does
not know them ignores them."""

import json
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..extractors.discovery import sort_key
from ..utils.durable import fsync_dir as fsync_folder

STATE_FORMAT = 1
INTERRUPTED = -1  # an entry's archive size while its outputs may be half renamed or withdrawn (run.py, outputs.py)


@dataclass(frozen=True, slots=True)
class OutputStamp:
    """An output as it was unpacked: one that differs since is somebody's edit, and is kept."""

    size: int
    mtime_ns: int

    def matches(self, st: os.stat_result) -> bool:
        return stat.S_ISREG(st.st_mode) and st.st_size == self.size and st.st_mtime_ns == self.mtime_ns

    def to_json(self) -> list[int]:
        return [self.size, self.mtime_ns]

    @classmethod
    def from_json(cls, out: str, rec: Any) -> "OutputStamp":
        if not (isinstance(rec, list) and len(rec) == 2 and all(isinstance(v, int) for v in rec)):
            raise ValueError(f"output {out!r} has no [size, mtime_ns]")
        return cls(rec[0], rec[1])


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """An archive as last unpacked (its size and mtime) and every file it produced. A size of
    INTERRUPTED marks a run killed while the outputs were renamed into place (the entry claims the
    outputs of both versions), or an archive whose tree was withdrawn to unpack it again (the entry
    claims what was left, changed by hand or found): never current, so the archive is unpacked again."""

    size: int
    mtime_ns: int
    outputs: dict[str, OutputStamp]  # output rel -> stamp, in the order the archive held them
    # members whose copy a later one of the same name replaced (D6: `duplicate_member`), reported
    # again while the archive is unchanged; the key is written only when there are any, so the
    # state of an archive without duplicates is the format-1 document it always was
    dropped: tuple[str, ...] = ()
    # outputs that were in place, byte for byte, before the archive was unpacked (a lost state, a
    # copy unpacked by hand): taken as they are, and never removed, since no archive wrote them;
    # written only when there are any, as `dropped`
    found: tuple[str, ...] = ()

    @property
    def produced(self) -> dict[str, OutputStamp]:
        """The outputs the archive wrote itself: the ones unpacking may replace or remove."""
        if not self.found:
            return self.outputs
        found = set(self.found)
        return {out: stamp for out, stamp in self.outputs.items() if out not in found}

    def to_json(self) -> dict:
        doc: dict[str, Any] = {"size": self.size, "mtime_ns": self.mtime_ns,
                               "outputs": {out: stamp.to_json() for out, stamp in self.outputs.items()}}
        if self.dropped:
            doc["dropped"] = list(self.dropped)
        if self.found:
            doc["found"] = list(self.found)
        return doc

    @classmethod
    def from_json(cls, entry: Any) -> "ArchiveEntry":
        size, mtime_ns, outputs = entry["size"], entry["mtime_ns"], entry["outputs"]
        dropped, found = entry.get("dropped", []), entry.get("found", [])
        if not (isinstance(size, int) and isinstance(mtime_ns, int) and isinstance(outputs, dict)
                and _strings(dropped) and _strings(found) and set(found) <= set(outputs)):
            raise ValueError("an entry lacks size, mtime_ns or outputs")
        return cls(size, mtime_ns, {out: OutputStamp.from_json(out, rec) for out, rec in outputs.items()},
                   tuple(dropped), tuple(found))


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True, slots=True)
class Blocker:
    """A file no archive produced that a member would have replaced, as it stood (issue 39)."""

    rel: str
    stamp: OutputStamp

    def to_json(self) -> list:
        return [self.rel, *self.stamp.to_json()]

    @classmethod
    def from_json(cls, rec: Any) -> "Blocker":
        if not (isinstance(rec, list) and len(rec) == 3 and isinstance(rec[0], str)):
            raise ValueError("a blocker is not [rel, size, mtime_ns]")
        return cls(rec[0], OutputStamp.from_json(rec[0], rec[1:]))


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """An archive whose own bytes failed: reported again, without reading them, while `key` holds
    (and, for a member refused over somebody's file, while that file stands as it was)."""

    key: tuple  # (size, mtime_ns, ctime_ns, max_ratio, max_bytes, max_members), see run._failure_key
    refused: bool  # ArchiveError (fails the dataset) rather than a skip
    reason: str
    blocker: Blocker | None = None  # written only when set, so older records are unchanged

    def to_json(self) -> dict:
        doc: dict[str, Any] = {"key": list(self.key), "refused": self.refused, "reason": self.reason}
        if self.blocker is not None:
            doc["blocker"] = self.blocker.to_json()
        return doc

    @classmethod
    def from_json(cls, failure: Any) -> "FailureRecord":
        key, refused, reason = failure["key"], failure["refused"], failure["reason"]
        # 5 items before `max_members` existed: such a record never matches a new key, so the
        # archive is read once more and its failure recorded again
        if not (isinstance(key, list) and len(key) in (5, 6) and isinstance(refused, bool)
                and isinstance(reason, str)):
            raise ValueError("a failure entry lacks key, refused or reason")
        blocker = failure.get("blocker")
        return cls(tuple(key), refused, reason, None if blocker is None else Blocker.from_json(blocker))


@dataclass(slots=True)
class ArchiveState:
    """The state file: {archive rel: entry} and {archive rel: its last failure}; `journal` names
    the intent journal (journal.py) whose intents this state already holds."""

    archives: dict[str, ArchiveEntry] = field(default_factory=dict)
    failed: dict[str, FailureRecord] = field(default_factory=dict)
    journal: str = ""  # written only when set

    def to_json(self) -> dict:
        doc: dict[str, Any] = {
            "format": STATE_FORMAT,
            "archives": {rel: self.archives[rel].to_json() for rel in sorted(self.archives, key=sort_key)},
            "failed": {rel: self.failed[rel].to_json() for rel in sorted(self.failed, key=sort_key)}}
        if self.journal:
            doc["journal"] = self.journal
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "ArchiveState":
        """Raises ValueError, KeyError, TypeError or AttributeError for a document of another shape."""
        if doc.get("format") != STATE_FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {STATE_FORMAT}")
        archives = {rel: ArchiveEntry.from_json(e) for rel, e in doc["archives"].items()}
        failed = {rel: FailureRecord.from_json(f) for rel, f in doc["failed"].items()}
        journal = doc.get("journal", "")
        if not isinstance(journal, str):
            raise ValueError("journal is not a string")
        return cls(archives, failed, journal)


def load_state(state_file: Path, warn: Callable[[str], None]) -> ArchiveState:
    """The saved state; an empty one (every archive is unpacked again) when it is missing or bad."""
    try:
        text = state_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ArchiveState()
    except (OSError, UnicodeDecodeError) as exc:
        warn(f"{state_file}: archive state cannot be read ({exc}); every archive is unpacked again")
        return ArchiveState()
    try:
        return ArchiveState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        warn(f"{state_file}: archive state is not valid ({exc}); every archive is unpacked again")
        return ArchiveState()


def save_state(state_file: Path, state: ArchiveState) -> None:
    """Write the state file atomically and durably (fsynced temporary, rename, fsynced folder):
    the intent journal it replaces is removed next."""
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_name(f".{state_file.name}.{secrets.token_hex(8)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state.to_json(), fh, separators=(",", ":"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, state_file)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_folder(state_file.parent)


@dataclass(frozen=True, slots=True)
class SkippedArchive:
    path: str  # relative to raw/<key>/
    reason: str


@dataclass(slots=True)
class ArchiveReport:
    """What one `unpack_archives` call did; paths are posix, relative to raw/<key>/."""

    unpacked: list[str] = field(default_factory=list)
    up_to_date: list[str] = field(default_factory=list)
    skipped: list[SkippedArchive] = field(default_factory=list)
    outputs: dict[str, list[str]] = field(default_factory=dict)  # archive -> the files it produced
    warnings: list[str] = field(default_factory=list)  # also logged, each once, as "WARNING ..."
    # D6 ledger lines, "<folder>/<rel>: <what> [reason]": each skipped archive (`bad_archive`) and
    # each member a later copy replaced (`duplicate_member`), unchanged archives included
    drops: list[str] = field(default_factory=list)
