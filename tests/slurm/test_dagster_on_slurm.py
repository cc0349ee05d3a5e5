"""Slurm as the engine Dagster drives (docs/slurm.md): deploy/dagster.slurm.yaml as shipped (paths moved
into a temp folder), a real PostgreSQL server, `dagster-webserver` and `dagster-daemon run`, and
every run a Slurm job on the test cluster (deploy/slurm/one-node-cluster.sh: nodes `small`, 1 CPU,
and `big`, 2 CPUs).

(1) A backfill of shards/fan (6 shards, 2 per run: 3 runs, each asking for 1 CPU) is 3 Slurm jobs
    in progress at once, so on both nodes, and the republish that follows (a 4th job) publishes the
    bytes of one serial `slm4ie extract`.
(2) A run whose job is scancel'd behind Dagster's back is marked failed by the daemon's run
    monitoring, with Slurm's word for it; Terminate in the UI cancels the run through scancel.
"""

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.assets import partitions_name
from slm4ie_assets.pipeline import lock_path
from slm4ie_assets.planning.shards import list_shards
from slm4ie_assets.slurm import JOB_TAG
from slm4ie_assets.slurm.commands import show_job
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.locks import dataset_lock, shard_lock
from support.slurm import (
    conllu_files,
    job_nodes,
    published,
    report_time,
    require_cluster,
    serial_extract,
    stopwatch,
    write_catalog,
)
from support.ui import (
    BACKFILL_DONE,
    REPO,
    VENV_BIN,
    Background,
    DagsterWebserver,
    PostgresServer,
    dagster_env,
    install_test_deps,
    instance_config,
    postgres_bin,
    wait_until,
)

pytestmark = pytest.mark.slow

SETTINGS = REPO / "deploy" / "dagster.slurm.yaml"
FAN, FILES, PER_RUN = "fan", 6, 2
SLOW = "slow"  # one shard; the test holds its dataset lock, so its runs wait inside their step
DATASETS = {FAN: {"extractor": "conllu", "domain": "test", "max_shards_per_run": PER_RUN},
            SLOW: {"extractor": "conllu", "domain": "test"}}
TIMEOUT = 240

LAUNCH_RUN = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on InvalidSubsetError { message } ... on RunConfigValidationInvalid { errors { message } } } }
"""
TERMINATE = """
mutation($runId: String!) { terminateRun(runId: $runId) { __typename
  ... on TerminateRunFailure { message } ... on PythonError { message } } }
"""


@dataclass
class Deployment:
    base: Path
    home: Path
    config: Path
    env: dict
    web: DagsterWebserver
    instance: DagsterInstance
    daemon: Background | None = None

    def start_daemon(self) -> None:
        """Started once a backfill exists: the backfill daemon looks for new ones as it starts,
        then every 30 s (tests/ui/test_postgres.py says more)."""
        if self.daemon is None:
            self.daemon = Background([str(VENV_BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], REPO,
                                     self.env, self.base / "daemon.log")

    def tail(self) -> str:
        """The runs that did not succeed, with the end of their event logs, then the daemon's log."""
        ended = [r for r in self.instance.get_runs() if r.is_finished and r.status != DagsterRunStatus.SUCCESS]
        runs = "".join(f"--- run {r.run_id} {r.status.value} (Slurm job {r.tags.get(JOB_TAG)})\n"
                       + "\n".join((e.message or "")[:1500] for e in self.instance.all_logs(r.run_id)[-6:]) + "\n"
                       for r in ended)
        return runs + "--- daemon\n" + (self.daemon.tail(3000) if self.daemon else "(no daemon)")

    def runs(self, **tags) -> list:
        return self.instance.get_runs(RunsFilter(tags=tags) if tags else None)

    def launch(self, key: str, partition: str, **tags: str) -> str:
        """Materialize one shards/<key> partition, as the UI's launch does (queued, then the daemon)."""
        return self.launch_asset(["shards", key], **{"dagster/partition": partition, **tags})

    def launch_asset(self, path: list[str], **tags: str) -> str:
        params = {"selector": {"repositoryLocationName": "slm4ie", "repositoryName": "__repository__",
                               "jobName": "__ASSET_JOB", "assetSelection": [{"path": path}]},
                  "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
        res = self.web.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
        assert res["__typename"] == "LaunchRunSuccess", res
        return res["run"]["runId"]


@contextmanager
def deployed(base: Path, config: Path, extra_env: dict[str, str] | None = None) -> Iterator[Deployment]:
    """deploy/dagster.slurm.yaml under `base` with a PostgreSQL server of its own and the webserver
    up, `config` as the catalog (the shards/ partitions of each dataset with a raw folder added),
    `extra_env` in the environment of the webserver and the daemon (so of every job)."""
    ok, report = install_test_deps("postgres")
    bindir = postgres_bin()
    assert ok and bindir is not None, report
    with ExitStack() as stack, stopwatch() as took:
        postgres = PostgresServer(bindir)
        stack.callback(postgres.stop)
        postgres.start()
        postgres.create_database("slm4ie_slurm")
        creds = postgres.dagster_env("slm4ie_slurm")
        home = base / "home"
        instance_config(home, template=SETTINGS)
        settings = yaml.safe_load((home / "dagster.yaml").read_text())
        settings["run_monitoring"]["poll_interval_seconds"] = 2  # the test waits for it
        settings["run_launcher"]["config"]["cpus_per_task"] = 1
        (home / "dagster.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        env = dagster_env(config, home, **creds, DAGSTER_EVENT_BATCH_SIZE="1000", **(extra_env or {}))
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        for k, v in creds.items():  # for the instance this process opens
            patch.setenv(k, v)
        instance = DagsterInstance.from_config(str(home))
        stack.callback(instance.dispose)
        catalog = load_catalog(config)
        for key in catalog.datasets:
            if catalog.dataset(key).raw_dir.is_dir():
                instance.add_dynamic_partitions(partitions_name(key),
                                                [s.key for s in list_shards(catalog.dataset(key))])
        web = DagsterWebserver(env, base / "webserver.log")
        stack.callback(web.proc.stop, grace=5)
        dep = Deployment(base, home, config, env, web, instance)
        stack.callback(lambda: dep.daemon.stop(grace=5) if dep.daemon else None)
        stack.callback(_scancel_leftovers, dep)
        web.wait_ready(timeout=180)
        report_time("PostgreSQL and dagster-webserver started", took())
        yield dep


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    require_cluster()
    base = tmp_path_factory.mktemp("dagster_on_slurm")
    conllu_files(base / "project" / "raw" / FAN, FILES)
    conllu_files(base / "project" / "raw" / SLOW, 1)
    with deployed(base, write_catalog(base / "project", DATASETS)) as dep:
        yield dep


def _scancel_leftovers(dep: Deployment) -> None:
    """Jobs of this test's runs that are still queued or running (a failed assertion): scancel'd."""
    for run in dep.instance.get_runs():
        job = run.tags.get(JOB_TAG)
        if job:
            subprocess.run(["scancel", job], capture_output=True, timeout=30)


def test_a_shard_backfill_runs_as_slurm_jobs_on_both_nodes_and_publishes_the_serial_bytes(deployment, tmp_path):
    dep = deployment
    serial = tmp_path / "serial"
    conllu_files(serial / "raw" / FAN, FILES)
    serial_extract(write_catalog(serial, {FAN: DATASETS[FAN]}), FAN)

    spec = load_catalog(dep.config).dataset(FAN)
    keys = [s.key for s in list_shards(spec)]
    store = DatasetStore(spec)
    with stopwatch() as took:
        with ExitStack() as held:
            # the first shard of each run, held: every run waits inside its step until all three
            # are in progress at once, whatever the machine's speed
            for first in keys[::PER_RUN]:
                held.enter_context(shard_lock(store.shard_lock(first), FAN, first, timeout=5))
            backfill = dep.web.launch_backfill([["shards", FAN]])
            dep.start_daemon()

            def all_started():
                runs = dep.runs(**{"dagster/backfill": backfill})
                assert not any(r.is_finished for r in runs), dep.tail()
                return len(runs) == FILES // PER_RUN and all(r.status == DagsterRunStatus.STARTED for r in runs)

            wait_until(all_started, TIMEOUT, "3 backfill runs in progress at once", interval=1.0, on_timeout=dep.tail)
            jobs = [r.tags[JOB_TAG] for r in dep.runs(**{"dagster/backfill": backfill})]
            nodes = job_nodes(jobs)
            assert set(nodes.values()) == {"small", "big"}, f"3 one-CPU jobs on 3 CPUs use both nodes: {nodes}"

        def published_after_backfill():
            if dep.web.backfill_status(backfill) not in BACKFILL_DONE:
                return False
            runs = dep.runs()
            return not any(not r.is_finished for r in runs) and (spec.output_dir / f"{FAN}.jsonl").exists()

        wait_until(published_after_backfill, TIMEOUT, "the backfill and the republish to finish", interval=1.0,
                   on_timeout=dep.tail)
        seconds = took()
    report_time("Dagster backfill of 6 shards in 3 Slurm jobs + republish job", seconds)
    assert dep.web.backfill_status(backfill) == "COMPLETED_SUCCESS", dep.tail()
    fan_runs = [r for r in dep.runs() if any(k.path[1] == FAN for k in r.asset_selection or ())]
    assert [r.status for r in fan_runs] == [DagsterRunStatus.SUCCESS] * len(fan_runs), dep.tail()
    assert len(fan_runs) == FILES // PER_RUN + 1, "3 shard runs and one republish"
    assert all(JOB_TAG in r.tags for r in fan_runs), "every run went through Slurm"
    assert published(spec.output_dir, FAN) == published(serial / "out", FAN)


def _wait_started(dep: Deployment, run_id: str) -> str:
    def started():
        run = dep.instance.get_run_by_id(run_id)
        assert run is not None and not run.is_finished, dep.tail()
        return run.tags.get(JOB_TAG) if run.status == DagsterRunStatus.STARTED else None

    return wait_until(started, TIMEOUT, f"run {run_id} to start in its Slurm job", interval=0.5, on_timeout=dep.tail)


def wait_finished(dep: Deployment, run_id: str):
    def finished():
        run = dep.instance.get_run_by_id(run_id)
        return run if run is not None and run.is_finished else None

    return wait_until(finished, TIMEOUT, f"run {run_id} to end", interval=0.5, on_timeout=dep.tail)


def _worker_pid(dep: Deployment, run_id: str) -> int:
    """The run worker's pid, as it reported it (the job runs on this host, as the test cluster's nodes do)."""
    found = re.search(r"Started process for run \(pid: (\d+)\)", run_messages(dep, run_id))
    assert found, run_messages(dep, run_id)
    return int(found.group(1))


def run_messages(dep: Deployment, run_id: str) -> str:
    """Every event's message, and the error it carries, if any."""
    lines = []
    for event in dep.instance.all_logs(run_id):
        lines.append(event.message or "")
        error = getattr(event.dagster_event and event.dagster_event.event_specific_data, "error", None)
        if error is not None:
            lines.append(error.message)
    return "\n".join(lines)


def test_runs_whose_jobs_die_are_failed_and_terminate_is_scancel(deployment):
    """Three runs of shards/slow at once, each waiting in its step on the lock the test holds:
    one's job is scancel'd (a user or an administrator), one's run worker is SIGKILLed (as the OOM
    killer does: it records nothing, and its job ends), one is terminated from Dagster."""
    dep = deployment
    dep.start_daemon()
    spec = load_catalog(dep.config).dataset(SLOW)
    shard = list_shards(spec)[0].key
    with dataset_lock(lock_path(spec), SLOW, timeout=5):
        refused = dep.launch(SLOW, shard, **{"slm4ie/sbatch_args": "--partition=no_such_partition"})
        scancelled, killed, terminated = (dep.launch(SLOW, shard) for _ in range(3))
        jobs = {run_id: _wait_started(dep, run_id) for run_id in (scancelled, killed, terminated)}
        with stopwatch() as took:
            subprocess.run(["scancel", jobs[scancelled]], check=True, timeout=30)
            os.kill(_worker_pid(dep, killed), signal.SIGKILL)
            # Terminate, as the UI's button sends it: the launcher scancels the job
            res = dep.web.graphql(TERMINATE, {"runId": terminated})["terminateRun"]
            assert res["__typename"] == "TerminateRunSuccess", res
            ended = {run_id: wait_finished(dep, run_id) for run_id in jobs}
            seconds = took()
    report_time("3 runs failed or canceled after scancel / SIGKILL / Terminate", seconds)

    # a job sbatch refuses (the run's own sbatch options name no partition): the run fails at launch
    msgs = run_messages(dep, refused)
    assert wait_finished(dep, refused).status == DagsterRunStatus.FAILURE, msgs
    assert "sbatch refused" in msgs and JOB_TAG not in dep.instance.get_run_by_id(refused).tags, msgs

    # scancel: SIGTERM reaches the run worker, which records the interruption itself; had it not
    # managed to, the daemon's run monitoring would say "Slurm job N was cancelled"
    msgs = run_messages(dep, scancelled)
    assert ended[scancelled].status == DagsterRunStatus.FAILURE, msgs
    assert "interrupted" in msgs or f"Slurm job {jobs[scancelled]} was cancelled" in msgs, msgs
    # SIGKILL: nothing recorded by the worker; the daemon asks Slurm and fails the run with its words
    msgs = run_messages(dep, killed)
    print(f"--- the SIGKILLed run's event log\n{msgs}")
    assert ended[killed].status == DagsterRunStatus.FAILURE, msgs
    assert f"Slurm job {jobs[killed]} " in msgs and "Marking run" in msgs, msgs
    # Terminate: canceled, and its job is over
    msgs = run_messages(dep, terminated)
    assert ended[terminated].status == DagsterRunStatus.CANCELED, msgs
    assert f"Slurm job {jobs[terminated]}" in msgs, msgs
    state = show_job(jobs[terminated])
    assert state is not None and state.state not in ("PENDING", "RUNNING"), state


def test_a_run_whose_job_is_cancelled_while_pending_ends_at_the_next_look(deployment):
    """A job still in Slurm's queue (held here with --hold, as a busy cluster would keep it) is
    scancel'd: its worker never starts, so the run would stay STARTING until run monitoring's start
    timeout (hours on Slurm). slm4ie_stale_run_sensor asks Slurm about STARTING runs every 30 s and
    fails it with Slurm's words (slurm/unstarted.py)."""
    dep = deployment
    dep.start_daemon()
    shard = list_shards(load_catalog(dep.config).dataset(SLOW))[0].key
    run_id = dep.launch(SLOW, shard, **{"slm4ie/sbatch_args": "--hold"})

    def pending_job():
        run = dep.instance.get_run_by_id(run_id)
        assert run is not None and not run.is_finished, dep.tail()
        job = run.tags.get(JOB_TAG)
        state = show_job(job) if job else None
        return job if run.status == DagsterRunStatus.STARTING and state and state.state == "PENDING" else None

    job = wait_until(pending_job, TIMEOUT, "the run's job to wait in Slurm's queue", interval=0.5, on_timeout=dep.tail)
    with stopwatch() as took:
        subprocess.run(["scancel", job], check=True, timeout=30)
        run = wait_finished(dep, run_id)
        seconds = took()
    report_time("a run whose Slurm job was cancelled while pending, ended", seconds)
    msgs = run_messages(dep, run_id)
    assert run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED), msgs
    assert f"The run never started: Slurm job {job} was cancelled" in msgs, msgs
