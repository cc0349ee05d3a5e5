"""Strict, located config errors and the extract.yaml JSON Schema (issue 15 item 5).

Everything goes through real files and the real YAML parser: the line numbers asserted here are
the lines of the texts written below.
"""

import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from dagster import AssetSelection, ScheduleDefinition

from slm4ie_assets.catalog import PROJECT_ROOT, CatalogError, load_catalog, parse_catalog
from slm4ie_assets.catalog import spec as catalog_module
from slm4ie_assets.catalog.json_schema import build_schema
from slm4ie_assets.extractors.registry import EXTRACTORS
from support.paths import CORPORA, REPO

SCHEMA_PATH = REPO / "schemas" / "extract.schema.json"
REAL_CATALOGS = [
    pytest.param(PROJECT_ROOT / "extract.yaml", id="extract.yaml"),
    pytest.param(REPO / "examples" / "extract.yaml", id="examples/extract.yaml"),
    pytest.param(CORPORA / "extract.yaml", id="shared/corpora/extract.yaml", marks=pytest.mark.skipif(
        not (CORPORA / "extract.yaml").exists(), reason="the shared corpora are not beside this checkout")),
]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "extract.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(err: pytest.ExceptionInfo) -> list[str]:
    """The bullet lines of a CatalogError, without the leading `  - `."""
    return [line[4:] for line in str(err.value).splitlines() if line.startswith("  - ")]


def refused(path: Path) -> list[str]:
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    return problems(err)


# ----------------------------------------------------------------------------- duplicate keys


def test_a_dataset_written_twice_is_refused_naming_both_lines(tmp_path):
    cfg = write(tmp_path, (
        "datasets:\n"                      # 1
        "  kas:\n"                         # 2
        "    extractor: tei\n"             # 3
        "    domain: academic\n"           # 4
        "  news:\n"                        # 5
        "    extractor: text\n"            # 6
        "    domain: news\n"               # 7
        "  kas:\n"                         # 8
        "    extractor: text\n"            # 9
        "    domain: web\n"                # 10
    ))
    assert refused(cfg) == [
        f"{cfg}:8: datasets.kas: duplicate key (first at line 2, again at line 8); "
        "YAML keeps only the last one, so remove or rename one"
    ]


def test_duplicates_at_every_level_are_all_reported_together_with_other_problems(tmp_path):
    cfg = write(tmp_path, (
        "input_dir: raw\n"                                        # 1
        "output_dir: out\n"                                       # 2
        "input_dir: raw2\n"                                       # 3
        "archives:\n"                                             # 4
        "  max_ratio: 10\n"                                       # 5
        "  max_ratio: 20\n"                                       # 6
        "datasets:\n"                                             # 7
        "  oss:\n"                                                # 8
        "    extractor: conllu\n"                                 # 9
        "    domain: scientific\n"                                # 10
        "    domain: academic\n"                                  # 11
        "    metadata:\n"                                         # 12
        "      path: m.tsv\n"                                     # 13
        "      key_column: id\n"                                  # 14
        "      fields: {a: x, b: y, a: z}\n"                      # 15
        "  bad:\n"                                                # 16
        "    extractor: nope\n"                                   # 17
        "    domain: web\n"                                       # 18
    ))
    found = refused(cfg)
    assert f"{cfg}:3: input_dir: duplicate key (first at line 1, again at line 3)" in "\n".join(found)
    expected_starts = [
        f"{cfg}:3: input_dir: duplicate key (first at line 1, again at line 3)",
        f"{cfg}:6: archives.max_ratio: duplicate key (first at line 5, again at line 6)",
        f"{cfg}:11: datasets.oss.domain: duplicate key (first at line 10, again at line 11)",
        f"{cfg}:15: datasets.oss.metadata.fields.a: duplicate key (first at line 15, again at line 15)",
        f"{cfg}:17: datasets.bad.extractor: unknown extractor 'nope'",
    ]
    assert len(found) == len(expected_starts), found
    for line, start in zip(found, expected_starts, strict=True):
        assert line.startswith(start), (line, start)
    with pytest.raises(CatalogError, match=r"5 problem\(s\)"):
        load_catalog(cfg)


def test_merge_keys_may_override_what_they_merge(tmp_path):
    """`<<: *base` then an explicit key is YAML's way to override, not a duplicate."""
    cfg = write(tmp_path, (
        "datasets:\n"
        "  a: &base {extractor: text, domain: web, watch_interval: 30}\n"
        "  b:\n"
        "    <<: *base\n"
        "    domain: news\n"
    ))
    cat = load_catalog(cfg)
    assert cat.dataset("b").domain == "news" and cat.dataset("b").watch_interval == 30


def test_a_key_repeated_after_a_merge_is_still_a_duplicate(tmp_path):
    cfg = write(tmp_path, (
        "datasets:\n"
        "  a: &base {extractor: text, domain: web}\n"
        "  b:\n"
        "    <<: *base\n"
        "    domain: news\n"
        "    domain: legal\n"
    ))
    assert refused(cfg) == [
        f"{cfg}:6: datasets.b.domain: duplicate key (first at line 5, again at line 6); "
        "YAML keeps only the last one, so remove or rename one"
    ]


def test_equal_keys_of_different_spelling_are_duplicates(tmp_path):
    """YAML compares keys by value: a quoted and a plain spelling of one name are the same key."""
    cfg = write(tmp_path, (
        "datasets:\n"
        "  kas: {extractor: tei, domain: academic}\n"
        "  'kas': {extractor: tei, domain: academic}\n"
    ))
    assert refused(cfg)[0].startswith(f"{cfg}:3: datasets.kas: duplicate key (first at line 2, again at line 3)")


# ----------------------------------------------------------------------------- schedules


@pytest.mark.parametrize("cron", ["99 99 * * *", "0 3 31 2 *", "0 25 * * *", "61 * * * *", "0 3 * * 8",
                                  "a b c d e", "weekly", "@daily", "0 3 * * 0 2026", ""])
def test_a_cron_string_dagster_would_refuse_fails_the_catalog_naming_dataset_and_line(tmp_path, cron):
    cfg = write(tmp_path, (
        "datasets:\n"
        "  ok: {extractor: text, domain: web, schedule: '0 3 * * 0'}\n"
        "  news_txt:\n"
        "    extractor: text\n"
        "    domain: news\n"
        f"    schedule: '{cron}'\n"
    ))
    found = refused(cfg)
    assert len(found) == 1
    assert found[0].startswith(f"{cfg}:6: datasets.news_txt.schedule: expected a valid 5-field cron string"), found
    assert repr(cron) in found[0]


@pytest.mark.parametrize("cron", ["0 3 * * 0", "*/15 0-6 * * 1-5", "0 0 1 1 *", "30 2 * * mon", "0 3 29 2 *"])
def test_a_cron_string_the_catalog_accepts_makes_a_dagster_schedule(tmp_path, cron):
    cfg = write(tmp_path, f"datasets:\n  k: {{extractor: text, domain: web, schedule: '{cron}'}}\n")
    spec = load_catalog(cfg).dataset("k")
    assert spec.schedule == cron
    ScheduleDefinition(name="probe", cron_schedule=spec.schedule, target=AssetSelection.all())


CRON_PROBES = ["0 3 * * 0", "* * * * *", "0 0 30 2 *", "0 0 31 2 *", "0 0 29 2 *", "*/5 * * * mon-fri", "61 * * * *",
               "0 0 * * * *", "0 0 1,15 * *", "0 0 L * *", "0 0 ? * *", "a b c d e", "0 0 30 2,3 *", "0 0 1 1 7",
               "0 0 * * 8", "0 0 31 4 *", "0-59/7 1-3 */2 jan-mar sun", "0 3 * * 0 2026", "0 0 31 2,4 *"]


def test_the_catalog_cron_rule_is_dagsters_own():
    """catalog/spec.py checks cron strings without importing Dagster; here the two rules meet."""
    from dagster._utils.schedules import is_valid_cron_string

    assert [catalog_module._is_valid_cron(c) for c in CRON_PROBES] == [is_valid_cron_string(c) for c in CRON_PROBES]


@pytest.mark.parametrize("owner", ["ana@ijs.si", "team:corpora", "team:", "ana", "ana@ijs", "a.b+c@x-y.org", "@x.si"])
def test_the_catalog_owner_rule_is_dagsters_own(owner):
    from dagster._core.definitions.utils import is_valid_owner

    assert catalog_module._is_valid_owner(owner) == is_valid_owner(owner)


def test_a_non_string_schedule_is_refused(tmp_path):
    cfg = write(tmp_path, "datasets:\n  k:\n    extractor: text\n    domain: web\n    schedule: 5\n")
    assert refused(cfg)[0].startswith(f"{cfg}:5: datasets.k.schedule: expected a valid 5-field cron string")


# ----------------------------------------------------------------------------- every error located


def test_every_problem_carries_the_line_of_its_key(tmp_path):
    cfg = write(tmp_path, (
        "max_workers: -1\n"                                                # 1
        "bogus: 1\n"                                                       # 2
        "archives:\n"                                                      # 3
        "  max_ratio: 0\n"                                                 # 4
        "datasets:\n"                                                      # 5
        "  a: {extractor: nope, domain: web}\n"                            # 6
        "  b:\n"                                                           # 7
        "    extractor: text\n"                                            # 8
        "  c:\n"                                                           # 9
        "    extractor: jsonl\n"                                           # 10
        "    domain: news\n"                                               # 11
        "    metadata:\n"                                                  # 12
        "      text_field: body\n"                                         # 13
        "      metadata_fields: url\n"                                     # 14
        "  d: {extractor: json, domain: x,\n"                              # 15
        "      colour: red}\n"                                             # 16
        "  e-f: {extractor: text, domain: web}\n"                          # 17
        "  g:\n"                                                           # 18
        "    extractor: text\n"                                            # 19
        "    domain: web\n"                                                # 20
        "    watch: yes\n"                                                 # 21 (YAML 1.1: a boolean)
        "    watch_interval: 1\n"                                          # 22
        "  h: [not, a, mapping]\n"                                         # 23
        "  k:\n"                                                           # 24
        "    extractor: conllu\n"                                          # 25
        "    domain: web\n"                                                # 26
        "    metadata:\n"                                                  # 27
        "      path: m.tsv\n"                                              # 28
        "      key_column: id\n"                                           # 29
        "      fields: {a: x}\n"                                           # 30
        "      splits: {b: '|'}\n"                                         # 31
    ))
    found = refused(cfg)
    located = {}
    for line in found:
        m = re.match(re.escape(str(cfg)) + r":(\d+): ([^:]+):", line)
        assert m, f"not located: {line}"
        located[m.group(2)] = int(m.group(1))
    assert located == {
        "max_workers": 1, "bogus": 2, "archives.max_ratio": 4, "datasets.a.extractor": 6,
        "datasets.b.domain": 7,  # missing: the dataset's own line
        "datasets.c.metadata.metadata_fields": 14, "datasets.d.colour": 16, "datasets.e-f": 17,
        "datasets.g.watch_interval": 22, "datasets.h": 23, "datasets.k.metadata.splits.b": 31,
    }


def test_yaml_syntax_errors_and_a_non_mapping_top_level_are_located(tmp_path):
    cfg = write(tmp_path, "input_dir: raw\ndatasets:\n  a: {extractor: text\n")
    with pytest.raises(CatalogError, match=re.escape(f"{cfg}:") + r"\d+: not valid YAML"):
        load_catalog(cfg)
    cfg = write(tmp_path, "# a list, not a mapping\n- a\n- b\n")
    with pytest.raises(CatalogError, match=re.escape(f"{cfg}:2: top level must be a mapping")):
        load_catalog(cfg)


def test_a_document_handed_over_already_parsed_still_gets_every_problem(tmp_path):
    """No file lines to give: the problems are listed as before, without a line."""
    with pytest.raises(CatalogError) as err:
        parse_catalog({"bogus": 1, "datasets": {"a": {"extractor": "text", "domain": "web",
                                                      "schedule": "99 99 * * *"}}}, tmp_path / "extract.yaml")
    assert problems(err)[0].startswith("bogus: unknown top-level key")
    assert problems(err)[1].startswith("datasets.a.schedule: expected a valid 5-field cron string")


# ----------------------------------------------------------------------------- JSON Schema


@pytest.fixture(scope="module")
def validator():
    """The schema as generated now: a stale committed file fails only core/test_catalog_schema.py,
    which names the command that rewrites it."""
    schema = build_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", REAL_CATALOGS)
def test_every_real_catalog_is_valid_against_the_schema_and_loads(validator, path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    assert errors == []
    load_catalog(path)


def test_the_schema_knows_every_extractor_and_every_key_the_loader_knows(validator):
    schema = validator.schema
    dataset = schema["$defs"]["dataset"]
    assert set(schema["properties"]) == catalog_module._TOP_KEYS
    assert set(dataset["properties"]) == catalog_module._DATASET_KEYS
    assert set(schema["properties"]["archives"]["properties"]) == catalog_module._ARCHIVE_KEYS
    assert sorted(dataset["properties"]["extractor"]["enum"]) == sorted(EXTRACTORS)


BROKEN = {
    "unknown top-level key": {"bogus": 1, "datasets": {}},
    "unknown extractor": {"datasets": {"a": {"extractor": "nope", "domain": "web"}}},
    "missing domain": {"datasets": {"a": {"extractor": "text"}}},
    "empty domain": {"datasets": {"a": {"extractor": "text", "domain": " "}}},
    "unknown dataset key": {"datasets": {"a": {"extractor": "text", "domain": "web", "colour": "red"}}},
    "bad dataset name": {"datasets": {"a-b": {"extractor": "text", "domain": "web"}}},
    "trailing newline in name": {"datasets": {"kas\n": {"extractor": "text", "domain": "web"}}},
    "watch not a boolean": {"datasets": {"a": {"extractor": "text", "domain": "web", "watch": "yes"}}},
    "watch_interval too short": {"datasets": {"a": {"extractor": "text", "domain": "web", "watch_interval": 2}}},
    "schedule of 3 fields": {"datasets": {"a": {"extractor": "text", "domain": "web", "schedule": "0 3 *"}}},
    "negative max_workers": {"max_workers": -1},
    "max_workers not whole": {"max_workers": 1.5},
    "zero threshold": {"shard_group_threshold": 0},
    "archives key": {"archives": {"max_size": 3}},
    "archives ratio": {"archives": {"max_ratio": 0}},
    "jsonl metadata key": {"datasets": {"a": {"extractor": "jsonl", "domain": "web", "metadata": {"txt": "x"}}}},
    "text metadata block": {"datasets": {"a": {"extractor": "text", "domain": "web", "metadata": {"text_field": "x"}}}},
    "macocu metadata block": {"datasets": {"a": {"extractor": "macocu", "domain": "web", "metadata": {"x": 1}}}},
    "coleslaw metadata block": {"datasets": {"a": {"extractor": "coleslaw", "domain": "legal", "metadata": [1]}}},
    "huggingface metadata scalar": {"datasets": {"a": {"extractor": "huggingface", "domain": "web", "metadata": "x"}}},
    "jsonl metadata_fields": {"datasets": {"a": {"extractor": "jsonl", "domain": "web",
                                                 "metadata": {"metadata_fields": "url"}}}},
    "tsv without path": {"datasets": {"a": {"extractor": "tei", "domain": "web",
                                            "metadata": {"key_column": "id", "fields": {"a": "b"}}}}},
    "tsv key_from": {"datasets": {"a": {"extractor": "conllu", "domain": "web", "metadata": {
        "path": "m.tsv", "key_column": "id", "fields": {"a": "b"}, "key_from": "stem"}}}},
    "tsv empty target": {"datasets": {"a": {"extractor": "conllu", "domain": "web", "metadata": {
        "path": "m.tsv", "key_column": "id", "fields": {"a": ""}}}}},
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_config_fails_the_schema_and_the_loader(tmp_path, validator, name):
    doc = BROKEN[name]
    assert list(validator.iter_errors(doc)), f"schema accepted {name}"
    with pytest.raises(CatalogError):
        load_catalog(write(tmp_path, yaml.safe_dump(doc)))


def test_accepted_variants_pass_both(tmp_path, validator):
    doc = {"input_dir": "r", "output_dir": "o", "max_workers": None, "shard_group_threshold": 5,
           "archives": {"max_ratio": 2.5, "max_bytes": 10},
           "datasets": {
               "a": {"extractor": "jsonl", "domain": "web", "strict": True, "watch": False, "watch_interval": 5,
                     "schedule": "0 3 * * 0", "metadata": {"text_field": "body", "metadata_fields": None}},
               "b": {"extractor": "tei", "domain": "web", "metadata": {}},
               "c": {"extractor": "conllu", "domain": "web", "metadata": {
                   "path": "m.tsv", "key_column": "id", "fields": {"a": "b"}, "splits": {"a": ""},
                   "key_from": "filename_stem", "key_pattern": "(.*)"}},
               "d": {"extractor": "text", "domain": "web", "metadata": None},
           }}
    assert [e.message for e in validator.iter_errors(doc)] == []
    load_catalog(write(tmp_path, yaml.safe_dump(doc)))


@pytest.mark.parametrize("path", REAL_CATALOGS[:2])
def test_the_project_catalogs_point_editors_at_the_schema(path):
    first = path.read_text(encoding="utf-8").splitlines()[0]
    m = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert m, first
    assert (path.parent / m.group(1)).resolve() == SCHEMA_PATH.resolve()
