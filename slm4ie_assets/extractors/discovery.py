"""Finding the inputs under `raw/<key>/` (ADDENDUM 3.1): the walk, its order, and the names that are
not inputs (a copy tool's working names, names not valid UTF-8) or cannot be read (D6)."""

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ..utils.fswalk import walk
from .input_file import InputFile


@dataclass(frozen=True, slots=True)
class Discovery:
    """What `Extractor.list_inputs` found: the inputs in ADDENDUM 3.1 order and the entries named
    like inputs that cannot be read (D6: reported as `unreadable_path`, never silently lost)."""

    files: tuple[InputFile, ...]
    unreadable: tuple[str, ...] = ()  # "<rel>: <why>; not extracted", relative to raw/<key>/


def sort_key(rel: str) -> tuple:
    """Order of ADDENDUM 3.1: compare path components as code-point strings."""
    return tuple(rel.split("/"))


def discover(root: Path, suffixes: tuple[str, ...], unreadable: list | None = None) -> list[InputFile]:
    """Recursive discovery (ADDENDUM 3.1): hidden entries included, symlinked files included,
    symlinked directories not descended (so a link loop is never followed), directories named like
    inputs ignored (D6). What is named like an input but cannot be read as a file (a broken link, a
    link loop, a fifo or device, a folder that cannot be listed) goes to `unreadable` (D6: reported,
    never silently lost). A raw folder that cannot be listed at all raises: publishing it as empty
    would replace good output with nothing."""
    found: list[InputFile] = []

    def unlistable(folder: str, exc: OSError) -> None:
        if not folder:
            raise OSError(exc.errno, f"cannot list the raw folder {root}: {exc.strerror or exc}") from exc
        if unreadable is not None:
            unreadable.append(f"{folder}: folder cannot be listed ({exc.strerror or exc}); "
                              "its files are not extracted")

    for item in walk(root, unlistable):
        rel, entry = item.rel, item.entry
        try:
            if item.type_error is not None:  # whether it is a folder could not be told
                raise item.type_error
            if not entry.name.endswith(suffixes) or is_arriving_name(entry.name, suffixes):
                continue
            if not is_utf8_name(rel):  # D6: counted, never a crash in keys, metas or the UI
                if unreadable is not None:
                    unreadable.append(f"{escaped_name(rel)}: {NOT_UTF8}; not extracted")
                continue
            if entry.is_file(follow_symlinks=True):
                found.append(InputFile(Path(entry.path), rel))
                continue
            mode = os.stat(entry.path).st_mode  # raises for a broken link or a link loop
        except OSError as exc:
            if unreadable is not None:
                unreadable.append(f"{rel}: {unreadable_reason(entry, exc)}; not extracted")
            continue
        if not stat.S_ISDIR(mode) and unreadable is not None:
            unreadable.append(f"{rel}: not a regular file ({file_kind(mode)}); not extracted")
    found.sort(key=lambda f: sort_key(f.rel))
    return found


_RSYNC_TEMP = re.compile(r"\.(.+)\.[A-Za-z0-9]{6}")  # rsync writes `.<name>.<6 random characters>`
_DOWNLOAD_SUFFIXES = (".part", ".partial", ".tmp", ".crdownload", "~")


def is_arriving_name(name: str, suffixes: tuple[str, ...] = ()) -> bool:
    """A name copy and download tools give a file while they write it (rsync's `.name.XXXXXX`,
    `*.part`, `*.partial`, `*.tmp`, `*.crdownload`, `*~`): never an input, and a sign that a file
    is still arriving. A hidden name that ends in one of `suffixes` (`.notes.conllu`) is an input."""
    if name.endswith(_DOWNLOAD_SUFFIXES):
        return True
    if suffixes and name.endswith(suffixes):
        return False
    return _RSYNC_TEMP.fullmatch(name) is not None


NOT_UTF8 = "the name is not valid UTF-8 (made on another code page?); rename the file to UTF-8"


def is_utf8_name(name: str) -> bool:
    """False for a name the OS gave back with undecodable bytes (surrogate escapes): it cannot go
    into a shard key, a part meta, a partition key or a log line."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escaped_name(name: str) -> str:
    """A name with its undecodable bytes written as `\\xNN`: shown to users, lossless, always UTF-8."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def unreadable_reason(entry: os.DirEntry, exc: OSError) -> str:
    """Why a directory entry named like an input cannot be read, for the `unreadable` list (D6)."""
    if entry.is_symlink():
        if exc.errno == errno.ENOENT:
            return "a symbolic link whose target does not exist"
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
    return exc.strerror or str(exc)


def file_kind(mode: int) -> str:
    """`a fifo`, `a socket`, ... for a mode that is neither a regular file nor a folder."""
    for test, name in ((stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "an unknown kind of file"
