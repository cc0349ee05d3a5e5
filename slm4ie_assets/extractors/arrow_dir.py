"""Read a `save_to_disk()` folder with pyarrow alone, when that provably gives what
`datasets.load_from_disk()` would.

Importing `datasets` costs about 2 CPU seconds (pandas, fsspec, huggingface_hub...), more than
extracting 100 MB of rows, and every pool worker pays it again. The on-disk layout is simple:
`state.json` lists Arrow IPC stream files; a `DatasetDict` adds `dataset_dict.json` naming split
folders. `load_from_disk` memory-maps and concatenates those files, then casts the table to the
features of `dataset_info.json` only when their Arrow schema differs from the table's.

The fast path is taken only when no such cast can happen: the features stored in the Arrow schema
(written by the same `ArrowWriter` from the same features) equal those of `dataset_info.json`, and
no column uses a dictionary or extension type. Anything else (an indices mapping, an unknown
state key, a missing or odd file) returns None and the caller falls back to `datasets` itself,
which also produces the canonical error for broken folders.

An Arrow file truncated in place while it is mapped would kill the process with SIGBUS as soon as
a missing page is touched, with no message. So before each batch of rows is touched, the files it
may live in are checked against their mapped sizes (`HfSplit.check_intact`), and one that shrank
is that config's `read_failed`, naming the file (issue 34). A truncation in the few milliseconds
between the check and the batch's copy can still raise SIGBUS: a pool worker's death then names
its shard (worker_pool.WorkerDied).

A config over `split_bytes` is cut into ranges of rows (docs/splitting.md): `plan_row_cuts` places
the cuts from the record batches' row counts and buffer sizes, which the memory-mapped stream gives
without reading a row.
"""

import bisect
import itertools
import json
import mmap
import os
from pathlib import Path


class ArrowFileShrank(OSError):
    """An Arrow file is shorter than when it was mapped (truncated or rewritten in place)."""


_STATE_KEYS = {"_data_files", "_fingerprint", "_format_columns", "_format_kwargs", "_format_type",
               "_output_all_columns", "_split"}


class HfSplit:
    """One hf split (a `Dataset` of a config) as the extractor reads it: schema, row count and row
    batches. `maps` are the memory maps its table lives in (the fast path's, one per Arrow file in
    row order, holding `rows_per_map` rows each), whose pages are let go after each batch."""

    def __init__(self, table, maps: tuple[mmap.mmap, ...] = (), rows_per_map: tuple[int, ...] = (),
                 names: tuple[str, ...] = (), files: tuple[tuple[str, int], ...] = ()):
        self.table = table
        self.schema = table.schema
        self.num_rows = table.num_rows
        self._maps = maps
        self._names = names  # of the mapped files, for the message
        self._files = files  # (path, size) of the files `datasets` mapped itself (its fallback path)
        self._first_rows = list(itertools.accumulate(rows_per_map, initial=0))[:-1]

    def check_intact(self) -> None:
        """Raise ArrowFileShrank naming the first Arrow file now shorter than when it was mapped:
        touching its missing pages would raise SIGBUS. A file replaced by a rename keeps its mapped
        bytes, so only the mapped file itself counts (fstat through the map)."""
        for m, name in zip(self._maps, self._names, strict=True):
            _check_size(name, len(m), m.size())
        for path, size in self._files:
            try:
                now = os.stat(path).st_size
            except OSError:
                continue  # removed: the mapping keeps its bytes
            _check_size(os.path.basename(path), size, now)

    def batches(self, size: int, start: int = 0, stop: int | None = None):
        """Rows [start, stop) as zero-copy slices on the grid of `size` rows counted from row 0, so
        a range of rows (docs/splitting.md) reads the unsplit pass's batches, cut at its edges.
        Once a batch is done its pages leave this process (they stay in the page cache): mapped
        pages count in RSS, which would otherwise grow to the size of the config."""
        stop = self.num_rows if stop is None else min(stop, self.num_rows)
        while start < stop:
            end = min(stop, (start // size + 1) * size)
            self.check_intact()
            yield self.table.slice(start, end - start)
            self._release(start, end)
            start = end

    def _release(self, start: int, end: int) -> None:
        """Let go of the pages of the Arrow files holding rows [start, end)."""
        i = max(0, bisect.bisect_right(self._first_rows, start) - 1)
        while i < len(self._maps) and self._first_rows[i] < end:
            self._maps[i].madvise(mmap.MADV_DONTNEED)
            i += 1

    def batch_sizes(self) -> list[tuple[int, int]]:
        """(rows, bytes of its buffers) of each stored record batch, from the batch headers alone:
        the buffers are memory-mapped and never touched."""
        return [(b.num_rows, b.get_total_buffer_size()) for b in self.table.to_batches()]


def _check_size(name: str, mapped: int, now: int) -> None:
    if now < mapped:
        raise ArrowFileShrank(f"{name} shrank from {mapped:,} to {now:,} bytes while it was read (truncated or "
                              "rewritten in place); its rows are not read, which would end the process with SIGBUS")


def plan_row_cuts(sizes: list[tuple[int, int]], size: int, split_bytes: int) -> tuple[int, ...]:
    """`(0, cut, ..., rows)`: ceil(size / split_bytes) ranges of about equal bytes over batches of
    (rows, bytes), each cut placed inside its batch in proportion to its bytes (rows count when no
    batch has bytes). Where a batch ends plays no part in what is extracted, only in the balance."""
    rows = sum(n for n, _ in sizes)
    ranges = min(rows, -(-size // split_bytes)) if split_bytes > 0 else 1  # no range without a row
    if ranges < 2 or rows < 2:
        return (0, rows)
    if not any(nbytes for _, nbytes in sizes):
        sizes = [(n, n) for n, _ in sizes]
    total = sum(nbytes for _, nbytes in sizes)
    cuts = [0]
    k, seen_rows, seen_bytes = 1, 0, 0
    for n, nbytes in sizes:
        while k < ranges and k * total // ranges < seen_bytes + nbytes:
            cut = seen_rows + (k * total // ranges - seen_bytes) * n // nbytes
            if cuts[-1] < cut < rows:
                cuts.append(cut)
            k += 1
        seen_rows += n
        seen_bytes += nbytes
    return (*cuts, rows)


def _read_json(path: Path):
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return None


def _plain_type(t) -> bool:
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_dictionary(t) or isinstance(t, pa.ExtensionType):
        return False
    if pt.is_struct(t):
        return all(_plain_type(t.field(i).type) for i in range(t.num_fields))
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return _plain_type(t.value_type)
    if pt.is_map(t):
        return _plain_type(t.key_type) and _plain_type(t.item_type)
    return not pt.is_union(t)


def load_hf_split(folder: Path) -> HfSplit | None:
    """A `Dataset` folder as an HfSplit, or None when only `datasets` can load it exactly."""
    state = _read_json(folder / "state.json")
    info = _read_json(folder / "dataset_info.json")
    if not isinstance(state, dict) or not isinstance(info, dict) or set(state) != _STATE_KEYS:
        return None
    files = state.get("_data_files")
    if not isinstance(files, list) or not files:
        return None
    names: list[str] = []
    for f in files:
        name = f.get("filename") if isinstance(f, dict) and set(f) == {"filename"} else None
        if not (isinstance(name, str) and name and os.sep not in name and name not in (".", "..")):
            return None
        names.append(name)
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        maps = tuple(_map(folder / n) for n in names)
        tables = [ipc.open_stream(pa.BufferReader(pa.py_buffer(m))).read_all() for m in maps]  # zero-copy
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    except (pa.ArrowException, OSError, ValueError):  # an empty file cannot be mapped: ValueError
        return None
    stored = (table.schema.metadata or {}).get(b"huggingface")
    try:
        stored_features = json.loads(stored)["info"]["features"] if stored else None
    except (ValueError, KeyError, TypeError):
        return None
    if stored_features is None or stored_features != info.get("features"):
        return None
    if not all(_plain_type(f.type) for f in table.schema):
        return None
    return HfSplit(table, maps, tuple(t.num_rows for t in tables), tuple(names))


def _map(path: Path) -> mmap.mmap:
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def load_folder(folder: Path) -> list[tuple[str | None, HfSplit]] | None:
    """[(split name or None, hf split)] in `load_from_disk` order, or None to fall back to `datasets`."""
    if (folder / "dataset_info.json").is_file() and (folder / "state.json").is_file():
        hf_split = load_hf_split(folder)
        return None if hf_split is None else [(None, hf_split)]
    manifest = _read_json(folder / "dataset_dict.json")
    if not isinstance(manifest, dict) or set(manifest) != {"splits"} or not isinstance(manifest["splits"], list):
        return None
    if len(set(map(str, manifest["splits"]))) != len(manifest["splits"]):
        return None  # a repeated split name: `datasets` keeps the last one at the first's place
    out: list[tuple[str | None, HfSplit]] = []
    for name in manifest["splits"]:
        if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
            return None
        hf_split = load_hf_split(folder / name)
        if hf_split is None:
            return None
        out.append((name, hf_split))
    return out
