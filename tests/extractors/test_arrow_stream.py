"""The Arrow IPC stream read at offsets (extractors/arrow_stream.py): its index of the messages is
what pyarrow reads from the same bytes, and what it cannot vouch for it leaves to `datasets`."""

import datetime
import io

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm4ie_assets.extractors.arrow_stream import ArrowFileShrank, StreamFile

_COLUMNS = {
    "text": (pa.string(), lambda i: None if i % 7 == 3 else f"besedilo {i} " * (i % 4)),
    "big": (pa.large_string(), lambda i: "č" * (i % 5)),
    "n": (pa.int64(), lambda i: i if i % 5 else None),
    "f": (pa.float64(), lambda i: i / 3),
    "ok": (pa.bool_(), lambda i: i % 2 == 0),
    "raw": (pa.binary(), lambda i: bytes([i % 256]) * (i % 3)),
    "when": (pa.timestamp("us"), lambda i: datetime.datetime(2020, 1, 1 + i % 28)),
    "tags": (pa.list_(pa.string()), lambda i: [f"t{k}" for k in range(i % 3)] if i % 4 else None),
    "rec": (pa.struct([("a", pa.int32()), ("b", pa.list_(pa.float32()))]), lambda i: {"a": i, "b": [0.5] * (i % 2)}),
    "nothing": (pa.null(), lambda i: None),
}


def _stream(columns: list[str], batches: list[int], legacy: bool = False, compression=None, end: bool = True) -> bytes:
    schema = pa.schema([(c, _COLUMNS[c][0]) for c in columns], metadata={"huggingface": "{}"})
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(use_legacy_format=legacy, compression=compression)
    writer = pa.ipc.new_stream(sink, schema, options=options)
    row = 0
    for n in batches:
        writer.write_batch(pa.record_batch([pa.array([_COLUMNS[c][1](row + i) for i in range(n)], _COLUMNS[c][0])
                                            for c in columns], schema=schema))
        row += n
    if end:
        writer.close()
    return sink.getvalue()


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(columns=st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=5, unique=True),
       batches=st.lists(st.integers(0, 40), max_size=6), legacy=st.booleans(), end=st.booleans())
def test_the_index_is_what_pyarrow_reads(tmp_path_factory, columns, batches, legacy, end):
    path = tmp_path_factory.mktemp("s") / "a.arrow"
    path.write_bytes(_stream(columns, batches, legacy, end=end))
    stream = StreamFile.open(path)
    try:
        reader = pa.ipc.open_stream(path.read_bytes())
    except pa.ArrowInvalid:  # nothing written (no batch, not closed): not a stream
        assert stream is None
        return
    expected = list(reader)
    assert stream is not None and stream.schema.equals(reader.schema, check_metadata=True)
    assert [(b.rows, b.nbytes) for b in stream.batches] == [(b.num_rows, b.get_total_buffer_size()) for b in expected]
    assert all(stream.read(b).equals(e) for b, e in zip(stream.batches, expected, strict=True))


def test_what_it_cannot_vouch_for_goes_to_datasets(tmp_path):
    """A stream cut short at any byte, a compressed one, one with dictionaries and bytes that are no
    stream: None (the caller reads the folder with `datasets`), never an exception."""
    whole = _stream(["text", "tags"], [5, 7])
    path = tmp_path / "a.arrow"
    for cut in range(len(whole)):
        path.write_bytes(whole[:cut])
        stream = StreamFile.open(path)
        if stream is not None:  # cut at a message's end: the batches before it
            assert sum(b.rows for b in stream.batches) in (0, 5, 12), cut
    path.write_bytes(_stream(["text"], [3], compression="zstd"))
    assert StreamFile.open(path) is None
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, pa.schema([("d", pa.dictionary(pa.int32(), pa.string()))])) as w:
        w.write_batch(pa.record_batch([pa.array(["a", "b"]).dictionary_encode()], names=["d"]))
    path.write_bytes(sink.getvalue())
    assert StreamFile.open(path) is None
    for junk in (b"", b"\xff\xff\xff\xff", b"\x00" * 8, b"not an arrow file at all" * 10):
        path.write_bytes(junk)
        assert StreamFile.open(path) is None, junk


def test_a_file_that_shrank_is_named_when_its_rows_are_read(tmp_path):
    path = tmp_path / "data-00000-of-00001.arrow"
    path.write_bytes(_stream(["text"], [10, 10, 10]))
    stream = StreamFile.open(path)
    assert stream is not None and stream.read(stream.batches[2]).num_rows == 10
    with open(path, "r+b") as fh:
        fh.truncate(stream.batches[1].end - 1)
    assert stream.read(stream.batches[0]).num_rows == 10
    with pytest.raises(ArrowFileShrank, match=r"data-00000-of-00001\.arrow shrank from [\d,]+ to [\d,]+ bytes"):
        stream.read(stream.batches[1])
