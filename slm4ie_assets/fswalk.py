"""The package's one walk of a raw tree (ADDENDUM 3.1), shared by extractor discovery and archive
unpacking, so both see the same entries in the same order.

Real folders are entered, hidden ones included; a symlinked folder is never entered, so a link
loop cannot be followed and the walk cannot leave the tree. Everything else is handed to the
caller, whose policy decides what to report and what to take: discovery follows links to files,
archives refuses them.
"""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class WalkEntry:
    """An entry that is not a real folder (or whose kind could not be told)."""

    rel: str  # posix path relative to the walk's root
    entry: os.DirEntry
    type_error: OSError | None = None  # raised while telling whether it is a folder; not entered then


def walk(root: Path, on_unlistable: Callable[[str, OSError], None]) -> Iterator[WalkEntry]:
    """Every entry below `root` that is not a real folder, depth first.

    A folder that cannot be listed goes to `on_unlistable(folder_rel, error)`; `root` itself comes
    as `""`, and the callback raises for it when an unlistable root must fail the caller."""
    stack = [("", os.fspath(root))]
    while stack:
        prefix, dirpath = stack.pop()
        try:
            entries = list(os.scandir(dirpath))
        except OSError as exc:
            on_unlistable(prefix[:-1], exc)
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                yield WalkEntry(rel, entry, exc)
                continue
            if is_folder:
                stack.append((rel + "/", entry.path))
            else:
                yield WalkEntry(rel, entry)
