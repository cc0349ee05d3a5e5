"""External-TSV metadata sidecar for conllu and tei (extraction-formats: External-TSV metadata;
ADDENDUM 7; D8, D15).

A corpus may ship one flat TSV beside its text files, keyed by file name. The config is validated
when the catalog loads; the table is read once per extraction pass (`prepare`), keeping only the
columns the projection needs, and every input file looks its row up by stem.
"""

import csv
import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import Extractor, ExtractorError
from .extract_context import ExtractContext
from .input_file import InputFile
from .reading import BOM

NA_VALUES = frozenset({"", "-"})
KEY_FROM_CHOICES = ("filename_stem",)
_CONFIG_KEYS = ("path", "key_column", "key_from", "key_pattern", "fields", "splits")
METADATA_MISSING = "metadata_missing"  # drop-ledger reason: an input file without its TSV row


@dataclass(frozen=True)
class TsvConfig:
    """A validated `metadata:` block; plain tuples so it pickles into worker processes."""

    path: str
    key_column: str
    fields: tuple[tuple[str, str], ...]  # (tsv column, metadata name), config order
    splits: tuple[tuple[str, str], ...]  # (tsv column, separator)
    key_pattern: str | None = None
    key_from: str = "filename_stem"


def _non_empty_str(raw: dict, name: str, where: str) -> str:
    if name not in raw or raw[name] is None:
        raise ValueError(f"{where}.{name}: missing (the TSV sidecar needs path, key_column and fields)")
    value = raw[name]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{name}: expected a non-empty string, got {value!r}")
    return value


def _str_mapping(raw: dict, name: str, where: str, allow_empty_values: bool) -> tuple[tuple[str, str], ...]:
    value = raw[name]
    if not isinstance(value, dict):
        raise ValueError(f"{where}.{name}: expected a mapping of TSV column -> string, got {value!r}")
    pairs = []
    for column, target in value.items():
        if not isinstance(column, str) or not column:
            raise ValueError(f"{where}.{name}: column names must be non-empty strings "
                             f"(quote numbers in YAML), got {column!r}")
        if not isinstance(target, str) or (not target and not allow_empty_values):
            raise ValueError(f"{where}.{name}.{column}: expected a non-empty string, got {target!r}")
        pairs.append((column, target))
    return tuple(pairs)


def parse_tsv_config(raw: Any, where: str) -> TsvConfig | None:
    """Validate a `metadata:` block as a TSV sidecar config at load time (D15). None or `{}` means
    no sidecar; any other value must be a complete config (ADDENDUM 5.4: a truthy block IS one)."""
    if raw is None or (isinstance(raw, dict) and not raw):
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a TSV sidecar mapping (path, key_column, fields, ...), got {raw!r}")
    unknown = [k for k in raw if k not in _CONFIG_KEYS]
    if raw.get("path") is None:
        found = f"; found {', '.join(map(str, raw))}" if unknown else ""
        raise ValueError(f"{where}.path: missing: for this extractor a metadata block is a TSV sidecar config "
                         f"(path, key_column, fields){found}")
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key for a TSV sidecar (allowed: {', '.join(_CONFIG_KEYS)})")
    path = _non_empty_str(raw, "path", where)
    key_column = _non_empty_str(raw, "key_column", where)
    if "fields" not in raw or raw["fields"] is None:
        raise ValueError(f"{where}.fields: missing (a mapping of TSV column -> metadata name)")
    fields = _str_mapping(raw, "fields", where, allow_empty_values=False)
    splits: tuple[tuple[str, str], ...] = ()
    if raw.get("splits") is not None:
        splits = _str_mapping(raw, "splits", where, allow_empty_values=True)
        sources = {column for column, _ in fields}
        for column, _ in splits:
            if column not in sources:
                raise ValueError(f"{where}.splits.{column}: not a TSV column listed in fields "
                                 f"(splits are keyed by the source column: {', '.join(sorted(sources))})")
    key_from = raw.get("key_from")
    if key_from is None:
        key_from = "filename_stem"
    elif key_from not in KEY_FROM_CHOICES:
        raise ValueError(f"{where}.key_from: only {', '.join(KEY_FROM_CHOICES)} is supported, got {key_from!r}")
    key_pattern = raw.get("key_pattern")
    if key_pattern is not None:
        if not isinstance(key_pattern, str):
            raise ValueError(f"{where}.key_pattern: expected a regular expression string, got {key_pattern!r}")
        try:
            compiled = re.compile(key_pattern)
        except re.error as exc:
            raise ValueError(f"{where}.key_pattern: invalid regular expression {key_pattern!r}: {exc}") from None
        if compiled.groups < 1:
            raise ValueError(f"{where}.key_pattern: {key_pattern!r} needs a capture group; group 1 is the key")
    return TsvConfig(path, key_column, fields, splits, key_pattern, key_from)


def _project(row: dict, fields: tuple, splits: dict) -> dict:
    """ADDENDUM 7 projection: config order, stripped, NA dropped, splits by source column."""
    out: dict = {}
    for column, target in fields:
        value = row.get(column)
        if value is None:
            continue
        value = value.strip()
        if value in NA_VALUES:
            continue
        sep = splits.get(column)
        if sep:
            parts = [p for p in (part.strip() for part in value.split(sep)) if p not in NA_VALUES]
            if not parts:
                continue
            out[target] = parts
        else:
            out[target] = value
    return out


class TsvMetadata:
    """The loaded table: projected rows keyed by their stripped key."""

    def __init__(self, config: TsvConfig, rows: dict[str, dict]):
        self.config = config
        self._rows = rows
        self._pattern = re.compile(config.key_pattern) if config.key_pattern is not None else None

    @classmethod
    def load(cls, config: TsvConfig, root: Path) -> "TsvMetadata":
        """Read the TSV (relative to the dataset's raw dir unless absolute; `.gz` through gzip;
        strict UTF-8, BOM removed per D8; csv excel dialect with tab delimiter)."""
        path = Path(config.path)
        if not path.is_absolute():
            path = Path(root) / path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ExtractorError(f"metadata TSV {path} not found (metadata.path = {config.path!r})") from None
        except OSError as exc:
            raise ExtractorError(f"metadata TSV {path} cannot be read: {exc.strerror or exc}") from None
        if path.name.endswith(".gz"):
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise ExtractorError(f"metadata TSV {path} is not a valid gzip file: {exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExtractorError(f"metadata TSV {path} is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
        del data
        if text.startswith(BOM):
            text = text[1:]
        reader = csv.DictReader(io.StringIO(text, newline=None), delimiter="\t")
        header = reader.fieldnames or []
        if config.key_column not in header:
            shown = ", ".join(repr(h) for h in header[:20]) or "none: the file is empty"
            raise ExtractorError(f"metadata TSV {path} has no key column {config.key_column!r} "
                                 f"(header columns: {shown})")
        splits = dict(config.splits)
        rows: dict[str, dict] = {}
        key_column = config.key_column
        try:
            for row in reader:
                key = row.get(key_column)
                if key is None:
                    continue
                key = key.strip()
                if not key:
                    continue
                rows[key] = _project(row, config.fields, splits)  # the last duplicate wins
        except csv.Error as exc:
            raise ExtractorError(f"metadata TSV {path} line {reader.line_num}: {exc}") from None
        return cls(config, rows)

    def key_for(self, file: InputFile) -> str | None:
        """The lookup key from the file stem, narrowed by `key_pattern` group 1 (unanchored search)."""
        stem = file.stem
        if self._pattern is None:
            return stem
        match = self._pattern.search(stem)
        return match.group(1) if match is not None else None

    def for_file(self, file: InputFile) -> dict:
        """A fresh metadata dict for this file; `{}` when the key or the row is missing."""
        key = self.key_for(file)
        row = self._rows.get(key) if key is not None else None
        if not row:
            return {}
        return {k: (list(v) if isinstance(v, list) else v) for k, v in row.items()}

    def missing_row(self, file: InputFile) -> str | None:
        """Why this file has no row (its stem misses `key_pattern`, or no row has its key), or None
        when it has one (a row whose every value is NA still counts as found)."""
        key = self.key_for(file)
        if key is None:
            return f"file stem {file.stem!r} does not match key_pattern {self.config.key_pattern!r}"
        if key not in self._rows:
            return f"no row with {self.config.key_column} {key!r}"
        return None

    def __len__(self) -> int:
        return len(self._rows)


class TsvSidecarExtractor(Extractor):
    """Base of the extractors whose `metadata:` block is an external-TSV config (conllu, tei):
    validated at load, loaded once per extraction pass, looked up per input file."""

    metadata_keys = _CONFIG_KEYS
    options: TsvConfig | None

    def __init__(self, options=None):
        super().__init__(options)
        self._tsv: TsvMetadata | None = None

    @classmethod
    def parse_options(cls, raw, where):
        # ADDENDUM 5.4: any truthy `metadata:` block is a TSV sidecar config
        return parse_tsv_config(raw, where)

    def prepare(self, root: Path) -> None:
        if self.options is not None:
            self._tsv = TsvMetadata.load(self.options, root)

    def tsv_row(self, file: InputFile, ctx: ExtractContext) -> dict:
        """A fresh copy of the file's TSV row, `{}` without a sidecar or a matching row. A file
        without its row is counted once (at its first range) as `metadata_missing`, so a gap in
        the table shows in the drop ledger instead of passing silently; its documents are kept."""
        if self.options is None:
            return {}
        if self._tsv is None:
            self._tsv = TsvMetadata.load(self.options, ctx.root)
        if file.at_file_start:
            why = self._tsv.missing_row(file)
            if why is not None:
                ctx.drop(METADATA_MISSING, file, f"{why} in metadata TSV {self.options.path}; "
                         "its documents are kept without TSV metadata")
        return self._tsv.for_file(file)
