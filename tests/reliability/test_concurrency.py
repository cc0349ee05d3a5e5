"""Concurrency (docs/guarantees.md 2): two runs on the same dataset never corrupt each other; different
datasets run side by side freely.

The per-dataset `flock` (store/locks.py) is taken around archive unpacking (the asset body) and around
part writing and publishing (`extract_and_publish`, `extract_shard_batch`). To make the races
deterministic, a test takes the same lock itself, starts real `dagster asset materialize` CLI
processes, waits until each has logged that it is waiting for the lock, checks that nothing was
written meanwhile, and then lets them go at the same instant.
"""

import gzip
import json
import os
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset, lock_path, unpack
from slm4ie_assets.planning.shards import list_shards
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.locks import dataset_lock
from support.crash import Cli, TwoVersionProject, assert_consistent, assert_no_leftovers, instance_home, snapshot
from support.files import write_config

WAITING = "another run holds the dataset lock"

pytestmark = pytest.mark.slow


def tree_state(*roots: Path) -> dict:
    """Every file and link under the roots with its size and mtime (folders left out)."""
    state = {}
    for root in roots:
        for dirpath, _, filenames in os.walk(root):
            for name in filenames:
                p = Path(dirpath) / name
                if p.name == "lock":
                    continue  # the lock file holds the holder's pid: rewritten by design
                st = p.lstat()
                state[str(p)] = (st.st_size, st.st_mtime_ns)
    return state


def wait_for(predicate, timeout: float, what: str, runs=()) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for run in runs:
            if run.proc.poll() is not None:
                raise AssertionError(f"a run ended while waiting for {what}:\n{run.log[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def materializations(home: Path, key: str) -> list[dict]:
    from dagster import AssetKey, DagsterInstance

    instance = DagsterInstance.from_config(str(home))
    try:
        records = instance.fetch_materializations(AssetKey(["extracted", key]), limit=20).records
        return [{k: v.value for k, v in r.asset_materialization.metadata.items()} for r in records]
    finally:
        instance.dispose()


def part_windows(spec) -> tuple[float, float]:
    """When the dataset's parts were written: (first start, last end), from each committed part's
    meta file (written last) and the seconds it records."""
    spans = []
    for meta_path in DatasetStore(spec).parts.glob("*.meta.json"):
        meta = json.loads(meta_path.read_bytes())
        end = meta_path.stat().st_mtime
        spans.append((end - meta["seconds"], end))
    return min(s for s, _ in spans), max(e for _, e in spans)


@pytest.mark.parametrize("force", [False, True], ids=["skip", "force"])
def test_two_cli_runs_on_one_dataset_never_interleave_and_equal_a_serial_run(tmp_path, force):
    """Both runs wait for the lock (and write nothing while it is held); released together, one
    extracts and publishes, the other then either skips (nothing left to do) or, forced, publishes
    again. Both succeed; the published pair equals a serial run's; no leftovers."""
    project = TwoVersionProject(tmp_path, docs=1500, datasets={"c_jsonl": "jsonl"})
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    project.write("new")
    home = instance_home(tmp_path / "home")
    with dataset_lock(lock_path(spec), spec.key):
        runs = [Cli(project.config, home, ["c_jsonl"], force=force, workers=1) for _ in range(2)]
        before = tree_state(spec.raw_dir, spec.output_dir)
        wait_for(lambda: all(WAITING in r.log for r in runs), 600, "both runs to wait for the lock", runs)
        assert tree_state(spec.raw_dir, spec.output_dir) == before, "a run wrote without holding the lock"
    for run in runs:
        assert run.wait() == 0, run.log[-4000:]
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_consistent(spec, {"new": project.expected["new"]["c_jsonl"]}, "after both runs")
    assert_no_leftovers(spec)
    skipped = [m["skipped"] for m in materializations(home, "c_jsonl")]
    assert sorted(skipped) == ([False, False] if force else [False, True]), skipped


def test_a_shard_partition_run_beside_a_dataset_run(tmp_path):
    """`shards/<key>` (one partition) and `extracted/<key>` at once: they take turns on the lock,
    every part stays whole, and the published pair equals a serial run's."""
    from dagster import DagsterInstance

    from slm4ie_assets.dagster_layer.assets import partitions_name

    project = TwoVersionProject(tmp_path, docs=1500, datasets={"c_jsonl": "jsonl"})
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    project.write("new")
    unpack(spec, project.catalog)  # so the partition list below is the new version's
    home = instance_home(tmp_path / "home")
    shard_keys = [s.key for s in list_shards(spec)]
    instance = DagsterInstance.from_config(str(home))
    instance.add_dynamic_partitions(partitions_name("c_jsonl"), shard_keys)
    instance.dispose()
    partition = "f3.jsonl"
    assert partition in shard_keys
    with dataset_lock(lock_path(spec), spec.key):
        shard_run = ShardCli(project.config, home, "c_jsonl", partition)
        dataset_run = Cli(project.config, home, ["c_jsonl"], workers=1)
        before = tree_state(spec.raw_dir, spec.output_dir)
        wait_for(lambda: WAITING in shard_run.log and WAITING in dataset_run.log, 600, "both runs to wait",
                 [shard_run, dataset_run])
        assert tree_state(spec.raw_dir, spec.output_dir) == before
    assert shard_run.wait() == 0, shard_run.log[-4000:]
    assert dataset_run.wait() == 0, dataset_run.log[-4000:]
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec)


class ShardCli(Cli):
    """`dagster asset materialize --select shards/<key> --partition <shard>`."""

    def __init__(self, config: Path, home: Path, key: str, partition: str):
        import subprocess

        from support.dagster_cli import dagster_env
        from support.paths import REPO, VENV_BIN

        args = [str(VENV_BIN / "dagster"), "asset", "materialize", "--select", f"shards/{key}",
                "--partition", partition,
                "--config-json", json.dumps({"resources": {"extract": {"config": {"max_workers": 1}}}})]
        self.proc = subprocess.Popen(args, cwd=REPO, env=dagster_env(config, home), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


def test_different_datasets_run_in_parallel_not_serialized_by_the_lock(tmp_path):
    """Two datasets, two CLI processes, released at the same instant: both finish, neither ever
    waits for the other, and their part writing overlaps in time."""
    project = TwoVersionProject(tmp_path, docs=4000, datasets={"c_jsonl": "jsonl", "c_conllu": "conllu"})
    specs = [project.spec(k) for k in ("c_jsonl", "c_conllu")]
    project.write("new")
    home = instance_home(tmp_path / "home")
    with ExitStack() as held:
        for spec in specs:
            held.enter_context(dataset_lock(lock_path(spec), spec.key))
        runs = [Cli(project.config, home, [spec.key], workers=1) for spec in specs]
        wait_for(lambda: all(WAITING in r.log for r in runs), 600, "both runs to reach their lock", runs)
        waits_before = [r.log.count(WAITING) for r in runs]
    for run in runs:
        assert run.wait() == 0, run.log[-4000:]
    assert [r.log.count(WAITING) for r in runs] == waits_before == [1, 1]  # never waited for each other
    (a_start, a_end), (b_start, b_end) = (part_windows(s) for s in specs)
    overlap = min(a_end, b_end) - max(a_start, b_start)
    assert overlap > 0, f"part writing did not overlap: {a_start:.2f}-{a_end:.2f} vs {b_start:.2f}-{b_end:.2f}"
    for spec in specs:
        assert snapshot(spec) == project.expected["new"][spec.key]
        assert_no_leftovers(spec)


def test_one_datasets_lock_never_blocks_another_dataset(tmp_path):
    """Plain Python: with dataset a's lock held elsewhere, dataset b extracts and publishes at once."""
    project = TwoVersionProject(tmp_path, docs=50, datasets={"c_text": "text", "c_tei": "tei"})
    project.write("new")
    a, b = project.spec("c_text"), project.spec("c_tei")
    with dataset_lock(lock_path(a), a.key):
        started = time.monotonic()
        extract_dataset(b, project.catalog, workers=1)
        assert time.monotonic() - started < 60
    assert snapshot(b) == project.expected["new"]["c_tei"]
    assert not a.text_path.exists()


def test_readers_resolving_current_once_never_see_a_mixed_pair(tmp_path):
    """While one process republishes over and over (annotated and plain versions alternating, so
    the sidecar appears and disappears), a reader that resolves `.slm4ie/<key>/current` once and
    opens both files through it always reads a complete, aligned pair (or retries when the version
    it resolved was just retired)."""
    raw = tmp_path / "raw" / "k"
    raw.mkdir(parents=True)
    cfg = write_config(tmp_path, {"k": {"extractor": "jsonl", "domain": "test"}})
    cat = load_catalog(cfg)
    spec = cat.dataset("k")
    versions = []
    for n, annotated in ((300, True), (500, False), (200, True)):
        lines = []
        for i in range(n):
            rec = {"doc_id": f"{n}-{i}", "text": f"beseda {i}"}
            if annotated:
                rec["paragraphs"] = [{"sentences": [{"tokens": [{"form": "beseda"}, {"form": str(i)}]}]}]
            lines.append(json.dumps(rec))
        versions.append(("\n".join(lines) + "\n").encode())
    (raw / "a.jsonl").write_bytes(versions[0])
    extract_dataset(spec, cat, workers=1)
    store = DatasetStore(spec)
    stop = threading.Event()
    seen = {"pairs": 0, "retries": 0}
    failures = []

    def reader():
        while not stop.is_set():
            try:
                version = store.current.resolve(strict=True)
                with open(version / spec.text_path.name, "rb") as fh:
                    text = fh.read()
                manifest = json.loads((version / "manifest.json").read_bytes())
                side = None
                if manifest["has_sidecar"]:
                    with open(version / spec.sidecar_path.name, "rb") as fh:
                        side = gzip.decompress(fh.read())
            except FileNotFoundError:
                seen["retries"] += 1  # the version was retired between resolving and opening: read again
                continue
            uids = [json.loads(line)["uid"] for line in text.splitlines()]
            if len(uids) != manifest["docs"] or (side is not None and
                                                 [json.loads(x)["uid"] for x in side.splitlines()] != uids):
                failures.append((len(uids), manifest["docs"]))
            seen["pairs"] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(12):
            (raw / "a.jsonl").write_bytes(versions[(i + 1) % 3])
            extract_dataset(spec, cat, workers=1)
    finally:
        stop.set()
        thread.join()
    assert not failures, failures[:3]
    assert seen["pairs"] > 12, seen
