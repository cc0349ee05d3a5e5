"""Which files are archives, the temporary names outputs are staged under, and the member-path
rules that keep every member inside the archive's folder (D16)."""

import os
import re
import secrets
from dataclasses import dataclass

from .errors import ArchiveError

TEMP_MARK = ".slm4ie-tmp-"
_TEMP_NAME = re.compile(r"\..*\.slm4ie-tmp-[0-9a-f]{16}", re.DOTALL)

_TAR_SUFFIXES = ((".tar.gz", "gzip"), (".tgz", "gzip"), (".tar.xz", "xz"), (".tar.bz2", "bz2"),
                 (".tar.zst", "zstd"), (".tar.zstd", "zstd"), (".tar", None))
_SINGLE_SUFFIXES = ((".gz", "gzip"), (".xz", "xz"), (".bz2", "bz2"), (".zst", "zstd"))


@dataclass(frozen=True, slots=True)
class ArchiveKind:
    shape: str  # "tar" | "zip" | "single"
    codec: str | None  # "gzip" | "xz" | "bz2" | "zstd", None for a plain tar and for zip
    suffix: str  # the matched suffix; a single file's output is its name without it


def archive_kind(name: str) -> ArchiveKind | None:
    """What an archive file name says it holds, else None (D16). Longest suffixes first, so
    `a.tar.gz` is a tar, not a single gzip file."""
    for suffix, codec in _TAR_SUFFIXES:
        if name.endswith(suffix):
            return ArchiveKind("tar", codec, suffix)
    if name.endswith(".zip"):
        return ArchiveKind("zip", None, ".zip")
    for suffix, codec in _SINGLE_SUFFIXES:
        if name.endswith(suffix):
            return ArchiveKind("single", codec, suffix)
    return None


def temp_name(final_name: str) -> str:
    """Hidden, unique, and ending in random hex, so no extractor suffix (or archive suffix) matches."""
    head = os.fsdecode(os.fsencode(final_name)[:100])
    return f".{head}{TEMP_MARK}{secrets.token_hex(8)}"


def is_temp_name(name: str) -> bool:
    return _TEMP_NAME.fullmatch(name) is not None


def member_parts(name: str, where: str, windows_separators: bool = False) -> list[str]:
    """The path components of a member, or ArchiveError when it would leave the archive's folder."""
    path = name.replace("\\", "/") if windows_separators else name
    if "\x00" in path:
        raise ArchiveError(f"{where}: member {name!r} has a NUL byte in its name")
    if path.startswith("/") or (windows_separators and re.match(r"[A-Za-z]:", path)):
        raise ArchiveError(f"{where}: member {name!r} has an absolute path; members must stay inside "
                           f"the archive's folder")
    parts = [p for p in path.split("/") if p and p != "."]
    if ".." in parts:
        raise ArchiveError(f"{where}: member {name!r} climbs out of the archive's folder with '..'")
    return parts
