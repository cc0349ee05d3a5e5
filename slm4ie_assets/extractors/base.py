"""The Extractor contract: what every raw format implements, and the errors and fingerprints it returns.

The values it works on live beside it: `input_file` (the input and its byte range), `drop_ledger`,
`extract_context` (the context and a range's counts), `discovery` (finding inputs); decoding and
range reading live in `reading.py`.

An extractor turns one input file into Documents. It knows nothing of Dagster, shards, JSON
output or gzip; it reports what it could not read to the ledger and moves on (D6).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..schema import Document
from .discovery import Discovery, discover
from .extract_context import ExtractContext
from .input_file import InputFile
from .splitting import Splitter


class ExtractorError(Exception):
    """A problem that fails the whole dataset (bad config discovered at run start, ...)."""


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
