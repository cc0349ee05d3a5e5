"""What a run's Slurm job says about its run worker, in the terms of Dagster's run monitoring.

The monitoring daemon asks only about runs that are STARTED (the worker has begun and not yet
recorded an end), and marks the run failed for any answer but RUNNING or SUCCESS, quoting our
message. So every state in which the job cannot still be working says in words what happened to
it (cancelled, node failure, out of memory, time limit), and a controller that cannot be asked for
a moment does not fail runs that may well be healthy.
"""

from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

from slm4ie_assets.slurm.commands import SlurmCommandError, SlurmJob, show_job

# States in which the batch script may still run, or will run again (requeue)
ALIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
         "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"}

WHY = {
    "CANCELLED": "was cancelled (scancel by a user or an administrator, outside Dagster)",
    "NODE_FAIL": "ended because its node failed",
    "OUT_OF_MEMORY": "was killed for using more memory than it asked for (raise --mem in the launcher's "
                     "sbatch options)",
    "TIMEOUT": "reached its time limit (raise --time in the launcher's sbatch options)",
    "PREEMPTED": "was preempted by the scheduler",
    "BOOT_FAIL": "could not start: its node failed to boot",
    "DEADLINE": "missed its deadline",
    "FAILED": "exited with an error before the run worker recorded the end of the run",
    "COMPLETED": "exited without the run worker recording the end of the run",
}


def job_health(job_id: str, bin_dir: str | None = None) -> CheckRunHealthResult:
    try:
        job = show_job(job_id, bin_dir)
    except SlurmCommandError as exc:
        # Treated as running: the daemon fails a run for any other answer, and a controller being
        # restarted is no reason to fail every run on the cluster. The next poll asks again.
        return CheckRunHealthResult(WorkerStatus.RUNNING, f"could not ask Slurm ({exc}); asking again later",
                                    transient=True, run_worker_id=job_id)
    return health_of(job_id, job)


def health_of(job_id: str, job: SlurmJob | None) -> CheckRunHealthResult:
    if job is None:
        return CheckRunHealthResult(
            WorkerStatus.NOT_FOUND,
            f"Slurm job {job_id} is unknown to the controller: it ended more than MinJobAge seconds ago "
            "or the controller lost its state, and its run worker never recorded the end of the run. "
            "Its output file may say why; launch the run again.", run_worker_id=job_id)
    if job.state in ALIVE:
        return CheckRunHealthResult(WorkerStatus.RUNNING, job.describe(), run_worker_id=job_id)
    why = WHY.get(job.state, "ended")
    return CheckRunHealthResult(
        WorkerStatus.FAILED,
        f"Slurm job {job_id} {why} ({job.describe()}). The run cannot finish; launch it again "
        "(shards already written are reused).", run_worker_id=job_id)
