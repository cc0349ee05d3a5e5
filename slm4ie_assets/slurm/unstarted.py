"""Runs whose Slurm job ended before its run worker started: ended at the next look, not hours later.

A launched run is STARTING until its worker reports in, which on Slurm is once the job leaves the
queue. Dagster's run monitoring asks the launcher about STARTED runs only; a STARTING run it fails
after `start_timeout_seconds`, which a Slurm instance sets to hours so that a long queue wait is no
failure (deploy/dagster.slurm.yaml). A job cancelled (scancel) or refused while still PENDING never
starts its worker, and its run stayed STARTING, holding its place under the run limits, that long.

`end_unstarted_runs` asks Slurm about every STARTING run this launcher submitted: one whose job can
no longer start is failed with Slurm's words and the job's output (the same check and text run
monitoring uses for a STARTED run, slurm/health.py). The sensor `slm4ie_stale_run_sensor` calls it
every 30 s, the shipped run monitoring's poll. Nothing happens on an instance with another launcher.
"""

from collections.abc import Callable

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.launcher import WorkerStatus

from slm4ie_assets.slurm.health import job_health
from slm4ie_assets.slurm.launcher import JOB_TAG, SlurmRunLauncher


def end_unstarted_runs(instance: DagsterInstance, log: Callable[[str], None] | None = None) -> list[str]:
    """Fail the STARTING runs whose Slurm job ended (or was forgotten) before the worker started; their ids."""
    launcher = instance.run_launcher
    if not isinstance(launcher, SlurmRunLauncher):
        return []
    ended = []
    for record in instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTING])):
        job_id = record.dagster_run.tags.get(JOB_TAG)
        if job_id is None:
            continue
        health = job_health(job_id, launcher.options.bin_dir)
        if health.status == WorkerStatus.RUNNING:  # still queued or running, or Slurm did not answer
            continue
        run = instance.get_run_by_id(record.dagster_run.run_id)
        if run is None or run.status != DagsterRunStatus.STARTING:  # its worker reported in meanwhile
            continue
        debug = launcher.get_run_worker_debug_info(run)
        message = f"The run never started: {health.msg}" + (f"\n{debug}" if debug else "")
        instance.report_run_failed(run, message)
        if log is not None:
            log(f"run {run.run_id}: {health.msg}")
        ended.append(run.run_id)
    return ended
