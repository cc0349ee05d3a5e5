"""A Dagster run launcher that runs every run as one Slurm batch job.

Runs from the UI, sensors, schedules and backfills are dequeued by the daemon as usual; instead of
starting the run worker beside the code server, `launch_run` submits a batch job whose script is
the run worker itself (`python -m dagster api execute_run ...`). The worker opens the same instance
(PostgreSQL: the nodes reach it over the network) and writes the run's events as any worker does,
so the UI shows the run live. Cancel from Dagster is `scancel`; with `run_monitoring` enabled the
daemon asks Slurm about each started run and fails, with Slurm's reason, a run whose job died.
docs/slurm.md says how to deploy it.
"""

import os
import shlex
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagster import DagsterRun
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, RunLauncher, WorkerStatus
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData, serialize_value

from slm4ie_assets.slurm.commands import SlurmCommandError, SlurmJob, cancel, show_job, submit
from slm4ie_assets.slurm.health import ALIVE, job_health
from slm4ie_assets.slurm.options import CONFIG_SCHEMA, SbatchOptions

JOB_TAG = "slm4ie/slurm_job_id"
LOG_TAG = "slm4ie/slurm_log"


class SlurmRunLauncher(RunLauncher, ConfigurableClass):
    """Each run is a Slurm job (instance setting `run_launcher`, see deploy/dagster.slurm.yaml)."""

    def __init__(self, inst_data: ConfigurableClassData | None = None, **config: Any):
        self._inst_data = inst_data
        self.options = SbatchOptions.from_config(config)
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict:
        return CONFIG_SCHEMA

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]):
        return cls(inst_data=inst_data, **config_value)

    # ------------------------------------------------------------------ launch

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = run.job_code_origin
        if origin is None:
            raise SlurmCommandError(f"run {run.run_id} has no code origin: launch it from a code location")
        args = ExecuteRunArgs(job_origin=origin, run_id=run.run_id, instance_ref=self._instance.get_ref(),
                              set_exit_code_on_failure=True)
        python = self.options.python or origin.executable_path
        script = worker_script(run.run_id, [python, "-m", "dagster", "api", "execute_run", serialize_value(args)])
        log_dir = self._log_dir()
        workdir = getattr(origin.repository_origin.code_pointer, "working_directory", None) or os.getcwd()
        sbatch_args = self.options.sbatch_args(run.run_id, log_dir, workdir, dict(run.tags))
        job_id = submit(script, sbatch_args, self.options.bin_dir)
        log = log_dir / f"dagster-run-{run.run_id}-{job_id}.log"
        self._instance.add_run_tags(run.run_id, {JOB_TAG: job_id, LOG_TAG: str(log)})
        self._instance.report_engine_event(
            f"Submitted Slurm job {job_id} for this run (output: {log}); it starts when Slurm schedules it.",
            run)

    def _log_dir(self) -> Path:
        base = self.options.log_dir or str(Path(self._instance.root_directory) / "slurm_logs")
        path = Path(base)
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ------------------------------------------------------------------ cancel

    def terminate(self, run_id: str) -> bool:
        """SIGINT to the job's processes, so the worker records the cancellation itself, as Ctrl-C
        would; `scancel` outright after the grace period, or at once for a job still pending."""
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        job_id = run.tags.get(JOB_TAG)
        self._instance.report_run_canceling(run)
        if job_id is None:
            self._instance.report_engine_event("No Slurm job was recorded for this run; nothing to scancel.", run)
            return False
        try:
            job = show_job(job_id, self.options.bin_dir)
        except SlurmCommandError as exc:  # cannot tell its state: end it outright
            self._instance.report_engine_event(f"Could not ask Slurm about job {job_id}: {exc}", run)
            job = SlurmJob(job_id, "UNKNOWN", "", "", "", "")
        if job is None:
            return self._mark_canceled(run_id, f"Slurm job {job_id} had already ended.")
        if job.state == "RUNNING":
            cancel(job_id, signal="INT", bin_dir=self.options.bin_dir)
            if self._wait_job_end(job_id, self.options.cancel_grace_seconds):
                return self._mark_canceled(run_id, f"Slurm job {job_id} stopped after SIGINT (scancel --signal=INT).")
        if job.state in ALIVE or job.state == "UNKNOWN":
            cancel(job_id, bin_dir=self.options.bin_dir)
            self._wait_job_end(job_id, 30)
        return self._mark_canceled(run_id, f"Slurm job {job_id} was ended with scancel.")

    def _wait_job_end(self, job_id: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                job = show_job(job_id, self.options.bin_dir)
            except SlurmCommandError:
                job = SlurmJob(job_id, "UNKNOWN", "", "", "", "")  # ask again
            if job is None or job.state not in ALIVE | {"UNKNOWN"}:
                return True
            time.sleep(0.5)
        return False

    def _mark_canceled(self, run_id: str, message: str) -> bool:
        """The worker records the cancellation when it can; when it could not (killed, or never
        started), the run is marked canceled here, so it never waits for a worker that is gone."""
        run = self._instance.get_run_by_id(run_id)
        if run is not None and not run.is_finished:
            self._instance.report_run_canceled(run, message)
        elif run is not None:
            self._instance.report_engine_event(message, run)
        return True

    # ------------------------------------------------------------------ monitoring

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        job_id = run.tags.get(JOB_TAG)
        if job_id is None:
            # Not launched by this launcher: a `dagster asset materialize` or `dg launch` run in its
            # own process on this instance. Slurm knows nothing of it, so it is not ours to fail.
            return CheckRunHealthResult(WorkerStatus.RUNNING, "not launched through Slurm; not judged here")
        return job_health(job_id, self.options.bin_dir)

    def get_run_worker_debug_info(self, run: DagsterRun, include_container_logs: bool | None = True) -> str | None:
        """The job as Slurm sees it and the end of its output file (tracebacks, OOM notes)."""
        job_id = run.tags.get(JOB_TAG)
        if job_id is None:
            return None
        try:
            job = show_job(job_id, self.options.bin_dir)
        except SlurmCommandError as exc:
            job, lines = None, [str(exc)]
        else:
            lines = [job.describe() if job else f"Slurm job {job_id}: unknown to the controller"]
        log = Path(run.tags.get(LOG_TAG, ""))
        if log.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            lines += [f"last lines of {log}:", *tail]
        return "\n".join(lines)


def worker_script(run_id: str, command: list[str]) -> str:
    """The batch script: the run worker in place of the shell, so that signals reach it directly."""
    return ("#!/bin/sh\n"
            f"# Dagster run {run_id}, submitted by slm4ie_assets.slurm.SlurmRunLauncher\n"
            f"exec {shlex.join(command)}\n")
