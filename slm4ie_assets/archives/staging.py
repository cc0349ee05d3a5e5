"""One archive's outputs, staged: streamed into temporary files (names no extractor matches) and
renamed into place together once the whole archive has been read, or all removed (D16, D17).
A failure leaves nothing half-written, and a previous good version stays until the new one is
complete."""

import errno
import itertools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from ..extractors.discovery import escaped_name
from ..utils.gzipio import ChunkWriter
from .errors import ArchiveError, BudgetExceeded, SkipArchive, WouldReplace, WriteFailure
from .names import temp_name
from .ownership import Owners, same_bytes
from .state import OutputStamp

Log = Callable[[str], None]

PROGRESS_EVERY = 10.0  # seconds between progress lines for one large archive

# errors that say the member cannot be placed where it names (a property of the tree, not the disk)
_PLACEMENT_ERRNOS = (errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ELOOP)


@dataclass(slots=True)
class Budget:
    """How many bytes and members one ROOT archive (a raw file, not one unpacked from another) may
    unpack to, at any depth: every archive that comes out of it is charged to the same Budget, so
    nesting never multiplies the limits (issue 34). Counted on the bytes written, never on header
    claims; `note` names the limit that set it, for the message."""

    limit: int
    note: str
    max_members: int = 0  # members (files and folders) the root may hold at any depth; 0: no limit
    root: str = ""  # the root archive as messages name it ("<key>/<rel>"); "": the staged archive itself
    written: int = 0  # bytes unpacked from the root so far, at any depth
    members: int = 0


class Staging:
    """One archive's outputs: streamed into temporary files, stamped by `staged` (what the intent
    records), renamed into place together by `commit`, or all removed (with the folders made for
    them) by `rollback`. A member is never renamed over a file that `owners` does not record as an
    archive's output (issue 39): when that file holds the member's bytes it is kept as found,
    otherwise the root is refused (WouldReplace)."""

    def __init__(self, archive: Path, folder_rel: str, where: str, budget: Budget,
                 warn: Log, log: Log | None = None, owners: Owners | None = None):
        self.archive = archive
        self.folder = archive.parent
        self.folder_rel = folder_rel
        self.where = where
        self.budget = budget
        self.written = 0
        self.members = 0
        self.duplicates: list[str] = []  # members a later copy of the same name replaced (D6)
        self._warn = warn
        self._log = log
        self._owners = owners  # None: no file is recorded as an archive's output
        self._pending: dict[tuple[str, ...], Path] = {}  # member path -> its temporary file
        self._found: set[tuple[str, ...]] = set()  # members whose path already holds their bytes
        self._created: list[Path] = []  # folders made for this archive, removed again by rollback
        self._dirs: set[tuple[str, ...]] = {()}
        self._last_progress = time.monotonic()

    def rel(self, parts: Iterable[str]) -> str:
        tail = "/".join(parts)
        return f"{self.folder_rel}/{tail}" if self.folder_rel else tail

    def directory(self, parts: list[str], name: str) -> None:
        self._count_member(name)
        self._ensure_dir(tuple(parts), name)

    def _count_member(self, name: str) -> None:
        """Refuse a root archive of more members, at any depth, than `archives.max_members`: a few
        KB of tar.gz can hold tens of thousands of empty files, which the byte limits never see."""
        self.members += 1
        self.budget.members += 1
        limit = self.budget.max_members
        if limit and self.budget.members > limit:
            raise BudgetExceeded(f"holds more than {limit:,} members at any depth (limit archives.max_members; "
                                 f"reached at member {name!r}{self._nested_in()}); raise archives.max_members "
                                 f"in the config if the archive is trusted")

    def _nested_in(self) -> str:
        """Where a limit tripped, when that is an archive inside the root rather than the root."""
        return f" of {self.where}" if self.budget.root and self.budget.root != self.where else ""

    def _ensure_dir(self, parts: tuple[str, ...], name: str) -> Path:
        if parts in self._dirs:
            return self.folder.joinpath(*parts)
        path = self.folder
        for i, part in enumerate(parts, 1):
            path = path / part
            sub = parts[:i]
            if sub not in self._dirs:
                self._make_dir(path, sub, name)
                self._dirs.add(sub)
        return path

    def _make_dir(self, path: Path, sub: tuple[str, ...], name: str) -> None:
        if sub in self._pending:
            raise SkipArchive(f"member {name!r} needs {self.rel(sub)} to be a folder, but the archive "
                              f"also holds a file of that name")  # a property of the archive itself
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                os.mkdir(path)
            except OSError as exc:
                self._os_failure(exc, path, name)
            self._created.append(path)
            return
        if stat.S_ISLNK(st.st_mode):
            raise ArchiveError(f"{self.where}: member {name!r} would be written through the "
                               f"symbolic link {self.rel(sub)}; links are not followed", False)
        if not stat.S_ISDIR(st.st_mode):
            raise SkipArchive(f"member {name!r} needs {self.rel(sub)} to be a folder, but a file is there",
                              False)

    def file(self, parts: list[str], name: str, chunks: Iterable[bytes]) -> None:
        """Stage one member; errors raised by `chunks` come from reading the archive and pass."""
        self._count_member(name)
        key = self._file_key(parts, name)
        tmp = self.folder.joinpath(*key[:-1]) / temp_name(key[-1])
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            self._os_failure(exc, tmp, name)
        # buffered, so a short write is retried; the writer hands it whole chunks anyway
        fh = open(fd, "wb")
        failure: OSError | None = None
        try:
            earlier = self._pending.pop(key, None)
            self._pending[key] = tmp  # registered before the first byte, so rollback always finds it
            self._found.discard(key)
            if earlier is not None:
                earlier.unlink(missing_ok=True)
                message = f"member {name!r} appears more than once; an earlier copy was dropped, the last one kept"
                self.duplicates.append(message)
                self._warn(f"{self.where}: {message}")
            failure = self._copy(fh, chunks, name)
        finally:
            try:
                fh.close()
            except OSError as exc:
                failure = failure or exc
        if failure is not None:
            self._os_failure(failure, tmp, name)
        self._check_in_place(key, tmp, name)

    def _check_in_place(self, key: tuple[str, ...], tmp: Path, name: str) -> None:
        """What stands at the member's path may be replaced only when an archive produced it."""
        final = tmp.parent / key[-1]
        try:
            os.lstat(final)
        except FileNotFoundError:
            return
        rel = self.rel(key)
        if self._owners is not None and self._owners.produced(rel):
            return
        if same_bytes(final, tmp):
            self._found.add(key)
            return
        shown = self._owners.where(rel) if self._owners is not None else str(final)
        raise WouldReplace(f"member {name!r}{self._nested_in()} would replace {shown}, a file no archive "
                           f"produced (it is left as it is; move it away to unpack the archive)", rel)

    def _file_key(self, parts: list[str], name: str) -> tuple[str, ...]:
        """The member's path, once its folders exist and nothing in the tree stands in its way."""
        if not parts:
            raise ArchiveError(f"{self.where}: member {name!r} has an empty path")
        key = tuple(parts)
        final = self._ensure_dir(key[:-1], name) / key[-1]
        if key in self._dirs:
            raise SkipArchive(f"member {name!r} is a file, but the archive also uses {self.rel(key)} as a folder")
        if final == self.archive:
            raise SkipArchive(f"member {name!r} would overwrite the archive itself")
        try:
            st = os.lstat(final)
        except FileNotFoundError:
            return key
        if stat.S_ISDIR(st.st_mode):
            raise SkipArchive(f"member {name!r} would replace the folder {self.rel(key)}", False)
        return key

    def _copy(self, fh: BinaryIO, chunks: Iterable[bytes], name: str) -> OSError | None:
        """Write the member's chunks, decompressing the next one while the helper thread writes
        (both release the GIL); a member of one chunk never starts a thread. Returns the write
        error that stopped it, if any: the caller knows the path."""
        source = self._counted(chunks, name)
        head = list(itertools.islice(source, 2))
        writer = ChunkWriter(fh, threaded=len(head) > 1)
        try:
            for chunk in itertools.chain(head, source):  # errors raised here come from reading the archive
                try:
                    writer.write(chunk)
                except OSError as exc:
                    writer.abort()
                    return exc
                self._progress()
        except BaseException:
            writer.abort()
            raise
        try:
            writer.close()
        except OSError as exc:
            return exc
        return None

    def _counted(self, chunks: Iterable[bytes], name: str) -> Iterator[bytes]:
        budget = self.budget
        for chunk in chunks:
            self.written += len(chunk)
            budget.written += len(chunk)
            if budget.written > budget.limit:
                raise BudgetExceeded(f"unpacks to more than {budget.limit:,} bytes at any depth (limit "
                                     f"{budget.note}; reached in member {name!r}{self._nested_in()}); raise "
                                     f"archives.max_ratio / archives.max_bytes in the config if the archive "
                                     f"is trusted")
            yield chunk

    def _progress(self) -> None:
        now = time.monotonic()
        if self._log is not None and now - self._last_progress >= PROGRESS_EVERY:
            self._last_progress = now
            self._log(escaped_name(f"{self.where}: {self.written / 1e6:.0f} MB unpacked so far"))

    def _os_failure(self, exc: OSError, path: Path, name: str) -> NoReturn:
        if exc.errno in _PLACEMENT_ERRNOS:
            raise SkipArchive(f"member {name!r} cannot be placed at {path}: {exc.strerror}", False) from exc
        raise WriteFailure(exc.errno, f"{self.where}: cannot write {path}: {exc.strerror}") from exc

    def staged(self) -> tuple[dict[str, OutputStamp], tuple[str, ...]]:
        """Each output as it will stand once in place (a rename keeps size and mtime), and those
        found in place already: what the intent records before `commit`."""
        outputs: dict[str, OutputStamp] = {}
        for key, tmp in self._pending.items():
            path = tmp.parent / key[-1] if key in self._found else tmp
            try:
                st = os.lstat(path)
            except OSError as exc:
                raise WriteFailure(exc.errno, f"{self.where}: cannot stat {path}: {exc.strerror}") from exc
            outputs[self.rel(key)] = OutputStamp(st.st_size, st.st_mtime_ns)
        return outputs, tuple(self.rel(key) for key in self._pending if key in self._found)

    def commit(self) -> None:
        """Rename every staged file into place; a member found in place drops its copy."""
        for key, tmp in list(self._pending.items()):
            final = tmp.parent / key[-1]
            try:
                if key in self._found:
                    os.unlink(tmp)
                else:
                    os.replace(tmp, final)
            except OSError as exc:
                raise WriteFailure(exc.errno, f"{self.where}: cannot move {tmp} to {final}: "
                                              f"{exc.strerror}") from exc
            del self._pending[key]
        self._created.clear()

    def rollback(self) -> None:
        for tmp in self._pending.values():
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
        self._pending.clear()
        for path in reversed(self._created):
            try:
                os.rmdir(path)
            except OSError:
                pass
        self._created.clear()
