"""Dagster's default run launcher, plus the worker health check that run monitoring needs.

Without a health check, Dagster's `run_monitoring` daemon leaves a STARTED run alone however dead
its worker is, so a run whose code server and run worker were killed (out of memory, a host going
down) kept its `slm4ie_extract` pool slot and every queued run waited for ever. With this launcher
in dagster.yaml (`run_launcher:`, shipped in deploy/dagster.instance.yaml) the monitoring daemon
asks `check_run_worker_health` every `poll_interval_seconds` and fails a run whose worker is gone
with what happened and what to do (dagster_layer/stale_runs.py; DAGSTER_NOTES 5). It judges in the daemon's
own process, so it works while the code server is down, and covers every STARTED run of this
host and pid namespace, launched or not (a `dagster asset materialize` run once its first step has
recorded itself); a run of another pid namespace under this host's name (a container with the
host's network) is left RUNNING, since its pids mean nothing here (stale_runs.py).
Runs are launched as DefaultRunLauncher does, with hidden tags naming the launching host and its
pid namespace (the worker's when the code server is local, a child of this process). A launch that
cannot reach the code server (it was killed with the run worker) reloads the code location and tries
again: the daemon's own code server is started afresh, and under `dg dev` the code-server proxy
starts a new gRPC process, which it otherwise does only when someone presses Reload. If that fails
too, the error goes to the queue, which tries again later (`max_user_code_failure_retries` in the
shipped settings).
"""

import socket

from dagster import DagsterRun
from dagster._core.errors import DagsterCodeLocationLoadError, DagsterUserCodeUnreachableError
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus
from dagster._core.launcher.default_run_launcher import DefaultRunLauncher

from .dagster_layer.stale_runs import (
    LAUNCHED_FROM_TAG,
    LAUNCHED_NAMESPACE_TAG,
    WHAT_TO_DO,
    lost_message,
    lost_process,
    pid_namespace,
)

# A reload whose old gRPC process is dead can report an error although the new one started (the proxy
# of `dg dev` fails to shut the dead one down): a second reload then finds it.
RELOAD_ATTEMPTS = 2


class ProcessCheckingRunLauncher(DefaultRunLauncher):
    """DefaultRunLauncher whose runs the run-monitoring daemon can find dead."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        self._instance.add_run_tags(run.run_id, {LAUNCHED_FROM_TAG: socket.gethostname(),
                                                  LAUNCHED_NAMESPACE_TAG: pid_namespace()})
        for attempt in range(RELOAD_ATTEMPTS + 1):
            try:
                return super().launch_run(context)
            except (DagsterUserCodeUnreachableError, DagsterCodeLocationLoadError):
                if attempt == RELOAD_ATTEMPTS or context.workspace is None or run.remote_job_origin is None:
                    raise
            location = run.remote_job_origin.repository_origin.code_location_origin.location_name
            self._instance.report_engine_event(
                f"slm4ie: the code server of {location!r} could not be reached (killed, or restarting); "
                "reloading the code location and launching again", run)
            context = LaunchRunContext(run, context.workspace.reload_code_location(location))

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        """FAILED when the run's process is known, of this host and pid namespace, and gone; RUNNING
        otherwise (alive, another host's or namespace's, or not known yet: Dagster's start timeout
        covers a worker that never started)."""
        lost = lost_process(self._instance, run)
        if lost is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(WorkerStatus.FAILED, lost_message(lost, run.status))

    def get_run_worker_debug_info(self, run: DagsterRun, include_container_logs: bool | None = True) -> str | None:
        """Appended by run monitoring to the failure of a dead, never-started or never-canceled run."""
        return WHAT_TO_DO
