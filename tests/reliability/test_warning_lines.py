"""Each over-cap warning names its document's first line, split and unsplit alike (issue 34,
point 3; docs/splitting.md "Warnings"; docs/memory.md).

text used to name a dropped block by the line at the start of its read chunk (`a.txt:1` for blocks on
lines 3 and 7 unsplit, `:1` and `:5` split): the block's own line was computed only in chunks that
held invalid bytes.
"""

from support.split_outputs import assert_same, extract

_CAP = "    max_document_bytes: 20\n"


def _blocks_on_lines_3_and_7() -> bytes:
    long = "beseda " * 10  # 70 bytes, 69 stripped: over the cap of 20
    return f"kratko\n\n{long}\n\nše ena\n\n{long}\n\nkonec\n".encode()


def test_over_cap_text_blocks_are_named_by_their_first_line_split_and_unsplit(tmp_path):
    files = {"a.txt": _blocks_on_lines_3_and_7()}
    whole = extract(tmp_path / "whole", "text", files, 0, metadata=_CAP)
    assert whole.manifest["drops"] == {"document_too_large": 2}
    assert whole.warnings == [
        "d/a.txt:3: a block of 69 bytes, over max_document_bytes (20); block skipped [document_too_large]",
        "d/a.txt:7: a block of 69 bytes, over max_document_bytes (20); block skipped [document_too_large]",
    ]
    for split, workers in ((8, 1), (30, 2)):
        got = extract(tmp_path / "split", "text", files, split, workers, metadata=_CAP)
        assert len(got.shards) > 2, split
        assert_same(got, whole, f"split_bytes={split}, {workers} worker(s)")


def test_a_block_longer_than_a_read_chunk_is_named_by_its_first_line(tmp_path):
    """A block over the cap that spans several 4 MiB reads is counted, not kept (`_BigBlock`), and
    still named by its first line and its exact size."""
    big = ("x" * 99 + "\n") * 90_000  # 9,000,000 bytes, 9,000,000 - 1 after stripping
    data = f"prvi\n\n\n  \ndrugi\n\n{big}  \n \n\ntretji\n".encode()
    whole = extract(tmp_path / "whole", "text", {"a.txt": data}, 0, metadata="    max_document_bytes: 1000\n")
    assert whole.warnings == [f"d/a.txt:7: a block of {len(big) - 1:,} bytes, over max_document_bytes (1,000); "
                              "block skipped [document_too_large]"]
    assert whole.text.count(b'"doc_id"') == 3 and b"tretji" in whole.text
