"""`schemas/extract.schema.json` is generated from the catalog's field table and the extractor
registry (issue 22 item 5): the committed file is the generated one, and the loader and the schema
refuse the same bad values, the loader in the table's words."""

import json
import types

import jsonschema
import pytest
import yaml

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.catalog import fields as fields
from slm4ie_assets.catalog import json_schema as catalog_schema
from slm4ie_assets.extractors.base import Extractor
from support.paths import REPO

VALIDATOR = jsonschema.Draft202012Validator(json.loads((REPO / "schemas" / "extract.schema.json").read_text()))


def test_the_committed_schema_is_the_generated_one():
    committed = (REPO / "schemas" / "extract.schema.json").read_text(encoding="utf-8")
    assert committed == catalog_schema.render(), (
        f"schemas/extract.schema.json is out of date with the field table or the registry; "
        f"regenerate it: {catalog_schema.REGENERATE}")


def test_the_generated_schema_is_valid_stable_and_ends_with_a_newline():
    text = catalog_schema.render()
    jsonschema.Draft202012Validator.check_schema(json.loads(text))
    assert text == catalog_schema.render() and text.endswith("}\n")


def test_check_reports_a_stale_file_with_the_command_and_the_generator_rewrites_it(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "extract.schema.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(catalog_schema, "SCHEMA_PATH", stale)
    assert catalog_schema.main(["--check"]) == 1
    assert "make schema" in capsys.readouterr().err
    assert catalog_schema.main([]) == 0 and catalog_schema.main(["--check"]) == 0
    assert stale.read_text() == catalog_schema.render()


def _with_extractors(monkeypatch, **classes: type) -> dict:
    """The schema as it would be with these extractors registered as well."""
    known = dict(catalog_schema.EXTRACTORS)
    lookup = catalog_schema.get_extractor_class
    monkeypatch.setattr(catalog_schema, "EXTRACTORS", {**known, **{n: f"x:{n}" for n in classes}})
    monkeypatch.setattr(catalog_schema, "get_extractor_class", lambda n: classes[n] if n in classes else lookup(n))
    return catalog_schema.build_schema()


def test_a_new_extractor_appears_in_the_schema_with_its_own_metadata_keys(monkeypatch):
    plain = types.new_class("Plain", (Extractor,), {}, lambda ns: ns.update(name="plain"))
    knobs = types.new_class("Knobs", (Extractor,), {}, lambda ns: ns.update(name="knobs", metadata_keys=("a", "b")))
    validator = jsonschema.Draft202012Validator(_with_extractors(monkeypatch, plain=plain, knobs=knobs))

    def errors(extractor: str, metadata) -> list:
        doc = {"datasets": {"k": {"extractor": extractor, "domain": "web", "metadata": metadata}}}
        return list(validator.iter_errors(doc))

    assert errors("plain", None) == [] and errors("plain", {}) == [] and errors("plain", {"a": 1})
    assert errors("knobs", {"a": 1, "b": "x"}) == [] and errors("knobs", {"c": 1})
    assert "plain" in validator.schema["$defs"]["dataset"]["properties"]["extractor"]["enum"]


def _bad(setting: fields.Setting):
    if setting.type == "boolean":
        return "yes"
    if setting.type == "string":
        return ""
    return setting.minimum if setting.exclusive else setting.minimum - 1


def _cases():
    dataset = {"extractor": "text", "domain": "web"}
    for s in fields.TOP + fields.ARCHIVES + fields.DATASET:
        if s.type is None or s.shape is not None:
            continue
        if s in fields.ARCHIVES:
            yield pytest.param(s, {"archives": {s.name: _bad(s)}}, f"archives.{s.name}", id=f"archives.{s.name}")
        elif s in fields.TOP:
            yield pytest.param(s, {s.name: _bad(s)}, s.name, id=s.name)
        if s in fields.DATASET:
            yield pytest.param(s, {"datasets": {"a": {**dataset, s.name: _bad(s)}}}, f"datasets.a.{s.name}",
                               id=f"datasets.a.{s.name}")


@pytest.mark.parametrize(("setting", "doc", "where"), list(_cases()))
def test_every_plain_setting_is_refused_by_both_in_the_tables_words(tmp_path, setting, doc, where):
    assert list(VALIDATOR.iter_errors(doc)), "the schema accepted it"
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert f": {where}: expected {setting.expected}, got {_bad(setting)!r}" in str(err.value)
