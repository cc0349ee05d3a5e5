"""The package's one walk of a raw tree (ADDENDUM 3.1), shared by extractor discovery and archive
unpacking, so both see the same entries in the same order.

Real folders are entered, hidden ones included; a symlinked folder is never entered, so a link
loop cannot be followed and the walk cannot leave the tree. Everything else is handed to the
caller, whose policy decides what to report and what to take: discovery follows links to files,
archives refuses them.

Copy tools' working folders and names are never handed out and never entered: rsync's
`--delay-updates` folder `.~tmp~/` and `--partial-dir` `.rsync-partial/`, and azcopy's
`.azDownload-*` (a file or a folder). What is in them is cut off until the tool renames it into place,
so neither discovery nor the archive stage may take it; the raw sensor is told (`on_copy_temp`) and
reads them as "still arriving" (planning/settling.py).
"""

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

COPY_TOOL_FOLDERS = frozenset({".~tmp~", ".rsync-partial"})  # rsync --delay-updates, rsync --partial-dir
COPY_TOOL_PREFIXES = (".azDownload-",)  # azcopy's download in progress


def is_copy_tool_name(name: str) -> bool:
    """A folder or file a copy tool writes into before renaming its content into place."""
    return name in COPY_TOOL_FOLDERS or name.startswith(COPY_TOOL_PREFIXES)


@dataclass(frozen=True, slots=True)
class WalkEntry:
    """An entry that is not a real folder (or whose kind could not be told)."""

    rel: str  # posix path relative to the walk's root
    entry: os.DirEntry
    type_error: OSError | None = None  # raised while telling whether it is a folder; not entered then


def walk(root: Path, on_unlistable: Callable[[str, OSError], None],
         on_copy_temp: Callable[[str, os.DirEntry], None] | None = None) -> Iterator[WalkEntry]:
    """Every entry below `root` that is not a real folder, depth first.

    A folder that cannot be listed goes to `on_unlistable(folder_rel, error)`; `root` itself comes
    as `""`, and the callback raises for it when an unlistable root must fail the caller. A copy
    tool's working folder or file (`is_copy_tool_name`) goes to `on_copy_temp(rel, entry)` when given,
    and is skipped either way."""
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
            if is_copy_tool_name(entry.name):
                if on_copy_temp is not None:
                    on_copy_temp(rel, entry)
                continue
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                yield WalkEntry(rel, entry, exc)
                continue
            if is_folder:
                stack.append((rel + "/", entry.path))
            else:
                yield WalkEntry(rel, entry)
