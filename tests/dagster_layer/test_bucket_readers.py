"""`slm4ie inspect/stats/status` and the asset checks read a bucket's published version through its
newest commit record (store/published_reader.py), not the local work folder: one dataset published
to a folder and to a bucket (from a bucket, on the local S3 server) reads the same after the work
folder is deleted, and the checks judge the commit record's version objects, not the top-level
copies beside them."""

import dataclasses
import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.cli.main import main
from slm4ie_assets.dagster_layer.checks import ALIGNED, SCHEMA, check_results, inspect_published
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.storage.urls import open_store
from slm4ie_assets.store.lease import Lease
from slm4ie_assets.store.published_reader import published_version
from slm4ie_assets.store.remote_publish import LocalVersion, publish_version
from support.files import write_config, write_files
from support.paths import VENV_BIN

TOKENS = {"paragraphs": [{"sentences": [{"tokens": [
    {"form": "Dober", "lemma": "dober", "upos": "ADJ"},
    {"form": "dan", "lemma": "dan", "upos": "NOUN", "space_after": False},
    {"form": ".", "lemma": ".", "upos": "PUNCT"}]}]}]}
DATASETS = {"web": {"extractor": "jsonl", "domain": "web"}, "kas": {"extractor": "text", "domain": "academic"}}


def raw_files() -> dict[str, str]:
    """An annotated jsonl dataset over two files (metadata, stubs, one malformed line) and a text one."""
    def line(i: int) -> str:
        extra = TOKENS if i % 3 == 0 else {}
        text = "Dober dan." if extra else f"spletni dokument {i} " + "besedilo " * (i % 7)
        return json.dumps({"doc_id": f"w{i}", "text": text, "url": f"u{i % 4}", **extra}, ensure_ascii=False)
    web_a = "\n".join(line(i) for i in range(12)) + "\n{not json\n"
    web_b = "\n".join(line(i) for i in range(12, 30)) + "\n"
    files = {"web/a.jsonl": web_a, "web/b.jsonl": web_b}
    files |= {f"kas/d{i % 2}/f{i}.txt": "\n\n".join(f"odstavek {i} {j}" for j in range(2 + i)) for i in range(5)}
    return files


@pytest.fixture
def published_twice(tmp_path, s3_bucket):
    """The same raw files published to a folder and, read from the bucket, to the bucket; then the
    bucket config's work folder is deleted, as on another host."""
    folder = tmp_path / "folder"
    write_files(folder / "raw", raw_files())
    folder_config = write_config(folder, DATASETS)
    for rel, content in raw_files().items():
        s3_bucket.client.put_object(Bucket=s3_bucket.name, Key=f"raw/{rel}", Body=content.encode())
        # a mirrored file's mtime is its object's LastModified: the same on disk gives the same fingerprints
        modified = s3_bucket.client.head_object(Bucket=s3_bucket.name, Key=f"raw/{rel}")["LastModified"]
        os.utime(folder / "raw" / rel, ns=(int(modified.timestamp()) * 10**9,) * 2)
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    bucket_config = write_config(bucket, DATASETS, input_dir=f"{s3_bucket.url}/raw",
                                 output_dir=f"{s3_bucket.url}/out", work_dir=str(bucket / "work"))
    for config in (folder_config, bucket_config):
        catalog = load_catalog(config)
        for key in DATASETS:
            extract_dataset(catalog.dataset(key), catalog, workers=1)
    shutil.rmtree(bucket / "work")
    return folder_config, bucket_config


def cli(capsys, config: Path, *args: str) -> tuple[int, str, str]:
    """`slm4ie --config CONFIG ARGS` in this process: exit status, stdout and stderr without the
    line naming the catalog, published_at masked (the two publishes ran seconds apart)."""
    code = main(["--config", str(config), *args])
    out, err = capsys.readouterr()
    first = f"slm4ie: catalog {config} (--config)\n"
    out, err = out.replace(first, "", 1), err.replace(first, "", 1)
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    return code, stamp.sub("<published_at>", out), stamp.sub("<published_at>", err)


READS = [
    ("inspect", "web"), ("inspect", "web", "--json"), ("inspect", "web", "--skip", "7", "--n", "3"),
    ("inspect", "web", "--grep", "dokument 1[0-9]"), ("inspect", "web", "--where", "metadata.url=u2", "--json"),
    ("inspect", "web", "--annotated", "--n", "20"), ("inspect", "web", "--sample", "4", "--seed", "3"),
    ("inspect", "kas", "--n", "100"), ("stats", "web"), ("stats", "web", "--json"), ("stats", "kas", "--json"),
    ("stats", "web", "--by", "metadata.url"), ("stats", "web", "--by", "metadata.url", "--json"),
]


def test_inspect_and_stats_read_the_bucket_version_as_the_folder_one_without_the_work_folder(
        published_twice, capsys):
    folder_config, bucket_config = published_twice
    work = bucket_config.parent / "work"
    for args in READS:
        on_disk = cli(capsys, folder_config, *args)
        assert on_disk[0] == 0 and on_disk[1], (args, on_disk)
        in_bucket = cli(capsys, bucket_config, *args)
        assert in_bucket[1].splitlines() == on_disk[1].splitlines(), args
        assert in_bucket == on_disk, args
    table = [cli(capsys, config, "stats", "--json") for config in (folder_config, bucket_config)]
    assert [json.loads(out)["datasets"] for _, out, _ in table] == [json.loads(table[0][1])["datasets"]] * 2
    assert all(row["documents"] for row in json.loads(table[1][1])["datasets"])
    # the drop ledger is the manifest's; the warnings naming file and line are kept in the parts
    on_disk = cli(capsys, folder_config, "inspect", "web", "--dropped")[1].splitlines()
    code, out, _ = cli(capsys, bucket_config, "inspect", "web", "--dropped")
    assert code == 0 and out.splitlines()[0] == on_disk[0] == "web: 1 item(s) dropped: malformed_json 1"
    assert out.splitlines()[1:] == ["  a.jsonl: its part is not on this host (warnings not shown)",
                                    "  b.jsonl: its part is not on this host (warnings not shown)"]
    script = subprocess.run([str(VENV_BIN / "slm4ie"), "--config", str(bucket_config), "inspect", "web", "--n", "2"],
                            capture_output=True, text=True, timeout=120)
    assert script.returncode == 0, script.stderr
    assert script.stdout.partition("\n")[2] == cli(capsys, folder_config, "inspect", "web", "--n", "2")[1]
    assert not work.exists()  # looking wrote nothing, not even the work folder


def test_status_names_the_bucket_version_and_readers_name_the_bucket_when_there_is_none(
        published_twice, capsys, tmp_path):
    """Raw on disk here (status plans from the raw files; a bucket's raw is mirrored only by a run),
    the output in the bucket, and a work folder that never held a part or a version."""
    folder_config, bucket_config = published_twice
    output = yaml.safe_load(bucket_config.read_text())["output_dir"]
    here = tmp_path / "another-host"
    here.mkdir()
    config = write_config(here, DATASETS, input_dir=str(folder_config.parent / "raw"), output_dir=output,
                          work_dir=str(here / "work"))
    code, out, _ = cli(capsys, config, "status", "web")
    assert code == 0 and "2 missing; published version: out of date" in out  # not "never published"
    assert cli(capsys, config, "stats", "web")[1] == cli(capsys, folder_config, "stats", "web")[1]
    config.write_text(config.read_text().replace(output, output + "/elsewhere"))
    assert "published version: never published" in cli(capsys, config, "status", "web")[1]
    code, _, err = cli(capsys, config, "stats", "web")
    assert (code, err) == (1, f"slm4ie: web has no published version under {output}/elsewhere yet (slm4ie extract "
                              "web, or materialize extracted/web)\n")


def findings(config: Path, key: str) -> dict:
    spec = load_catalog(config).dataset(key)
    return {r.check_name: (r.passed, r.description) for r in check_results(spec, inspect_published(spec))}


def test_the_checks_read_the_commit_records_version_not_the_top_level_copies(published_twice, s3_bucket, tmp_path):
    folder_config, bucket_config = published_twice
    on_disk = findings(folder_config, "web")
    assert on_disk[ALIGNED][0] and on_disk[SCHEMA][0]
    assert findings(bucket_config, "web") == on_disk
    # a hand replaces the top-level sidecar copy by a misaligned one: readers follow the commit record
    spec = load_catalog(bucket_config).dataset("web")
    version = published_version(spec)
    assert version is not None and version.sidecar is not None and version.sidecar.startswith(".slm4ie/web/versions/")
    with version.open_sidecar() as side:
        lines = side.read().splitlines(keepends=True)
    misaligned = gzip.compress(b"".join([lines[1], lines[0], *lines[2:]]), mtime=0)
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="out/web.annotations.jsonl.gz", Body=misaligned)
    assert findings(bucket_config, "web") == on_disk
    # a new commit whose sidecar is misaligned: the checks read it and fail
    local = tmp_path / "bad"
    local.mkdir()
    with version.open_text() as text:
        (local / "web.jsonl").write_bytes(text.read())
    (local / "web.annotations.jsonl.gz").write_bytes(misaligned)
    manifest = dataclasses.replace(version.manifest, sidecar_bytes=len(misaligned))
    store = open_store(spec.output_location)
    with Lease(store, "web") as lease:
        record = publish_version(store, "web", LocalVersion(local / "web.jsonl", local / "web.annotations.jsonl.gz"),
                                 manifest, lease)
    assert published_version(spec).where.endswith(f"/.slm4ie/web/published/{record.seq:012d}.json")
    aligned_passed, description = findings(bucket_config, "web")[ALIGNED]
    assert not aligned_passed and "line 1: sidecar uid 'web:w1' != text uid 'web:w0'" in description
    assert findings(bucket_config, "web")[SCHEMA] == on_disk[SCHEMA]
