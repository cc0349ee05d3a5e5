"""The `slm4ie` console script as a user and a batch scheduler run it: real subprocesses of the venv's
entry point, over catalogs under tmp_path (README, "Look at the data"). Slices run as concurrent
processes and publish the same bytes as one serial run; looking writes nothing."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from support.files import read_jsonl, write_config, write_files
from support.paths import VENV_BIN

pytestmark = pytest.mark.slow

SLM4IE = VENV_BIN / "slm4ie"
DATASETS = {"kas": {"extractor": "text", "domain": "academic"},
            "web": {"extractor": "jsonl", "domain": "web", "split_bytes": 4096}}


def raw_tree(root: Path) -> None:
    """13 text files of different sizes, and one jsonl file cut into ranges (split_bytes 4096), with
    one malformed line and one annotated record."""
    write_files(root / "raw" / "kas", {f"d{i % 3}/f{i:02d}.txt": "\n\n".join(f"dokument {i} {j}\nvrstica"
                                                                            for j in range(3 + 7 * i))
                                      for i in range(13)})
    lines = [f'{{"doc_id": "w{i}", "text": "spletni dokument {i} ' + "besedilo " * 20 + '"}' for i in range(150)]
    lines[40] = "{not json"
    lines[7] = ('{"doc_id": "w7", "text": "Dober dan.", "paragraphs": [{"sentences": [{"tokens": ['
                '{"form": "Dober", "lemma": "dober", "upos": "ADJ"}, '
                '{"form": "dan", "lemma": "dan", "upos": "NOUN", "space_after": false}, '
                '{"form": ".", "lemma": ".", "upos": "PUNCT"}]}]}]}')
    write_files(root / "raw" / "web", {"crawl.jsonl": "\n".join(lines) + "\n"})


def slm4ie(args: list, config: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env["SLM4IE_EXTRACT_CONFIG"] = str(config)
    res = subprocess.run(["nice", str(SLM4IE), *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=config.parent)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def body(res: subprocess.CompletedProcess, config: Path) -> str:
    """The output after its first line, which names the catalog read."""
    first, _, rest = res.stdout.partition("\n")
    assert first == f"slm4ie: catalog {config} ($SLM4IE_EXTRACT_CONFIG)", res.stdout
    return rest


def published_bytes(out: Path, key: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith(f"{key}.")}


def tree_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.is_symlink(), p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def serial(tmp_path) -> Path:
    """One serial `slm4ie extract` per dataset: the reference bytes."""
    root = tmp_path / "serial"
    raw_tree(root)
    config = write_config(root, DATASETS)
    for key in DATASETS:
        res = slm4ie(["extract", key, "--workers", "1"], config)
        assert f"published {root / 'out' / key}.jsonl" in res.stdout
    return root


def test_slices_as_concurrent_processes_then_publish_give_the_serial_bytes(tmp_path, serial):
    root = tmp_path / "sliced"
    raw_tree(root)
    config = write_config(root, DATASETS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env["SLM4IE_EXTRACT_CONFIG"] = str(config)
    for key in DATASETS:
        refused = slm4ie(["publish", key], config, check=False)  # nothing extracted yet
        assert refused.returncode == 1 and "have no current part" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        procs = [subprocess.Popen(["nice", str(SLM4IE), "extract", key, "--slice", f"{i}/3", "--no-publish",
                                   "--workers", "1"], env=env, cwd=root, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for i in (1, 2, 3)]
        logs = [p.communicate(timeout=300)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], logs
        assert all("slice" in log for log in logs)
        assert not (root / "out" / f"{key}.jsonl").exists()  # --no-publish
        res = slm4ie(["publish", key], config)
        assert "published" in res.stdout
        assert published_bytes(root / "out", key) == published_bytes(serial / "out", key)
        assert "already published" in slm4ie(["publish", key], config).stdout


def test_publish_names_the_shards_a_missing_slice_would_have_written(tmp_path):
    raw_tree(tmp_path)
    config = write_config(tmp_path, DATASETS)
    slm4ie(["extract", "kas", "--slice", "1/2", "--no-publish"], config)
    res = slm4ie(["publish", "kas"], config, check=False)
    assert res.returncode == 1 and "6 of 13 shard(s) have no current part" in res.stderr, res.stderr
    slm4ie(["extract", "kas", "--slice", "2/2", "--no-publish"], config)
    assert "published" in slm4ie(["publish", "kas"], config).stdout


def test_inspect_and_stats_read_the_published_version_and_write_nothing(tmp_path, serial):
    config = serial / "extract.yaml"
    before = tree_state(serial)
    res = slm4ie(["inspect", "web", "--n", "2"], config)
    assert body(res, config).startswith("#1  web:w0  (") and "#2  web:w1  (" in res.stdout and "#3 " not in res.stdout
    res = slm4ie(["inspect", "web", "--annotated"], config)
    assert "web:w7" in res.stdout and "s1: Dober/dober/ADJ dan/dan/NOUN ././PUNCT" in res.stdout
    res = slm4ie(["inspect", "web", "--dropped"], config)
    assert "1 item(s) dropped: malformed_json 1" in res.stdout and "crawl.jsonl:41:" in res.stdout
    res = slm4ie(["inspect", "kas", "--shard", "d1/f04.txt", "--n", "100"], config)
    assert res.stdout.count("\n#") == 31 and "| vrstica" in res.stdout  # line breaks
    res = slm4ie(["inspect", "kas", "--skip", "3", "--n", "1"], config)
    assert body(res, config).startswith("#4  kas:")
    res = slm4ie(["inspect", "kas", "--shard", "d1/nope.txt"], config, check=False)
    assert res.returncode == 2 and res.stderr.splitlines() == [
        "slm4ie inspect: no shard 'd1/nope.txt' in kas (`slm4ie status kas` lists its shard keys)"]
    res = slm4ie(["stats", "web"], config)
    docs = len(read_jsonl(serial / "out" / "web.jsonl"))
    assert re.search(rf"\n  documents +{docs}\n", res.stdout) and re.search(r"malformed_json +1\n", res.stdout)
    first_range = re.search(r"shard keys \(for inspect --shard\): ([^,]+),", res.stdout).group(1)
    assert "… and 4 more" in res.stdout
    res = slm4ie(["inspect", "web", "--shard", first_range, "--annotated"], config)
    assert body(res, config).startswith("#8  web:w7  (10 characters)") and "s1: Dober/dober/ADJ" in res.stdout  # line 8
    res = slm4ie(["stats", "web"], config)
    assert "characters per document" in res.stdout and "tokens per annotated document" in res.stdout
    assert tree_state(serial) == before


@pytest.mark.parametrize("args, says", [
    ([], "the following arguments are required"),
    (["inspect"], "the following arguments are required: key"),
    (["inspect", "nope"], "no dataset 'nope'"),
    (["inspect", "kas", "--n", "0"], "--n: wants a whole number of at least 1"),
    (["inspect", "kas", "--skip", "-3"], "--skip: wants a whole number of at least 0, not '-3'"),
    (["inspect", "kas", "--sample", "2", "--skip", "1"], "--sample N draws N from every document; it takes no --skip"),
    (["inspect", "kas", "--sample", "2", "--n", "3"], "--sample N draws N from every document; it takes no --n"),
    (["inspect", "kas", "--seed", "x"], "--seed: wants a whole number, not 'x'"),
    (["inspect", "kas", "--seed", "3"], "--seed picks the random sample; it needs --sample N"),
    (["inspect", "kas", "--dropped", "--n", "3", "--seed", "1"], "--dropped lists the drop ledger; it takes no "
                                                                 "--seed, --n"),
    (["inspect", "kas", "--where", "year=2020"], "'year' is not a document field (uid, doc_id, source, domain, text "
                                                 "or metadata.NAME); did you mean metadata.year?"),
    (["stats", "kas", "--by", "year"], "--by: 'year' is not a document field"),
    (["stats", "kas", "--by", "metadata"], "--by: 'metadata' needs a NAME after metadata."),
    (["stats", "kas", "--by", "uid.x"], "--by: 'uid.x' uid has no parts"),
    (["--config", "nope.yaml", "stats"], "slm4ie: --config nope.yaml: "),
    (["--config", "", "stats"], "is a folder, not a catalog file"),
    (["inspect", "kas", "--grep", "(a"], "--grep: not a regular expression"),
    (["inspect", "kas", "--where", "metadata."], "--where: wants FIELD=VALUE"),
    (["stats", "--by", "metadata.year"], "--by needs a dataset key"),
    (["stats", "nope"], "no dataset 'nope'"),
    (["extract", "kas", "--slice", "4/3", "--no-publish"], "--slice wants I/N"),
    (["extract", "kas", "--slice", "1/3"], "--slice needs --no-publish"),
    (["frobnicate"], "invalid choice"),
    (["stats", "kas"], "no published version"),
])
def test_bad_arguments_exit_non_zero_with_one_line(tmp_path, args, says):
    raw_tree(tmp_path)
    config = write_config(tmp_path, DATASETS)
    res = slm4ie(args, config, check=False)
    assert res.returncode == (1 if says == "no published version" else 2)
    assert res.stdout in ("", f"slm4ie: catalog {config} ($SLM4IE_EXTRACT_CONFIG)\n")
    assert len(res.stderr.strip().splitlines()) == 1 and says in res.stderr, res.stderr


def test_a_catalog_file_that_is_not_there_is_a_bad_argument_wherever_it_is_named(tmp_path):
    """--config or $SLM4IE_EXTRACT_CONFIG naming no file: exit 2 and one line naming the file and who named it,
    never a fall-back to another catalog, and no advice to set the variable that was just set."""
    missing = tmp_path / "nima.yaml"
    res = slm4ie(["stats"], missing, check=False)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"slm4ie: $SLM4IE_EXTRACT_CONFIG={missing}: {missing} names no file "
                                       "(an extract.yaml; see slm4ie --help)"]
    write_config(tmp_path, DATASETS)  # a ./extract.yaml in the working folder is not read instead
    res = slm4ie(["--config", "nima.yaml", "inspect", "kas"], tmp_path / "extract.yaml", check=False)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [f"slm4ie: --config nima.yaml: {missing} names no file "
                                       "(an extract.yaml; see slm4ie --help)"]


def test_expected_errors_are_one_line_with_what_to_do_and_help_works(tmp_path):
    config = write_config(tmp_path, DATASETS)  # no raw folder
    res = slm4ie(["extract", "kas"], config, check=False)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "raw folder" in res.stderr and "What to do:" in res.stderr
    bad = write_config(tmp_path, {"kas": {"extractor": "text"}})
    res = slm4ie(["stats", "kas"], bad, check=False)
    assert res.returncode == 1 and "datasets.kas.domain: missing" in res.stderr and "Traceback" not in res.stderr
    for args in (["--help"], ["inspect", "--help"], ["extract", "--help"]):
        res = slm4ie(args, config)
        assert res.stdout.startswith("usage: slm4ie")
    assert not (tmp_path / "out").exists()


def test_extract_counts_a_refused_archive_as_the_pipeline_does_and_strict_fails_on_it(tmp_path):
    """`slm4ie extract` hands the unpack's skips to the plan, as `extract_dataset` and the asset do:
    a damaged archive is a `bad_archive` drop in the manifest, and a strict dataset fails on it."""
    import json

    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import extract_dataset

    for name, strict in (("cli", False), ("api", False), ("strict", True)):
        root = tmp_path / name
        write_files(root / "raw" / "t", {"a.txt": "besedilo\n", "broken.tar.gz": b"\x1f\x8b\x08\x00 not a gzip"})
        write_config(root, {"t": {"extractor": "text", "domain": "test", **({"strict": True} if strict else {})}})
    slm4ie(["extract", "t"], tmp_path / "cli" / "extract.yaml")
    catalog = load_catalog(tmp_path / "api" / "extract.yaml")
    extract_dataset(catalog.datasets["t"], catalog)

    def drops(name: str) -> dict:
        manifest = tmp_path / name / "out" / ".slm4ie" / "t" / "current" / "manifest.json"
        return json.loads(manifest.read_text())["drops"]

    assert drops("cli") == drops("api") == {"bad_archive": 1}
    res = slm4ie(["extract", "t"], tmp_path / "strict" / "extract.yaml", check=False)
    assert res.returncode != 0 and "strict" in res.stderr, res.stdout + res.stderr
