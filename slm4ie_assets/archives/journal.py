"""The intent journal: what an archive is about to produce, written durably BEFORE the first of its
outputs is renamed into place (issue 39). The state file is saved every SAVE_EVERY seconds and at
the end of a run; a run killed in between used to leave renamed outputs that no record named, so
the next run unpacked each inner archive on a budget of its own and never withdrew what a newer
version of an archive dropped. The journal names them, and the next run reads it back first
(outputs.resolve_intent).

One JSON line per intent, appended and fsynced; the first line names the journal. A saved state
records the name of the journal it already holds (`ArchiveState.journal`) and the journal is
removed just after, so one left by a kill between the two is not read twice. A last line cut short
by a kill is ignored: the renames of its archive had not begun."""

import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .state import ArchiveEntry, fsync_folder


@dataclass(frozen=True, slots=True)
class Intent:
    archive: str  # relative to raw/<key>/
    entry: ArchiveEntry  # the archive's record as it stands once every output is in place


def journal_path(state_file: Path) -> Path:
    return state_file.with_name(f"{state_file.name}.intents")


class Journal:
    """The journal this run appends to; created with its first intent."""

    def __init__(self, path: Path):
        self.path = path
        self.name = ""  # "" until the first intent
        self._fd: int | None = None

    def append(self, intent: Intent) -> None:
        """Returns once the intent is on disk (fsynced, its file's name too)."""
        if self._fd is None:
            self._create()
        assert self._fd is not None
        line = {"archive": intent.archive, "entry": intent.entry.to_json()}
        _write_all(self._fd, json.dumps(line, separators=(",", ":")).encode() + b"\n")
        os.fsync(self._fd)

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        name = secrets.token_hex(8)
        # O_EXCL: a journal left by another run is read back and removed before this one starts
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            _write_all(fd, json.dumps({"journal": name}).encode() + b"\n")
            os.fsync(fd)
            fsync_folder(self.path.parent)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.name = fd, name

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Once a state that holds every intent in it is saved; the next intent starts a new one."""
        self.close()
        self.path.unlink(missing_ok=True)
        self.name = ""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_journal(path: Path, held: str, warn: Callable[[str], None]) -> tuple[str, list[Intent]]:
    """(the journal's name, its intents, in order); none when there is no journal, or when it is
    the one named `held`, whose intents the saved state already holds."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "", []
    except OSError as exc:
        warn(f"{path}: archive intents cannot be read ({exc.strerror or exc}); an archive that a killed run "
             f"was unpacking may be unpacked again on a budget of its own")
        return "", []
    lines = data.split(b"\n")[:-1]  # what follows the last newline was cut short by a kill
    if not lines:
        return "", []
    try:
        name = json.loads(lines[0])["journal"]
        if not isinstance(name, str):
            raise ValueError("no journal name")
    except (ValueError, KeyError, TypeError) as exc:
        warn(f"{path}: archive intents are not valid ({exc}); ignored")
        return "", []
    if name == held:
        return name, []
    intents = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            doc = json.loads(line)
            intents.append(Intent(doc["archive"], ArchiveEntry.from_json(doc["entry"])))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            warn(f"{path}:{number}: an archive intent is not valid ({exc}); it and the rest are ignored")
            break
    return name, intents
