"""Runs whose process died without telling the instance (SIGKILL, out of memory, power loss).

Such a run stays STARTED forever, and with dagster.yaml's run-granularity pool `slm4ie_extract`
(limit 1) it keeps its slot, so no queued run (UI, sensors, schedules) ever starts again. Dagster's
own `run_monitoring` does not help here: the default run launcher cannot check a run worker's
health, it knows nothing of runs started by `dagster asset materialize` (they are executed by the
CLI process itself), and its only remedy, `max_runtime_seconds`, would cancel healthy long
extractions too.

So the first extraction step of a run records on the run's tags which process executes it (host,
pid, and the process's start time since boot, so a reused pid is not taken for it). Before taking
work, and on every tick of `slm4ie_stale_run_sensor` (so the daemon cleans up too), runs of this
instance that are still active, carry these tags for this host and whose process is gone are
marked failed (canceled if a cancel was pending) with a message saying why: the slot is free.

Only this host's runs are judged (another host's pids mean nothing here), and only tags recorded
by the run itself (a re-execution copies its parent's tags; those name another run's process).
The step runs in the run's own process: definitions.py uses the in-process executor, and a step
in a child process (a multiprocess executor) records nothing, since that child exits while the
run goes on.
"""

import multiprocessing
import os
import socket
from collections.abc import Callable

from dagster import AssetExecutionContext, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

# Bookkeeping, not for people: under Dagster's hidden-tag prefix `.dagster/` the UI's Runs list and
# run page leave them out (dagster/_core/storage/tags.py, TagType.HIDDEN; docs/dagster-notes.md).
HIDDEN = ".dagster/"
HOST_TAG = f"{HIDDEN}slm4ie/host"
PID_TAG = f"{HIDDEN}slm4ie/pid"
START_TAG = f"{HIDDEN}slm4ie/process_start"  # "<boot id>/<start time in clock ticks since boot>" (Linux)
RUN_TAG = f"{HIDDEN}slm4ie/process_run"  # the run the three above were recorded by
ACTIVE = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING)

Log = Callable[[str], None]
_recorded: set[str] = set()  # run ids this process has tagged (steps of one run share the process)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) from /proc/<pid>/stat; None: no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def process_start(pid: int) -> str:
    """A value that changes when `pid` is reused: boot id and start time; "" without /proc."""
    if not os.path.isdir("/proc/self"):
        return ""
    stat = _proc_stat(pid)
    return f"{_boot_id()}/{stat[1]}" if stat else ""


def process_tags(run_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid), RUN_TAG: run_id}


def process_is_alive(pid: int, start: str) -> bool:
    """Whether the process recorded as (`pid`, `start`) still runs on this host."""
    if os.path.isdir("/proc/self"):
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):  # gone, or dead and not yet reaped by its parent
            return False
        return not start or start == f"{_boot_id()}/{stat[1]}"
    try:
        os.kill(pid, 0)  # no /proc: liveness only, a reused pid cannot be told apart
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record_run_process(instance: DagsterInstance, run: DagsterRun) -> bool:
    """Tag `run` with the process executing it, once per run and process; False when not recorded
    (already done, or this is a step child process that ends before the run does)."""
    if run.run_id in _recorded or multiprocessing.parent_process() is not None:
        return False
    tags = process_tags(run.run_id)
    if any(run.tags.get(k) != v for k, v in tags.items()):
        instance.add_run_tags(run.run_id, tags)
    _recorded.add(run.run_id)
    return True


def _dead_process(run: DagsterRun) -> tuple[int, str] | None:
    """(pid, host) of `run`'s recorded process when that process is gone, else None."""
    tags = _process_tags_of(run)
    if tags.get(RUN_TAG) != run.run_id:
        return None  # copied from the run this one re-executes, or not recorded yet
    try:
        pid = int(tags[PID_TAG])
    except (KeyError, ValueError):
        return None
    if pid <= 0:
        return None
    if process_is_alive(pid, tags.get(START_TAG, "")):
        return None
    return pid, tags[HOST_TAG]


def _process_tags_of(run: DagsterRun) -> dict[str, str]:
    """The run's process tags; a run recorded before they were hidden has them without the prefix."""
    tags = dict(run.tags)
    for name in (HOST_TAG, PID_TAG, START_TAG, RUN_TAG):
        legacy = name[len(HIDDEN):]
        if name not in tags and legacy in tags:
            tags[name] = tags[legacy]
    return tags


def _active_runs_of(instance: DagsterInstance, host: str) -> list[DagsterRun]:
    runs: dict[str, DagsterRun] = {}
    for tag in (HOST_TAG, HOST_TAG[len(HIDDEN):]):  # and runs recorded before the tags were hidden
        runs.update((r.run_id, r) for r in instance.get_runs(filters=RunsFilter(statuses=list(ACTIVE),
                                                                                 tags={tag: host})))
    return list(runs.values())


def reap_dead_runs(instance: DagsterInstance, log: Log | None = None) -> list[str]:
    """Mark this host's active runs whose recorded process is gone as failed (canceled when a
    cancel was pending), so they free their pool slot. Returns their run ids."""
    host = socket.gethostname()
    reaped: list[str] = []
    for run in _active_runs_of(instance, host):
        dead = _dead_process(run)
        if dead is None:
            continue
        # the process is gone, so the status read now is final: a run that ended normally meanwhile
        # has written its end event before exiting and is left alone
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status not in ACTIVE:
            continue
        pid, run_host = dead  # the same as `host`: the filter matched it
        message = (f"slm4ie: the process executing this run (pid {pid} on {run_host}) is gone: it was killed "
                   f"(SIGKILL, out of memory, shutdown) or crashed while the run was {current.status.value}. "
                   "Marked as ended so the run no longer holds its concurrency pool slot and queued runs can "
                   "start. Published outputs are unaffected: an interrupted run never changes them, and the "
                   "next run of each dataset removes what it left behind.")
        if current.status == DagsterRunStatus.CANCELING:
            instance.report_run_canceled(current, message)
            outcome = "canceled"
        else:
            instance.report_run_failed(current, message)
            outcome = "failed"
        reaped.append(current.run_id)
        if log is not None:
            log(f"run {current.run_id} marked {outcome}: its process (pid {pid} on {run_host}) is gone")
    return reaped


def before_extraction(context: AssetExecutionContext) -> None:
    """Called by each extraction step before it takes work: record this run's process, and on the
    run's first step here free the slots of runs whose process died. Housekeeping only: an error
    here is logged, never fails the extraction."""
    try:
        if record_run_process(context.instance, context.run):
            reap_dead_runs(context.instance, log=context.log.warning)
    except Exception as exc:  # noqa: BLE001 - a storage hiccup must not cost the extraction
        context.log.warning(f"could not check for runs whose process died ({type(exc).__name__}: {exc})")
