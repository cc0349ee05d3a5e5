"""json extractor: extraction-formats (json), ADDENDUM 4.3, D6, D7, D8, D25."""

import json

import pytest

from slm4ie_assets.extractors.json_stream import stream_records
from slm4ie_assets.extractors.records import MAX_JSON_DEPTH, loads


def test_seed_example_array_of_records(corpus):
    data = [{"doc_id": "vemo.1", "text": "Bolnik je prišel z bolečinami.", "specialty": "interna", "year": 2023},
            {"doc_id": "vemo.2", "text": "Drugi opis primera."}]
    r = corpus.run("povejmo_vemo_med", "json", {"a.json": json.dumps(data, ensure_ascii=False)}, domain="medical")
    assert r.lines == [
        {"text": "Bolnik je prišel z bolečinami.", "source": "povejmo_vemo_med", "domain": "medical",
         "doc_id": "vemo.1", "uid": "povejmo_vemo_med:vemo.1", "metadata": {"specialty": "interna", "year": 2023}},
        {"text": "Drugi opis primera.", "source": "povejmo_vemo_med", "domain": "medical", "doc_id": "vemo.2",
         "uid": "povejmo_vemo_med:vemo.2"},
    ]
    assert r.sidecar is None


def test_single_object_is_one_record(corpus):
    r = corpus.run("d", "json", {"a.json": '{"doc_id": "x", "text": "ena"}'})
    assert r.ids == ["x"]


def test_other_top_level_skips_file_with_warning(corpus):
    r = corpus.run("d", "json", {"a.json": '"just a string"', "b.json": '[{"doc_id":"y","text":"t"}]'})
    assert r.ids == ["y"]
    assert r.drops == {"unsupported_top_level": 1}
    assert any("d/a.json" in w for w in r.warnings)


def test_decode_error_skips_whole_file_with_warning(corpus):
    r = corpus.run("d", "json",
                   {"a.json": '[{"doc_id":"x","text":"t"}', "b.json": "", "c.json": '[{"doc_id":"y","text":"t"}]'})
    assert r.ids == ["y"]
    assert r.drops == {"malformed_json": 2}


def test_d8_bom_removed_instead_of_dropping_the_file(corpus):
    r = corpus.run("d", "json", {"a.json": '\ufeff[{"doc_id":"x","text":"t"}]'})
    assert r.ids == ["x"] and r.drops == {}


def test_d6_invalid_utf8_skips_file_not_dataset(corpus):
    r = corpus.run("d", "json", {"a.json": b'[{"doc_id":"x","text":"\xff"}]', "b.json": '[{"doc_id":"y","text":"t"}]'})
    assert r.ids == ["y"]
    assert r.drops == {"invalid_utf8": 1}


def test_d6_non_object_elements_skipped_with_warning(corpus):
    r = corpus.run("d", "json", {"a.json": '[1, "s", null, {"doc_id":"x","text":"t"}]'})
    assert r.ids == ["x"]
    assert r.drops == {"non_object_record": 3}
    assert any("element 0" in w for w in r.warnings)


def test_d7_falsy_and_non_string_text_skipped_and_counted(corpus):
    data = [{"doc_id": "1", "text": None}, {"doc_id": "2", "text": ""}, {"doc_id": "3", "text": 0},
            {"doc_id": "4", "text": []}, {"doc_id": "5", "text": "  "}, {"doc_id": "6", "text": " ok"}]
    r = corpus.run("d", "json", {"a.json": json.dumps(data)})
    assert r.texts == [" ok"]
    assert r.drops == {"missing_text": 1, "empty_text": 2, "non_string_text": 2}


def test_paragraphs_excluded_and_never_parsed(corpus):
    data = [{"doc_id": "x", "text": "t", "paragraphs": [{"sentences": [{"tokens": [{"form": "t"}]}]}], "conll": "c",
             "k": 1}]
    r = corpus.run("d", "json", {"a.json": json.dumps(data)})
    assert r.lines[0]["metadata"] == {"k": 1}
    assert r.sidecar is None


def test_knobs_shared_with_jsonl(corpus):
    data = [{"id": "a", "body": "t", "x": 1, "y": None, "z": 2}]
    r = corpus.run("d", "json", {"a.json": json.dumps(data)},
                   metadata={"text_field": "body", "id_field": "id", "metadata_fields": ["z", "y", "x"]})
    assert r.ids == ["a"] and r.lines[0]["metadata"] == {"z": 2, "x": 1}


def test_fallback_ids_per_file(corpus):
    data = [{"doc_id": "x", "text": "a"}, {"text": "b"}]
    r = corpus.run("d", "json", {"sub/a.json": json.dumps(data)})
    assert r.ids == ["x", "sub/a:000001"]


# ----------------------------------------------------------------------------- the stream (docs/memory.md)

_TRICKY = [
    b'[{"text": "a", "f": 0.1, "g": -0.0, "h": 1e-320, "i": 9223372036854775807, "j": 1.7976931348623157e308}]',
    b'[{"text": "pair \\ud83d\\ude00", "k": "\\u0000\\/\\"", "k": "last wins"}, 5, "s", null, []]',
    b'\xef\xbb\xbf [\r\n\t{"text": "bom"} ]\n',
    b"[]",
    b'[{"text": "a\\ud800 lone high"}]',  # yajl would give "?"
    b'[{"text": "a\\udc00 lone low"}]',
    b'[1,\x0c{"text": "form feed"}]',  # yajl takes \f for whitespace, the reference does not
    b'[{"text": "x", "n": NaN}]',
    b'[{"text": "x", "n": 123456789012345678901234567890}]',
    b'[{"text": "x", "n": 1e400}]',
    b'[{"text": "x"}] trailing',
    b'[{"text": "\xff"}]',
    b'[{"text": "x",}]',
    b'[' + b'[' * 1030 + b']' * 1030 + b']',
    b'[' + b'[' * 500 + b']' * 500 + b', {"text": "deep but fine"}]',
]


@pytest.mark.parametrize("data", _TRICKY, ids=range(len(_TRICKY)))
def test_streamed_records_are_the_whole_file_readings_or_the_file_is_read_whole(tmp_path, data):
    path = tmp_path / "a.json"
    path.write_bytes(data)
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        whole = ("ok", loads(body))
    except ValueError:  # UnicodeDecodeError too
        whole = ("refused",)
    records = stream_records(path)
    if records is None:
        return  # the extractor reads it whole, exactly as before
    assert repr(("ok", list(records))) == repr(whole)  # repr: -0.0 and 0.0, 1 and 1.0 differ


def test_a_file_yajl_reads_differently_is_read_whole(tmp_path):
    for data in (_TRICKY[4], _TRICKY[6], _TRICKY[7], _TRICKY[8]):
        (tmp_path / "a.json").write_bytes(data)
        assert stream_records(tmp_path / "a.json") is None, data


def test_streamed_and_whole_files_give_the_same_documents_and_drops(corpus):
    records = [{"doc_id": f"r{i}", "text": f"t {i}", "score": i / 3, "big": 2**62 + i} for i in range(50)]
    records[7] = {"text": ""}
    records[9] = 5
    array = json.dumps(records)
    r = corpus.run("d", "json", {"a.json": array, "b.json": array.replace('"t 3"', '"t \\ud800"')})
    assert r.drops == {"empty_text": 2, "non_object_record": 2}
    a = [line for line in r.lines if line["doc_id"].startswith("r")][:48]
    assert [line["metadata"]["score"] for line in a[:3]] == [0.0, 1 / 3, 2 / 3]
    assert a[0]["metadata"]["big"] == 2**62
    # b.json is read whole: its lone surrogate is repaired to U+FFFD (D1), where yajl would have given "?"
    assert [line["text"] for line in r.lines if line["text"].startswith("t \ufffd")] == ["t \ufffd"]


def test_d25_nesting_is_counted_outside_strings_and_a_file_deeper_than_the_limit_is_read_whole(tmp_path):
    path = tmp_path / "a.json"
    # brackets, an escaped backslash before a closing quote and an escaped quote, all inside strings
    path.write_text('[{"text": "' + "[{" * 2000 + '\\\\", "k": "\\"]]", "m": [[[1]]]}]')
    records = stream_records(path)
    assert records is not None and list(records) == loads(path.read_bytes())
    # records nested MAX_JSON_DEPTH deep, in the top-level array: streamed; one level more: read whole,
    # which refuses it (D25)
    deepest = "[" + "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1) + "]"
    path.write_text(f"[{deepest}, {deepest}]")
    assert stream_records(path) is not None
    path.write_text(f"[{deepest}, [{deepest}]]")
    assert stream_records(path) is None
    with pytest.raises(ValueError, match="nested deeper than 513 levels"):
        loads(path.read_bytes(), MAX_JSON_DEPTH + 1)
