"""extract.yaml loading and validation (README, "Config reference"; D15, ADDENDUM 8.1)."""

import re

import pytest
import yaml

from slm4ie_assets.catalog import CONFIG_ENV, PROJECT_ROOT, CatalogError, load_catalog, parse_catalog


def load(tmp_path, doc):
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return load_catalog(path)


def test_paths_relative_to_the_config_folder_and_defaults(tmp_path):
    cat = load(tmp_path, {"datasets": {"a": {"extractor": "text", "domain": "web"}}})
    assert cat.input_dir == (tmp_path / "data/raw").resolve()
    assert cat.output_dir == (tmp_path / "data/extracted").resolve()
    assert cat.max_workers == 0
    spec = cat.dataset("a")
    assert spec.raw_dir == cat.input_dir / "a"
    assert spec.text_path == cat.output_dir / "a.jsonl"
    assert spec.sidecar_path == cat.output_dir / "a.annotations.jsonl.gz"
    assert spec.watch is True and spec.strict is False and spec.schedule is None


def test_absolute_paths_used_as_given(tmp_path):
    cat = load(tmp_path, {"input_dir": str(tmp_path / "r"), "output_dir": str(tmp_path / "o"), "datasets": {}})
    assert cat.input_dir == tmp_path / "r" and cat.output_dir == tmp_path / "o"


def test_env_var_names_another_config(tmp_path, monkeypatch):
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"datasets": {"zz": {"extractor": "json", "domain": "medical"}}}))
    monkeypatch.setenv(CONFIG_ENV, str(other))
    assert list(load_catalog().datasets) == ["zz"]
    monkeypatch.delenv(CONFIG_ENV)
    assert load_catalog().path == PROJECT_ROOT / "extract.yaml"


def test_root_catalog_is_the_real_slovenian_catalog():
    cat = load_catalog(PROJECT_ROOT / "extract.yaml")
    assert cat.input_dir == PROJECT_ROOT / "data/raw" and cat.output_dir == PROJECT_ROOT / "data/extracted"
    assert cat.dataset("kas").extractor == "tei" and cat.dataset("slovenian_news").extractor == "jsonl"
    assert len(cat.datasets) == 25
    assert cat.dataset("oss").domain == "scientific"


def test_datasets_keep_config_order(tmp_path):
    cat = load(tmp_path, "datasets:\n  b: {extractor: text, domain: web}\n  a: {extractor: text, domain: web}\n")
    assert list(cat.datasets) == ["b", "a"]


def test_d15_every_problem_reported_at_once_naming_dataset_and_field(tmp_path):
    doc = {
        "max_workers": -1,
        "bogus": 1,
        "datasets": {
            "a": {"extractor": "nope", "domain": "web"},
            "b": {"extractor": "text"},
            "c": {"extractor": "jsonl", "domain": "news", "metadata": {"metadata_fields": "url"}},
            "d": {"extractor": "json", "domain": "x", "colour": "red"},
            "e-f": {"extractor": "text", "domain": "web"},
            "g": {"extractor": "text", "domain": "web", "watch": "yes"},
        },
    }
    with pytest.raises(CatalogError) as err:
        load(tmp_path, doc)
    msg = str(err.value)
    for needle in ("max_workers", "bogus: unknown top-level key", "datasets.a.extractor: unknown extractor 'nope'",
                   "datasets.b.domain: missing", "datasets.c.metadata.metadata_fields: expected a list",
                   "datasets.d.colour: unknown key", "datasets.e-f", "datasets.g.watch"):
        assert needle in msg, needle
    assert "7 problem(s)" in msg or "8 problem(s)" in msg
    bullets = [line for line in msg.splitlines() if line.startswith("  - ")]
    assert bullets and all(re.match(rf"  - {re.escape(str(tmp_path / 'extract.yaml'))}:\d+: ", b) for b in bullets)


def test_missing_file_and_bad_yaml_are_clear(tmp_path):
    with pytest.raises(CatalogError, match="config file not found"):
        load_catalog(tmp_path / "missing.yaml")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load(tmp_path, "datasets: [unclosed\n")


def test_null_datasets_and_empty_file_mean_no_datasets(tmp_path):
    assert load(tmp_path, "datasets:\n").datasets == {}
    assert load(tmp_path, "").datasets == {}


def test_recipe_changes_with_anything_that_changes_output(tmp_path):
    base = {"extractor": "jsonl", "domain": "web"}
    a = parse_catalog({"datasets": {"k": base}}, tmp_path / "x.yaml").dataset("k")
    b = parse_catalog({"datasets": {"k": {**base, "domain": "news"}}}, tmp_path / "x.yaml").dataset("k")
    c = parse_catalog({"datasets": {"k": {**base, "metadata": {"text_field": "body"}}}},
                      tmp_path / "x.yaml").dataset("k")
    d = parse_catalog({"datasets": {"k": {**base, "watch": False}}}, tmp_path / "x.yaml").dataset("k")
    assert len({a.recipe, b.recipe, c.recipe}) == 3
    assert a.recipe == d.recipe  # watching does not change what is written


def test_schedule_must_be_cron(tmp_path):
    with pytest.raises(CatalogError, match="datasets.k.schedule"):
        load(tmp_path, {"datasets": {"k": {"extractor": "text", "domain": "web", "schedule": "weekly"}}})
    cat = load(tmp_path, {"datasets": {"k": {"extractor": "text", "domain": "web", "schedule": "0 3 * * 0"}}})
    assert cat.dataset("k").schedule == "0 3 * * 0"
