"""coleslaw extractor: extraction-formats (coleslaw), ADDENDUM 3.3, 4.4, D3, D4, D6, D7, D8, D14, D18,
D22, S1, S2, S4, S12, S13."""

import json
import logging
from pathlib import Path

from slm4ie_assets.extractors.coleslaw import SHADOW_WARNINGS_PER_FILE
from support.extraction import Result, extract_raw
from support.files import ordered


def extract(tmp_path: Path, files: dict, key: str = "coleslaw", workers: int = 1) -> Result:
    """Write `files` under raw/<key>/ and run the plain pipeline (plan, extract, publish)."""
    return extract_raw(tmp_path, key, "coleslaw", "legal", files, workers)


def jl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


def line(text, doc_id, metadata) -> dict:
    return {"text": text, "source": "coleslaw", "domain": "legal", "doc_id": doc_id, "uid": f"coleslaw:{doc_id}",
            "metadata": metadata}


# ----------------------------------------------------------------------------- the four subcorpora


def test_four_subcorpora_with_their_schemas_exact_lines(tmp_path):
    """extraction-formats coleslaw + ADDENDUM 4.4: one schema per subcorpus, detected per record;
    subcorpus = parent directory (D14); `id` survives into metadata; files in code-point order of their
    path components (ADDENDUM 3.1: "USRS" before "UradniList")."""
    files = {
        "PISRS/zakoni.jsonl": jl({"id": 1, "text": "Zakon o nečem.", "title": "Zakon"}),
        "UradniList/ul.jsonl": jl({"id": "UL-7", "text": "  Uradni list.\n", "issue": 3, "year": None}),
        "USRS/us.jsonl": jl({"id": "Up-1", "fullText": "Sklep ustavnega sodišča.", "date": "2020-01-01"}),
        "SodnaPraksa/sp.jsonl": jl(
            {"id": "c1", "jedro": "Bistvo.", "izrek": "Razveljavi se.", "obrazlozitev": "Obrazložitev sledi.",
             "court": "VSL"},
            {"id": "750", "skodni_dogodek": "Prometna nesreča.", "poskodba": "Zvin vratu.", "znesek": 1500.5}),
    }
    r = extract(tmp_path, files)
    assert ordered(r.lines) == ordered([
        line("Zakon o nečem.", "1", {"subcorpus": "PISRS", "id": 1, "title": "Zakon"}),
        line("Bistvo.\n\nRazveljavi se.\n\nObrazložitev sledi.", "c1",
             {"subcorpus": "SodnaPraksa", "id": "c1", "court": "VSL"}),
        line("Prometna nesreča.\n\nZvin vratu.", "750", {"subcorpus": "SodnaPraksa", "id": "750", "znesek": 1500.5}),
        line("Sklep ustavnega sodišča.", "Up-1", {"subcorpus": "USRS", "id": "Up-1", "date": "2020-01-01"}),
        line("  Uradni list.\n", "UL-7", {"subcorpus": "UradniList", "id": "UL-7", "issue": 3}),
    ])
    assert r.drops == {}


def test_text_and_fulltext_used_unstripped_only_when_non_blank_strings(tmp_path):
    """ADDENDUM 4.4 candidates 1-2: a string non-empty after stripping; the unstripped value is used.
    A blank or non-string `text` is no candidate and stays in metadata (S12)."""
    r = extract(tmp_path, {"USRS/a.jsonl": jl(
        {"id": "a", "text": "  ", "fullText": " Polno besedilo. "},
        {"id": "b", "text": 5, "fullText": "\u00a0\u2003"},
        {"id": "c", "text": ["x"], "fullText": "f"})})
    assert r.texts == [" Polno besedilo. ", "f"]
    assert r.metas[0] == {"subcorpus": "USRS", "id": "a", "text": "  "}
    assert r.metas[1] == {"subcorpus": "USRS", "id": "c", "text": ["x"]}
    assert r.drops == {"missing_text": 1}  # record b: S4, NBSP and em space are whitespace


def test_court_parts_stripped_joined_by_blank_line_and_all_three_leave_metadata(tmp_path):
    """ADDENDUM 4.4 candidate 3 and S12: each non-blank string part is stripped; an empty `izrek` of the
    chosen court text leaves metadata with the others; a non-string part is not text."""
    r = extract(tmp_path, {"SodnaPraksa/a.jsonl": jl(
        {"doc_id": "s1", "jedro": "  Jedro. ", "izrek": "", "obrazlozitev": "\nRazlogi.\n", "senat": "III"},
        {"doc_id": "s2", "jedro": 7, "izrek": " Izrek. ", "obrazlozitev": None})})
    assert r.texts == ["Jedro.\n\nRazlogi.", "Izrek."]
    assert r.metas == [{"subcorpus": "SodnaPraksa", "senat": "III"}, {"subcorpus": "SodnaPraksa"}]


def test_claim_fields_in_reading_order_addendum_example(tmp_path):
    """ADDENDUM 4.4 candidate 4, its own example; all six claim fields of the chosen source leave metadata."""
    rec = {"id": 1, "dodatne_informacije": "z", "skodni_dogodek": " a ", "poskodba": 5, "telesne_bolecine": "b",
           "strah": " ", "zmanjsanje_zivljenjske_aktivnosti": None, "znesek": 10}
    r = extract(tmp_path, {"SodnaPraksa/c.jsonl": jl(rec, {"id": 2, "skodni_dogodek": " a ", "poskodba": 5,
                                                          "telesne_bolecine": "b", "strah": " "})})
    assert r.texts == ["a\n\nb\n\nz", "a\n\nb"]
    assert r.metas == [{"subcorpus": "SodnaPraksa", "id": 1, "znesek": 10}, {"subcorpus": "SodnaPraksa", "id": 2}]


def test_record_without_any_text_source_is_skipped_and_counted(tmp_path):
    """D7 (replaces 'skipped silently'): no candidate means the record is counted, the line named."""
    r = extract(tmp_path, {"PISRS/a.jsonl": jl({"id": 1, "title": "brez besedila"}, {"id": 2, "text": "ok"})})
    assert r.ids == ["2"]
    assert r.drops == {"missing_text": 1}
    assert r.warnings[0].startswith("coleslaw/PISRS/a.jsonl:1:")


# ----------------------------------------------------------------------------- shadowed sources


def test_shadowed_sources_stay_in_metadata_and_are_logged_not_dropped(tmp_path, caplog):
    """ADDENDUM 4.4 Warning + D22/S12: the earliest source wins; the others stay in metadata (so nothing
    is lost and nothing is counted as a drop); a WARNING names doc_id, subcorpus, every source and the
    chosen one."""
    rec = {"doc_id": "d1", "id": 9, "jedro": "J.", "text": "Glavno.", "fullText": "Polno.", "izrek": "I.",
           "skodni_dogodek": "Nesreča."}
    with caplog.at_level(logging.WARNING, logger="slm4ie_assets.extractors.coleslaw"):
        r = extract(tmp_path, {"USRS/a.jsonl": jl(rec)})
    assert r.texts == ["Glavno."]
    assert ordered(r.metas[0]) == ordered({"subcorpus": "USRS", "id": 9, "jedro": "J.", "fullText": "Polno.",
                                          "izrek": "I.", "skodni_dogodek": "Nesreča."})
    assert r.drops == {}
    [msg] = [rec.getMessage() for rec in caplog.records if rec.name == "slm4ie_assets.extractors.coleslaw"]
    assert "'d1'" in msg and "'USRS'" in msg and "['text', 'fullText', 'sp_courts', 'sp_claims']" in msg
    assert "chose 'text'" in msg


def test_single_source_logs_nothing(tmp_path, caplog):
    """ADDENDUM 4.4 Warning: only two or more candidates warn; a blank `text` is not a candidate."""
    with caplog.at_level(logging.WARNING, logger="slm4ie_assets.extractors.coleslaw"):
        extract(tmp_path, {"USRS/a.jsonl": jl({"id": "u", "text": " ", "fullText": "F."})})
    assert [r for r in caplog.records if r.name == "slm4ie_assets.extractors.coleslaw"] == []


def test_many_shadowed_records_are_summarised_after_the_first_ones(tmp_path, caplog):
    """A subcorpus that always carries two sources warns for the first records and then once with the
    total, so the log stays readable and no shadowing goes unreported."""
    n = SHADOW_WARNINGS_PER_FILE + 5
    records = [{"id": i, "text": "t", "fullText": "f"} for i in range(n)]
    with caplog.at_level(logging.WARNING, logger="slm4ie_assets.extractors.coleslaw"):
        r = extract(tmp_path, {"PISRS/a.jsonl": jl(*records)})
    assert len(r.lines) == n
    msgs = [x.getMessage() for x in caplog.records if x.name == "slm4ie_assets.extractors.coleslaw"]
    assert len(msgs) == SHADOW_WARNINGS_PER_FILE + 1
    assert f"{n} record(s)" in msgs[-1]


# ----------------------------------------------------------------------------- ids and metadata


def test_id_probe_doc_id_then_id_blank_falls_through(tmp_path):
    """ADDENDUM 3.3/4.4 and D4/S2: probe ["doc_id","id"]; null or blank skips to the next; str() of the
    value; {"doc_id":"","id":0} gives "0"; doc_id never enters metadata, id always does."""
    r = extract(tmp_path, {"PISRS/a.jsonl": jl(
        {"doc_id": "", "id": 0, "text": "a"},
        {"doc_id": " ", "id": True, "text": "b"},
        {"doc_id": None, "id": 1.0, "text": "c"},
        {"doc_id": " x ", "id": "y", "text": "d"},
        {"doc_id": {"k": 1}, "text": "e"})})
    assert r.ids == ["0", "True", "1.0", " x ", "{'k': 1}"]
    assert r.metas == [{"subcorpus": "PISRS", "id": 0}, {"subcorpus": "PISRS", "id": True},
                       {"subcorpus": "PISRS", "id": 1.0}, {"subcorpus": "PISRS", "id": "y"}, {"subcorpus": "PISRS"}]


def test_record_without_usable_id_gets_the_file_position_fallback(tmp_path):
    """D3/S1 (replaces Q1's idx- ids): <rel_stem>:<n>, n counting every document emitted from that
    file (with or without its own id); skipped records do not count."""
    r = extract(tmp_path, {"UradniList/2020.v1.jsonl": jl({"id": "a", "text": "1"}, {"text": "2"}, "{bad",
                                                         {"title": "no text"}, {"id": " ", "text": "3"})})
    assert r.ids == ["a", "UradniList/2020.v1:000001", "UradniList/2020.v1:000002"]
    assert r.lines[1]["uid"] == "coleslaw:UradniList/2020.v1:000001"


def test_subcorpus_is_the_immediate_parent_directory_and_never_the_record_field(tmp_path):
    """D14 (replaces Q14) / S13: the parent directory names the subcorpus, a nested file gets its own
    parent, a top-level file gets the dataset dir's name; a record's own `subcorpus` is dropped and
    `subcorpus` stays first."""
    rec = {"title": "T", "subcorpus": "FAKE", "text": "x", "id": 1}
    r = extract(tmp_path, {"SodnaPraksa/sub/x.jsonl": jl(rec), "top.jsonl": jl(rec), "PISRS/p.jsonl": jl(rec)})
    assert [m["subcorpus"] for m in r.metas] == ["PISRS", "sub", "coleslaw"]
    assert ordered(r.metas[0]) == ordered({"subcorpus": "PISRS", "title": "T", "id": 1})


def test_metadata_keeps_record_order_drops_only_top_level_nulls(tmp_path):
    """ADDENDUM 3.3 mode (b): record order, top-level nulls dropped; nested nulls, "", 0 and false kept."""
    rec = {"z": 1, "n": None, "m": [1, {"x": None}], "text": "t", "e": "", "f": False, "zero": 0}
    r = extract(tmp_path, {"PISRS/a.jsonl": jl(rec)})
    assert ordered(r.metas[0]) == ordered({"subcorpus": "PISRS", "z": 1, "m": [1, {"x": None}], "e": "", "f": False,
                                          "zero": 0})


# ----------------------------------------------------------------------------- bad input (D6, D8)


def test_bad_lines_are_skipped_with_warnings_naming_file_and_line(tmp_path):
    """ADDENDUM 4.4 Skipping + D6 (replaces Q5): blank lines silent; malformed JSON, non-object records
    and invalid UTF-8 skipped with a warning naming file and line, counted; the rest is extracted."""
    data = (b'{"id": 1, "text": "ena"}\n\n   \n{"id": 2, "text": \n[1, 2]\n"str"\n'
            b'{"id": 3, "text": "tri\xff"}\r\n{"id": 4, "text": "\xc5\xa1tiri"}\r{"id": 5, "text": "pet"}')
    r = extract(tmp_path, {"PISRS/a.jsonl": data})
    assert r.ids == ["1", "4", "5"]
    assert r.texts == ["ena", "štiri", "pet"]
    assert r.drops == {"malformed_json": 1, "non_object_record": 2, "invalid_utf8": 1}
    where = sorted(w.split(": ", 1)[0] for w in r.warnings)
    assert where == ["coleslaw/PISRS/a.jsonl:4", "coleslaw/PISRS/a.jsonl:5", "coleslaw/PISRS/a.jsonl:6",
                     "coleslaw/PISRS/a.jsonl:7"]


def test_bom_is_removed(tmp_path):
    """D8 (replaces Q9): a UTF-8 BOM in front of the first line does not lose that line."""
    r = extract(tmp_path, {"PISRS/a.jsonl": b"\xef\xbb\xbf" + jl({"id": 1, "text": "a"}).encode()})
    assert r.ids == ["1"]
    assert r.drops == {}


def test_directories_named_jsonl_are_ignored(tmp_path):
    """ADDENDUM 3.1 / D6: a directory matching the glob is not an input."""
    r = extract(tmp_path, {"PISRS/d.jsonl/x.jsonl": jl({"id": 1, "text": "inner"}),
                           "PISRS/a.jsonl": jl({"id": 2, "text": "a"})})
    assert r.ids == ["2", "1"]
    assert [m["subcorpus"] for m in r.metas] == ["PISRS", "d.jsonl"]


def test_each_file_is_one_shard_and_two_workers_publish_the_same_bytes(tmp_path):
    """D18: coleslaw is shardable too; per-file extraction is independent, so the output does not
    depend on the worker count (fallback ids included)."""
    files = {f"{sub}/a.jsonl": jl({"id": sub, "text": sub}, {"text": "anon"})
             for sub in ("PISRS", "UradniList", "USRS")}
    one = extract(tmp_path / "one", files)
    extract(tmp_path / "two", files, workers=2)
    assert one.report.shards == 3
    assert (tmp_path / "one/out/coleslaw.jsonl").read_bytes() == (tmp_path / "two/out/coleslaw.jsonl").read_bytes()
    assert one.ids == ["PISRS", "PISRS/a:000001", "USRS", "USRS/a:000001", "UradniList", "UradniList/a:000001"]
