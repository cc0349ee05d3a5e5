"""What every extractor shares: the input-file handle, the drop ledger, discovery, reading helpers.

An extractor turns one input file into Documents. It knows nothing of Dagster, shards, JSON
output or gzip; it reports what it could not read to the ledger and moves on (D6).
"""

import codecs
import errno
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..fswalk import walk
from ..schema import Document

MAX_WARNINGS_KEPT = 100


@dataclass(frozen=True)
class InputFile:
    """One unit of extraction: a file (or, for huggingface, a config directory)."""

    path: Path
    rel: str  # posix path relative to raw/<key>/

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


@dataclass
class DropLedger:
    """Everything skipped, counted by reason, with the first warnings kept verbatim."""

    counts: Counter = field(default_factory=Counter)
    warnings: list = field(default_factory=list)

    def add(self, reason: str, message: str) -> None:
        self.counts[reason] += 1
        if len(self.warnings) < MAX_WARNINGS_KEPT:
            self.warnings.append(message)

    def merge(self, counts: dict, warnings: list) -> None:
        self.counts.update(counts)
        room = MAX_WARNINGS_KEPT - len(self.warnings)
        if room > 0:
            self.warnings.extend(warnings[:room])

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class ExtractContext:
    """Per-shard context handed to an extractor: where the data is and where drops go."""

    def __init__(self, dataset: str, root: Path, ledger: DropLedger | None = None, on_warning=None):
        self.dataset = dataset
        self.root = root
        self.ledger = ledger if ledger is not None else DropLedger()
        self._on_warning = on_warning

    def drop(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        where = f"{self.dataset}/{file.rel}" + (f":{line}" if line is not None else "")
        text = f"{where}: {message} [{reason}]"
        self.ledger.add(reason, text)
        if self._on_warning is not None:
            self._on_warning(text)


class ExtractorError(Exception):
    """A problem that fails the whole dataset (bad config discovered at run start, ...)."""


@dataclass(frozen=True, slots=True)
class Discovery:
    """What `Extractor.list_inputs` found: the inputs in ADDENDUM 3.1 order and the entries named
    like inputs that cannot be read (D6: reported as `unreadable_path`, never silently lost)."""

    files: tuple[InputFile, ...]
    unreadable: tuple[str, ...] = ()  # "<rel>: <why>; not extracted", relative to raw/<key>/


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A stat-only change detector of one input. Its string form `<size>:<stamp>` is what part
    metas, manifests and the sensor's run keys persist, so it must never change for the same stat."""

    size: int  # bytes of the input (a config directory: of all its files); shard sizes add these up
    stamp: str  # the rest, e.g. the file's mtime in ns or a digest of a directory listing

    def __str__(self) -> str:
        return f"{self.size}:{self.stamp}"


class Extractor:
    """One raw format. The contract, in the order the pipeline uses it:

    - `name` is the key of this class in `registry.EXTRACTORS` (tests/test_registry.py holds them
      together); `patterns` are the name suffixes `discover` looks for.
    - `parse_options(raw, where)` validates the dataset's `metadata:` block when the catalog loads.
    - `list_inputs(root)` -> `Discovery`: the units of extraction and what could not be read.
    - `fingerprint_of(file)` -> `Fingerprint`, from stat only: planning never reads content.
    - `prepare(root)` once per extraction pass, then `extract(file, ctx)` per input: a stream of
      Documents; whatever is skipped goes to `ctx.drop` (D6), nothing else is written anywhere.

    Each pool worker rebuilds the instance from `options` alone, so options must pickle.
    """

    name: ClassVar[str] = ""
    patterns: ClassVar[tuple[str, ...]] = ()  # name suffixes, e.g. (".txt",)
    options: Any

    def __init__(self, options: Any = None):
        self.options = options

    @classmethod
    def parse_options(cls, raw: Any, where: str) -> Any:
        """Validate the dataset's `metadata:` block at load time (D15); return a picklable value.
        Raise `ValueError` with a message naming the field."""
        return raw or {}

    def prepare(self, root: Path) -> None:
        """Run-start checks and lookups that need the raw folder (e.g. a TSV sidecar)."""

    def list_inputs(self, root: Path) -> Discovery:
        """Recursive discovery of `patterns` under `root` (ADDENDUM 3.1). Raises OSError when
        `root` itself cannot be listed: publishing that as empty would replace good output."""
        unreadable: list[str] = []
        files = discover(root, self.patterns, unreadable)
        return Discovery(tuple(files), tuple(unreadable))

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        """The Documents of one input, streamed; never a list of them (memory stays bounded)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def fingerprint_of(self, file: InputFile) -> Fingerprint:
        """Cheap change detector from stat only (no content reads)."""
        st = file.path.stat()
        return Fingerprint(st.st_size, str(st.st_mtime_ns))


# ----------------------------------------------------------------------------- discovery


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
            if not entry.name.endswith(suffixes):
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
            unreadable.append(f"{rel}: not a regular file ({_file_kind(mode)}); not extracted")
    found.sort(key=lambda f: sort_key(f.rel))
    return found


def unreadable_reason(entry: os.DirEntry, exc: OSError) -> str:
    """Why a directory entry named like an input cannot be read, for the `unreadable` list (D6)."""
    if entry.is_symlink():
        if exc.errno == errno.ENOENT:
            return "a symbolic link whose target does not exist"
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
    return exc.strerror or str(exc)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "an unknown kind of file"


def is_regular_readable(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode) and os.access(path, os.R_OK)
    except OSError:
        return False


# ----------------------------------------------------------------------------- decoding

_INVALID_SEEN = [0]
_surrogateescape = codecs.lookup_error("surrogateescape")


def _escape_and_count(exc: UnicodeError) -> tuple[str | bytes, int]:
    _INVALID_SEEN[0] += 1
    return _surrogateescape(exc)


codecs.register_error("slm4ie_escape", _escape_and_count)


def open_text(path: Path):
    """Strict-UTF-8 text with universal newlines, where invalid bytes become escapes that
    `invalid_count()` reports, so the reader can drop just the affected document (D6)."""
    return open(path, encoding="utf-8", errors="slm4ie_escape", newline=None)


_DECODE_CHUNK = 1 << 22


def read_text_chunks(path: Path, size: int = _DECODE_CHUNK) -> Iterator[str]:
    """The file as decoded text chunks with universal newlines (`\r\n` and lone `\r` become `\n`)
    and a leading BOM removed (D8). Much faster than a text-mode file object; invalid bytes become
    escapes counted by `invalid_count()`, as with `open_text`."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="slm4ie_escape")
    pending_cr = False
    first = True
    with open(path, "rb") as fh:
        while True:
            raw = fh.read(size)
            final = not raw
            text = decoder.decode(raw, final=final)
            if first and text:
                first = False
                if text.startswith(BOM):
                    text = text[1:]
            if pending_cr:
                text = "\r" + text
                pending_cr = False
            if "\r" in text:
                if not final and text.endswith("\r"):
                    text = text[:-1]
                    pending_cr = True
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            if text:
                yield text
            if final:
                return


def invalid_count() -> int:
    return _INVALID_SEEN[0]


def has_escapes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


BOM = "\ufeff"
