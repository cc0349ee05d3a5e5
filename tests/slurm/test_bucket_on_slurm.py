"""A bucket dataset (`input_dir` and `output_dir` s3://...) materialized by a run that Slurm runs
(deploy/dagster.slurm.yaml, as tests/slurm/test_dagster_on_slurm.py deploys it, on the local S3
server of tests/support/s3.py).

The AWS_* variables live only in the environment of the webserver and the daemon, the process that
submits the job: the job reads raw/ from the bucket and publishes to it with them (sbatch
--export=ALL), and its published bytes are a serial POSIX run's. Neither the secret key nor the
database password is written where the job's batch script, `scontrol show job` or its output file
would show it: Slurm keeps the exported environment in its own state folder, readable by its
administrators only.
"""

import subprocess
import uuid

import pytest
import yaml
from dagster import DagsterRunStatus
from test_dagster_on_slurm import deployed, run_messages, wait_finished

from slm4ie_assets.slurm.launcher import JOB_TAG, LOG_TAG
from support.s3 import remove_bucket
from support.slurm import (
    conllu_files,
    published,
    report_time,
    require_cluster,
    serial_extract,
    stopwatch,
    write_catalog,
)

pytestmark = pytest.mark.slow

KEY, FILES = "cloud", 3
DATASET = {"extractor": "conllu", "domain": "test"}


@pytest.fixture(scope="module")
def bucket_deployment(tmp_path_factory, s3_server):
    require_cluster()
    base = tmp_path_factory.mktemp("bucket_on_slurm")
    bucket = f"slm4ie-slurm-{uuid.uuid4().hex[:12]}"
    s3_server.client.create_bucket(Bucket=bucket)
    raw = base / "upload" / KEY
    conllu_files(raw, FILES)
    for path in sorted(raw.iterdir()):
        s3_server.client.upload_file(str(path), bucket, f"raw/{KEY}/{path.name}")
    config = base / "extract.yaml"
    config.write_text(yaml.safe_dump({"input_dir": f"s3://{bucket}/raw", "output_dir": f"s3://{bucket}/out",
                                      "work_dir": str(base / "work"), "max_workers": 1,
                                      "datasets": {KEY: {"watch": False, **DATASET}}}, sort_keys=False))
    aws = {**s3_server.env(base), "AWS_SECRET_ACCESS_KEY": f"secret-{uuid.uuid4().hex}"}
    try:
        with deployed(base, config, aws) as dep:
            yield dep, bucket, aws["AWS_SECRET_ACCESS_KEY"]
    finally:
        remove_bucket(s3_server.client, bucket)


def test_a_slurm_job_reads_and_publishes_the_bucket_with_the_launchers_credentials(bucket_deployment, s3_server,
                                                                                    tmp_path):
    dep, bucket, secret = bucket_deployment
    serial = tmp_path / "serial"
    conllu_files(serial / "raw" / KEY, FILES)
    serial_extract(write_catalog(serial, {KEY: DATASET}), KEY)

    with stopwatch() as took:
        run_id = dep.launch_asset(["extracted", KEY])
        dep.start_daemon()
        run = wait_finished(dep, run_id)
        seconds = took()
    report_time("a bucket dataset mirrored, extracted and published by a Slurm job", seconds)
    assert run.status == DagsterRunStatus.SUCCESS, run_messages(dep, run_id) + dep.tail()
    job = run.tags[JOB_TAG]
    bucket_text = {name: s3_server.client.get_object(Bucket=bucket, Key=f"out/{name}")["Body"].read()
                   for name in published(serial / "out", KEY)}
    assert bucket_text == published(serial / "out", KEY)

    shown = [subprocess.run(args, capture_output=True, text=True, timeout=30, check=True).stdout
             for args in (["scontrol", "show", "job", "-dd", job], ["scontrol", "write", "batch_script", job, "-"])]
    assert "execute_run" in shown[1], shown[1]  # the script is the run worker's command line
    output = open(run.tags[LOG_TAG], encoding="utf-8", errors="replace").read()
    for name, text in (("scontrol show job", shown[0]), ("the batch script", shown[1]), ("the job's output", output),
                       ("the run's events", run_messages(dep, run_id))):
        for value in (secret, dep.env["DAGSTER_PG_PASSWORD"]):
            assert value not in text, f"{name} shows a secret"
