"""A lost host does not block the run queue (README "When a host dies"; run_launcher.py, dagster_layer/stale_runs.py).

The issue's scenario: real `dagster dev` (what `dg dev` runs: webserver, daemon, and the code server
as a proxy, `dagster code-server start`, in front of a `dagster api grpc` process) with the project's
instance settings (deploy/dagster.instance.yaml: the queue, the run-granularity pool `slm4ie_extract`
at limit 1, the project's run launcher and run monitoring), and the project's raw-folder sensor
launching the runs. The first
run is held inside its extraction step (support/held_location.py) while the sensor queues a second
one behind the pool; then the code server's gRPC process and the run worker are SIGKILLed by pid,
as an OOM kill or a crash would. Run monitoring must fail the first run with what happened and what
to do, and the second run must leave the queue and finish. Intervals are shortened for the test
(the shipped poll is 30 s).
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from slm4ie_assets.dagster_layer.stale_runs import PID_TAG, launched_worker
from support.dagster_cli import dagster_env
from support.files import write_config, write_files
from support.paths import REPO, VENV_BIN
from support.processes import stop_group
from support.ui import free_port

DEADLINE = 240  # seconds for the whole `dagster dev` part (about 60 s on a quiet 2-core host, 150 s on a busy
# one); the waits end as soon as their state is reached


def instance_yaml() -> str:
    """The shipped settings, with the daemon's loops shortened."""
    settings = yaml.safe_load((REPO / "deploy" / "dagster.instance.yaml").read_text())
    settings["run_coordinator"]["config"].update(dequeue_interval_seconds=1, user_code_failure_retry_delay=1,
                                                 max_user_code_failure_retries=200)
    settings["run_monitoring"]["poll_interval_seconds"] = 1
    return yaml.safe_dump(settings)


def _wait(what: str, predicate, deadline: float, log: Path):
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-5000:] if log.exists() else ""
    pytest.fail(f"timed out waiting for {what}; dagster dev log tail:\n{tail}")


def _runs(instance, *statuses: DagsterRunStatus) -> list[DagsterRun]:
    return instance.get_runs(filters=RunsFilter(statuses=list(statuses)) if statuses else None)


def _parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the code server as the run worker's parent")
def test_killing_the_code_server_and_run_worker_fails_the_run_and_frees_its_slot(tmp_path, request):
    write_files(tmp_path / "raw" / "k", {"a.txt": "ena\n\ndva\n"})
    config = write_config(tmp_path, {"k": {"extractor": "text", "domain": "test", "watch_interval": 5}},
                          settle_seconds=0, max_workers=1)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml())
    hold = tmp_path / "hold"
    hold.touch()
    env = dagster_env(config, DAGSTER_HOME=str(home), SLM4IE_TEST_HOLD=str(hold),
                      PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]))
    instance = DagsterInstance.from_config(str(home))
    request.addfinalizer(instance.dispose)

    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen([str(VENV_BIN / "dagster"), "dev", "-m", "support.held_location",
                                   "-h", "127.0.0.1", "-p", str(free_port())],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    request.addfinalizer(lambda: stop_group(daemon))
    deadline = time.monotonic() + DEADLINE

    # the sensor's first run (extracted/k, never published) is held inside its step ...
    _wait("the sensor's run to reach its step", lambda: list(tmp_path.glob("held.*")), deadline, log)
    [first] = _runs(instance, DagsterRunStatus.STARTED)
    # ... and a new file makes the sensor queue a second run, which the pool keeps waiting
    write_files(tmp_path / "raw" / "k", {"b.txt": "tri\n"})
    [second] = _wait("a second run queued behind the pool", lambda: _runs(instance, DagsterRunStatus.QUEUED),
                     deadline, log)
    time.sleep(2)  # a few dequeue ticks: the slot is held
    assert instance.get_run_by_id(second.run_id).status == DagsterRunStatus.QUEUED

    # the run worker, as Dagster's own event names it, and the code server that started it
    worker = launched_worker(instance, first.run_id)
    assert worker is not None
    worker_pid = worker[0]
    assert instance.get_run_by_id(first.run_id).tags[PID_TAG] == str(worker_pid)  # the step recorded the worker
    server_pid = _parent_pid(worker_pid)
    assert "api grpc" in _cmdline(server_pid), _cmdline(server_pid)
    assert "code-server start" in _cmdline(_parent_pid(server_pid))  # the proxy, left alive
    os.kill(server_pid, signal.SIGKILL)
    os.kill(worker_pid, signal.SIGKILL)
    hold.unlink()  # the second run, once started, goes through

    _wait("the killed run to be failed",
          lambda: instance.get_run_by_id(first.run_id).status == DagsterRunStatus.FAILURE, deadline, log)
    [failure] = instance.all_logs(first.run_id, of_type=DagsterEventType.RUN_FAILURE)
    assert f"pid {worker_pid} on" in failure.message and "is gone" in failure.message
    assert "What to do: launch the run again" in failure.message
    # the slot is free: the queue dequeues the waiting run at once; its launch finds the code server
    # gone, reloads the code location (the proxy starts a new gRPC process) and launches it there
    _wait("the queued run to finish", lambda: instance.get_run_by_id(second.run_id).status
          in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE), deadline, log)
    assert instance.get_run_by_id(second.run_id).status == DagsterRunStatus.SUCCESS
    messages = [e.dagster_event.message or "" for e in instance.all_logs(second.run_id) if e.dagster_event]
    assert any("could not be reached (killed, or restarting); reloading the code location" in m for m in messages)
