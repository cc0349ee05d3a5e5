"""The CLI path on a real Slurm cluster, without a Dagster instance (README, "Run on a Slurm cluster"):
deploy/slurm/extract-array.sbatch as an array of slices, then deploy/slurm/publish.sbatch after it,
publish the bytes of one serial `slm4ie extract`.

The slices ask for 1 CPU each and the publish for 2, so on the test cluster (nodes `small`, 1 CPU,
and `big`, 2 CPUs: deploy/slurm/one-node-cluster.sh) the publish can only run on `big`, and every
job runs bound to the CPUs it was given (task/affinity): slices plan with 1 CPU, the publish with 2,
and the keys must still agree.
"""

import re
import subprocess

import pytest

from support.slurm import (
    DEPLOY,
    published,
    report_time,
    require_cluster,
    serial_extract,
    slm4ie_env,
    stopwatch,
    text_tree,
    write_catalog,
)

pytestmark = pytest.mark.slow

DATASETS = {"kas": {"extractor": "text", "domain": "academic"}}


def test_the_readme_slurm_array_job_publishes_the_serial_bytes(tmp_path):
    require_cluster()
    serial = tmp_path / "serial"
    text_tree(serial / "raw" / "kas")
    serial_extract(write_catalog(serial, DATASETS), "kas")

    root = tmp_path / "slurm"
    text_tree(root / "raw" / "kas")
    config = write_catalog(root, DATASETS)
    env = slm4ie_env(config)
    submit = ["sbatch", "--parsable", "--export=ALL,KEY=kas", f"--chdir={root}"]
    with stopwatch() as took:
        array = subprocess.run([*submit, "--cpus-per-task=1", "--array=1-3", f"--output={root}/%x-%A_%a.log",
                                str(DEPLOY / "extract-array.sbatch")], env=env, capture_output=True, text=True,
                               timeout=60, check=True).stdout.strip()
        done = subprocess.run([*submit, "--cpus-per-task=2", f"--output={root}/%x-%j.log",
                               f"--dependency=afterok:{array}", "--wait", str(DEPLOY / "publish.sbatch")], env=env,
                              capture_output=True, text=True, timeout=300)
        seconds = took()
    logs = "\n".join(p.read_text() for p in sorted(root.glob("*.log")))
    assert done.returncode == 0, logs + done.stderr
    report_time("array job of 3 slices + publish (sbatch --wait)", seconds)
    assert published(root / "out", "kas") == published(serial / "out", "kas"), logs

    slices = re.findall(r"slm4ie: slice (\d)/3 of kas on (\S+) with (\d+) CPUs", logs)
    assert sorted(s[0] for s in slices) == ["1", "2", "3"], logs
    assert {s[2] for s in slices} == {"1"}, f"each slice bound to the 1 CPU it asked for: {slices}"
    assert re.search(r"slm4ie: publish kas on big with 2 CPUs", logs), logs
