"""huggingface: Arrow datasets written by `save_to_disk()`, one per immediate subdirectory (config).

ADDENDUM 4.5 with D4 (a blank key falls through), D7 (text must be a non-blank string), D18 (one
config directory is one shard) and D20/S11 (`arrow_values`: dates and times become ISO-8601 strings at any depth;
a row holding bytes, Decimal or timedelta is skipped with a warning). Rows are read batch by batch
(arrow_dir), never materialised as a whole.

A config over `split_bytes` becomes ranges of rows (`RowSplitter`, docs/splitting.md).

`datasets` and `pyarrow` are imported inside `extract` only: loading the catalog imports every
extractor class it names, and that must stay fast.
"""

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from ..schema import Document
from ..utils.fswalk import is_copy_tool_name
from ..utils.type_names import a_type_name
from .arrow_dir import HfSplit, TableSplit, load_folder, plan_row_cuts
from .arrow_values import UnsupportedValue, converter, never_skipped
from .base import Extractor, Fingerprint
from .discovery import (
    NOT_UTF8,
    Discovery,
    escaped_name,
    file_kind,
    is_arriving_name,
    is_utf8_name,
    sort_key,
    unreadable_reason,
)
from .extract_context import ExtractContext
from .input_file import InputFile
from .records import probe_id
from .splitting import Splitter

NATURAL_ID_KEYS = ("id", "_id", "docid", "doc_id", "uid", "url")
TEXT_COLUMN = "text"
BATCH_ROWS = 1024


def directory_fingerprint(path: Path) -> Fingerprint:
    """`<total size>:<digest of every file's relative name, size and mtime>`, from stat alone."""
    listing = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, path)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except OSError:
                listing.append(f"{rel_dir}/{name}\0?")
                continue
            total += st.st_size
            listing.append(f"{rel_dir}/{name}\0{st.st_size}\0{st.st_mtime_ns}")
    digest = hashlib.sha256("\n".join(listing).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return Fingerprint(total, digest)


def special_file(folder: Path) -> str | None:
    """The first entry below a config directory that is neither a regular file nor a folder (a
    fifo where `data-*.arrow` should be, a socket, a device), described, or None. Checked before
    anything is opened: opening a fifo waits for a writer that never comes."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue  # a broken link: loading reports it
            if not stat.S_ISREG(mode):
                rel = escaped_name(os.path.relpath(path, folder))
                return f"{rel} is {file_kind(mode)}"
    return None


class RowSplitter(Splitter):
    """Ranges of rows: cuts are indices into the config's rows in `load_from_disk` order."""

    unit = "rows"
    cut_rule = ("at a row: row indices into the config's rows, its hf splits in `load_from_disk` order "
                "(ADDENDUM 4.5) as one sequence")

    def plan(self, file: InputFile, size: int, split_bytes: int) -> tuple[int, ...]:
        """Row cuts from the Arrow files' batch headers (no row is read); a config only `datasets`
        can load, or unreadable now, stays one shard (its extraction reports it, D6)."""
        import pyarrow as pa

        if special_file(file.path) is not None:
            return (0, 0)  # opening a fifo would block: one shard, whose extraction reports it
        try:
            hf_splits = load_folder(file.path)
            if hf_splits is None:
                return (0, 0)
            return plan_row_cuts([s for _, hf_split in hf_splits for s in hf_split.batch_sizes()], size, split_bytes)
        except (OSError, ValueError, pa.ArrowException):  # planning never fails a dataset
            return (0, 0)

    def rows(self, file: InputFile) -> int:
        """The rows of a range."""
        assert file.range is not None
        return file.range.cuts[file.range.index + 1] - file.range.start

    def lines(self, file: InputFile) -> int:
        """What a range adds to the numbering of later ranges (`Splitter.lines`): a config numbers
        rows, not lines (a warning names a row within its hf split), so its rows."""
        return self.rows(file)

    def quick_count(self, file: InputFile) -> tuple[int, int] | None:
        """(documents, rows) from Arrow buffers when provably no row is skipped: no null or blank
        text, every other column of values JSON holds (D20) and the encoder writes as they are (D1
        repairs nothing an Arrow column yields). Otherwise None: the count-only pass extracts."""
        import pyarrow as pa

        if file.range is None or special_file(file.path) is not None:
            return None
        try:
            hf_splits = load_folder(file.path)
            if hf_splits is None:
                return None
            docs = 0
            for _name, hf_split, lo, hi, owns_start in _windows(hf_splits, file):
                kept = _clean_rows(hf_split, lo, hi, owns_start)
                if kept is None:
                    return None
                docs += kept
        except (OSError, ValueError, pa.ArrowException):  # the full pass decides and reports it
            return None
        return docs, self.rows(file)


class HuggingfaceExtractor(Extractor):
    name = "huggingface"
    patterns = ()
    splitter = RowSplitter()

    def list_inputs(self, root: Path) -> Discovery:
        """One input per immediate subdirectory (symlinked ones too), hidden ones included (ADDENDUM 3.1).
        Plain files are ignored; a symbolic link that leads nowhere (broken, a loop) or an entry that
        cannot be examined may be a config directory that went missing, so it goes to `unreadable`
        (D6: reported as `unreadable_path`, never silently lost)."""
        unreadable: list[str] = []
        found = []
        with os.scandir(root) as entries:
            for entry in entries:
                try:
                    if is_arriving_name(entry.name) or is_copy_tool_name(entry.name):
                        # a config still being copied in, or a copy tool's working folder (planning/settling.py)
                        continue
                    if not is_utf8_name(entry.name):  # D6: counted, never a crash in keys or metas
                        if entry.is_dir() or entry.is_symlink():
                            unreadable.append(f"{escaped_name(entry.name)}: {NOT_UTF8}; not read as a config "
                                              "directory")
                    elif entry.is_dir():
                        found.append(InputFile(Path(entry.path), entry.name))
                    elif entry.is_symlink():
                        os.stat(entry.path)  # raises for a broken link or a loop; a link to a file is ignored
                except OSError as exc:
                    reason = unreadable_reason(entry, exc)
                    try:
                        reason += f" (it points to {os.readlink(entry.path)!r})"
                    except OSError:
                        pass
                    unreadable.append(f"{entry.name}: {reason}; not read as a config directory")
        found.sort(key=lambda f: sort_key(f.rel))
        unreadable.sort()
        return Discovery(tuple(found), tuple(unreadable))

    def fingerprint_of(self, file: InputFile) -> Fingerprint:
        return directory_fingerprint(file.path)

    def extract(self, file: InputFile, ctx: ExtractContext) -> Iterator[Document]:
        config = file.rel
        for split_name, hf_split, lo, hi, owns_start in _windows(self._hf_splits(file, ctx), file):
            prefix, where = ((f"{config}:", "") if split_name is None
                             else (f"{config}:{split_name}:", f"split {split_name!r} "))
            yield from self._rows(hf_split, prefix, where, file, ctx, lo, hi, owns_start)

    def _hf_splits(self, file: InputFile, ctx: ExtractContext) -> list:
        """[(split name or None, HfSplit)]: read with pyarrow alone when that is provably what
        `load_from_disk` gives (arrow_dir), else through `datasets` itself."""
        special = special_file(file.path)
        if special is not None:  # opening it would block for ever (a fifo) or read a device
            ctx.drop("load_failed", file, f"{special}, not a regular file; config directory skipped")
            return []
        fast = load_folder(file.path)
        if fast is not None:
            return fast
        import datasets

        dataset = self._load(file, ctx, datasets)
        if dataset is None:
            return []
        if isinstance(dataset, datasets.DatasetDict):
            return [(split_name, _as_hf_split(hf_split)) for split_name, hf_split in dataset.items()]
        return [(None, _as_hf_split(dataset))]

    @staticmethod
    def _load(file: InputFile, ctx: ExtractContext, datasets):
        quiet = datasets.are_progress_bars_disabled()
        datasets.disable_progress_bars()
        try:
            return datasets.load_from_disk(str(file.path))
        except Exception as exc:  # any failure to load is the config's problem, not the run's (ADDENDUM 4.5)
            ctx.drop("load_failed", file, f"datasets.load_from_disk failed ({type(exc).__name__}: {exc}); "
                                          "config directory skipped")
            return None
        finally:
            if not quiet:
                datasets.enable_progress_bars()

    @staticmethod
    def _rows(hf_split, id_prefix: str, where: str, file: InputFile, ctx: ExtractContext, lo: int = 0,
              hi: int | None = None, owns_start: bool = True) -> Iterator[Document]:
        """The documents of rows [lo, hi) of one hf split (row indices within it)."""
        import pyarrow as pa

        schema = hf_split.schema
        if TEXT_COLUMN not in schema.names:
            if owns_start:  # counted once per hf split, by the range holding its first row
                ctx.drop("missing_text", file, f"{where}has no {TEXT_COLUMN!r} column; "
                                               f"its {hf_split.num_rows} row(s) skipped")
            return
        # The columns are fixed per hf split (its whole schema, in every range), so the id
        # probe and the conversions are planned once.
        id_keys = tuple(k for k in NATURAL_ID_KEYS if k in schema.names)
        converters = tuple((f.name, converter(f.type)) for f in schema
                           if f.name != TEXT_COLUMN and converter(f.type) is not None)
        start = lo
        try:
            for batch in hf_split.batches(BATCH_ROWS, lo, hi):
                texts = batch.column(TEXT_COLUMN).to_pylist()
                rest = batch.drop_columns([TEXT_COLUMN])
                rows = rest.to_pylist()
                has_nulls = any(column.null_count for column in rest.columns)
                for offset, text in enumerate(texts):
                    if not isinstance(text, str) or not text or text.isspace():
                        _drop_text(text, start + offset, where, file, ctx)
                        continue
                    row = rows[offset]
                    doc_id = probe_id(row, id_keys) if id_keys else None
                    if doc_id is None:
                        doc_id = f"{id_prefix}{start + offset:08d}"
                    meta = {k: v for k, v in row.items() if v is not None} if has_nulls else row
                    if converters:
                        try:
                            for name, convert in converters:
                                value = meta.get(name)
                                if value is not None:
                                    meta[name] = convert(value)
                        except UnsupportedValue as exc:
                            ctx.drop("unsupported_value", file, f"{where}row {start + offset}: column {name!r} holds "
                                                                f"a {exc} value, which JSON cannot hold; row skipped")
                            continue
                    yield Document(text, doc_id, meta)
                start += len(texts)
        except (pa.ArrowException, OSError) as exc:
            ctx.drop("read_failed", file, f"{where}reading the batch at row {start} failed ({type(exc).__name__}: "
                                          f"{exc}); the rest of the split skipped")


Window = tuple[str | None, HfSplit, int, int | None, bool]


def _windows(hf_splits: list, file: InputFile) -> Iterator[Window]:
    """(split name, hf split, lo, hi, owns_start) for each hf split the range reads: its rows [lo, hi)
    (hi None: to the end) and whether the range holds the split's first row, i.e. its place in the
    unsplit order (an empty split belongs to the range starting at or before it). A whole config
    reads every split whole."""
    first, stop = (0, None) if file.range is None else (file.range.start, file.range.end)
    offset = 0
    for name, hf_split in hf_splits:
        owns_start = first <= offset and (stop is None or offset < stop)
        lo = min(hf_split.num_rows, max(0, first - offset))
        hi = None if stop is None else max(0, min(hf_split.num_rows, stop - offset))
        if owns_start or lo < (hf_split.num_rows if hi is None else hi):
            yield name, hf_split, lo, hi, owns_start
        offset += hf_split.num_rows


def _clean_rows(hf_split: HfSplit, lo: int, hi: int | None, owns_start: bool) -> int | None:
    """How many of rows [lo, hi) of an hf split become documents, when provably none is skipped
    (`quick_count`); None when one may be."""
    import pyarrow.compute as pc
    import pyarrow.types as pt

    if TEXT_COLUMN not in hf_split.schema.names:
        return None if owns_start else 0  # the hf split's `missing_text` warning is in this range
    if any(f.name != TEXT_COLUMN and not never_skipped(f.type) for f in hf_split.schema):
        return None
    hi = hf_split.num_rows if hi is None else hi
    if hi <= lo:
        return 0
    for batch in hf_split.batches(BATCH_ROWS, lo, hi):
        texts = batch.column(TEXT_COLUMN)
        if not (pt.is_string(texts.type) or pt.is_large_string(texts.type)) or texts.null_count:
            return None
        # a text whose first character is not whitespace is not blank; only the others are looked at
        firsts = pc.utf8_slice_codeunits(texts, 0, 1).to_pylist()
        for i, first in enumerate(firsts):
            if not first or first.isspace():
                text = texts[i].as_py()
                if not text or text.isspace():
                    return None
    return hi - lo


def _as_hf_split(dataset) -> HfSplit:
    """A loaded `datasets.Dataset` as the HfSplit the row reader takes: its table after
    `load_from_disk`'s own casts (`save_to_disk` flattens any indices mapping before writing), with
    the sizes of the files it mapped, checked before each batch is touched (`TableSplit`)."""
    files = []
    for entry in dataset.cache_files:
        try:
            files.append((entry["filename"], os.stat(entry["filename"]).st_size))
        except (OSError, KeyError, TypeError):
            continue
    return TableSplit(dataset.data.table, tuple(files))


def _drop_text(text, row_index: int, where: str, file: InputFile, ctx: ExtractContext) -> None:
    """D7: a null, non-string or blank text skips the row; the row still counts for positional ids."""
    if text is None:
        reason, what = "missing_text", "null"
    elif isinstance(text, str):
        reason, what = "empty_text", "blank"
    else:
        reason, what = "non_string_text", a_type_name(text)
    ctx.drop(reason, file, f"{where}row {row_index}: text is {what}; row skipped")
