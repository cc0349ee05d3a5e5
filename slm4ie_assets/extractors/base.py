"""What every extractor shares: the input-file handle, the drop ledger, discovery.

Decoding and range reading live in `reading.py`.

An extractor turns one input file into Documents. It knows nothing of Dagster, shards, JSON
output or gzip; it reports what it could not read to the ledger and moves on (D6).
"""

import errno
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ..fswalk import walk
from ..schema import Document

if TYPE_CHECKING:  # the splitter module reads InputFile from here
    from .splitting import Splitter

MAX_WARNINGS_KEPT = 100


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


@dataclass
class DropLedger:
    """Everything skipped, counted by reason, and the warnings kept verbatim, in the order they
    arose. The one cap (docs/splitting.md, "Warnings"): each input file keeps the warnings of its
    first 100 drops and of its first 100 repaired documents (MAX_WARNINGS_KEPT per kind), whether
    it is read whole or in ranges; `start_file` opens a file's (or a range's) room, less what the
    file's earlier ranges already kept."""

    counts: Counter = field(default_factory=Counter)
    warnings: list = field(default_factory=list)  # drop and repair warnings, in input order
    limit: int = MAX_WARNINGS_KEPT  # drop warnings the current file may still keep
    repair_limit: int = MAX_WARNINGS_KEPT  # repair warnings likewise

    def start_file(self, drops_before: int = 0, repairs_before: int = 0, keep: bool = True) -> None:
        """A new input file (or range) begins: its room is the file's first 100 of each kind, less
        the drops and repaired documents of its earlier ranges; `keep` False keeps none (a count)."""
        self.limit = max(0, MAX_WARNINGS_KEPT - drops_before) if keep else 0
        self.repair_limit = max(0, MAX_WARNINGS_KEPT - repairs_before) if keep else 0

    def add(self, reason: str, message: str) -> None:
        self.counts[reason] += 1
        if self.limit > 0:
            self.limit -= 1
            self.warnings.append(message)

    def add_repair(self, message: str) -> None:
        """A repaired document's warning (its count is the part writer's `repairs`)."""
        if self.repair_limit > 0:
            self.repair_limit -= 1
            self.warnings.append(message)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Carry(Protocol):
    """What a format's range hands to the ranges after it beyond `RangeCounts`' own fields (coleslaw:
    `ShadowCarry`, macocu: `RangeState`): a frozen dataclass whose `+` adds two ranges' values."""

    def __add__(self, other: Any, /) -> Any: ...


C = TypeVar("C", bound=Carry)


@dataclass(frozen=True, slots=True)
class RangeCounts:
    """What ranges of one split file produced (docs/splitting.md): documents written, lines read,
    drops, documents with repairs, and the format's own `carry`. The sum over the ranges before one
    is where that range continues."""

    docs: int = 0
    lines: int = 0
    drops: int = 0
    repaired_docs: int = 0
    carry: Carry | None = None

    def __add__(self, other: "RangeCounts") -> "RangeCounts":
        carry = other.carry if self.carry is None else self.carry if other.carry is None else self.carry + other.carry
        return RangeCounts(self.docs + other.docs, self.lines + other.lines, self.drops + other.drops,
                           self.repaired_docs + other.repaired_docs, carry)

    def carry_of(self, kind: type[C]) -> C:
        """The carry as `kind`; its zero value when no earlier range handed one on."""
        carry = self.carry
        return carry if isinstance(carry, kind) else kind()


FILE_START = RangeCounts()


class NeedsBefore(BaseException):
    """A speculative extraction of a range (docs/splitting.md) met what depends on the ranges before
    it: a drop or a repair (warning line numbers, the file's first 100) or a fallback id. The part is
    abandoned and the range extracted again once its `before` is known. A BaseException, so no
    reader's `except Exception` can take it for a bad record."""


class ExtractContext:
    """Per-shard context handed to an extractor: where the data is and where drops go.

    For a range of a split file, `before` holds what the earlier ranges produced. The one line
    convention: a reader numbers lines from 1 at the start of what it reads, and `file_line` adds
    `before.lines`, so warnings name the line of the whole file (an XML parse already numbers the
    file's lines: `drop_at_file_line`). `counting` is set during a count-only pass (nothing is
    logged); `carry` is the format's own state at the end of the range (`RangeCounts.carry`);
    `lines_read`, set by a reader that counted the line ends of the whole range as it read them
    (text), spares the part writer a second pass over the range for `RangeCounts.lines`;
    `speculative`: the range is read before the counts of the ranges before it are known, which
    only a range without drops can be (`NeedsBefore`)."""

    def __init__(self, dataset: str, root: Path, ledger: DropLedger | None = None, on_warning=None,
                 before: RangeCounts = FILE_START, counting: bool = False, max_document_bytes: int = 0,
                 speculative: bool = False):
        self.dataset = dataset
        # readers that can see a record's size before parsing it skip one over this (0: no cap)
        self.max_document_bytes = max_document_bytes
        self.root = root
        self.ledger = ledger if ledger is not None else DropLedger()
        self._on_warning = on_warning
        self.before = before
        self.counting = counting
        self.speculative = speculative  # `before` is not known: a drop raises NeedsBefore
        self.carry: Carry | None = None
        self.lines_read: int | None = None  # None: `Splitter.lines` counts them

    def file_line(self, line: int) -> int:
        """A line counted from the start of the range, as a line of the whole file."""
        return line + self.before.lines

    def drop(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        self.drop_at_file_line(reason, file, message, self.file_line(line) if isinstance(line, int) else line)

    def drop_at_file_line(self, reason: str, file: InputFile, message: str, line: int | str | None = None) -> None:
        """`drop` for a reader whose lines are already the file's."""
        if self.speculative:
            raise NeedsBefore(reason)
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

    - `name` is the key of this class in `registry.EXTRACTORS` (tests/extractors/test_registry.py holds them
      together); `patterns` are the name suffixes `discover` looks for.
    - `parse_options(raw, where)` validates the dataset's `metadata:` block when the catalog loads;
      `metadata_keys` names the keys that block may hold (none: the block is refused, D23).
    - `list_inputs(root)` -> `Discovery`: the units of extraction and what could not be read.
    - `fingerprint_of(file)` -> `Fingerprint`, from stat only: planning never reads content.
    - `prepare(root)` once per extraction pass, then `extract(file, ctx)` per input: a stream of
      Documents; whatever is skipped goes to `ctx.drop` (D6), nothing else is written anywhere.
    - `splitter` (optional, `extractors/splitting.py`): how a file over `split_bytes` is cut.

    Each pool worker rebuilds the instance from `options` alone, so options must pickle.
    """

    name: ClassVar[str] = ""
    patterns: ClassVar[tuple[str, ...]] = ()  # name suffixes, e.g. (".txt",)
    metadata_keys: ClassVar[tuple[str, ...]] = ()  # what its `metadata:` block may hold; () = it takes none
    # how a file over `split_bytes` is cut into ranges (docs/splitting.md); None: never split.
    # With one, `extract` must honour `InputFile.range` and continue from `ctx.before`.
    splitter: ClassVar["Splitter | None"] = None
    options: Any

    def __init__(self, options: Any = None):
        self.options = options

    @classmethod
    def parse_options(cls, raw: Any, where: str) -> Any:
        """Validate the dataset's `metadata:` block at load time (D15); return a picklable value.
        Raise `ValueError` with a message naming the field. This default is for a format without
        knobs: a block it would ignore is refused, so a misplaced block never passes silently (D23);
        `metadata: {}` and an empty `metadata:` say nothing and pass."""
        if raw is None or (isinstance(raw, dict) and not raw):
            return None
        shown = ", ".join(map(str, raw)) if isinstance(raw, dict) else repr(raw)
        raise ValueError(f"{where}: the {cls.name} extractor takes no metadata block (found {shown}); remove it")

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


def is_input_error(exc: OSError, file: InputFile) -> bool:
    """True when an extractor's OSError is about reading its own input (the file, or a file inside
    a config directory), not about something else it needs (a TSV sidecar fails the dataset)."""
    if exc.filename is None:
        return True
    name = os.fsdecode(exc.filename)
    base = os.fspath(file.path)
    return name == base or name.startswith(base + os.sep)


def is_regular_readable(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode) and os.access(path, os.R_OK)
    except OSError:
        return False
