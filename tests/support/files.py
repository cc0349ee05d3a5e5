"""Writing catalogs and raw trees, reading published outputs."""

import gzip
import json
from pathlib import Path

import yaml


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


def ordered(value):
    """Dicts as (key, value) lists, so comparisons check key order too (ADDENDUM 2.1)."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value
