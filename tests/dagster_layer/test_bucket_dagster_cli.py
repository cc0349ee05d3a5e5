"""The literal `dagster asset materialize --select extracted/<key>` with s3:// paths in extract.yaml
(issue 42), against the local S3 server: an annotated dataset of the bundled examples read from a
bucket and published to one gives the committed bytes of tests/core/published_hashes.json."""

import json

import pytest

from support.bucket_runs import PUBLISHED_HASHES, bucket_config, bucket_hashes, upload_tree
from support.dagster_cli import dagster_env, run_dagster
from support.paths import REPO

pytestmark = pytest.mark.slow
KEY = "web_jsonl"  # text and a sidecar


def test_the_literal_dagster_command_publishes_a_bucket_dataset_with_the_committed_bytes(s3_bucket, tmp_path):
    upload_tree(REPO / "examples" / "data" / "raw" / KEY, f"{s3_bucket.url}/raw/{KEY}")
    config = bucket_config(REPO / "examples" / "extract.yaml", tmp_path, s3_bucket.url)
    home = tmp_path / "dagster_home"
    home.mkdir()
    res = run_dagster(["asset", "materialize", "--select", f"extracted/{KEY}"], dagster_env(config, home),
                      timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-5000:]
    committed = json.loads(PUBLISHED_HASHES.read_text())["examples"]
    assert bucket_hashes(f"{s3_bucket.url}/out", KEY) == {k: v for k, v in committed.items() if k.startswith(KEY)}
