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

The fast path reads each Arrow file at offsets, never memory-mapped (`arrow_stream.StreamFile`):
a file truncated in place while it is read is then a short read, that config's `read_failed`
naming the file, on every worker count; mapped, the first touch of a missing page killed the
process with SIGBUS, and with one worker that was the run (issue 39). Only the batches a window of
rows needs are in memory. `datasets` maps its files itself: on that path the files' sizes are
checked before each batch is touched (`TableSplit`), which leaves the instant between the check and
the copy, where a pool worker's death names its shard (worker_pool.WorkerDied).

A config over `split_bytes` is cut into ranges of rows (docs/splitting.md): `plan_row_cuts` places
the cuts from the record batches' row counts and buffer sizes, which the stream's message headers
give without reading a row.
"""

import bisect
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .arrow_stream import ArrowFileShrank, StoredBatch, StreamFile

if TYPE_CHECKING:
    import pyarrow as pa

_STATE_KEYS = {"_data_files", "_fingerprint", "_format_columns", "_format_kwargs", "_format_type",
               "_output_all_columns", "_split"}


class HfSplit:
    """One hf split (a `Dataset` of a config) as the extractor reads it: its schema, row count and
    windows of rows."""

    schema: "pa.Schema"
    num_rows: int

    def batches(self, size: int, start: int = 0, stop: int | None = None) -> Iterator:
        """Rows [start, stop) as tables on the grid of `size` rows counted from row 0, so a range of
        rows (docs/splitting.md) reads the unsplit pass's batches, cut at its edges."""
        stop = self.num_rows if stop is None else min(stop, self.num_rows)
        while start < stop:
            end = min(stop, (start // size + 1) * size)
            yield self._rows(start, end)
            start = end

    def _rows(self, start: int, end: int):
        raise NotImplementedError  # pragma: no cover - abstract


class StreamSplit(HfSplit):
    """The fast path's hf split: its Arrow files in row order, read at offsets (arrow_stream)."""

    def __init__(self, files: list[StreamFile]):
        self.files = tuple(files)
        self.schema = files[0].schema
        self._stored: list[tuple[StreamFile, StoredBatch]] = [(f, b) for f in files for b in f.batches]
        self._first_rows = list(itertools.accumulate((b.rows for _, b in self._stored), initial=0))
        self.num_rows = self._first_rows[-1]
        self._held: tuple[int, pa.RecordBatch] | None = None  # the stored batch read last: a window may end in it

    def _rows(self, start: int, end: int):
        import pyarrow as pa

        pieces = []
        while start < end:
            i = bisect.bisect_right(self._first_rows, start) - 1  # the stored batch holding row `start`
            first, rows = self._first_rows[i], self._stored[i][1].rows
            n = min(end, first + rows) - start
            pieces.append(self._read(i).slice(start - first, n))
            start += n
        return pa.Table.from_batches(pieces, schema=self.schema)

    def _read(self, i: int) -> "pa.RecordBatch":
        if self._held is None or self._held[0] != i:
            self._held = None  # let the last one go before the next is read
            file, batch = self._stored[i]
            self._held = (i, file.read(batch))
        return self._held[1]

    def batch_sizes(self) -> list[tuple[int, int]]:
        """(rows, bytes of its buffers) of each stored record batch, from the message headers alone."""
        return [(b.rows, b.nbytes) for _, b in self._stored]


class TableSplit(HfSplit):
    """An hf split `datasets` loaded (its table, memory-mapped by `datasets`), with the (path, size)
    of the files it mapped, checked before each window of rows is touched: a file shorter than it
    was is `ArrowFileShrank`, naming it, not SIGBUS (but for the instant between check and copy)."""

    def __init__(self, table, files: tuple[tuple[str, int], ...] = ()):
        self.table = table
        self.schema = table.schema
        self.num_rows = table.num_rows
        self._files = files

    def _rows(self, start: int, end: int):
        for path, size in self._files:
            try:
                now = os.stat(path).st_size
            except OSError:
                continue  # removed: the mapping keeps its bytes
            if now < size:
                raise ArrowFileShrank(f"{os.path.basename(path)} shrank from {size:,} to {now:,} bytes while it was "
                                      "read (truncated or rewritten in place); its rows are not read, which would "
                                      "end the process with SIGBUS")
        return self.table.slice(start, end - start)


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


def load_hf_split(folder: Path) -> StreamSplit | None:
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
    streams: list[StreamFile] = []
    for name in names:
        try:
            stream = StreamFile.open(folder / name)
        except OSError:
            return None
        if stream is None or (streams and not stream.schema.equals(streams[0].schema, check_metadata=False)):
            return None  # what pyarrow would not read, or not concatenate: `datasets` says why
        streams.append(stream)
    stored = (streams[0].schema.metadata or {}).get(b"huggingface")
    try:
        stored_features = json.loads(stored)["info"]["features"] if stored else None
    except (ValueError, KeyError, TypeError):
        return None
    if stored_features is None or stored_features != info.get("features"):
        return None
    if not all(_plain_type(f.type) for f in streams[0].schema):
        return None
    return StreamSplit(streams)


def load_folder(folder: Path) -> list[tuple[str | None, StreamSplit]] | None:
    """[(split name or None, hf split)] in `load_from_disk` order, or None to fall back to `datasets`."""
    if (folder / "dataset_info.json").is_file() and (folder / "state.json").is_file():
        hf_split = load_hf_split(folder)
        return None if hf_split is None else [(None, hf_split)]
    manifest = _read_json(folder / "dataset_dict.json")
    if not isinstance(manifest, dict) or set(manifest) != {"splits"} or not isinstance(manifest["splits"], list):
        return None
    if len(set(map(str, manifest["splits"]))) != len(manifest["splits"]):
        return None  # a repeated split name: `datasets` keeps the last one at the first's place
    out: list[tuple[str | None, StreamSplit]] = []
    for name in manifest["splits"]:
        if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
            return None
        hf_split = load_hf_split(folder / name)
        if hf_split is None:
            return None
        out.append((name, hf_split))
    return out
