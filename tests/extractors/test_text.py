"""text extractor: extraction-formats (text), ADDENDUM 4.1 as amended by D8, D9, D23, S1, S4."""

import pytest

from slm4ie_assets.catalog import CatalogError


def test_blank_line_separates_documents_and_ids_are_rel_and_block_index(corpus):
    r = corpus.run("cc100", "text", {"sl.txt": "Prvi dokument, prva vrstica.\nPrvi dokument, druga vrstica.\n\n"
                                               "Drugi dokument, ena sama vrstica.\n\nTretji dokument.\n"})
    assert r.texts == ["Prvi dokument, prva vrstica.\nPrvi dokument, druga vrstica.",
                       "Drugi dokument, ena sama vrstica.", "Tretji dokument."]
    assert r.ids == ["sl:000000", "sl:000001", "sl:000002"]
    assert [x["uid"] for x in r.lines] == ["cc100:sl:000000", "cc100:sl:000001", "cc100:sl:000002"]
    assert r.sidecar is None  # text-only datasets get no sidecar at all


def test_line_keys_in_schema_order_without_metadata(corpus):
    r = corpus.run("cc100", "text", {"a.txt": "x\n"}, domain="web", metadata={})
    assert list(r.lines[0]) == ["text", "source", "domain", "doc_id", "uid"]
    assert r.lines[0]["source"] == "cc100" and r.lines[0]["domain"] == "web"


def test_d23_a_metadata_block_is_refused_not_ignored(corpus):
    # ADDENDUM 4.1 ignored `metadata:` for text; D23 makes a block that would be ignored a config error
    with pytest.raises(CatalogError, match=r"extract.yaml:\d+: datasets.cc100.metadata: the text extractor takes no "
                                           r"metadata block \(found ignored\); remove it"):
        corpus.run("cc100", "text", {"a.txt": "x\n"}, domain="web", metadata={"ignored": True})


def test_d9_whitespace_only_line_is_a_boundary(corpus):
    # ADDENDUM 4.1 kept whitespace-only lines inside a block; D9 makes them boundaries.
    r = corpus.run("t", "text", {"a.txt": "  Prvi\n   \n  druga  \n\t\nTretji\n"})
    assert r.texts == ["Prvi", "druga", "Tretji"]


def test_s4_nbsp_only_line_is_a_boundary(corpus):
    r = corpus.run("t", "text", {"a.txt": "ena\n\u00a0\u00a0\ndva\n"})
    assert r.texts == ["ena", "dva"]


def test_block_text_joined_with_newlines_then_stripped_once(corpus):
    r = corpus.run("t", "text", {"a.txt": "  Prvi  \n  druga  \n"})
    assert r.texts == ["Prvi  \n  druga"]


def test_blank_blocks_do_not_consume_an_index(corpus):
    r = corpus.run("t", "text", {"a.txt": "\n\n\nena\n\n\n\ndva\n\n"})
    assert r.ids == ["a:000000", "a:000001"]


def test_index_restarts_per_file_and_rel_drops_only_last_suffix(corpus):
    r = corpus.run("t", "text", {"a.b.txt": "x\n\ny\n", "sub/dir/x.txt": "z\n", ".hidden.txt": "h\n"})
    assert r.ids == [".hidden:000000", "a.b:000000", "a.b:000001", "sub/dir/x:000000"]


def test_index_padded_to_at_least_six_digits(corpus):
    r = corpus.run("t", "text", {"a.txt": "\n\n".join(f"d{i}" for i in range(12)) + "\n"})
    assert r.ids[-1] == "a:000011"


def test_universal_newlines_crlf_and_lone_cr(corpus):
    r = corpus.run("t", "text", {"a.txt": b"ena\r\ndva\r\n\r\ntri\rstiri\r\rpet"})
    assert r.texts == ["ena\ndva", "tri\nstiri", "pet"]


def test_form_feed_and_u2028_do_not_split_lines(corpus):
    r = corpus.run("t", "text", {"a.txt": "a\fb\u2028c\n"})
    assert r.texts == ["a\fb\u2028c"]


def test_d8_bom_removed(corpus):
    r = corpus.run("t", "text", {"a.txt": "\ufeff  Prvi\n"})
    assert r.texts == ["Prvi"]


def test_no_trailing_newline_still_closes_last_block(corpus):
    r = corpus.run("t", "text", {"a.txt": "ena\n\ndva"})
    assert r.texts == ["ena", "dva"]


def test_empty_file_gives_empty_output_file(corpus):
    r = corpus.run("t", "text", {"a.txt": ""})
    assert r.lines == [] and (r.out / "t.jsonl").read_bytes() == b""


def test_d6_invalid_utf8_drops_only_the_block_with_a_warning_naming_file_and_line(corpus):
    r = corpus.run("t", "text", {"a.txt": b"dobro\n\nslabo \xff\xfe tu\nse\n\nspet dobro\n"})
    assert r.texts == ["dobro", "spet dobro"]
    assert r.ids == ["a:000000", "a:000001"]
    assert r.drops == {"invalid_utf8": 1}
    assert any("t/a.txt:3" in w for w in r.warnings)


def test_d6_directory_named_like_input_is_ignored(corpus):
    r = corpus.run("t", "text", {"real.txt": "x\n", "dir.txt/inner.txt": "y\n"})
    assert r.ids == ["dir.txt/inner:000000", "real:000000"]


def test_discovery_order_compares_path_components(corpus):
    # ADDENDUM 3.1: a/b.txt < a.b.txt < a.txt ; uppercase before lowercase; .h before a
    r = corpus.run("t", "text", {"a.txt": "3\n", "a.b.txt": "2\n", "a/b.txt": "1\n", "B.txt": "0\n", ".h.txt": "-1\n"})
    assert r.texts == ["-1", "0", "1", "2", "3"]
