"""Issue 42, done when: the shared corpora extracted from a bucket to a bucket, from the CLI with 2
workers and from the literal `dagster asset materialize` with s3:// paths, equal
shared/corpora/expected; a second run writes no object. Against the local S3 server.

`make test-long` runs these (about 30 s each alone, 70-135 s under CI's load); CI runs the bundled
examples and the bench corpus through a bucket (tests/core/test_bucket_pipeline.py) and the literal
command on one dataset (test_bucket_dagster_cli.py), to keep the whole CI run within 15 minutes."""

import subprocess

import pytest
import yaml

from support.bucket_runs import bucket_config, listing, object_bytes, upload_tree
from support.corpora import load_compare_outputs
from support.dagster_cli import dagster_env, run_dagster
from support.paths import CORPORA, VENV_BIN

pytestmark = pytest.mark.long


def _corpora_in_bucket(s3_bucket, tmp_path):
    if not CORPORA.exists():
        pytest.skip(f"{CORPORA} not found: the shared corpora are not beside this checkout")
    upload_tree(CORPORA / "raw", f"{s3_bucket.url}/raw")
    config = bucket_config(CORPORA / "extract.yaml", tmp_path, s3_bucket.url)
    return config, list(yaml.safe_load(config.read_text())["datasets"])


def _download_top_level(location: str, keys: list[str], target):
    from slm4ie_assets.storage.urls import open_store

    store = open_store(location)
    target.mkdir()
    for key in keys:
        for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
            data = object_bytes(store, name)
            if data is not None:
                (target / name).write_bytes(data)
    return target


def _slm4ie(config, *args):
    env = dagster_env(config, SLM4IE_RECORD="0")
    return subprocess.run([str(VENV_BIN / "slm4ie"), *args], env=env, capture_output=True, text=True, timeout=600)


def test_shared_corpora_bucket_to_bucket_from_the_cli_with_two_workers(s3_bucket, tmp_path):
    compare = load_compare_outputs()
    config, keys = _corpora_in_bucket(s3_bucket, tmp_path)
    for key in keys:
        res = _slm4ie(config, "extract", key, "--workers", "2")
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"published {s3_bucket.url}/out/{key}.jsonl" in res.stdout + res.stderr
    got = _download_top_level(f"{s3_bucket.url}/out", keys, tmp_path / "got")
    assert compare.main([str(got), str(CORPORA / "expected"), "--keys", ",".join(keys)]) == 0

    before = listing(s3_bucket.url)
    for key in keys:
        res = _slm4ie(config, "extract", key, "--workers", "2")
        assert res.returncode == 0 and "already published" in res.stdout + res.stderr, res.stdout + res.stderr
    assert listing(s3_bucket.url) == before


def test_shared_corpora_bucket_to_bucket_through_dagster_asset_materialize(s3_bucket, tmp_path):
    compare = load_compare_outputs()
    config, keys = _corpora_in_bucket(s3_bucket, tmp_path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    selection = ",".join(f"extracted/{k}" for k in keys)
    res = run_dagster(["asset", "materialize", "--select", selection], dagster_env(config, home), timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-5000:]
    got = _download_top_level(f"{s3_bucket.url}/out", keys, tmp_path / "got")
    assert compare.main([str(got), str(CORPORA / "expected"), "--keys", ",".join(keys)]) == 0
