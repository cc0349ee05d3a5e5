"""What unpacking remembers between runs (the state file, outside the raw tree) and what one run
reports. The state file's JSON is a contract with every existing deployment: `to_json` writes, and
`from_json` accepts, exactly the format-1 document, so state written before stays valid."""

import json
import os
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..extractors.discovery import sort_key

STATE_FORMAT = 1


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
    """An archive as last unpacked (its size and mtime) and every file it produced."""

    size: int
    mtime_ns: int
    outputs: dict[str, OutputStamp]  # output rel -> stamp, in the order the archive held them
    # members whose copy a later one of the same name replaced (D6: `duplicate_member`), reported
    # again while the archive is unchanged; the key is written only when there are any, so the
    # state of an archive without duplicates is the format-1 document it always was
    dropped: tuple[str, ...] = ()

    def to_json(self) -> dict:
        doc: dict[str, Any] = {"size": self.size, "mtime_ns": self.mtime_ns,
                               "outputs": {out: stamp.to_json() for out, stamp in self.outputs.items()}}
        if self.dropped:
            doc["dropped"] = list(self.dropped)
        return doc

    @classmethod
    def from_json(cls, entry: Any) -> "ArchiveEntry":
        size, mtime_ns, outputs = entry["size"], entry["mtime_ns"], entry["outputs"]
        dropped = entry.get("dropped", [])
        if not (isinstance(size, int) and isinstance(mtime_ns, int) and isinstance(outputs, dict)
                and isinstance(dropped, list) and all(isinstance(d, str) for d in dropped)):
            raise ValueError("an entry lacks size, mtime_ns or outputs")
        return cls(size, mtime_ns, {out: OutputStamp.from_json(out, rec) for out, rec in outputs.items()},
                   tuple(dropped))


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """An archive whose own bytes failed: reported again, without reading them, while `key` holds."""

    key: tuple  # (size, mtime_ns, ctime_ns, max_ratio, max_bytes, max_members), see run._failure_key
    refused: bool  # ArchiveError (fails the dataset) rather than a skip
    reason: str

    def to_json(self) -> dict:
        return {"key": list(self.key), "refused": self.refused, "reason": self.reason}

    @classmethod
    def from_json(cls, failure: Any) -> "FailureRecord":
        key, refused, reason = failure["key"], failure["refused"], failure["reason"]
        # 5 items before `max_members` existed: such a record never matches a new key, so the
        # archive is read once more and its failure recorded again
        if not (isinstance(key, list) and len(key) in (5, 6) and isinstance(refused, bool)
                and isinstance(reason, str)):
            raise ValueError("a failure entry lacks key, refused or reason")
        return cls(tuple(key), refused, reason)


@dataclass(slots=True)
class ArchiveState:
    """The state file: {archive rel: entry} and {archive rel: its last failure}."""

    archives: dict[str, ArchiveEntry] = field(default_factory=dict)
    failed: dict[str, FailureRecord] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"format": STATE_FORMAT,
                "archives": {rel: self.archives[rel].to_json() for rel in sorted(self.archives, key=sort_key)},
                "failed": {rel: self.failed[rel].to_json() for rel in sorted(self.failed, key=sort_key)}}

    @classmethod
    def from_json(cls, doc: Any) -> "ArchiveState":
        """Raises ValueError, KeyError, TypeError or AttributeError for a document of another shape."""
        if doc.get("format") != STATE_FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {STATE_FORMAT}")
        archives = {rel: ArchiveEntry.from_json(e) for rel, e in doc["archives"].items()}
        failed = {rel: FailureRecord.from_json(f) for rel, f in doc["failed"].items()}
        return cls(archives, failed)


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
    """Write the state file atomically (fsynced temporary, then rename)."""
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
