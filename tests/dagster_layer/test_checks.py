"""Asset checks on extracted/<key> (ADDENDUM 2.1/2.2 line schema and alignment, D1, D5, D6), computed
by streaming the published files; real runs on a real sqlite instance in a temp DAGSTER_HOME."""

import gzip
import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml
from dagster import AssetCheckKey, AssetCheckSeverity, AssetSelection

from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.checks import (
    ALIGNED,
    DROPS,
    SCHEMA,
    SENTENCES,
    UNIQUE,
    check_results,
    inspect_published,
)
from slm4ie_assets.extractors.registry import EXTRACTORS
from support.corpora import corpora_config, load_compare_outputs
from support.dagster_project import DagsterProject
from support.files import write_files
from support.paths import CORPORA

TOKENS = {"paragraphs": [{"sentences": [{"tokens": [  # "Dober dan.", the text of both records that use it
    {"form": "Dober", "lemma": "dober", "upos": "ADJ"},
    {"form": "dan", "lemma": "dan", "upos": "NOUN", "space_after": False},
    {"form": ".", "lemma": ".", "upos": "PUNCT"}]}]}]}


def jsonl(*records) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


@pytest.fixture
def web(tmp_path):
    """An annotated dataset: real annotation lines and stubs, over two files."""
    write_files(tmp_path / "raw" / "web", {
        "a.jsonl": jsonl({"doc_id": "a1", "text": "Dober dan.", **TOKENS}, {"doc_id": "a2", "text": "brez"}),
        "b.jsonl": jsonl({"doc_id": "b1", "text": "še en", "url": "u"},
                         {"doc_id": "b2", "text": "Dober dan.", **TOKENS}),
    })
    return DagsterProject(tmp_path, {"web": {"extractor": "jsonl", "domain": "web"}})


def results(run) -> dict:
    out = {}
    for ev in run.all_events:
        if ev.event_type_value == "ASSET_CHECK_EVALUATION":
            e = ev.event_specific_data
            out[e.check_name] = e
    return out


def findings(project: DagsterProject, key: str) -> dict:
    spec = project.spec(key)
    return {r.check_name: r for r in check_results(spec, inspect_published(spec))}


def published_file(path: Path) -> Path:
    return Path(os.path.realpath(path))  # the file inside the published version


def rewrite_sidecar(project: DagsterProject, key: str, change) -> None:
    side = published_file(project.spec(key).sidecar_path)
    lines = gzip.decompress(side.read_bytes()).splitlines(keepends=True)
    side.write_bytes(gzip.compress(b"".join(change(lines))))


def rewrite_text(project: DagsterProject, key: str, change) -> None:
    text = published_file(project.spec(key).text_path)
    text.write_bytes(b"".join(change(text.read_bytes().splitlines(keepends=True))))


def test_all_checks_pass_on_a_clean_annotated_dataset_and_run_with_the_asset(web, instance):
    run = web.publish(instance, "web")
    res = results(run)
    assert set(res) == {ALIGNED, SCHEMA, UNIQUE, DROPS, SENTENCES}
    assert all(r.passed for r in res.values())
    assert res[ALIGNED].metadata["text_lines"].value == res[ALIGNED].metadata["sidecar_lines"].value == 4
    assert {r.severity for n, r in res.items() if n in (UNIQUE, DROPS, SENTENCES)} == {AssetCheckSeverity.WARN}
    assert res[SENTENCES].metadata["annotated_documents"].value == 2


def test_one_check_runs_alone_without_its_asset_or_the_other_checks(web, instance):
    """can_subset: the Checks tab's Execute (a selection of one check) runs that check only."""
    published = web.publish(instance, "web")
    rewrite_sidecar(web, "web", lambda lines: [lines[1], lines[0], *lines[2:]])  # ALIGNED would fail
    one = AssetSelection.checks(AssetCheckKey(extracted_key("web"), UNIQUE))
    alone = web.materialize(instance, one)
    assert set(results(alone)) == {UNIQUE} and results(alone)[UNIQUE].passed
    assert not alone.get_asset_materialization_events()
    two = AssetSelection.checks(*(AssetCheckKey(extracted_key("web"), n) for n in (SCHEMA, ALIGNED)))
    run = web.materialize(instance, two, raise_on_error=False)
    assert set(results(run)) == {SCHEMA, ALIGNED} and not results(run)[ALIGNED].passed
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [AssetCheckKey(extracted_key("web"), n) for n in (UNIQUE, DROPS)])
    assert {k.name: r.run_id for k, r in latest.items()} == {UNIQUE: alone.run_id, DROPS: published.run_id}


def test_checks_fail_clearly_before_anything_is_published(web, instance):
    run = web.materialize(instance, AssetSelection.checks_for_assets(extracted_key("web")), raise_on_error=False)
    res = results(run)
    assert not any(r.passed for r in res.values())
    assert "no published output" in res[ALIGNED].description and "extracted/web" in res[ALIGNED].description


def test_a_misaligned_sidecar_fails_the_blocking_check_naming_the_line(web, instance):
    web.publish(instance, "web")
    rewrite_sidecar(web, "web", lambda lines: [lines[1], lines[0], *lines[2:]])
    run = web.materialize(instance, AssetSelection.checks_for_assets(extracted_key("web")), raise_on_error=False)
    res = results(run)
    assert not res[ALIGNED].passed and res[ALIGNED].severity == AssetCheckSeverity.ERROR
    assert "line 1: sidecar uid 'web:a2' != text uid 'web:a1'" in res[ALIGNED].description
    assert res[SCHEMA].passed
    assert not run.success  # blocking ERROR check


def test_a_sidecar_missing_lines_or_with_extra_lines_fails_alignment(web, instance):
    web.publish(instance, "web")
    side = published_file(web.spec("web").sidecar_path)
    original = side.read_bytes()
    rewrite_sidecar(web, "web", lambda lines: lines[:-1])
    f = findings(web, "web")[ALIGNED]
    assert not f.passed and "the sidecar ends after 3 lines but the text has more" in f.description
    side.write_bytes(original)
    assert findings(web, "web")[ALIGNED].passed
    rewrite_sidecar(web, "web", lambda lines: [*lines, lines[-1], lines[-1]])
    f = findings(web, "web")[ALIGNED]
    assert not f.passed and "2 line(s) more than the text" in f.description


def test_a_missing_sidecar_that_the_manifest_promises_fails_alignment(web, instance):
    web.publish(instance, "web")
    published_file(web.spec("web").sidecar_path).unlink()
    f = findings(web, "web")[ALIGNED]
    assert not f.passed and "has_sidecar=True but the sidecar file is missing" in f.description


def test_a_truncated_sidecar_fails_alignment_instead_of_crashing(web, instance):
    web.publish(instance, "web")
    side = published_file(web.spec("web").sidecar_path)
    side.write_bytes(side.read_bytes()[:-12])
    f = findings(web, "web")[ALIGNED]
    assert not f.passed and "cannot be read to the end" in f.description


def test_d5_a_duplicated_uid_warns_naming_it_without_failing_the_run(tmp_path, instance):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl({"doc_id": "x", "text": "ena"},
                                                          {"doc_id": "y", "text": "dva"}),
                                        "b.jsonl": jsonl({"doc_id": "x", "text": "tri"})})
    project = DagsterProject(tmp_path, {"d": {"extractor": "jsonl", "domain": "d"}})
    run = project.publish(instance, "d")
    assert run.success
    res = results(run)
    assert not res[UNIQUE].passed and res[UNIQUE].severity == AssetCheckSeverity.WARN
    assert "1 document(s) repeat a uid" in res[UNIQUE].description and "'d:x'" in res[UNIQUE].description
    assert res[UNIQUE].metadata["examples"].value == ["d:x"]
    assert res[ALIGNED].passed and res[SCHEMA].passed


def test_d6_skipped_items_warn_with_the_ledger(tmp_path, instance):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl({"doc_id": "x", "text": "ena"}) + "{not json\n" + jsonl([1])})
    project = DagsterProject(tmp_path, {"d": {"extractor": "jsonl", "domain": "d"}})
    res = results(project.publish(instance, "d"))
    assert not res[DROPS].passed and res[DROPS].severity == AssetCheckSeverity.WARN
    assert res[DROPS].metadata["skipped_items"].value == 2
    assert res[DROPS].description.startswith("2 item(s) skipped: ")


@pytest.mark.parametrize("broken, expect", [
    (b'{"source":"web","text":"x","domain":"web","doc_id":"a1","uid":"web:a1"}\n', "keys ['source', 'text'"),
    (b'{"text":NaN,"source":"web","domain":"web","doc_id":"a1","uid":"web:a1"}\n', "not valid JSON"),
    (b'{"text":"x","source":"web","domain":"web","doc_id":"a1","uid":"web:zz"}\n', "is not source:doc_id"),
    (b'{"text":"  ","source":"web","domain":"web","doc_id":"a1","uid":"web:a1"}\n', "non-blank string"),
    (b'{"text":"x","source":"web","domain":"web","doc_id":"a1","uid":"web:a1","metadata":{}}\n', "metadata"),
    (b'["text"]\n', "not an object"),
])
def test_a_text_line_breaking_addendum_2_1_fails_the_schema_check(web, instance, broken, expect):
    web.publish(instance, "web")
    rewrite_text(web, "web", lambda lines: [broken, *lines[1:]])
    f = findings(web, "web")[SCHEMA]
    assert not f.passed and "web.jsonl line 1: " in f.description and expect in f.description


@pytest.mark.parametrize("broken, expect", [
    ({"uid": "web:a1", "doc_id": "a1"}, "neither"),
    ({"doc_id": "a1", "uid": "web:a1", "forms": ["a", "b"], "lemmas": ["a"], "upos": [None, None],
      "feats": [None, None], "space_after": [True, True], "sentences": [[0, 1]]}, "lemmas is not a list parallel"),
    ({"doc_id": "a1", "uid": "web:a1", "forms": ["a", "b"], "lemmas": ["a", None], "upos": [None, None],
      "feats": [None, None], "space_after": [True, 1], "sentences": [[0, 1]]}, "space_after holds a non-boolean"),
    ({"doc_id": "a1", "uid": "web:a1", "forms": ["a", "b"], "lemmas": ["a", None], "upos": [None, None],
      "feats": [None, None], "space_after": [True, False], "sentences": [[0, 2]]}, "sentence span [0, 2]"),
])
def test_a_sidecar_line_breaking_addendum_2_2_fails_the_schema_check(web, instance, broken, expect):
    web.publish(instance, "web")
    rewrite_sidecar(web, "web", lambda lines: [json.dumps(broken).encode() + b"\n", *lines[1:]])
    f = findings(web, "web")[SCHEMA]
    assert not f.passed and "web.annotations line 1: " in f.description and expect in f.description


# Drops that DECISIONS requires on the shared corpora: the no_drops check warns about them, correctly.
SPEC_DROPS = {"parlamint_si_plain": {"text_outside_utterance"}}  # S8: content outside <u> is counted as dropped
# conllu skips multiword-token rows (ADDENDUM 5.1), so janes_tag's 31 sentences holding one rebuild to
# their words, not their `# text`: sentences_match_text warns about exactly those (core/test_sentence_check.py)
SPEC_SENTENCE_MISMATCHES = {"janes_tag": 31}


def _available_corpora() -> list[str]:
    if not CORPORA.exists():
        return []
    doc = yaml.safe_load((CORPORA / "extract.yaml").read_text())
    keys = []
    for key, entry in doc["datasets"].items():
        module = EXTRACTORS[entry["extractor"]].split(":")[0]
        if importlib.util.find_spec(f"slm4ie_assets.extractors.{module}") is not None:
            keys.append(key)
    return keys


@pytest.mark.slow
def test_checks_pass_on_every_shared_corpus_whose_extractor_exists(tmp_path, instance):
    keys = _available_corpora()
    if not keys:
        pytest.skip("no shared corpus has its extractor yet")
    cfg = corpora_config(tmp_path)
    doc = yaml.safe_load(cfg.read_text())
    doc["datasets"] = {k: doc["datasets"][k] for k in keys}  # only keys whose extractor module exists
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
    project = DagsterProject.from_config(cfg)
    run = project.materialize(instance, AssetSelection.assets(*(extracted_key(k) for k in keys)), workers=2)
    evaluations = [ev.event_specific_data for ev in run.all_events if ev.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert len(evaluations) == 5 * len(keys)
    failed = [(e.asset_key.path[-1], e.check_name, e.description) for e in evaluations if not e.passed]
    # the only allowed "failures" are the WARNs of a drop the spec itself mandates (S8) and of the
    # multiword-token sentences of janes_tag
    assert all((name == DROPS and key in SPEC_DROPS) or (name == SENTENCES and key in SPEC_SENTENCE_MISMATCHES)
               for key, name, _ in failed), failed
    for e in evaluations:
        if e.check_name == SENTENCES and not e.passed:
            key = e.asset_key.path[-1]
            assert e.severity == AssetCheckSeverity.WARN
            assert e.metadata["mismatched_sentences"].value == SPEC_SENTENCE_MISMATCHES[key]
    for key, _, _ in [f for f in failed if f[1] == DROPS]:
        manifest = json.loads((tmp_path / "out" / ".slm4ie" / key / "current" / "manifest.json").read_text())
        assert set(manifest["drops"]) <= SPEC_DROPS[key]
    compare = load_compare_outputs()
    assert compare.main([str(tmp_path / "out"), str(CORPORA / "expected"), "--keys", ",".join(keys)]) == 0
