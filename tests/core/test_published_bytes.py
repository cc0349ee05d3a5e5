"""The sha256 of every published file of two fixed inputs, held to committed values
(tests/core/published_hashes.json): the bundled sample corpus (examples/) and the bench generator's
small deterministic corpus (bench.generate, one dataset per format and TEI route).

A dependency upgrade in uv.lock that changes one output byte fails here, so whoever upgrades
decides knowingly (README, "Installing: the lock"). After a deliberate change, rewrite the values
with `SLM4IE_UPDATE_HASHES=1 .venv/bin/python -m pytest tests/core/test_published_bytes.py` and
say in the commit message why the bytes moved.
"""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from support.paths import REPO

EXPECTED = Path(__file__).with_name("published_hashes.json")
VOLATILE = ("published_at",)  # the wall-clock time of the publish; shard fingerprints (mtimes) are left out too


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def published_hashes(output_dir: Path, key: str) -> dict[str, str]:
    found = {}
    for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
        if (output_dir / name).exists():
            found[name] = sha256((output_dir / name).read_bytes())
    manifest = json.loads((output_dir / ".slm4ie" / key / "current" / "manifest.json").read_bytes())
    for field in VOLATILE:
        manifest.pop(field)
    manifest["shards"] = [name for name, _fingerprint in manifest["shards"]]
    found[f"{key}/manifest.json"] = sha256(json.dumps(manifest, sort_keys=True).encode())
    return found


def extract_all(config: Path) -> dict[str, str]:
    catalog = load_catalog(config)
    hashes: dict[str, str] = {}
    for spec in catalog.datasets.values():
        extract_dataset(spec, catalog, force=True, workers=1)
        hashes.update(published_hashes(spec.output_dir, spec.key))
    return hashes


def examples_config(tmp_path: Path) -> Path:
    """examples/extract.yaml over a copy of its raw folder (archives unpack in place)."""
    shutil.copytree(REPO / "examples" / "data" / "raw", tmp_path / "raw",
                    ignore=shutil.ignore_patterns("2023.txt"))  # left behind by an earlier unpack
    doc = yaml.safe_load((REPO / "examples" / "extract.yaml").read_text())
    doc.update(input_dir=str(tmp_path / "raw"), output_dir=str(tmp_path / "out"))
    path = tmp_path / "extract.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def bench_config(tmp_path: Path) -> Path:
    import sys

    sys.path.insert(0, str(REPO))
    from bench.generate import generate

    return generate(tmp_path / "bench", scale=0.005, files=2)


@pytest.mark.parametrize("corpus", ["examples", "bench"])
def test_published_bytes_equal_the_committed_hashes(tmp_path, corpus):
    config = examples_config(tmp_path) if corpus == "examples" else bench_config(tmp_path)
    hashes = extract_all(config)
    committed = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    if os.environ.get("SLM4IE_UPDATE_HASHES") == "1":
        committed[corpus] = hashes
        EXPECTED.write_text(json.dumps(committed, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"{EXPECTED.name}: rewrote the {len(hashes)} values of {corpus!r}")
    assert corpus in committed, f"no committed hashes for {corpus!r}: see this module's docstring"
    changed = {name: (committed[corpus].get(name), digest) for name, digest in hashes.items()
               if committed[corpus].get(name) != digest}
    missing = sorted(set(committed[corpus]) - set(hashes))
    assert not changed and not missing, (
        f"published bytes of {corpus!r} changed (name: (committed, now)): {changed}; no longer published: "
        f"{missing}. If an upgrade or a change meant this, rewrite them (this module's docstring).")
