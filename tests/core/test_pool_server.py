"""The pool's forkserver started early (engine/pool_server.py, docs/splitting.md "Fixed costs"): the pool
then forks from that same server, and the server's preload stays free of what workers never use."""

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slm4ie_assets.engine.pool_server import PRELOAD, effective_workers, start_early

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
HAS_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()


def test_one_worker_starts_no_server():
    assert start_early(1) is False
    assert start_early(0) is False


def _usable() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def test_effective_workers():
    assert effective_workers(None, 3) == 3
    assert effective_workers(2, 3) == 2
    assert effective_workers(0, 3) == _usable()
    assert effective_workers(None, -1) == _usable()


_PINNED = """
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.pool_server import effective_workers
cat = load_catalog(sys.argv[1])
print(effective_workers(None, cat.max_workers))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_all_cores_means_the_cores_this_process_may_use(tmp_path):
    """`max_workers: 0` on a node that gives the job fewer cores than the machine has (taskset,
    a batch system's cpuset): one worker per core it may use, not one per core of the machine. (The
    range keys never depend on either: tests/core/test_plan_keys.py.)"""
    (tmp_path / "raw" / "t").mkdir(parents=True)
    config = tmp_path / "extract.yaml"
    config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\nmax_workers: 0\n"
                      "datasets:\n  t: {extractor: text, domain: test}\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", _PINNED, str(config)], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1"], f"workers: {out}"


_CHILD = """
import os, sys
from multiprocessing import forkserver
from slm4ie_assets.engine.pool_server import start_early
assert start_early(2)
early = forkserver._forkserver._forkserver_pid
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
report = extract_dataset(cat.dataset("t"), cat, force=True, workers=2)
assert forkserver._forkserver._forkserver_pid == early, "the pool started a second server"
print(report.shards, sorted(report.stage_seconds))
"""


@pytest.mark.skipif(not HAS_FORKSERVER, reason="no forkserver on this platform")
def test_a_pool_forks_from_the_server_started_early(tmp_path):
    raw = tmp_path / "raw" / "t"
    raw.mkdir(parents=True)
    (raw / "a.txt").write_text("".join(f"block {i}\nline two\n\n" for i in range(3000)))
    config = tmp_path / "extract.yaml"
    config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\n"
                      "datasets:\n  t:\n    extractor: text\n    domain: web\n    split_bytes: 8192\n")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(config)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    shards = int(out.stdout.split()[0])
    assert shards > 2  # split, so the run really pooled
    blocks = (tmp_path / "out" / "t.jsonl").read_text().splitlines()
    assert len(blocks) == 3000


def test_the_preload_imports_no_yaml_or_cron_parser():
    """Workers unpickle specs but never read extract.yaml: the server's imports stay lean."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in PRELOAD)
            + "print(sorted(m for m in ('yaml', 'croniter', 'dateutil', 'dagster') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(not HAS_FORKSERVER, reason="no forkserver on this platform")
def test_start_early_is_idempotent_in_a_process():
    code = ("from multiprocessing import forkserver\nfrom slm4ie_assets.engine.pool_server import start_early\n"
            "start_early(2); a = forkserver._forkserver._forkserver_pid\n"
            "start_early(4); b = forkserver._forkserver._forkserver_pid\n"
            "assert a is not None and a == b, (a, b)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("spare_core", [True, False])
def test_a_pool_that_fills_the_machine_writes_text_without_a_helper_thread(tmp_path, monkeypatch, spare_core):
    """worker_pool.worker_start: a pool's workers keep the text writer's thread only while the pool
    leaves a core spare; `pool_worker.serve` makes that the worker's context."""
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.engine import worker_pool
    from slm4ie_assets.engine.pool_worker import PartWork
    from slm4ie_assets.engine.worker_context import WorkerContext

    config = tmp_path / "extract.yaml"
    (tmp_path / "raw" / "t").mkdir(parents=True)
    config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\n"
                      "datasets:\n  t:\n    extractor: text\n    domain: web\n")
    spec = load_catalog(config).dataset("t")
    monkeypatch.setattr(worker_pool, "usable_cpus", lambda: 8 if spare_core else 2)
    start = worker_pool.worker_start(PartWork(spec), 2, None, 1.0)
    assert start.text_writer_thread is spare_core and start.work == PartWork(spec)
    context = WorkerContext.in_pool(start.text_writer_thread, start.counters, start.sampling_period)
    assert context.text_writer_thread is spare_core and context.reporter is None


def test_a_worker_context_keeps_one_extractor_per_dataset(tmp_path):
    """worker_context.WorkerContext.extractor: a worker's next task of the same dataset reuses the
    prepared extractor; a task of another dataset gets its own, and the first is not kept."""
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.engine.worker_context import WorkerContext

    config = tmp_path / "extract.yaml"
    for name in ("a", "b"):
        (tmp_path / "raw" / name).mkdir(parents=True)
    config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\ndatasets:\n"
                      "  a:\n    extractor: text\n    domain: web\n  b:\n    extractor: text\n    domain: web\n")
    catalog = load_catalog(config)
    context = WorkerContext.in_process(None, 1.0)
    first = context.extractor(catalog.dataset("a"))
    assert context.extractor(catalog.dataset("a")) is first
    other = context.extractor(catalog.dataset("b"))
    assert other is not first and context.extractor(catalog.dataset("b")) is other
    assert context.extractor(catalog.dataset("a")) is not first
    with context.track(0, None) as hook:  # no counters: nobody follows the shard (none needed)
        assert hook is None
    assert context.text_writer_thread is True


def test_shard_counters_read_back_what_a_task_wrote_and_bytes_read_never_go_back():
    from slm4ie_assets.engine.progress import ShardCounters

    for shared in (True, False):
        counters = ShardCounters.for_tasks(3, shared=shared)
        counters.set_docs(1, 5)
        counters.raise_bytes_read(1, 100)
        counters.raise_bytes_read(1, 40)  # an earlier offset sampled late: kept at the furthest
        assert counters.numbers(1) == (5, 100) and counters.numbers(0) == counters.numbers(2) == (0, 0)
        assert (counters.docs(1), counters.bytes_read(1)) == (5, 100)
