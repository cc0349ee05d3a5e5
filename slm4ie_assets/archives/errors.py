"""How unpacking fails, by whose fault: the archive's (refused or skipped, and remembered), the
tree's around it (tried again next time), or the disk's (the run fails)."""

import lzma
import struct
import tarfile
import zipfile
import zlib

import zstandard

from ..extractors.discovery import escaped_name


class ArchiveError(ValueError):
    """An archive that must not be unpacked (unsafe member, expansion beyond the limits):
    fails the dataset, naming the archive and member. `about_archive` is False when the cause lies
    in the tree around it (a symlinked folder), so an unchanged archive is tried again."""

    def __init__(self, message: str, about_archive: bool = True):
        super().__init__(escaped_name(message))  # a name that is not UTF-8: \xNN escapes
        self.about_archive = about_archive


class SkipArchive(Exception):
    """An archive that cannot be unpacked as it is: skipped with a warning (S14). `about_archive`
    as for ArchiveError: a clash with existing files is not remembered, corrupt data is."""

    def __init__(self, reason: str, about_archive: bool = True):
        super().__init__(escaped_name(reason))
        self.about_archive = about_archive


class RefusesRoot(SkipArchive):
    """A failure anywhere in a root archive's tree that skips the ROOT as `bad_archive` and removes
    everything its tree produced (D16), rather than skipping only the archive where it happened."""


class BudgetExceeded(RefusesRoot):
    """A root archive unpacks, at any depth, to more bytes or members than `archives:` allows (D16):
    the root is skipped as `bad_archive` and everything unpacked from it is removed. The reason
    names the member where the limit tripped, and the inner archive that held it."""


class WouldReplace(RefusesRoot):
    """A member whose path holds a file no archive produced, with other bytes (issue 39): the file
    is somebody's own and stays. Remembered while the archive and that file (`blocker`, relative
    to raw/<key>/) are unchanged."""

    def __init__(self, reason: str, blocker: str):
        super().__init__(reason)
        self.blocker = blocker


class WriteFailure(OSError):
    """The raw tree cannot be written (disk full, permissions): fails the run, unlike a bad archive."""


class OversizedHeader(Exception):
    """A tar metadata header larger than formats.MAX_TAR_METADATA; args[0] is its size."""


# the reading side of an archive raises these when the archive itself is bad
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, zstandard.ZstdError, tarfile.TarError,
               zipfile.BadZipFile, zipfile.LargeZipFile, struct.error, ValueError, NotImplementedError)


def describe(exc: BaseException) -> str:
    """A read error as a skip reason, naming the library that raised it."""
    text = str(exc) or "no details"
    kind = type(exc)
    package = kind.__module__.split(".")[0].lstrip("_")
    name = kind.__name__ if package == "builtins" else f"{package}.{kind.__name__}"
    return f"cannot be read: {name}: {text}"
