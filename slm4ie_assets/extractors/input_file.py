"""The unit of extraction: an input file (or config directory), or one byte range of a split file.

`InputFile` and `FileRange` are plain values that planning, the pool and every extractor pass
around; `is_input_error` tells an extractor's failure to read its own input from anything else.
"""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class FileRange:
    """Range `index` of a file split on record boundaries (docs/splitting.md): bytes
    `cuts[index]` up to `cuts[index + 1]`; the last range reads to the end of the file."""

    index: int
    cuts: tuple[int, ...]  # 0, the cut offsets, the file size at planning

    @property
    def start(self) -> int:
        return self.cuts[self.index]

    @property
    def end(self) -> int | None:
        """Where reading stops; None for the last range (to the end, as an unsplit read)."""
        return None if self.is_last else self.cuts[self.index + 1]

    @property
    def is_last(self) -> bool:
        return self.index == len(self.cuts) - 2


@dataclass(frozen=True)
class InputFile:
    """One unit of extraction: a file (or, for huggingface, a config directory), or one byte range
    of a file split on record boundaries (`range`)."""

    path: Path
    rel: str  # posix path relative to raw/<key>/
    range: FileRange | None = None

    @property
    def at_file_start(self) -> bool:
        """Reading starts at byte 0: only there is a BOM removed (D8)."""
        return self.range is None or self.range.index == 0

    @property
    def ends_file(self) -> bool:
        """Reading goes on to the end of the file: only then do end-of-file summaries apply."""
        return self.range is None or self.range.is_last

    def range_of(self, index: int) -> "InputFile":
        """Another range of the same split file."""
        assert self.range is not None
        return InputFile(self.path, self.rel, FileRange(index, self.range.cuts))

    @property
    def rel_stem(self) -> str:
        """`rel` without its last suffix: `sub/a.b.txt` -> `sub/a.b` (ADDENDUM 4.1)."""
        head, _, name = self.rel.rpartition("/")
        stem = _stem(name)
        return f"{head}/{stem}" if head else stem

    @property
    def stem(self) -> str:
        return _stem(self.path.name)


def _stem(name: str) -> str:
    # Path.stem semantics: a leading dot is not a suffix separator (".hidden.txt" -> ".hidden")
    i = name.rfind(".")
    return name[:i] if i > 0 else name


def is_input_error(exc: OSError, file: InputFile) -> bool:
    """True when an extractor's OSError is about reading its own input (the file, or a file inside
    a config directory), not about something else it needs (a TSV sidecar fails the dataset)."""
    if exc.filename is None:
        return True
    name = os.fsdecode(exc.filename)
    base = os.fspath(file.path)
    return name == base or name.startswith(base + os.sep)
