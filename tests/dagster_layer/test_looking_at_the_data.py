"""Looking at the data on extracted/<key> (issue 15 item 4): the sample preview, the length table and
the sentences_match_text check, through a real materialize() on a real instance."""

from pathlib import Path

import yaml
from dagster import AssetCheckSeverity, AssetKey, AssetSelection, materialize

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.checks import SENTENCES
from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
from slm4ie_assets.dagster_layer.resources import ExtractSettings
from slm4ie_assets.definitions import build_definitions


def row(i: int, form: str, lemma: str, upos: str, misc: str = "_") -> str:
    return "\t".join([str(i), form, lemma, upos, "_", "_", "_", "_", "_", misc]) + "\n"


# Two documents, four sentences; the second sentence's `# text` says "Tri stiri" but its tokens say
# "Tri štiri": one sentence of four (0.25) in one document of two (0.5) disagrees.
TREEBANK = ("# newdoc id = d1\n# text = Ena dva.\n" + row(1, "Ena", "en", "NUM")
            + row(2, "dva", "dva", "NUM", "SpaceAfter=No") + row(3, ".", ".", "PUNCT")
            + "\n# text = Tri stiri\n" + row(1, "Tri", "tri", "NUM") + row(2, "štiri", "štiri", "NUM")
            + "\n# newdoc id = d2\n# text = Pet.\n" + row(1, "Pet", "pet", "NUM", "SpaceAfter=No")
            + row(2, ".", ".", "PUNCT") + "\n" + row(1, "Šest", "šest", "NUM") + "\n")


def project(root: Path, files: dict, extractor: str = "conllu"):
    raw = root / "raw" / "tb"
    raw.mkdir(parents=True)
    for name, content in files.items():
        (raw / name).write_text(content, encoding="utf-8")
    cfg = root / "extract.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                   "datasets": {"tb": {"extractor": extractor, "domain": "mixed"}}}))
    defs = build_definitions(load_catalog(cfg))
    return [*defs.assets, *defs.asset_checks]


def run(assets, instance):
    resources = {"extract": ExtractSettings(force=False, max_workers=1), "extract_io": ExtractIOManager()}
    return materialize(assets, instance=instance, selection=AssetSelection.assets(extracted_key("tb")),
                       resources=resources, raise_on_error=False)


def evaluations(result) -> dict:
    return {ev.event_specific_data.check_name: ev.event_specific_data for ev in result.all_events
            if ev.event_type_value == "ASSET_CHECK_EVALUATION"}


def metadata(result) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == AssetKey(["extracted", "tb"])]
    return event.materialization.metadata


def test_text_that_disagrees_with_its_tokens_warns_with_the_rate_and_an_example(tmp_path, instance):
    result = run(project(tmp_path, {"a.conllu": TREEBANK}), instance)
    assert result.success  # a warning does not fail the run
    checks = evaluations(result)
    sentences = checks[SENTENCES]
    assert not sentences.passed and sentences.severity == AssetCheckSeverity.WARN
    md = {k: v.value for k, v in sentences.metadata.items()}
    assert (md["annotated_documents"], md["sentences"]) == (2, 4)
    assert (md["mismatched_documents"], md["mismatched_sentences"]) == (1, 1)
    assert md["mismatch_rate"] == 0.25 and md["document_mismatch_rate"] == 0.5
    assert md["examples"] == ["'d1' sentence 2 of 2: rebuilt 'Tri štiri' vs text 'Tri stiri'"]
    assert "1 of 4 sentences (25.00%)" in sentences.description and "multiword" in sentences.description
    assert all(c.passed for name, c in checks.items() if name != SENTENCES)


def test_the_materialization_shows_the_sample_with_tokens_and_the_length_table(tmp_path, instance):
    assets = project(tmp_path, {"a.conllu": TREEBANK})
    md = metadata(run(assets, instance))
    preview = md["preview"].value
    assert "- **d1**: Ena dva. ⏎ Tri stiri" in preview and "- **d2**: Pet. ⏎ Šest" in preview
    assert "line 2 of tb.jsonl, shard `a.conllu` line 2; 9 characters, 3 tokens" in preview
    assert "| form | lemma | upos |" in preview and "| štiri | štiri | NUM |" in preview
    rows = {r.data["measure"]: r.data for r in md["length_distribution"].value.records}
    assert rows["characters per document"] == {"measure": "characters per document", "documents": 2, "min": 9,
                                               "p10": 9, "p50": 9, "p90": 18, "p99": 18, "max": 18}
    assert rows["tokens per annotated document"]["min"] == 3 and rows["tokens per annotated document"]["max"] == 5
    again = metadata(run(assets, instance))  # a skipped run shows the same
    assert again["skipped"].value is True and again["preview"].value == preview


def test_tokens_that_match_their_text_pass(tmp_path, instance):
    jsonl = ('{"doc_id": "a", "text": "Dober dan.  Kako si?\\n", "paragraphs": [{"sentences": ['
             '{"tokens": [{"form": "Dober"}, {"form": "dan", "space_after": false}, {"form": "."}]}, '
             '{"tokens": [{"form": "Kako"}, {"form": "si", "space_after": false}, {"form": "?"}]}]}]}\n'
             '{"doc_id": "b", "text": "brez oznak"}\n')
    result = run(project(tmp_path, {"a.jsonl": jsonl}, extractor="jsonl"), instance)
    sentences = evaluations(result)[SENTENCES]
    assert sentences.passed and sentences.metadata["annotated_documents"].value == 1
    assert sentences.metadata["sentences"].value == 2
