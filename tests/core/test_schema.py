"""The Document schema and line encoders (ADDENDUM 2, D1)."""

import json
import math

import pytest

from slm4ie_assets.schema import (
    Annotations,
    Document,
    Token,
    UnencodableValue,
    annotation_record,
    dumps,
    sentence_text,
    stub_record,
    text_record,
    uid,
)


def test_uid_is_source_colon_doc_id():
    assert uid("cc100", "sl:000000") == "cc100:sl:000000"


def test_sentence_spans_are_inclusive_over_the_flat_token_list():
    ann = Annotations()
    ann.add_sentence([Token(f"a{i}") for i in range(5)])
    ann.add_sentence([])  # a sentence with no tokens gets no pair
    ann.add_sentence([Token(f"b{i}") for i in range(7)])
    assert ann.sentences == [[0, 4], [5, 11]]
    assert list(ann.tokens())[5] == Token("b0", None, None, None, True)


def test_sentence_text_honours_space_after_but_never_after_the_last_token():
    assert sentence_text(["javna", "uprava", "."], [True, False, False]) == "javna uprava."
    assert sentence_text(["a", "b"], [True, True]) == "a b"


def test_text_record_key_order_and_metadata_only_when_non_empty():
    rec = text_record(Document("t", "d", {"k": 1}), "src", "web", "d")
    assert list(rec) == ["text", "source", "domain", "doc_id", "uid", "metadata"]
    assert "metadata" not in text_record(Document("t", "d"), "src", "web", "d")


def test_annotation_and_stub_record_key_order():
    ann = Annotations(["a"], [None], [None], [None], [True], [[0, 0]])
    assert list(annotation_record("d", "s:d", ann)) == ["doc_id", "uid", "forms", "lemmas", "upos", "feats",
                                                         "space_after", "sentences"]
    assert stub_record("d", "s:d") == {"doc_id": "d", "uid": "s:d"}


def test_d1_valid_json_nan_inf_to_null():
    issues = []
    out = dumps({"a": math.nan, "b": [math.inf, -math.inf], "c": 1.5}, issues)
    assert json.loads(out) == {"a": None, "b": [None, None], "c": 1.5}


def test_d1_lone_surrogate_repaired_and_reported():
    issues = []
    out = dumps({"t": "x\ud800y", "k": ["\udfff"]}, issues)
    assert json.loads(out) == {"t": "x\ufffdy", "k": ["\ufffd"]}
    assert issues == ["lone_surrogate", "lone_surrogate"]


def test_big_integers_keep_precision_and_floats_use_shortest_repr():
    out = dumps({"i": 2**80, "f": 0.1, "z": -0.0})
    assert json.loads(out) == {"i": 2**80, "f": 0.1, "z": -0.0}
    assert b"-0.0" in out


def test_control_characters_escaped_and_non_ascii_raw():
    out = dumps({"t": "a\nb\x01č\u2028"})
    assert out == '{"t":"a\\nb\\u0001č\u2028"}'.encode("utf-8")


def test_unencodable_value_raises_a_named_error():
    with pytest.raises(UnencodableValue):
        dumps({"b": b"bytes"})
