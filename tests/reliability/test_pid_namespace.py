"""A run is judged by its pid only inside its own pid namespace (issue 39 point 4; dagster_layer/stale_runs.py).

A container that shares the host's name (`docker --network host`, Kubernetes `hostNetwork`, a compose
`hostname:`) has pids of its own: its run recorded as pid 1 is, seen from outside, the host's init or
nothing, so it was judged gone and marked FAILURE while it still worked. Here a real run executes in
a new pid namespace made by `unshare --pid --fork --mount-proc` (root only, as in CI) against a real
instance with the project's dagster.yaml, and stops inside its extraction step after recording its
process. Outside its namespace no judge touches it (the next step's clean-up, the stale-run sensor,
the launcher's health check that run monitoring calls); inside it (`nsenter`), it is judged as before:
alive while it runs, failed with the reason once SIGKILLed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterRunStatus, RunsFilter, build_sensor_context
from dagster._core.launcher import WorkerStatus

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.sensors import STALE_RUN_SENSOR
from slm4ie_assets.dagster_layer.stale_runs import (
    GRPC_INFO_TAG,
    LAUNCHED_FROM_TAG,
    LAUNCHED_NAMESPACE_TAG,
    NAMESPACE_TAG,
    PID_TAG,
    lost_process,
    pid_namespace,
    reap_dead_runs,
)
from slm4ie_assets.definitions import build_definitions
from support.paths import REPO
from support.stale_runs import held_run_script, launched, stale_run_project


@pytest.fixture(autouse=True)
def _namespaces_can_be_made():
    """Skip where no pid namespace can be made (not root, no unshare/nsenter), except under CI=true,
    which runs as root: there that is a failure, so CI never passes these tests by skipping."""
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("nsenter") and os.path.isdir("/proc/self"):
        return
    msg = "a new pid namespace needs root, unshare and nsenter"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true: {msg}", pytrace=False)
    pytest.skip(msg)

# Materializes extracted/k into the instance at argv[1]; the step records its process, then stops
# (the clean-up it would run next is replaced by a sleep): it prints "ready" and waits to be killed.
RUN = held_run_script("slm4ie_assets.dagster_layer.stale_runs", "reap_dead_runs")

# A judge inside the run's namespace: for each line read, the run ids it marks ended, as JSON.
JUDGE = """
import json, sys
from dagster import DagsterInstance
from slm4ie_assets.dagster_layer.stale_runs import reap_dead_runs
with DagsterInstance.from_config(sys.argv[1]) as instance:
    for _ in sys.stdin:
        print(json.dumps(reap_dead_runs(instance)), flush=True)
"""


@pytest.fixture
def project(tmp_path):
    with stale_run_project(tmp_path) as made:
        yield made


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _namespace_of(pid: int) -> str:
    """`pid_namespace()` as the process `pid` (a host pid) would record it."""
    inode = os.readlink(f"/proc/{pid}/ns/pid").partition("[")[2].rstrip("]")
    return f"{pid_namespace().split('/')[0]}/{inode}"


class Container:
    """A shell as pid 1 of a new pid namespace (with its own /proc), running the held run."""

    def __init__(self, home: Path, config: Path):
        script = f"{sys.executable} -c '{RUN}' {home} {config} & exec sleep 600"
        self.unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                                        stdout=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True)
        assert self.unshare.stdout.readline().strip() == "ready"
        [self.init] = _children(self.unshare.pid)  # the shell: pid 1 inside
        self.run_process = next(p for p in _children(self.init)
                                if Path(f"/proc/{p}/cmdline").read_bytes().startswith(sys.executable.encode()))

        self.judge = subprocess.Popen(["nsenter", "--target", str(self.init), "--pid", "--mount", "--",
                                       sys.executable, "-c", JUDGE, str(home)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def judge_inside(self) -> list[str]:
        self.judge.stdin.write("judge\n")
        self.judge.stdin.flush()
        return json.loads(self.judge.stdout.readline())

    def close(self) -> None:
        self.judge.kill()
        self.judge.wait()
        os.killpg(self.unshare.pid, signal.SIGKILL)
        self.unshare.wait()


def _judged_from_outside(sensor, instance, run_id: str) -> DagsterRunStatus:
    """Every judge this host runs outside the container: the next extraction step's clean-up, the
    stale-run sensor and the launcher's health check (what run monitoring acts on)."""
    assert reap_dead_runs(instance) == []
    result = sensor(build_sensor_context(instance=instance))
    assert run_id not in (getattr(result, "skip_message", None) or "")
    run = instance.get_run_by_id(run_id)
    assert instance.run_launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
    return instance.get_run_by_id(run_id).status


def test_a_live_run_in_another_pid_namespace_is_not_failed_and_is_judged_inside_it(project):
    home, config, instance = project
    sensor = build_definitions(load_catalog(config)).get_sensor_def(STALE_RUN_SENSOR)
    container = Container(home, config)
    try:
        [run] = instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        inside_pid = int(run.tags[PID_TAG])
        assert inside_pid != container.run_process  # a pid of its own namespace
        assert run.tags[NAMESPACE_TAG] == _namespace_of(container.run_process) != pid_namespace()

        assert _judged_from_outside(sensor, instance, run.run_id) == DagsterRunStatus.STARTED
        assert container.judge_inside() == []  # alive where its pid means something

        os.kill(container.run_process, signal.SIGKILL)  # dies; the shell (pid 1) keeps the namespace
        deadline = time.monotonic() + 30
        while Path(f"/proc/{container.run_process}").exists() and \
                Path(f"/proc/{container.run_process}/stat").read_text().split(") ")[1][0] not in "ZX":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # from outside it is still not judged by pid: Dagster's run monitoring there, or Terminate, ends it
        assert _judged_from_outside(sensor, instance, run.run_id) == DagsterRunStatus.STARTED
        assert container.judge_inside() == [run.run_id]  # inside, it is gone: failed with the reason
    finally:
        container.close()
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
    [failure] = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_FAILURE)
    assert f"(pid {inside_pid} on" in failure.message and "is gone" in failure.message


def test_a_launched_worker_is_judged_only_in_the_launchers_namespace(project):
    """Before its first step a run is known by the pid of Dagster's launch event, a pid of the code
    server's namespace: a local code server's is the launcher's (tagged), one addressed by host name
    may be a container's under this name, so it is not judged by pid."""
    _, _, instance = project
    host = socket.gethostname()
    other = subprocess.Popen(["unshare", "--pid", "--fork", "sleep", "60"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not _children(other.pid):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        elsewhere = _namespace_of(_children(other.pid)[0])
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
    gone = subprocess.Popen(["true"])
    gone.wait()
    local = {GRPC_INFO_TAG: json.dumps({"host": "localhost", "socket": "/tmp/x"}), LAUNCHED_FROM_TAG: host}
    here = launched(instance, gone.pid, {**local, LAUNCHED_NAMESPACE_TAG: pid_namespace()})
    there = launched(instance, gone.pid, {**local, LAUNCHED_NAMESPACE_TAG: elsewhere})
    by_name = launched(instance, gone.pid, {GRPC_INFO_TAG: json.dumps({"host": host, "port": 4000})})
    judged = {r.run_id: lost_process(instance, instance.get_run_by_id(r.run_id)) for r in (here, there, by_name)}
    assert judged[here.run_id] is not None and judged[here.run_id].pid == gone.pid
    assert judged[there.run_id] is None and judged[by_name.run_id] is None
    assert reap_dead_runs(instance) == [here.run_id]
