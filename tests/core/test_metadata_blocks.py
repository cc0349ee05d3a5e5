"""A `metadata:` block an extractor would ignore, or a key it does not read, is a located config
error, in the loader and in the JSON Schema alike (issue 15 item 5, D23).

Real files through the real YAML parser; the line numbers asserted are those of the texts below.
"""

from pathlib import Path

import jsonschema
import pytest
import yaml

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.catalog.json_schema import build_schema
from slm4ie_assets.extractors.registry import EXTRACTORS, get_extractor_class

SCHEMA = build_schema()  # as generated now: core/test_catalog_schema.py holds the committed file to it
TSV = {"path": "m.tsv", "key_column": "id", "fields": {"a": "b"}}
# a complete block for each extractor that takes one; every other extractor takes none
VALID_BLOCK = {"json": {"text_field": "body"}, "jsonl": {"text_field": "body"}, "conllu": TSV, "tei": TSV}
NO_METADATA = sorted(set(EXTRACTORS) - set(VALID_BLOCK))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "extract.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    return [line[4:] for line in str(err.value).splitlines() if line.startswith("  - ")]


def test_the_extractors_without_knobs_are_those_that_declare_no_metadata_keys():
    """Derived from the registry, so adding a format without knobs needs no edit here."""
    assert {"coleslaw", "huggingface", "macocu", "text"} <= set(NO_METADATA)
    for name in EXTRACTORS:
        assert bool(get_extractor_class(name).metadata_keys) == (name in VALID_BLOCK), name


@pytest.mark.parametrize("extractor", NO_METADATA)
def test_a_block_given_to_an_extractor_that_takes_none_names_the_dataset_and_line(tmp_path, extractor):
    cfg = write(tmp_path, (
        "datasets:\n"                          # 1
        "  fine:\n"                            # 2
        f"    extractor: {extractor}\n"        # 3
        "    domain: web\n"                    # 4
        "    metadata: {}\n"                   # 5  says nothing: accepted
        "  news:\n"                            # 6
        f"    extractor: {extractor}\n"        # 7
        "    domain: news\n"                   # 8
        "    metadata:\n"                      # 9
        "      text_field: body\n"             # 10
        "      id_field: uri\n"                # 11
        "  flag:\n"                            # 12
        f"    extractor: {extractor}\n"        # 13
        "    domain: news\n"                   # 14
        "    metadata: yes\n"                  # 15
    ))
    assert problems(cfg) == [
        f"{cfg}:9: datasets.news.metadata: the {extractor} extractor takes no metadata block "
        "(found text_field, id_field); remove it",
        f"{cfg}:15: datasets.flag.metadata: the {extractor} extractor takes no metadata block (found True); remove it",
    ]


@pytest.mark.parametrize("extractor", NO_METADATA)
def test_an_empty_block_says_nothing_and_passes(tmp_path, extractor):
    cfg = write(tmp_path, f"datasets:\n  a:\n    extractor: {extractor}\n    domain: web\n    metadata:\n")
    assert load_catalog(cfg).dataset("a").options is None


@pytest.mark.parametrize("extractor", sorted(EXTRACTORS))
def test_an_unknown_metadata_key_is_refused_by_the_loader_and_the_schema(tmp_path, extractor):
    block = {**VALID_BLOCK.get(extractor, {}), "bogus_knob": 1}
    doc = {"datasets": {"a": {"extractor": extractor, "domain": "web", "metadata": block}}}
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc)), "the schema accepted it"
    found = problems(write(tmp_path, yaml.safe_dump(doc, sort_keys=False)))
    assert len(found) == 1 and "datasets.a.metadata" in found[0] and "bogus_knob" in found[0], found
    assert found[0].startswith(f"{tmp_path / 'extract.yaml'}:"), found


@pytest.mark.parametrize("extractor", sorted(EXTRACTORS))
def test_the_schema_allows_exactly_the_keys_each_extractor_reads(extractor):
    keys = get_extractor_class(extractor).metadata_keys
    assert schema_metadata_keys(extractor) == set(keys)
    block = {**VALID_BLOCK.get(extractor, {})}
    doc = {"datasets": {"a": {"extractor": extractor, "domain": "web", "metadata": block}}}
    assert [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(doc)] == []


def schema_metadata_keys(extractor: str) -> set:
    """The property names the schema allows in `extractor`'s metadata block."""
    (branch,) = [b["then"]["properties"]["metadata"] for b in SCHEMA["$defs"]["dataset"]["allOf"]
                 if extractor in b["if"]["properties"]["extractor"]["enum"]]
    target = SCHEMA["$defs"][branch["$ref"].rsplit("/", 1)[1]]
    shapes = target.get("anyOf", [target])
    return {k for shape in shapes for k in shape.get("properties", {})}
