"""jsonl extractor: extraction-formats (jsonl), ADDENDUM 3.3, 4.2, D1, D3, D4, D6, D7, D8, D10."""

import json

PARAS = {"paragraphs": [{"sentences": [{"tokens": [
    {"form": "Dober", "lemma": "dober", "upos": "ADJ", "feats": "Case=Nom"},
    {"form": "dan", "lemma": "dan", "upos": "NOUN", "feats": "Case=Nom"},
    {"form": ".", "lemma": ".", "upos": "PUNCT", "feats": None}]}]}]}


def lines(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


def test_seed_example_with_paragraphs(corpus):
    rec = {"doc_id": "d1", "text": "Dober dan.", "url": "https://example.com", **PARAS}
    r = corpus.run("web", "jsonl", {"a.jsonl": lines(rec)})
    assert r.lines == [{"text": "Dober dan.", "source": "web", "domain": "test", "doc_id": "d1", "uid": "web:d1",
                        "metadata": {"url": "https://example.com"}}]
    assert r.sidecar == [{"doc_id": "d1", "uid": "web:d1", "forms": ["Dober", "dan", "."],
                          "lemmas": ["dober", "dan", "."], "upos": ["ADJ", "NOUN", "PUNCT"],
                          "feats": ["Case=Nom", "Case=Nom", None], "space_after": [True, True, True],
                          "sentences": [[0, 2]]}]
    assert list(r.sidecar[0]) == ["doc_id", "uid", "forms", "lemmas", "upos", "feats", "space_after", "sentences"]


def test_field_mapping_knobs_slovenian_news(corpus):
    rec = {"uri": "n1", "body": "Novica.", "url": "u", "title": "T", "dateTime": "2024-01-01", "source": "sta",
           "lang": "slv"}
    r = corpus.run("news", "jsonl", {"w.jsonl": lines(rec)},
                   metadata={"text_field": "body", "id_field": "uri",
                             "metadata_fields": ["url", "title", "dateTime", "source"]})
    assert r.lines[0]["doc_id"] == "n1"
    assert r.lines[0]["metadata"] == {"url": "u", "title": "T", "dateTime": "2024-01-01", "source": "sta"}


def test_exclude_mode_keeps_every_other_field_in_record_order_dropping_structural(corpus):
    rec = {"z": 1, "doc_id": "a", "text": "t", "conll": "x", "paragraphs": None, "m": [1, {"x": None}], "n": None,
           "e": "", "f": False, "zero": 0}
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(rec)})
    assert r.lines[0]["metadata"] == {"z": 1, "m": [1, {"x": None}], "e": "", "f": False, "zero": 0}
    assert list(r.lines[0]["metadata"]) == ["z", "m", "e", "f", "zero"]


def test_whitelist_mode_in_list_order_may_reinclude_text_and_id(corpus):
    rec = {"doc_id": "a", "text": "t", "b": 2, "a": 1, "n": None}
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(rec)},
                   metadata={"metadata_fields": ["a", "n", "missing", "b", "a", "text"]})
    assert r.lines[0]["metadata"] == {"a": 1, "b": 2, "text": "t"}
    assert list(r.lines[0]["metadata"]) == ["a", "b", "text"]


def test_annotations_only_from_paragraphs_and_stubs_keep_alignment(corpus):
    data = lines({"doc_id": "s1", "text": "brez"}, {"doc_id": "r1", "text": "z", **PARAS},
                 {"doc_id": "s2", "text": "brez", "paragraphs": []})
    r = corpus.run("d", "jsonl", {"a.jsonl": data})
    assert [x["doc_id"] for x in r.sidecar] == ["s1", "r1", "s2"]
    assert r.sidecar[0] == {"doc_id": "s1", "uid": "d:s1"}
    assert r.sidecar[2] == {"doc_id": "s2", "uid": "d:s2"}
    assert "forms" in r.sidecar[1]


def test_no_annotations_anywhere_means_no_sidecar(corpus):
    data = lines({"doc_id": "s1", "text": "brez"}, {"text": "x", "paragraphs": [{"sentences": []}]})
    r = corpus.run("d", "jsonl", {"a.jsonl": data})
    assert r.sidecar is None
    assert not (r.out / "d.annotations.jsonl.gz").exists()


def test_missing_levels_read_as_empty_and_empty_sentence_gets_no_span(corpus):
    paras = [{"sentences": [{"tokens": []}, {"tokens": [{"form": "a"}]}, {}]}, {},
             {"sentences": [{"tokens": [{"form": "b"}, {"form": "c"}]}]}]
    r = corpus.run("d", "jsonl", {"a.jsonl": lines({"doc_id": "x", "text": "a b c", "paragraphs": paras})})
    assert r.sidecar[0]["sentences"] == [[0, 0], [1, 2]]
    assert r.sidecar[0]["lemmas"] == [None, None, None]


def test_token_values_copied_as_they_are_and_text_never_rebuilt(corpus):
    paras = [{"sentences": [{"tokens": [{"form": "a", "lemma": "L", "upos": None, "feats": "Case=Nom",
                                         "misc": "SpaceAfter=No"}]}]}]
    r = corpus.run("d", "jsonl", {"a.jsonl": lines({"doc_id": "x", "text": "original text", "paragraphs": paras})})
    assert r.texts == ["original text"]
    assert r.sidecar[0]["lemmas"] == ["L"] and r.sidecar[0]["upos"] == [None] and r.sidecar[0]["feats"] == ["Case=Nom"]
    assert r.sidecar[0]["space_after"] == [True]  # misc is ignored


def test_d10_only_false_means_no_space(corpus):
    toks = [{"form": "a", "space_after": False}, {"form": "b", "space_after": None}, {"form": "c", "space_after": 0},
            {"form": "d", "space_after": "no"}, {"form": "e"}, {"form": "f", "space_after": True}]
    r = corpus.run("d", "jsonl",
                   {"a.jsonl": lines({"doc_id": "x", "text": "t", "paragraphs": [{"sentences": [{"tokens": toks}]}]})})
    assert r.sidecar[0]["space_after"] == [False, True, True, True, True, True]


def test_blank_lines_skipped_silently_malformed_lines_warn_with_line_number(corpus):
    data = "\n   \n" + lines({"doc_id": "a", "text": "ena"}) + "{broken\n\t\n" + lines({"doc_id": "b", "text": "dva"})
    r = corpus.run("d", "jsonl", {"a.jsonl": data})
    assert r.ids == ["a", "b"]
    assert r.drops == {"malformed_json": 1}
    assert any("d/a.jsonl:4" in w and "malformed" in w for w in r.warnings)


def test_d6_non_object_record_skipped_with_warning_not_fatal(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": "[1, 2]\n5\n" + lines({"doc_id": "a", "text": "ena"})})
    assert r.ids == ["a"]
    assert r.drops == {"non_object_record": 2}


def test_d7_text_must_be_a_non_blank_string(corpus):
    recs = [{"doc_id": "1", "text": 5}, {"doc_id": "2", "text": ["l"]}, {"doc_id": "3", "text": "   "},
            {"doc_id": "4"}, {"doc_id": "5", "text": None}, {"doc_id": "6", "text": ""},
            {"doc_id": "7", "text": "  ok "}]
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(*recs)})
    assert r.lines[0]["text"] == "  ok "  # kept unstripped
    assert r.ids == ["7"]
    assert r.drops == {"non_string_text": 2, "empty_text": 2, "missing_text": 2}


def test_id_probe_python_str_and_d4_blank_ids_fall_back_per_file(corpus):
    recs = [{"doc_id": 7, "text": "a"}, {"doc_id": 1.0, "text": "b"}, {"doc_id": True, "text": "c"},
            {"doc_id": {"k": 1}, "text": "d"}, {"doc_id": "", "text": "e"}, {"doc_id": "  ", "text": "f"},
            {"text": "g"}, {"doc_id": None, "text": "h"}, {"doc_id": " x ", "text": "i"}]
    r = corpus.run("d", "jsonl", {"sub/f.jsonl": lines(*recs)})
    assert r.ids == ["7", "1.0", "True", "{'k': 1}", "sub/f:000004", "sub/f:000005", "sub/f:000006",
                     "sub/f:000007", " x "]


def test_d3_fallback_counts_documents_emitted_from_the_file_only(corpus):
    # S1: <n> counts every document emitted from the file (own ids included); skipped records do not count
    recs = [{"doc_id": "x", "text": "a"}, {"text": ""}, {"text": "b"}]
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(*recs), "b.jsonl": lines({"text": "c"})})
    assert r.ids == ["x", "a:000001", "b:000000"]


def test_d8_bom_on_first_line_removed(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": "\ufeff" + lines({"doc_id": "a", "text": "ena"})})
    assert r.ids == ["a"] and r.drops == {}


def test_universal_newlines_and_crlf(corpus):
    r = corpus.run("d", "jsonl",
                   {"a.jsonl": '{"doc_id":"a","text":"x"}\r\n{"doc_id":"b","text":"y"}\r{"doc_id":"c","text":"z"}'})
    assert r.ids == ["a", "b", "c"]


def test_missing_form_drops_the_document_with_a_warning(corpus):
    bad = {"doc_id": "bad", "text": "t", "paragraphs": [{"sentences": [{"tokens": [{"lemma": "x"}]}]}]}
    shape = {"doc_id": "shape", "text": "t", "paragraphs": [5]}
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(bad, shape, {"doc_id": "ok", "text": "t"})})
    assert r.ids == ["ok"]
    assert r.drops == {"bad_annotations": 2}


def test_d1_nan_infinity_become_null_and_big_integers_keep_precision(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": '{"doc_id":"a","text":"x","n":NaN,"i":-Infinity,'
                                              '"big":123456789012345678901234567890,"f":1E2,"g":0.10,"h":-0.0}\n'})
    md = r.lines[0]["metadata"]
    assert md["n"] is None and md["i"] is None  # S10: the key stays, as null
    assert md["big"] == 123456789012345678901234567890
    assert md["f"] == 100.0 and isinstance(md["f"], float) and md["g"] == 0.1
    raw = (r.out / "d.jsonl").read_text()
    assert "NaN" not in raw and "Infinity" not in raw


def test_d1_lone_surrogate_becomes_replacement_char_and_is_counted(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": '{"doc_id":"a","text":"x \\ud800 y"}\n{"doc_id":"b","text":"ok"}\n'})
    assert r.texts == ["x \ufffd y", "ok"]
    assert r.manifest.repairs == {"lone_surrogate": 1}
    assert any("lone_surrogate" in w for w in r.warnings)


def test_repeated_key_last_value_wins_at_first_position(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": '{"a":1,"doc_id":"x","text":"t","b":2,"a":3}\n'})
    assert list(r.lines[0]["metadata"].items()) == [("a", 3), ("b", 2)]


def test_invalid_utf8_line_skipped_with_warning(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": b'{"doc_id":"a","text":"\xff"}\n{"doc_id":"b","text":"ok"}\n'})
    assert r.ids == ["b"]
    assert r.drops == {"invalid_utf8": 1}


def test_non_ascii_written_raw(corpus):
    r = corpus.run("d", "jsonl", {"a.jsonl": lines({"doc_id": "č", "text": "Žabe in ščurki \u2028 \x7f"})})
    raw = (r.out / "d.jsonl").read_text(encoding="utf-8")
    assert "Žabe in ščurki \u2028 \x7f" in raw and "\\u" not in raw
    assert r.lines[0]["uid"] == "d:č"


def test_a_token_value_of_the_wrong_type_drops_the_document_as_bad_annotations(corpus):
    def doc(doc_id, **token):
        return {"doc_id": doc_id, "text": "t", "paragraphs": [{"sentences": [{"tokens": [
            {"form": "ok", "lemma": "ok", "upos": "X", "feats": None}, token]}]}]}

    records = [doc("form", form=5), doc("lemma", form="a", lemma={"x": 1}), doc("upos", form="a", upos=7),
               doc("feats", form="a", feats=["Case=Nom"]), doc("nulls", form="a", lemma=None, upos=None, feats=None)]
    r = corpus.run("d", "jsonl", {"a.jsonl": lines(*records)})
    assert r.ids == ["nulls"]
    assert r.drops == {"bad_annotations": 4}
    assert "d/a.jsonl:1: token 2's 'form' is an int (5), not a string; record skipped [bad_annotations]" in r.warnings
    assert any("token 2's 'lemma' is a dict ({'x': 1}), not a string or null" in w for w in r.warnings)
    assert r.sidecar is not None and r.sidecar[0]["lemmas"] == ["ok", None]
