"""External-TSV metadata sidecar: extraction-formats (External-TSV metadata), ADDENDUM 7, D8, D15."""

import gzip
import pickle
from pathlib import Path

import pytest

from slm4ie_assets.extractors.base import ExtractorError
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.tsv_metadata import TsvConfig, TsvMetadata, parse_tsv_config

WHERE = "datasets.oss.metadata"


def cfg(**over):
    raw = {"path": "meta.tsv", "key_column": "id", "fields": {"a": "a"}}
    raw.update(over)
    return parse_tsv_config(raw, WHERE)


def load(tmp_path: Path, tsv: str | bytes, name: str = "meta.tsv", **over) -> TsvMetadata:
    data = tsv.encode("utf-8") if isinstance(tsv, str) else tsv
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return TsvMetadata.load(cfg(path=name, **over), tmp_path)


def file(name: str) -> InputFile:
    return InputFile(Path("/raw") / name, name)


# ----------------------------------------------------------------------------- config (D15)


def test_seed_example_oss_config_and_row():
    """extraction-formats: the oss example gives cerif as a list, udc, and type renamed to doctype."""
    config = parse_tsv_config({
        "path": "OSS.CoNLL-U/OSS-metadata.tsv", "key_column": "id", "key_from": "filename_stem",
        "key_pattern": r"^oss-(\d+)$", "fields": {"cerif": "cerif", "udc": "udc", "type": "doctype"},
        "splits": {"cerif": "|"}}, WHERE)
    assert config == TsvConfig("OSS.CoNLL-U/OSS-metadata.tsv", "id",
                               (("cerif", "cerif"), ("udc", "udc"), ("type", "doctype")), (("cerif", "|"),),
                               r"^oss-(\d+)$", "filename_stem")
    assert pickle.loads(pickle.dumps(config)) == config


def test_seed_example_lookup(tmp_path):
    (tmp_path / "OSS.CoNLL-U").mkdir()
    (tmp_path / "OSS.CoNLL-U" / "OSS-metadata.tsv").write_text(
        "id\tcerif\tudc\ttype\n10000\tP000|T270\t502(043)\tDiplomsko delo\n")
    config = parse_tsv_config({
        "path": "OSS.CoNLL-U/OSS-metadata.tsv", "key_column": "id", "key_pattern": r"^oss-(\d+)$",
        "fields": {"cerif": "cerif", "udc": "udc", "type": "doctype"}, "splits": {"cerif": "|"}}, WHERE)
    meta = TsvMetadata.load(config, tmp_path).for_file(file("oss-10000.conllu"))
    assert meta == {"cerif": ["P000", "T270"], "udc": "502(043)", "doctype": "Diplomsko delo"}
    assert list(meta) == ["cerif", "udc", "doctype"]


@pytest.mark.parametrize("raw", [None, {}])
def test_no_block_means_no_sidecar(raw):
    assert parse_tsv_config(raw, WHERE) is None


def test_jsonl_style_block_is_an_error_naming_the_missing_path():
    """ADDENDUM 5.4: a truthy block IS a sidecar config, so `text_field: ...` lacks `path`."""
    with pytest.raises(ValueError, match=rf"^{WHERE}\.path: missing.*text_field"):
        parse_tsv_config({"text_field": "body"}, WHERE)


@pytest.mark.parametrize("drop, field", [("key_column", "key_column"), ("fields", "fields")])
def test_required_keys(drop, field):
    raw = {"path": "m.tsv", "key_column": "id", "fields": {"a": "a"}}
    del raw[drop]
    with pytest.raises(ValueError, match=rf"^{WHERE}\.{field}: missing"):
        parse_tsv_config(raw, WHERE)


@pytest.mark.parametrize("over, field", [
    ({"path": ""}, "path"),
    ({"path": 5}, "path"),
    ({"key_column": ["id"]}, "key_column"),
    ({"fields": ["a", "b"]}, "fields"),
    ({"fields": "a"}, "fields"),
    ({"fields": {"a": 1}}, r"fields\.a"),
    ({"fields": {2020: "year"}}, "fields"),
    ({"splits": "|"}, "splits"),
    ({"splits": {"a": 1}}, r"splits\.a"),
    ({"splits": {"doctype": "|"}}, r"splits\.doctype"),  # keyed by the SOURCE column
    ({"key_from": "path"}, "key_from"),
    ({"key_pattern": "oss-[0-9]+"}, "key_pattern"),  # no capture group
    ({"key_pattern": "oss-(["}, "key_pattern"),  # does not compile
    ({"key_pattern": 7}, "key_pattern"),
    ({"colums": ["a"]}, "colums"),  # unknown key
])
def test_bad_config_names_dataset_and_field(over, field):
    with pytest.raises(ValueError, match=rf"^{WHERE}\.{field}:"):
        cfg(**over)


def test_scalar_block_is_an_error():
    with pytest.raises(ValueError, match=rf"^{WHERE}: expected a TSV sidecar mapping"):
        parse_tsv_config("meta.tsv", WHERE)


def test_defaults():
    config = cfg()
    assert config.splits == () and config.key_pattern is None and config.key_from == "filename_stem"
    assert cfg(splits=None, key_from=None) == config


# ----------------------------------------------------------------------------- loading


def test_path_relative_to_root_and_absolute_path(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.tsv").write_text("id\ta\nx\t1\n")
    assert TsvMetadata.load(cfg(path="sub/m.tsv"), tmp_path).for_file(file("x.conllu")) == {"a": "1"}
    absolute = str(tmp_path / "sub" / "m.tsv")
    assert TsvMetadata.load(cfg(path=absolute), Path("/nonexistent")).for_file(file("x.conllu")) == {"a": "1"}


def test_gz_suffix_is_read_through_gzip(tmp_path):
    meta = load(tmp_path, "id\ta\nx\tgz\n", name="meta.tsv.gz")
    assert meta.for_file(file("x.conllu")) == {"a": "gz"}


def test_d8_bom_before_the_header_is_removed(tmp_path):
    """Q9: the reference failed with a missing key column; D8 removes the BOM."""
    meta = load(tmp_path, "\ufeffid\ta\nx\t1\n")
    assert meta.for_file(file("x.conllu")) == {"a": "1"}


def test_missing_file_fails_with_its_path(tmp_path):
    with pytest.raises(ExtractorError, match=r"metadata TSV .*nope\.tsv not found"):
        TsvMetadata.load(cfg(path="nope.tsv"), tmp_path)


def test_missing_key_column_fails_naming_column_and_path(tmp_path):
    with pytest.raises(ExtractorError, match=r"meta\.tsv has no key column 'id'.*'ID'"):
        load(tmp_path, "ID\ta\nx\t1\n")


def test_empty_file_has_no_key_column(tmp_path):
    with pytest.raises(ExtractorError, match="no key column 'id'"):
        load(tmp_path, "")


def test_invalid_utf8_fails_naming_the_file(tmp_path):
    """ADDENDUM 7: the TSV is strict UTF-8."""
    with pytest.raises(ExtractorError, match=r"meta\.tsv is not valid UTF-8"):
        load(tmp_path, b"id\ta\nx\t\xff\n")


def test_universal_newlines(tmp_path):
    meta = load(tmp_path, "id\ta\r\nx\t1\r\ny\t2\rz\t3")
    assert [meta.for_file(file(f"{k}.conllu")) for k in "xyz"] == [{"a": "1"}, {"a": "2"}, {"a": "3"}]


# ----------------------------------------------------------------------------- csv semantics


def test_excel_dialect_quoting(tmp_path):
    """ADDENDUM 7: `"a<TAB>b"` is one field and `""` inside quotes is a literal quote."""
    meta = load(tmp_path, 'id\ta\tb\nx\t"one\ttwo"\t"say ""hi"""\n', fields={"a": "a", "b": "b"})
    assert meta.for_file(file("x.conllu")) == {"a": "one\ttwo", "b": 'say "hi"'}


def test_repeated_header_later_column_wins(tmp_path):
    meta = load(tmp_path, "id\ta\ta\nx\tfirst\tsecond\n")
    assert meta.for_file(file("x.conllu")) == {"a": "second"}


def test_short_rows_leave_cells_absent_and_extra_cells_are_ignored(tmp_path):
    meta = load(tmp_path, "id\ta\tb\nx\t1\ny\t1\t2\t3\t4\n", fields={"a": "a", "b": "b"})
    assert meta.for_file(file("x.conllu")) == {"a": "1"}
    assert meta.for_file(file("y.conllu")) == {"a": "1", "b": "2"}


def test_keys_stripped_empty_key_skipped_last_duplicate_wins(tmp_path):
    meta = load(tmp_path, "id\ta\n  x \told\n\tempty-key\nx\tnew\n   \tblank-key\n")
    assert meta.for_file(file("x.conllu")) == {"a": "new"}
    assert len(meta) == 1


# ----------------------------------------------------------------------------- lookup


def test_key_is_stem_with_only_the_last_suffix_removed(tmp_path):
    meta = load(tmp_path, "id\ta\nx.part\t1\nx\t2\n")
    assert meta.for_file(file("x.part.conllu")) == {"a": "1"}
    assert meta.for_file(InputFile(Path("/raw/sub/x.conll"), "sub/x.conll")) == {"a": "2"}


def test_key_pattern_is_an_unanchored_search_using_group_1(tmp_path):
    meta = load(tmp_path, "id\ta\n10000\tten\n", key_pattern=r"oss-(\d+)")
    assert meta.for_file(file("xoss-10000.conllu")) == {"a": "ten"}


def test_non_match_unset_group_and_row_miss_give_empty(tmp_path):
    meta = load(tmp_path, "id\ta\n10000\tten\n", key_pattern=r"oss-(\d+)|(other)")
    assert meta.for_file(file("kas-1.conllu")) == {}  # no match
    assert meta.for_file(file("other.conllu")) == {}  # group 1 did not participate
    assert meta.for_file(file("oss-2.conllu")) == {}  # no such row


def test_matching_is_exact_string_equality(tmp_path):
    meta = load(tmp_path, "id\ta\n010\tpadded\n", key_pattern=r"-(\d+)$")
    assert meta.for_file(file("oss-10.conllu")) == {}
    assert meta.for_file(file("oss-010.conllu")) == {"a": "padded"}


# ----------------------------------------------------------------------------- projection


def test_projection_in_config_order_with_renames(tmp_path):
    meta = load(tmp_path, "id\tz\ty\tx\nk\tZ\tY\tX\n", fields={"x": "ex", "z": "zed", "y": "why"})
    got = meta.for_file(file("k.conllu"))
    assert list(got.items()) == [("ex", "X"), ("zed", "Z"), ("why", "Y")]


def test_values_stripped_and_na_dropped_but_NA_kept(tmp_path):
    meta = load(tmp_path, "id\ta\tb\tc\td\te\nk\t  v  \t\t - \tNA\tN/A\n",
                fields={"a": "a", "b": "b", "c": "c", "d": "d", "e": "e"})
    assert meta.for_file(file("k.conllu")) == {"a": "v", "d": "NA", "e": "N/A"}


def test_splits_keyed_by_source_parts_stripped_and_na_dropped(tmp_path):
    """ADDENDUM 7 example: ` P000| |-|T270 ` split on `|` -> ["P000", "T270"]."""
    meta = load(tmp_path, "id\tcerif\nk\t P000| |-|T270 \n", fields={"cerif": "codes"}, splits={"cerif": "|"})
    assert meta.for_file(file("k.conllu")) == {"codes": ["P000", "T270"]}


def test_split_with_no_parts_left_is_skipped(tmp_path):
    meta = load(tmp_path, "id\ta\tb\nk\t - | \tx\n", fields={"a": "a", "b": "b"}, splits={"a": "|"})
    assert meta.for_file(file("k.conllu")) == {"b": "x"}


def test_empty_separator_means_no_split(tmp_path):
    meta = load(tmp_path, "id\ta\nk\tx|y\n", splits={"a": ""})
    assert meta.for_file(file("k.conllu")) == {"a": "x|y"}


def test_single_part_split_is_still_a_list(tmp_path):
    meta = load(tmp_path, "id\ta\nk\tonly\n", splits={"a": ","})
    assert meta.for_file(file("k.conllu")) == {"a": ["only"]}


def test_two_sources_one_target_later_wins_at_earlier_position(tmp_path):
    meta = load(tmp_path, "id\ta\tb\tc\nk\tA\tB\tC\n", fields={"a": "t", "b": "other", "c": "t"})
    assert list(meta.for_file(file("k.conllu")).items()) == [("t", "C"), ("other", "B")]


def test_values_never_become_numbers(tmp_path):
    meta = load(tmp_path, "id\tyear\tscore\nk\t2020\t0.5\n", fields={"year": "year", "score": "score"},
                splits={"score": ";"})
    assert meta.for_file(file("k.conllu")) == {"year": "2020", "score": ["0.5"]}


def test_for_file_returns_a_fresh_dict_each_time(tmp_path):
    meta = load(tmp_path, "id\ta\tb\nk\tx\tp|q\n", fields={"a": "a", "b": "b"}, splits={"b": "|"})
    first = meta.for_file(file("k.conllu"))
    first["a"] = "changed"
    first["b"].append("r")
    assert meta.for_file(file("k.conllu")) == {"a": "x", "b": ["p", "q"]}


# ----------------------------------------------------------------------------- a file without its row


def test_a_file_without_its_row_is_counted_metadata_missing_in_the_ledger_and_the_metadata(tmp_path):
    """A gap in the table is never silent: each input file whose key has no row (or whose stem misses
    key_pattern) is one `metadata_missing` drop naming the file; its documents are kept, with `{}`."""
    import yaml

    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.dagster_layer.materialization_metadata import publish_metadata
    from slm4ie_assets.pipeline import extract_dataset, plan_dataset

    raw = tmp_path / "raw" / "oss"
    raw.mkdir(parents=True)
    (raw / "meta.tsv").write_text("id\ta\n1\tone\n")
    for name in ("oss-1", "oss-2", "other"):
        (raw / f"{name}.conllu").write_text(f"# newdoc id = {name}\n1\tBeseda\tbeseda\tNOUN\t_\t_\t0\troot\t_\t_\n\n")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out", "datasets": {"oss": {
        "extractor": "conllu", "domain": "science",
        "metadata": {"path": "meta.tsv", "key_column": "id", "key_pattern": r"^oss-(\d+)$", "fields": {"a": "a"}}}}}))
    catalog = load_catalog(tmp_path / "c.yaml")
    spec = catalog.dataset("oss")
    report = extract_dataset(spec, catalog, force=True, workers=1)
    import json

    docs = {d["doc_id"]: d.get("metadata") for d in map(json.loads, spec.text_path.read_text().splitlines())}
    assert docs == {"oss-1": {"a": "one"}, "oss-2": None, "other": None}  # all kept; no row, no metadata
    assert report.manifest.drops == {"metadata_missing": 2}
    assert any("oss/oss-2.conllu: no row with id '2' in metadata TSV meta.tsv" in w and "[metadata_missing]" in w
               for w in report.warnings)
    assert any("oss/other.conllu: file stem 'other' does not match key_pattern" in w for w in report.warnings)
    md = publish_metadata(plan_dataset(spec), report)
    ledger = {r.data["reason"]: r.data["skipped"] for r in md["drop_ledger"].value.records}
    assert ledger == {"metadata_missing": 2}
    assert md["documents"].value == 3
