"""Shared fixtures: small corpora written into tmp_path, a real pipeline run, output readers."""

import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_and_publish, extract_dataset, plan_dataset

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"
VENV_BIN = Path(sys.executable).parent


def write_config(root: Path, datasets: dict, **top) -> Path:
    """An extract.yaml in `root` with raw/ and out/ beside it."""
    doc = {"input_dir": "raw", "output_dir": "out", **top, "datasets": datasets}
    path = root / "extract.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def write_files(root: Path, files: dict) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_bytes(content.encode("utf-8"))


def read_jsonl(path: Path) -> list:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path} does not end with a newline"
    return [json.loads(line) for line in data.decode("utf-8").split("\n")[:-1]] if data else []


def read_sidecar(path: Path) -> list | None:
    if not path.exists():
        return None
    data = gzip.decompress(path.read_bytes()).decode("utf-8")
    return [json.loads(line) for line in data.split("\n")[:-1]] if data else []


class Corpus:
    """A dataset written into tmp_path and extracted through the real pipeline."""

    def __init__(self, root: Path):
        self.root = root

    def run(self, key: str, extractor: str, files: dict, domain: str = "test", metadata=None, force: bool = True,
            workers: int = 1, **dataset):
        raw = self.root / "raw" / key
        if raw.exists():
            shutil.rmtree(raw)
        raw.mkdir(parents=True)
        write_files(raw, files)
        entry = {"extractor": extractor, "domain": domain, **dataset}
        if metadata is not None:
            entry["metadata"] = metadata
        cfg = write_config(self.root, {key: entry})
        catalog = load_catalog(cfg)
        report = extract_dataset(catalog.dataset(key), catalog, force=force, workers=workers)
        return Result(self.root / "out", key, report)


class Result:
    def __init__(self, out: Path, key: str, report, plan=None):
        self.out, self.key, self.report, self.plan = out, key, report, plan
        self.lines = read_jsonl(out / f"{key}.jsonl")
        self.sidecar = read_sidecar(out / f"{key}.annotations.jsonl.gz")
        self.manifest = report.manifest

    @property
    def texts(self) -> list:
        return [r["text"] for r in self.lines]

    @property
    def ids(self) -> list:
        return [r["doc_id"] for r in self.lines]

    @property
    def metas(self) -> list:
        return [r.get("metadata") for r in self.lines]

    @property
    def drops(self) -> dict:
        return self.manifest.drops

    @property
    def warnings(self) -> list:
        return self.report.warnings


def extract_raw(root: Path, key: str, extractor: str, domain: str, files: dict | None = None,
                workers: int = 1) -> Result:
    """Add `files` to raw/<key>/ (what is there stays) and run plan, extract and publish, forced."""
    raw = root / "raw" / key
    raw.mkdir(parents=True, exist_ok=True)
    write_files(raw, files or {})
    catalog = load_catalog(write_config(root, {key: {"extractor": extractor, "domain": domain}}))
    plan = plan_dataset(catalog.dataset(key), force=True, workers=workers)
    return Result(root / "out", key, extract_and_publish(plan), plan)


def ordered(value):
    """Dicts as (key, value) lists, so comparisons check key order too (ADDENDUM 2.1)."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


@pytest.fixture
def instance(tmp_path):
    """A throwaway Dagster instance under tmp_path (imported here so plain-pipeline tests stay fast)."""
    from dagster import instance_for_test

    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    return Corpus(tmp_path)


def load_compare_outputs():
    tool = SHARED / "tools" / "compare_outputs.py"
    if not tool.exists():
        pytest.skip(f"{tool} not found: the shared corpora are not beside this checkout")
    spec = importlib.util.spec_from_file_location("compare_outputs", tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def corpora_config(tmp_path: Path) -> Path:
    """A copy of shared/corpora/extract.yaml reading the shared raw/ and writing into tmp_path/out."""
    if not CORPORA.exists():
        pytest.skip(f"{CORPORA} not found: the shared corpora are not beside this checkout")
    doc = yaml.safe_load((CORPORA / "extract.yaml").read_text())
    raw = tmp_path / "raw"
    shutil.copytree(CORPORA / "raw", raw)  # archives unpack in place, so never point at the read-only original
    doc["input_dir"] = str(raw)
    doc["output_dir"] = str(tmp_path / "out")
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def dagster_env(config: Path, dagster_home: Path | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env["SLM4IE_EXTRACT_CONFIG"] = str(config)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    if dagster_home is not None:
        env["DAGSTER_HOME"] = str(dagster_home)
        (dagster_home / "dagster.yaml").touch()
    env.update(extra)
    return env


def run_dagster(args: list, env: dict, cwd: Path = REPO, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real `dagster` CLI of this venv, as a user types it."""
    return subprocess.run([str(VENV_BIN / "dagster"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
