"""Shard and range keys come from the raw tree and extract.yaml alone (docs/splitting.md, "The
setting"): never from the core count, the CPU affinity or the workers of the process that plans
them. They are Dagster partitions and Slurm slices: a sensor on one host, a run on another and a
`--slice` on a third must plan the same ones. And an output planned with other keys is re-planned
cleanly: the same published bytes, the old parts retired."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset, plan_dataset
from slm4ie_assets.planning.shards import AUTO_RANGE
from slm4ie_assets.store.dataset_store import DatasetStore

REPO = Path(__file__).resolve().parents[2]
BIG = 300_000_000

# One planner process playing a host: with a core count given, os.cpu_count and the affinity are
# those of such a host, set before the package is imported (what a 16-core node would report).
_HOST = r"""
import json, os, sys
cores = int(sys.argv[2])
if cores:
    os.cpu_count = lambda: cores
    os.sched_getaffinity = lambda pid: set(range(cores))
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import plan_dataset
from slm4ie_assets.engine.pool_server import effective_workers
from slm4ie_assets.planning.shards import list_shards
catalog = load_catalog(sys.argv[1])
workers = effective_workers(None, catalog.max_workers)
keys = {}
for key, spec in sorted(catalog.datasets.items()):
    plan = plan_dataset(spec, workers=workers, group_threshold=catalog.shard_group_threshold)
    listed = list_shards(spec, catalog.shard_group_threshold)  # what the sensors and the UI plan
    assert [(s.key, s.fingerprint) for s in listed] == [(s.key, s.fingerprint) for s in plan.shards]
    keys[key] = [[s.key, s.fingerprint] for s in plan.shards]
print(json.dumps({"workers": workers, "keys": keys}))
"""


def _plan_as_host(config: Path, cores: int = 0, pin: str | None = None) -> dict:
    """The keys one planner process plans; `cores`: the host it plays; `pin`: `taskset -c` cores."""
    argv = [sys.executable, "-c", _HOST, str(config), str(cores)]
    if pin is not None:
        argv = ["taskset", "-c", pin, *argv]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _write_big_text(path: Path, size: int) -> None:
    """`size` bytes and more of short blocks, written in 1 MiB chunks (planning reads only windows)."""
    block = "ena dva tri štiri pet\nšest sedem\n\n".encode()
    chunk = block * ((1 << 20) // len(block))
    with open(path, "wb") as fh:
        for _ in range(-(-size // len(chunk))):
            fh.write(chunk)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or shutil.which("taskset") is None,
                    reason="needs CPU affinity and taskset")
def test_one_catalog_plans_the_same_keys_as_a_1_2_and_16_core_host_and_a_300_MB_file_splits(tmp_path):
    raw = tmp_path / "raw" / "t"
    (raw / "sub").mkdir(parents=True)
    big = raw / "big.txt"
    for name in ("a.txt", "sub/b.txt", "z.txt"):
        (raw / name).write_text("kratko besedilo\n\ndrugi dokument\n", encoding="utf-8")
    configs = {}
    for max_workers in (0, 16):
        configs[max_workers] = config = tmp_path / f"extract-{max_workers}.yaml"
        config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\nmax_workers: {max_workers}\n"
                          "datasets:\n  t: {extractor: text, domain: web}\n", encoding="utf-8")
    try:
        _write_big_text(big, BIG)
        size = big.stat().st_size
        both = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        hosts = {
            "pinned to one core (taskset)": _plan_as_host(configs[0], pin="0"),
            "every core of this machine": _plan_as_host(configs[0], pin=both),
            "a 16-core host": _plan_as_host(configs[0], cores=16),
            "a 1-core host": _plan_as_host(configs[0], cores=1),
            "a 1-core host, max_workers 16": _plan_as_host(configs[16], cores=1),
        }
    finally:
        big.unlink(missing_ok=True)
    workers = {host: seen["workers"] for host, seen in hosts.items()}
    assert workers == {"pinned to one core (taskset)": 1, "every core of this machine": len(os.sched_getaffinity(0)),
                       "a 16-core host": 16, "a 1-core host": 1, "a 1-core host, max_workers 16": 16}  # hosts apart
    keys = {host: seen["keys"] for host, seen in hosts.items()}
    first = keys["pinned to one core (taskset)"]
    assert all(k == first for k in keys.values()), keys
    ranges = [k for k, _ in first["t"] if k.startswith("big.txt%r")]
    assert ranges == [f"big.txt%r{i}" for i in range(-(-size // AUTO_RANGE))]  # 8 MiB each: 36 ranges
    assert len(ranges) > 1
    assert [k for k, _ in first["t"] if "%r" not in k] == ["a.txt", "sub/b.txt", "z.txt"]


def _published(out: Path) -> tuple[bytes, bytes | None, dict]:
    manifest = json.loads((out / ".slm4ie" / "t" / "current" / "manifest.json").read_bytes())
    manifest.pop("published_at")
    manifest.pop("shards")
    sidecar = out / "t.annotations.jsonl.gz"
    return (out / "t.jsonl").read_bytes(), sidecar.read_bytes() if sidecar.exists() else None, manifest


def _catalog(tmp_path: Path, split: str):
    config = tmp_path / "extract.yaml"
    config.write_text(f"input_dir: raw\noutput_dir: out\n{split}datasets:\n  t: {{extractor: text, domain: web}}\n",
                      encoding="utf-8")
    return load_catalog(config)


def test_an_output_planned_with_other_keys_is_replanned_to_the_same_bytes_and_its_old_parts_retired(tmp_path):
    """Ranges of an older plan (a pinned split_bytes, or the core-based sizes before), then other
    ranges whose keys overlap theirs with other cuts, then the automatic size (this file: whole)."""
    raw = tmp_path / "raw" / "t"
    raw.mkdir(parents=True)
    (raw / "a.txt").write_text("prvi\n\n", encoding="utf-8")
    (raw / "big.txt").write_bytes(b"".join(b"blok %06d ima nekaj besed\nin vrstico\n\n" % i for i in range(30_000)))
    out = tmp_path / "out"
    seen = []
    for split, ranges in (("split_bytes: 200000\n", 6), ("split_bytes: 300000\n", 4), ("", 0)):
        catalog = _catalog(tmp_path, split)
        spec = catalog.dataset("t")
        report = extract_dataset(spec, catalog, workers=1)
        planned = plan_dataset(spec).shards
        assert not report.skipped and report.extracted == [s.key for s in planned if s.key != "a.txt" or not seen]
        assert [s.key for s in planned] == ["a.txt"] + ([f"big.txt%r{i}" for i in range(ranges)] or ["big.txt"])
        store = DatasetStore(spec)
        assert all(store.part_is_current(s) for s in planned)
        parts = {p.name.split(".", 1)[0] for p in store.parts.iterdir()}
        assert parts == {store.part_id(s.key) for s in planned}  # no part of the older plans is left
        assert not store.staging.is_dir() or not any(store.staging.iterdir())
        seen.append(_published(out))
    assert seen[0] == seen[1] == seen[2]
    again = extract_dataset(spec, catalog, workers=1)
    assert again.skipped and again.extracted == [] and _published(out) == seen[0]


def test_an_output_planned_at_the_old_default_is_replanned_to_the_new_default_with_the_same_bytes(tmp_path):
    """Issue 41 made the automatic range 8 MiB (was 32 MiB): a file between the two, published whole
    by every run before (the old default, pinned here as split_bytes), is re-planned on its next run
    into ranges of the new default, extracted by two workers; its whole part is retired and the
    published bytes stay the same. (Ranges re-cut into other ranges: the test above.)"""
    raw = tmp_path / "raw" / "t"
    raw.mkdir(parents=True)
    _write_big_text(raw / "big.txt", 17 << 20)  # under 32 MiB, over 2 x 8 MiB
    out, seen = tmp_path / "out", []
    for split, workers in (("split_bytes: 33554432\n", 1), ("", 2)):
        catalog = _catalog(tmp_path, split)
        spec = catalog.dataset("t")
        report = extract_dataset(spec, catalog, workers=workers)
        planned = [s.key for s in plan_dataset(spec).shards]
        store = DatasetStore(spec)
        assert not report.skipped and sorted(report.extracted) == sorted(planned)
        assert {p.name.split(".", 1)[0] for p in store.parts.iterdir()} == {store.part_id(k) for k in planned}
        seen.append((planned, _published(out)))
    assert [planned for planned, _ in seen] == [["big.txt"], [f"big.txt%r{i}" for i in range(3)]]
    assert seen[0][1] == seen[1][1]
