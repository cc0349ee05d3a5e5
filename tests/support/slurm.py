"""Helpers for the tests that run on a real Slurm cluster (tests/slurm/).

CI starts one (deploy/slurm/one-node-cluster.sh start, from .ci/run) and sets CI=true: there a
missing cluster FAILS the tests, so CI can never pass them by skipping. On a workstation without
Slurm they skip.
"""

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from slm4ie_assets.slurm.commands import cluster_answers
from support.files import write_files
from support.paths import REPO, VENV_BIN

DEPLOY = REPO / "deploy" / "slurm"
CLUSTER_SCRIPT = DEPLOY / "one-node-cluster.sh"


def require_cluster() -> None:
    """Skip without a Slurm cluster, except under CI=true, where its absence is a failure."""
    if cluster_answers():
        return
    msg = f"no Slurm cluster answers `sinfo` (start one: {CLUSTER_SCRIPT.relative_to(REPO)} start)"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true: {msg}; .ci/run starts it before `make test`", pytrace=False)
    pytest.skip(msg)


def report_time(what: str, seconds: float) -> None:
    """Print a wall time, and append it to $SLM4IE_TEST_TIMINGS when set (.ci/run prints that file
    after the suite: pytest's -q and xdist keep a passing test's output out of CI's log)."""
    line = f"slurm timing: {what}: {seconds:.1f} s"
    print(line)
    target = os.environ.get("SLM4IE_TEST_TIMINGS")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def job_nodes(job_ids: list[str]) -> dict[str, str]:
    """job id -> the node it ran on (scontrol keeps finished jobs for MinJobAge seconds)."""
    out = {}
    for job in job_ids:
        res = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=30)
        fields = dict(t.partition("=")[::2] for t in res.stdout.split() if "=" in t)
        out[job] = fields.get("NodeList", "?")
    return out


# ---------------------------------------------------------------- a small corpus

def conllu_doc(i: int, j: int) -> str:
    words = [f"beseda{i}_{j}_{k}" for k in range(3)]
    rows = "".join(f"{k + 1}\t{w}\t{w}\tNOUN\tNcmsn\t_\t0\troot\t_\t_\n" for k, w in enumerate(words))
    return f"# newdoc id = d{i}_{j}\n# sent_id = s{i}_{j}\n# text = {' '.join(words)}\n{rows}\n"


def conllu_files(raw: Path, count: int) -> None:
    """`count` conllu files (text and annotations), one shard each."""
    write_files(raw, {f"part{i:02d}.conllu": "".join(conllu_doc(i, j) for j in range(3)) for i in range(count)})


def text_tree(raw: Path) -> None:
    """Text files of different sizes in three folders: enough shards for three slices."""
    write_files(raw, {f"d{i % 3}/f{i:02d}.txt": "\n\n".join(f"dokument {i} {j}\nvrstica" for j in range(3 + 5 * i))
                      for i in range(9)})


def write_catalog(root: Path, datasets: dict) -> Path:
    """extract.yaml with absolute raw/ and out/ under `root`, one worker, sensors off."""
    doc = {"input_dir": str(root / "raw"), "output_dir": str(root / "out"), "max_workers": 1,
           "datasets": {k: {"watch": False, "watch_interval": 5, **v} for k, v in datasets.items()}}
    cfg = root / "extract.yaml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return cfg


def published(out: Path, key: str) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith(f"{key}.")}
    assert files, f"nothing of {key} published in {out}"
    return files


def slm4ie_env(config: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), SLM4IE=str(VENV_BIN / "slm4ie"))
    return env


def serial_extract(config: Path, key: str) -> None:
    """One serial `slm4ie extract KEY --workers 1`: the reference bytes."""
    res = subprocess.run([str(VENV_BIN / "slm4ie"), "extract", key, "--workers", "1"], env=slm4ie_env(config),
                         cwd=config.parent, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr


@contextmanager
def stopwatch():
    """`with stopwatch() as t: ...; t()` -> seconds since entry."""
    start = time.monotonic()
    yield lambda: time.monotonic() - start
