"""The shared corpora beside this checkout and their comparison tool (skipped where they are absent)."""

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml

from support.paths import CORPORA, SHARED


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
