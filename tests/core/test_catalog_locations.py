"""extract.yaml's input_dir and output_dir as paths or `s3://bucket/prefix`, with work_dir and
storage_options (issue 42): a bucket dataset extracts in local folders under work_dir named by bucket
and prefix alone, the bucket side is in its own fields, bad URLs and options are refused at their
line, and raw and output never overlap, in a bucket or in the local folders that stand for it."""

import json
import pickle

import jsonschema
import pytest
import yaml

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.catalog.locations import Location, StorageOptions, parse_location
from support.paths import REPO

SCHEMA = jsonschema.Draft202012Validator(json.loads((REPO / "schemas" / "extract.schema.json").read_text()))
DATASET = "datasets:\n  d: {extractor: text, domain: t}\n"


def write(tmp_path, text: str):
    path = tmp_path / "extract.yaml"
    path.write_text(text)
    return path


def test_a_bucket_dataset_extracts_in_local_folders_under_work_dir_named_by_bucket_and_prefix(tmp_path):
    cat = load_catalog(write(tmp_path, "input_dir: s3://corpora-1/raw/\noutput_dir: s3://pub.lic/sl/out\n"
                                       "storage_options: {endpoint_url: 'http://127.0.0.1:9555', region: x}\n"
                                       + DATASET))
    work = tmp_path / ".slm4ie-work"
    assert cat.work_dir == work
    assert cat.input_location == Location(None, "corpora-1", "raw")
    assert cat.output_location.url == "s3://pub.lic/sl/out"
    spec = cat.dataset("d")
    assert spec.raw_dir == cat.input_dir / "d" == work / "raw" / "corpora-1" / "raw" / "d"
    assert spec.output_dir == cat.output_dir == work / "extracted" / "pub.lic" / "sl" / "out"
    assert spec.text_path == spec.output_dir / "d.jsonl"
    assert spec.raw_location == "s3://corpora-1/raw/d" and spec.output_location == "s3://pub.lic/sl/out"
    assert spec.storage_options == StorageOptions(endpoint_url="http://127.0.0.1:9555", region="x")
    assert spec.storage_options.given() == {"endpoint_url": "http://127.0.0.1:9555", "region": "x"}
    assert spec.mirror_state is not None and spec.mirror_state.parent == work / "mirror-state"
    assert pickle.loads(pickle.dumps(spec)) == spec  # pool workers unpickle it


def test_the_local_folders_depend_only_on_the_catalog(tmp_path):
    """No host, user or time in them: two loads of one file, and the same file in another folder,
    give the same folders below work_dir."""
    text = "input_dir: s3://abc/p\noutput_dir: s3://abc/q\nwork_dir: w\n" + DATASET
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    a, b = load_catalog(write(one, text)).dataset("d"), load_catalog(write(two, text)).dataset("d")
    assert a.raw_dir.relative_to(one / "w") == b.raw_dir.relative_to(two / "w")
    assert a.raw_dir.relative_to(one / "w").as_posix() == "raw/abc/p/d"
    assert a.mirror_state.relative_to(one / "w") == b.mirror_state.relative_to(two / "w")
    assert load_catalog(one / "extract.yaml").dataset("d") == a


def test_a_path_dataset_has_no_bucket_side_and_the_same_folders_as_before(tmp_path):
    cat = load_catalog(write(tmp_path, "work_dir: /somewhere/else\n" + DATASET))
    spec = cat.dataset("d")
    assert spec.raw_dir == tmp_path / "data/raw/d" and spec.output_dir == tmp_path / "data/extracted"
    assert spec.raw_location is None and spec.output_location is None and spec.mirror_state is None
    assert cat.input_location == Location(tmp_path / "data/raw") and not cat.output_location.is_bucket
    assert cat.work_dir.as_posix() == "/somewhere/else"


@pytest.mark.parametrize(("dirs", "raw", "out"), [
    ("input_dir: s3://in-b\noutput_dir: o\n", "w/raw/in-b/d", "o"),
    ("input_dir: i\noutput_dir: S3://out-b/x/y\n", "i/d", "w/extracted/out-b/x/y"),
])
def test_one_side_in_a_bucket_the_other_on_disk(tmp_path, dirs, raw, out):
    spec = load_catalog(write(tmp_path, dirs + "work_dir: w\n" + DATASET)).dataset("d")
    assert spec.raw_dir == tmp_path / raw and spec.output_dir == tmp_path / out
    assert (spec.raw_location is None) == ("s3" not in dirs.split("\n")[0].lower())
    assert (spec.output_location is None) == ("s3" not in dirs.split("\n")[1].lower())


BAD_URLS = [
    ("s3://Corpora/raw", "'Corpora' is not a bucket name"),
    ("s3://ab/raw", "'ab' is not a bucket name"),
    ("s3://" + "a" * 64 + "/raw", "is not a bucket name"),
    ("s3://my_bucket/raw", "'my_bucket' is not a bucket name"),
    ("s3://-bucket/raw", "'-bucket' is not a bucket name"),
    ("s3:///raw", "'' is not a bucket name"),
    ("gs://bucket/raw", "no store for this URL scheme"),
]
LOADER_ONLY = [  # the schema checks the bucket's characters; these the loader alone
    ("s3://a..b/raw", "'a..b' is not a bucket name"),
    ("s3://bucket//raw", "has an empty, '.' or '..' part"),
    ("s3://bucket/raw/../x", "has an empty, '.' or '..' part"),
]


@pytest.mark.parametrize("key", ["input_dir", "output_dir"])
@pytest.mark.parametrize(("url", "why"), BAD_URLS + LOADER_ONLY)
def test_a_bad_bucket_url_is_refused_at_its_line_naming_it(tmp_path, key, url, why):
    path = write(tmp_path, f"max_workers: 1\n{key}: '{url}'\n" + DATASET)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert f"{path}:2: {key}: {url!r}: " in str(err.value) and why in str(err.value)
    assert "1 problem(s)" in str(err.value)
    refused_by_schema = bool(list(SCHEMA.iter_errors({key: url})))
    assert refused_by_schema == ((url, why) in BAD_URLS)


@pytest.mark.parametrize("url", ["s3://abc", "s3://abc/", "s3://a.b-c/x/y/", "s3://" + "a" * 63 + "/p"])
def test_good_bucket_urls_load_and_pass_the_schema(tmp_path, url):
    cat = load_catalog(write(tmp_path, f"input_dir: '{url}'\n" + DATASET))
    assert cat.input_location.is_bucket and cat.dataset("d").raw_location == url.rstrip("/") + "/d"
    assert not list(SCHEMA.iter_errors({"input_dir": url}))


def test_work_dir_is_a_local_folder_relative_to_the_config(tmp_path):
    assert load_catalog(write(tmp_path, "work_dir: ../scratch\n")).work_dir == (tmp_path.parent / "scratch")
    path = write(tmp_path, "input_dir: s3://abc\nwork_dir: s3://abc/work\n")
    with pytest.raises(CatalogError, match=rf"{path}:2: work_dir: 's3://abc/work': must be a folder on this host"):
        load_catalog(path)
    assert list(SCHEMA.iter_errors({"work_dir": "s3://abc/work"}))


@pytest.mark.parametrize(("options", "line", "message"), [
    ("{endpoint_url: http://h:9000, secret_key: x}", 4, "storage_options.secret_key: unknown key (allowed: "
                                                        "endpoint_url, region, profile; credentials come from"),
    ("{region: ''}", 3, "storage_options.region: expected a non-empty string, got ''"),
    ("{profile: 3}", 3, "storage_options.profile: expected a non-empty string, got 3"),
    ("{endpoint_url: 'h:9000'}", 3, "storage_options.endpoint_url: expected an http:// or https:// address"),
    ("[endpoint_url]", 2, "storage_options: expected a mapping of endpoint_url, region, profile to strings"),
])
def test_storage_options_are_refused_at_their_line(tmp_path, options, line, message):
    text = "input_dir: s3://abc\nstorage_options:\n  " + options.strip("{}").replace(", ", "\n  ") + "\n"
    if options.startswith("["):
        text = f"input_dir: s3://abc\nstorage_options: {options}\n"
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert f"{path}:{line}: {message}" in str(err.value)
    if "h:9000" not in options:  # the schema does not read addresses
        assert list(SCHEMA.iter_errors(yaml.safe_load(text))), "the schema accepted it"


def test_a_dataset_has_no_folder_of_its_own_to_override(tmp_path):
    """The catalog never had per-dataset input_dir/output_dir; they stay unknown keys."""
    path = write(tmp_path, "datasets:\n  d:\n    extractor: text\n    domain: t\n    input_dir: s3://abc/d\n")
    with pytest.raises(CatalogError, match=rf"{path}:5: datasets.d.input_dir: unknown key"):
        load_catalog(path)


@pytest.mark.parametrize(("dirs", "message"), [
    ("input_dir: s3://abc/in\noutput_dir: s3://abc/in/d/out\n",
     "output_dir: the output location s3://abc/in/d/out is inside dataset 'd''s raw location s3://abc/in/d: each run"),
    ("input_dir: s3://abc/out/raw\noutput_dir: s3://abc/out\n",
     "output_dir: the output location s3://abc/out holds dataset 'd''s raw location s3://abc/out/raw/d: each run"),
    ("input_dir: s3://abc/in\noutput_dir: s3://abc\n",
     "output_dir: the output location s3://abc holds dataset 'd''s raw location s3://abc/in/d"),
    ("input_dir: s3://abc/in\noutput_dir: s3://abc/in/d\n",
     "output_dir: the output location s3://abc/in/d is inside dataset 'd''s raw location s3://abc/in/d"),
])
def test_overlapping_bucket_locations_are_refused_at_the_output_dir_line(tmp_path, dirs, message):
    path = write(tmp_path, dirs + DATASET)
    with pytest.raises(CatalogError, match=rf"{path}:2: {message}"):
        load_catalog(path)


@pytest.mark.parametrize("dirs", [
    "input_dir: s3://abc/in\noutput_dir: s3://abc/in-d\n",  # a longer name, not a folder inside
    "input_dir: s3://abc/in\noutput_dir: s3://abd/in/d/out\n",  # another bucket
    "input_dir: s3://abc/x\noutput_dir: x/d\n",  # a bucket and a path never overlap
])
def test_side_by_side_locations_load(tmp_path, dirs):
    assert load_catalog(write(tmp_path, dirs + DATASET)).dataset("d")


def test_a_work_dir_that_puts_the_local_folders_inside_each_other_is_refused_at_its_line(tmp_path):
    path = write(tmp_path, "input_dir: raw\noutput_dir: s3://abc/out\nwork_dir: raw/d/work\n" + DATASET)
    with pytest.raises(CatalogError, match=rf"{path}:3: work_dir: the output folder .*/raw/d/work/extracted/abc/out "
                                           r"is inside dataset 'd''s raw folder .*/raw/d: each run"):
        load_catalog(path)


def test_location_holds_by_whole_prefix_parts(tmp_path):
    def loc(url):
        return parse_location(url, tmp_path)

    assert loc("s3://abc").holds(loc("s3://abc/x")) and loc("s3://abc/x").holds(loc("s3://abc/x"))
    assert loc("s3://abc/x").holds(loc("s3://abc/x/y/z")) and not loc("s3://abc/x").holds(loc("s3://abc/xy"))
    assert not loc("s3://abc/x/y").holds(loc("s3://abc/x")) and not loc("s3://abc").holds(loc("s3://abd"))
    assert not loc("s3://abc/x").holds(loc("abc/x")) and not loc("abc/x").holds(loc("s3://abc/x"))
    assert loc("a").holds(loc("a/b")) and not loc("a/b").holds(loc("a"))
