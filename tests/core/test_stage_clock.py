"""The stage clock (engine/stage_clock.py): a run says where its time went, serial stages in wall
seconds, pooled ones in worker-seconds, so that bench/scaling.py can show the critical path."""

import time

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.stage_clock import STAGES, StageClock, Timed
from slm4ie_assets.pipeline import extract_dataset
from support.files import write_config, write_files


def _text(blocks: int) -> bytes:
    return "".join(f"odstavek {i} z nekaj besedami\ndruga vrstica\n\n" for i in range(blocks)).encode()


def test_a_split_run_on_two_workers_times_every_stage(tmp_path):
    write_files(tmp_path / "raw" / "d", {"a.txt": _text(20_000)})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "text", "domain": "t", "split_bytes": 100_000}}))
    report = extract_dataset(catalog.dataset("d"), catalog, force=True, workers=2)
    stages = report.stage_seconds
    assert set(stages) == set(STAGES)
    assert report.shards > 2
    # two chains: the first half of the ranges counted, every range extracted, in the pool
    assert stages["count"] > 0 and stages["extract"] > 0 and stages["pool_start"] > 0
    assert stages["plan"] > 0 and stages["publish"] > 0 and stages["stage"] > 0
    assert stages["pool_start"] < report.seconds
    assert report.stage_cpu["count"] > 0 and report.stage_cpu["extract"] > 0  # the workers' own CPU seconds


def test_one_worker_unsplit_has_no_pool_and_no_count(tmp_path):
    write_files(tmp_path / "raw" / "d", {"a.txt": _text(2_000), "b.txt": _text(10)})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "text", "domain": "t", "split_bytes": 0}}))
    stages = extract_dataset(catalog.dataset("d"), catalog, force=True, workers=1).stage_seconds
    assert stages["extract"] > 0 and stages["count"] == 0 and stages["pool_start"] == 0


def test_pool_start_ends_when_the_first_task_starts_whichever_reports_first():
    clock = StageClock()
    opened = time.time()
    clock.pool_opened()
    clock.task_done("extract", Timed(None, opened + 0.5, 2.0))  # reported first, started second
    clock.task_done("count", Timed(None, opened + 0.2, 1.0))
    clock.task_done("extract", Timed(None, opened + 0.9, 1.0))
    assert abs(clock.seconds["pool_start"] - 0.2) < 0.05
    assert clock.seconds["extract"] == 3.0 and clock.seconds["count"] == 1.0
