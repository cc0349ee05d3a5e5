"""End to end under the real `dagster-daemon` (docs/architecture.md "The asset graph", DAGSTER_NOTES 2 and 10): with
the sensors on, a file dropped into raw/<key>/ is registered, extracted alone and published by ONE run
of extracted/<key>, which records the shard's partition as materialized; untouched shards are not
re-extracted and the output equals a fresh extraction."""

import subprocess
import time
from pathlib import Path

import pytest
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.scheduler.instigation import InstigatorType

from slm4ie_assets.dagster_layer.assets import partitions_name
from slm4ie_assets.store.dataset_store import DatasetStore
from support.dagster_cli import dagster_env
from support.dagster_project import DagsterProject, part_meta_mtimes
from support.files import write_files
from support.paths import VENV_BIN
from support.processes import stop_group

DAGSTER_YAML = """\
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
concurrency:
  pools:
    granularity: run
    default_limit: 1
telemetry:
  enabled: false
"""
DEADLINE = 85  # seconds for the whole daemon part


def _wait(what: str, predicate, deadline: float, log: Path, poll: float = 0.5):
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    pytest.fail(f"timed out waiting for {what}; daemon log tail:\n{tail}")


def _idle(instance) -> bool:
    """No run of the instance is queued, starting or started."""
    return not instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]))


@pytest.mark.slow
def test_daemon_sensor_extracts_a_dropped_file_and_republishes(tmp_path, request):
    write_files(tmp_path / "raw" / "kas", {f"d{i}.txt": f"dokument {i}\n\nše {i}\n" for i in range(4)})
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "academic", "watch_interval": 5}},
                      max_workers=1)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = dagster_env(project.config)
    env["DAGSTER_HOME"] = str(home)

    # the dataset is already published in this instance (as after `dagster asset materialize`)
    instance = DagsterInstance.from_config(str(home))
    request.addfinalizer(instance.dispose)
    project.publish(instance, "kas")
    spec = project.spec("kas")
    metas_before = part_meta_mtimes(spec)
    runs_before = len(instance.get_run_records())

    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen([str(VENV_BIN / "dagster-daemon"), "run", "-m", "slm4ie_assets.definitions"],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE

        def both_sensors_ticked():
            states = instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
            ticked = {s.name for s in states if s.instigator_data and s.instigator_data.last_tick_timestamp}
            return {"raw_kas_sensor", "slm4ie_republish_sensor"} <= ticked

        _wait("the first ticks of both sensors", both_sensors_ticked, deadline, log)
        assert len(instance.get_run_records()) == runs_before  # nothing changed: nothing requested

        write_files(project.raw("kas"), {"d2b.txt": "nov dokument\n\nin še eden\n"})
        store = DatasetStore(spec)

        def republished():
            m = store.published_manifest()
            return m is not None and "d2b.txt" in [k for k, _ in m.shards]

        _wait("the republish with the new file", republished, deadline, log)
        _wait("the publish run to finish", lambda: _idle(instance), deadline, log)
    finally:
        stop_group(daemon)

    assert instance.get_dynamic_partitions(partitions_name("kas")) == [
        "d0.txt", "d1.txt", "d2.txt", "d3.txt", "d2b.txt"]
    runs = [r.dagster_run for r in instance.get_run_records()][: len(instance.get_run_records()) - runs_before]
    by_selection = sorted((sorted(k.to_user_string() for k in r.asset_selection or []), r.tags.get("dagster/partition"),
                           r.tags.get("dagster/sensor_name"), r.status) for r in runs)
    assert by_selection == [(["extracted/kas"], None, "raw_kas_sensor", DagsterRunStatus.SUCCESS)]  # one run
    (shard_event,) = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(["shards", "kas"]), asset_partitions=["d2b.txt"]), limit=1).records
    assert shard_event.run_id == runs[0].run_id  # the UI shows the partition materialized
    metas_after = part_meta_mtimes(spec)
    assert all(metas_after[k] == v for k, v in metas_before.items())  # untouched shards not re-extracted
    assert len(metas_after) == len(metas_before) + 1
    text, _ = project.published("kas")
    assert b"nov dokument" in text and b"in \xc5\xa1e eden" in text
    assert project.published("kas") == project.fresh("kas")


@pytest.mark.slow
@pytest.mark.long  # CI time; the settle rule itself: test_sensors.py and test_raw_arrival.py in CI
def test_daemon_plans_a_file_only_once_its_writer_is_done(tmp_path, request):
    """A real writer appends to b.jsonl, each record in two halves, while the real daemon ticks; the
    sensor skips ("still arriving") until the file settles, then extracts it once, whole."""
    write_files(tmp_path / "raw" / "kas", {"a.jsonl": '{"text": "prvi"}\n'})
    project = DagsterProject(tmp_path, {"kas": {"extractor": "jsonl", "domain": "t", "watch_interval": 5,
                                                "settle_seconds": 3}}, max_workers=1)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = dagster_env(project.config)
    env["DAGSTER_HOME"] = str(home)
    instance = DagsterInstance.from_config(str(home))
    request.addfinalizer(instance.dispose)
    project.publish(instance, "kas")
    store = DatasetStore(project.spec("kas"))

    def sensor_skips() -> list[str]:
        states = [s for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
                  if s.name == "raw_kas_sensor"]
        if not states:
            return []
        ticks = instance.get_ticks(states[0].instigator_origin_id, states[0].selector_id, limit=100)
        return [t.skip_reason or "" for t in ticks]

    log = tmp_path / "daemon.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen([str(VENV_BIN / "dagster-daemon"), "run", "-m", "slm4ie_assets.definitions"],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE
        written = 0
        with open(tmp_path / "raw" / "kas" / "b.jsonl", "ab") as writer:
            while written < 10 or not any("still arriving (b.jsonl)" in r for r in sensor_skips()):
                assert time.monotonic() < deadline, "the sensor never ticked while the file was written"
                writer.write(b'{"text": "zapis %d, ' % written)
                writer.flush()
                time.sleep(0.2)  # a reader now would see half a record
                writer.write(b'drugi del"}\n')
                writer.flush()
                written += 1
        _wait("the republish with b.jsonl", lambda: (m := store.published_manifest()) is not None
              and "b.jsonl" in [k for k, _ in m.shards], deadline, log)
        _wait("the runs to finish", lambda: _idle(instance), deadline, log)
    finally:
        stop_group(daemon)
    manifest = store.published_manifest()
    assert manifest is not None and manifest.drops == {} and manifest.docs == 1 + written
    runs = [r.dagster_run for r in instance.get_run_records()]
    assert all(r.status == DagsterRunStatus.SUCCESS for r in runs)
    # planned once, when whole: one run of the sensor's, the one that published b.jsonl
    assert [r.tags.get("dagster/sensor_name") for r in runs].count("raw_kas_sensor") == 1
