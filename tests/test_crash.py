"""Crash safety: SIGKILL a materializing process at many moments (README "Guarantees" 1; D17).

After every kill the published pair is either the complete previous version or the complete new one,
the manifest agrees with the files, and the next run completes and removes every leftover.
"""

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.store import DatasetStore

from conftest import write_config, write_files

RUNNER = """
import sys
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
extract_dataset(cat.dataset("k"), cat, force=True, workers=int(sys.argv[2]))
"""


def corpus_files(version: str, n_files: int = 6, docs: int = 1500) -> dict:
    files = {}
    for f in range(n_files):
        lines = []
        for d in range(docs):
            rec = {"doc_id": f"{version}-{f}-{d}", "text": f"Besedilo {version} {f} {d} " * 8}
            if d % 3 == 0:
                rec["paragraphs"] = [{"sentences": [{"tokens": [{"form": w, "lemma": w.lower()} for w in rec["text"].split()]}]}]
            lines.append(json.dumps(rec, ensure_ascii=False))
        files[f"part{f}.jsonl"] = "\n".join(lines) + "\n"
    return files


def snapshot(spec) -> tuple:
    text = spec.text_path.read_bytes() if spec.text_path.exists() else None
    side = gzip.decompress(spec.sidecar_path.read_bytes()) if spec.sidecar_path.exists() else None
    return text, side


def build(tmp_path: Path, version: str):
    root = tmp_path / version
    write_files(root / "raw" / "k", corpus_files(version))
    cfg = write_config(root, {"k": {"extractor": "jsonl", "domain": "web"}})
    cat = load_catalog(cfg)
    extract_dataset(cat.dataset("k"), cat, workers=1)
    return snapshot(cat.dataset("k"))


def assert_no_leftovers(spec) -> None:
    store = DatasetStore(spec)
    names = [p.name for p in spec.output_dir.rglob("*")]
    assert not [n for n in names if n.endswith(".partial")], names
    committed = {p.name.split(".")[0] for p in store.parts.glob("*.meta.json")}
    assert all(p.name.split(".")[0] in committed for p in store.parts.iterdir())
    assert len(list(store.versions.iterdir())) == 1


def kill_at(cfg: Path, delay: float, workers: int) -> int:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(cfg), str(workers)], start_new_session=True)
    try:
        proc.wait(timeout=delay)
        return proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: pool workers die too
        proc.wait()
        return -9


def run_kills(tmp_path: Path, points: int, seed: int) -> None:
    old = build(tmp_path, "old")
    new = build(tmp_path, "new")
    root = tmp_path / "live"
    write_files(root / "raw" / "k", corpus_files("old"))
    cfg = write_config(root, {"k": {"extractor": "jsonl", "domain": "web"}})
    cat = load_catalog(cfg)
    spec = cat.dataset("k")
    extract_dataset(spec, cat, workers=1)
    assert snapshot(spec) == old
    write_files(root / "raw" / "k", corpus_files("new"))
    t0 = time.monotonic()
    assert kill_at(cfg, 120, 1) == 0
    full = time.monotonic() - t0
    rng = random.Random(seed)
    seen = {"old": 0, "new": 0}
    for i in range(points):
        # alternate which version is published before the kill, so both directions are exercised
        base_files = corpus_files("old" if i % 2 else "new")
        write_files(root / "raw" / "k", base_files)
        extract_dataset(spec, cat, force=True, workers=1)
        expected_before = old if i % 2 else new
        expected_after = new if i % 2 else old
        assert snapshot(spec) == expected_before
        write_files(root / "raw" / "k", corpus_files("new" if i % 2 else "old"))
        delay = rng.uniform(0.05, full * 1.1)
        kill_at(cfg, delay, 1 + (i % 3 == 0))
        state = snapshot(spec)
        assert state in (expected_before, expected_after), f"kill {i} at {delay:.2f}s left a mixed or partial pair"
        seen["new" if state == new else "old"] += 1
        manifest = DatasetStore(spec).published_manifest()
        assert manifest.docs == state[0].count(b"\n") == state[1].count(b"\n")
        extract_dataset(spec, cat, workers=1)
        assert snapshot(spec) == expected_after
        assert_no_leftovers(spec)
    assert seen["old"] and seen["new"], seen


def test_sigkill_at_random_moments_never_exposes_a_partial_pair(tmp_path):
    run_kills(tmp_path, points=16, seed=20261129)


@pytest.mark.long
def test_sigkill_many_points(tmp_path):
    run_kills(tmp_path, points=200, seed=4242)
