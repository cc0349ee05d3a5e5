"""`slm4ie` for scripts and people (issue 33): the corpus-wide `stats` table, `--json`, a reproducible
random `inspect --sample`, `--grep` / `--where` filters, `stats --by`, which catalog is read (and the
line naming it), one escaping of control and format characters in every command, and the ledger's
`metadata_missing` worded as kept (issue 40). Real subprocesses of the venv's entry point over small
corpora extracted once for the module."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.files import read_jsonl, write_config, write_files
from support.paths import VENV_BIN

SLM4IE = VENV_BIN / "slm4ie"
DATASETS = {"news": {"extractor": "jsonl", "domain": "news", "metadata": {"metadata_fields": ["year", "tags"]}},
            "odd": {"extractor": "text", "domain": "web"},
            "later": {"extractor": "text", "domain": "web"}}  # never published
HOSTILE = "prvi\n\x1b[2J\x1b]0;owned\x07 brisanje \x9b31m rdeče \u202eevil\r tekst\n"


def run(args: list, cwd: Path, config: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    if config is not None:
        env["SLM4IE_EXTRACT_CONFIG"] = str(config)
    res = subprocess.run(["nice", str(SLM4IE), *map(str, args)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=cwd)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """40 news records (year 2019-2022 by i % 4, tags lists), one hostile text file whose name has a
    newline; `later` has no published version."""
    root = tmp_path_factory.mktemp("corpus")
    records = [{"id": f"n{i:02d}", "text": f"novica {i} " + ("potres " if i % 5 == 0 else "vreme "),
                "year": 2019 + i % 4, "tags": ["a", "b"] if i % 2 else ["a"]} for i in range(40)]
    write_files(root / "raw" / "news", {"n.jsonl": "".join(json.dumps(r) + "\n" for r in records)})
    write_files(root / "raw" / "odd", {"a\nforged line.txt": HOSTILE})
    (root / "raw" / "later").mkdir(parents=True)
    config = write_config(root, DATASETS)
    for key in ("news", "odd"):
        run(["extract", key, "--workers", "1"], root, config)
    return root


def test_stats_without_a_key_is_one_table_of_every_dataset_and_json_holds_the_same(corpus):
    res = run(["stats"], corpus)  # no --config, no variable: ./extract.yaml of the working folder
    lines = res.stdout.splitlines()
    assert lines[0] == f"slm4ie: catalog {corpus / 'extract.yaml'} (./extract.yaml)"
    assert lines[1].split() == ["dataset", "documents", "characters", "dropped", "annotated", "last", "published"]
    news_chars = sum(len(r["text"]) for r in read_jsonl(corpus / "out" / "news.jsonl"))
    assert lines[2].split()[:5] == ["news", "40", f"{news_chars:,}", "0", "0.0%"]
    assert lines[4].split() == ["later", "-", "-", "-", "-", "not", "published"] and len(lines) == 5
    res = run(["stats", "--json"], corpus)
    assert res.stderr.splitlines()[0] == f"slm4ie: catalog {corpus / 'extract.yaml'} (./extract.yaml)"
    table = json.loads(res.stdout)  # stdout is nothing but the JSON
    rows = {r["dataset"]: r for r in table["datasets"]}
    assert table["catalog"] == str(corpus / "extract.yaml") and list(rows) == ["news", "odd", "later"]
    assert (rows["news"]["documents"], rows["news"]["characters"], rows["news"]["dropped"]) == (40, news_chars, 0)
    assert rows["news"]["annotated_share"] == 0.0 and rows["news"]["published_at"].endswith("Z")
    assert rows["later"]["documents"] is None and rows["later"]["published_at"] is None
    one = json.loads(run(["stats", "news", "--json"], corpus).stdout)
    assert one["documents"] == 40 and one["manifest"]["docs"] == 40


def test_inspect_sample_is_a_reproducible_random_subset_in_file_order(corpus):
    def sample(*args, n: int = 6) -> list[dict]:
        res = run(["inspect", "news", "--json", "--sample", str(n), *args], corpus)
        return [json.loads(line) for line in res.stdout.splitlines()]

    first, again, other = sample("--seed", "7"), sample("--seed", "7"), sample("--seed", "8")
    published = read_jsonl(corpus / "out" / "news.jsonl")
    assert first == again and len(first) == 6 and first != other
    assert [d["line"] for d in first] == sorted(d["line"] for d in first)
    assert all({k: v for k, v in d.items() if k != "line"} == published[d["line"] - 1] for d in first)
    draws = [sample("--seed", str(seed), n=10) for seed in range(3)]
    assert sample(n=10) == draws[0]  # no seed: seed 0, the same sample every time
    assert len({d["line"] for draw in draws for d in draw}) > 20  # drawn from the whole file, not its head
    assert len(sample(n=99)) == 40  # more than there are: every document


def test_grep_and_where_filter_documents_on_text_and_metadata(corpus):
    def lines(*args) -> list[int]:
        res = run(["inspect", "news", "--json", "--n", "100", *args], corpus)
        return [json.loads(line)["line"] for line in res.stdout.splitlines()]

    assert lines("--grep", "potres") == [1, 6, 11, 16, 21, 26, 31, 36]
    assert lines("--where", "metadata.year=2020") == list(range(2, 41, 4))
    assert lines("--where", "metadata.tags=b", "--where", "metadata.year=2020") == list(range(2, 41, 4))
    assert lines("--where", "metadata.tags=b", "--grep", "^novica 1[0-9] ") == [12, 14, 16, 18, 20]
    assert lines("--where", "uid=news:n:000003") == [4] and lines("--where", "metadata.nope=1") == []
    res = run(["inspect", "news", "--where", "metadata.year=1999"], corpus)
    assert res.stdout.splitlines()[1:] == ["(no documents with metadata.year=1999)"]
    sampled = run(["inspect", "news", "--json", "--sample", "3", "--grep", "potres", "--seed", "1"], corpus)
    assert all("potres" in json.loads(line)["text"] for line in sampled.stdout.splitlines())


def test_stats_by_a_metadata_field_groups_documents_and_characters(corpus):
    published = read_jsonl(corpus / "out" / "news.jsonl")
    res = json.loads(run(["stats", "news", "--by", "metadata.year", "--json"], corpus).stdout)
    assert res["by"] == "metadata.year" and [g["value"] for g in res["groups"]] == ["2019", "2020", "2021", "2022"]
    assert [g["documents"] for g in res["groups"]] == [10, 10, 10, 10]
    assert sum(g["characters"] for g in res["groups"]) == sum(len(r["text"]) for r in published)
    text = run(["stats", "news", "--by", "metadata.tags"], corpus).stdout.splitlines()
    assert text[1] == "news: 40 documents by metadata.tags"
    assert [line.split()[:2] for line in text[3:]] == [["a", "40"], ["b", "20"]]  # a list counts per element


def test_stats_by_a_field_no_document_has_says_no_and_names_the_fields_they_have(corpus):
    res = run(["stats", "news", "--by", "metadata.yeer"], corpus, check=False)
    assert res.returncode == 2 and res.stderr.splitlines() == [
        "slm4ie stats: no document of news has metadata.yeer (its documents have metadata.tags, metadata.year)"]
    res = run(["stats", "news", "--by", "year", "--json"], corpus, check=False)  # before reading anything
    assert res.returncode == 2 and res.stdout == "" and res.stderr.splitlines() == [
        "slm4ie stats: argument --by: 'year' is not a document field (uid, doc_id, source, domain, text or "
        "metadata.NAME); did you mean metadata.year? (see slm4ie --help)"]


def test_the_catalog_is_config_then_the_variable_then_the_working_folders_then_the_projects(corpus, tmp_path):
    config = corpus / "extract.yaml"
    copy = tmp_path / "copy.yaml"
    copy.write_text(config.read_text().replace("input_dir: raw", f"input_dir: {corpus / 'raw'}")
                    .replace("output_dir: out", f"output_dir: {corpus / 'out'}"))
    first = lambda res: res.stdout.splitlines()[0]  # noqa: E731
    assert first(run(["--config", copy, "stats"], corpus, config)) == f"slm4ie: catalog {copy} (--config)"
    assert first(run(["stats"], tmp_path, copy)) == f"slm4ie: catalog {copy} ($SLM4IE_EXTRACT_CONFIG)"
    assert first(run(["stats"], corpus)) == f"slm4ie: catalog {config} (./extract.yaml)"
    project = Path(__file__).resolve().parents[2] / "extract.yaml"
    assert first(run(["stats"], tmp_path)) == f"slm4ie: catalog {project} (the project's own; no ./extract.yaml here)"


def test_control_characters_from_the_corpus_and_from_file_names_are_shown_escaped(corpus):
    res = run(["inspect", "odd"], corpus)
    out = res.stdout
    assert not any(ch in out for ch in "\x1b\x07\x9b\r\u202e")  # nothing a terminal would act on
    lines = out.splitlines()
    assert lines[1].startswith("#1  odd:a\\nforged line:000000  (")  # the name's newline forges no line
    assert "  | \\x1b[2J\\x1b]0;owned\\x07 brisanje \\x9b31m rdeče \\u202eevil" in lines  # (\\r: a line break)
    as_json = run(["inspect", "odd", "--json"], corpus).stdout
    assert not any(ch in as_json for ch in "\x1b\x07\x9b\r\u202e")
    doc = json.loads(as_json)
    assert all(ch in doc["text"] for ch in "\x1b\x9b\u202e")  # the data is kept; only its display is escaped
    stats = run(["stats", "odd"], corpus).stdout
    assert "\x1b" not in stats and "a%0Aforged line.txt" in stats  # shard keys escape it their own way


NAMES = {"\u202egnp.txt": "obrnjeno ime\n", "esc\x1bm.txt": "ubežni znak\n", "c1\x9b.txt": "krmilni znak C1\n",
         "zw\u200bj.txt": "ničelna širina\n"}
UNSAFE = "\x1b\x9b\u202e\u200b"


@pytest.fixture(scope="module")
def names(tmp_path_factory) -> Path:
    """`names`: four text files whose names hold ESC, a C1 control, a right-to-left override and a
    zero-width space; `tsv`: two CoNLL-U files, one without its row in the metadata TSV."""
    root = tmp_path_factory.mktemp("names")
    write_files(root / "raw" / "names", NAMES)
    conllu = "# newdoc id = {}\n1\tBeseda\tbeseda\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    write_files(root / "raw" / "tsv", {"meta.tsv": "id\ta\n1\tena\n", "oss-1.conllu": conllu.format("oss-1"),
                                      "oss-2.conllu": conllu.format("oss-2")})
    write_config(root, {"names": {"extractor": "text", "domain": "web"},
                        "tsv": {"extractor": "conllu", "domain": "science", "metadata": {
                            "path": "meta.tsv", "key_column": "id", "key_pattern": r"^oss-(\d+)$",
                            "fields": {"a": "a"}}}})
    for key in ("names", "tsv"):
        run(["extract", key, "--workers", "1"], root)
    return root


def test_every_command_escapes_names_and_text_the_same_way(names):
    outputs = {" ".join(args): run(args, names).stdout for args in (
        ["status", "names"], ["stats", "names"], ["inspect", "names", "--n", "9"], ["stats"])}
    for command, out in outputs.items():
        assert not any(ch in out for ch in UNSAFE), f"slm4ie {command} printed a raw control or format character"
    status = outputs["status names"]
    # a shard key spells a C0 control its own way (%1B, as the UI shows it and --shard takes it); what a key
    # keeps as it is shows as everywhere else
    for key in ("\\u202egnp.txt", "esc%1Bm.txt", "c1\\x9b.txt", "zw\\u200bj.txt"):
        assert re.search(rf"^{re.escape(key)} +current$", status, re.MULTILINE), (key, status)
    assert "\\u202egnp.txt" in outputs["stats names"] and "c1\\x9b.txt" in outputs["stats names"]
    uids = re.findall(r"^#\d+  (\S+)  \(", outputs["inspect names --n 9"], re.MULTILINE)
    assert sorted(uids) == sorted(["names:\\u202egnp:000000", "names:esc\\x1bm:000000", "names:c1\\x9b:000000",
                                   "names:zw\\u200bj:000000"])
    for args in (["status", "names", "--json"], ["inspect", "names", "--json", "--n", "9"],
                 ["stats", "names", "--json"]):
        out = run(args, names).stdout
        assert not any(ch in out for ch in UNSAFE), args
        assert [json.loads(line) for line in out.splitlines()] if args[0] == "inspect" else json.loads(out)
    shards = json.loads(run(["status", "names", "--json"], names).stdout)["shards"]
    assert {s["key"] for s in shards} == {"\u202egnp.txt", "esc%1Bm.txt", "c1\x9b.txt", "zw\u200bj.txt"}
    res = run(["inspect", "names", "--shard", "\u202egnp.txt"], names)  # the key itself, as a script passes it
    assert "  | obrnjeno ime" in res.stdout


def test_a_file_without_its_metadata_row_is_counted_as_kept_not_as_dropped(names):
    res = run(["inspect", "tsv", "--dropped"], names)
    lines = res.stdout.splitlines()
    assert lines[1] == "tsv: 0 item(s) dropped; kept with a warning: metadata_missing 1"
    assert any("oss-2.conllu" in line and "[metadata_missing]" in line for line in lines[2:]), lines
    ledger = json.loads(run(["inspect", "tsv", "--dropped", "--json"], names).stdout)
    assert (ledger["dropped"], ledger["drops"], ledger["kept_with_warning"]) == (0, {}, {"metadata_missing": 1})
    summary = run(["stats", "tsv"], names).stdout
    assert re.search(r"\n  dropped +0\n  kept with a warning +1\n    metadata_missing +1\n", summary), summary
    row = next(r for r in json.loads(run(["stats", "--json"], names).stdout)["datasets"] if r["dataset"] == "tsv")
    assert (row["documents"], row["dropped"], row["kept_with_warning"]) == (2, 0, 1)
    assert "oss-2" in run(["inspect", "tsv"], names).stdout  # the document is there
