"""Runs whose process died stop holding the extraction pool (docs/guarantees.md 1; dagster_layer/stale_runs.py).

A real Dagster instance (the project's dagster.yaml: queued run coordinator, run-granularity pool
`slm4ie_extract`) in a temporary DAGSTER_HOME, and a real child process that materializes
extracted/<key> and is SIGKILLed inside the step. The slow CLI version is
reliability/test_crash_kills.py::test_a_killed_cli_run_does_not_keep_holding_the_extraction_pool;
the whole lost-host scenario under `dagster dev` is test_lost_host.py. Here also: the project
launcher's health check that run monitoring calls, and a launched run judged before its first step.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
    build_sensor_context,
)
from dagster._core.launcher import WorkerStatus

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.sensors import STALE_RUN_SENSOR
from slm4ie_assets.dagster_layer.stale_runs import (
    GRPC_INFO_TAG,
    HOST_TAG,
    LAUNCHED_FROM_TAG,
    PID_TAG,
    RUN_TAG,
    START_TAG,
    RunProcess,
    lost_process,
    process_is_alive,
    process_start,
    process_tags,
    reap_dead_runs,
)
from slm4ie_assets.definitions import build_definitions
from support.paths import REPO
from support.stale_runs import add_run, held_run_script, launched, stale_run_project

POOL = "slm4ie_extract"

# Materializes extracted/k into the instance at argv[1] and stops inside the step, after the step
# has recorded its process: it prints "ready" and sleeps until killed.
CHILD = held_run_script("slm4ie_assets.dagster_layer.assets", "unpack")


@pytest.fixture
def project(tmp_path):
    with stale_run_project(tmp_path) as made:
        yield made


def killed_run(home: Path, config: Path, instance) -> DagsterRun:
    """A run left STARTED by a SIGKILLed process, checked to be alive (and not reaped) before the kill."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(home), str(config)], stdout=subprocess.PIPE,
                             text=True, cwd=REPO, start_new_session=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        [run] = instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        assert run.tags[PID_TAG] == str(child.pid) and run.tags[RUN_TAG] == run.run_id
        assert run.tags[START_TAG] == process_start(child.pid)
        assert POOL in run.run_op_concurrency.all_pools  # the run holds the pool's only slot
        assert reap_dead_runs(instance) == []  # alive: left alone
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.STARTED  # what Dagster leaves
    return run


def assert_failed_with_reason(instance, run_id: str) -> None:
    assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE
    [failure] = instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)
    assert f"(pid {instance.get_run_by_id(run_id).tags[PID_TAG]} on" in failure.message
    assert "is gone" in failure.message and "pool slot" in failure.message


def test_the_stale_run_sensor_fails_a_run_whose_process_was_killed(project):
    home, config, instance = project
    run = killed_run(home, config, instance)
    defs = build_definitions(load_catalog(config))
    sensor = defs.get_sensor_def(STALE_RUN_SENSOR)
    result = sensor(build_sensor_context(instance=instance))
    assert run.run_id in result.skip_message
    assert_failed_with_reason(instance, run.run_id)
    assert reap_dead_runs(instance) == []  # once


def test_the_next_extraction_step_frees_the_slot_before_taking_work(project):
    home, config, instance = project
    run = killed_run(home, config, instance)
    job = build_definitions(load_catalog(config)).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, asset_selection=[AssetKey(["extracted", "k"])])
    assert result.success
    assert_failed_with_reason(instance, run.run_id)
    warnings = [e.message for e in instance.all_logs(result.run_id) if e.level == 30]
    assert any(run.run_id in w and "its process" in w for w in warnings), warnings
    assert instance.get_run_by_id(result.run_id).tags[PID_TAG] == str(os.getpid())


def dead_pid() -> tuple[int, str]:
    proc = subprocess.Popen(["sleep", "60"])
    start = process_start(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, start


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process start times need /proc")
def test_which_runs_are_judged_dead(project):
    """Only active runs of this host whose own recorded process is gone; a reused pid (another start
    time) is gone too; a pending cancel ends as canceled."""
    _, _, instance = project
    pid, start = dead_pid()
    here = process_tags("x")
    dead = {**here, PID_TAG: str(pid), START_TAG: start}
    reused = {**here, START_TAG: here[START_TAG] + "0"}  # this live pid, another process start
    failed = add_run(instance, DagsterRunStatus.STARTED, dead)
    reused_run = add_run(instance, DagsterRunStatus.STARTED, reused)
    canceling = add_run(instance, DagsterRunStatus.CANCELING, dead)
    alive = add_run(instance, DagsterRunStatus.STARTED, here)
    copied = add_run(instance, DagsterRunStatus.STARTED, {**dead, RUN_TAG: "the-parent-run"}, own=False)
    elsewhere = add_run(instance, DagsterRunStatus.STARTED, {**dead, HOST_TAG: here[HOST_TAG] + "-other"})
    finished = add_run(instance, DagsterRunStatus.SUCCESS, dead)
    assert sorted(reap_dead_runs(instance)) == sorted([failed.run_id, reused_run.run_id, canceling.run_id])
    status = {r.run_id: instance.get_run_by_id(r.run_id).status
              for r in (failed, reused_run, canceling, alive, copied, elsewhere, finished)}
    assert status == {failed.run_id: DagsterRunStatus.FAILURE, reused_run.run_id: DagsterRunStatus.FAILURE,
                      canceling.run_id: DagsterRunStatus.CANCELED, alive.run_id: DagsterRunStatus.STARTED,
                      copied.run_id: DagsterRunStatus.STARTED, elsewhere.run_id: DagsterRunStatus.STARTED,
                      finished.run_id: DagsterRunStatus.SUCCESS}


def test_process_identity_tells_a_reused_pid_apart():
    me = os.getpid()
    assert process_is_alive(me, process_start(me))
    if os.path.isdir("/proc/self"):
        assert not process_is_alive(me, process_start(me) + "0")
    pid, start = dead_pid()
    deadline = time.monotonic() + 5
    while process_is_alive(pid, start) and time.monotonic() < deadline:  # reaped by wait(): gone at once
        time.sleep(0.05)
    assert not process_is_alive(pid, start)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process start times need /proc")
def test_the_bookkeeping_tags_are_hidden_and_runs_tagged_before_still_count(project):
    """The Runs list leaves out `.dagster/` tags; a run recorded with the old visible names is reaped too."""
    from dagster._core.storage.tags import TagType, get_tag_type

    _, _, instance = project
    assert {get_tag_type(t) for t in (HOST_TAG, PID_TAG, START_TAG, RUN_TAG)} == {TagType.HIDDEN}
    pid, start = dead_pid()
    tags = {**process_tags("x"), PID_TAG: str(pid), START_TAG: start}
    old = {k.removeprefix(".dagster/"): v for k, v in tags.items()}
    run = DagsterRun(job_name="j", status=DagsterRunStatus.STARTED, tags=old)
    run = run.with_tags({**old, "slm4ie/process_run": run.run_id})
    instance.add_run(run)
    assert reap_dead_runs(instance) == [run.run_id]


def test_run_monitoring_asks_the_project_launcher_and_it_fails_a_killed_run(project):
    """The project's dagster.yaml names ProcessCheckingRunLauncher: Dagster's run-monitoring daemon
    calls its health check for every STARTED run, CLI runs included (run_launcher.py)."""
    home, config, instance = project
    launcher = instance.run_launcher
    assert type(launcher).__name__ == "ProcessCheckingRunLauncher" and launcher.supports_check_run_worker_health
    assert instance.run_monitoring_enabled
    run = killed_run(home, config, instance)
    health = launcher.check_run_worker_health(instance.get_run_by_id(run.run_id))
    assert health.status == WorkerStatus.FAILED
    assert f"(pid {run.tags[PID_TAG]} on" in health.msg and "is gone" in health.msg
    assert launcher.get_run_worker_debug_info(run).startswith("What to do: launch the run again")
    here = add_run(instance, DagsterRunStatus.STARTED, process_tags("x"))
    assert launcher.check_run_worker_health(instance.get_run_by_id(here.run_id)).status == WorkerStatus.RUNNING


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="process start times need /proc")
def test_a_launched_run_is_judged_by_its_workers_start_event_before_any_step(project):
    """Killed before its first step recorded anything: the pid of Dagster's "Started process for run"
    event, on the host the gRPC address names (a local code server: the launching host), and a pid
    whose process started after that event is a reused one."""
    _, _, instance = project
    host = socket.gethostname()
    local = {GRPC_INFO_TAG: json.dumps({"host": "localhost", "socket": "/tmp/x"}), LAUNCHED_FROM_TAG: host}
    pid, _ = dead_pid()
    dead = launched(instance, pid, local)
    alive = launched(instance, os.getpid(), local)
    reused = launched(instance, os.getpid(), local, started_at=time.time() - 10 ** 7)  # long before we started
    remote = launched(instance, pid, {GRPC_INFO_TAG: json.dumps({"host": "other-host", "port": 4000})})
    unknown = launched(instance, pid, {GRPC_INFO_TAG: json.dumps({"host": "localhost", "port": 4000})})
    lost = {r.run_id: lost_process(instance, instance.get_run_by_id(r.run_id))
            for r in (dead, alive, reused, remote, unknown)}
    assert lost[dead.run_id] == RunProcess(host, pid, started_before=lost[dead.run_id].started_before)
    assert lost[reused.run_id] is not None and lost[reused.run_id].pid == os.getpid()
    assert lost[alive.run_id] is None and lost[remote.run_id] is None and lost[unknown.run_id] is None
    assert sorted(reap_dead_runs(instance)) == sorted([dead.run_id, reused.run_id])
