"""Runs whose process died without telling the instance (SIGKILL, out of memory, a lost host).

Such a run stays STARTED forever, and with dagster.yaml's run-granularity pool `slm4ie_extract` it
keeps its slot, so no queued run (UI, sensors, schedules) ever starts again. Dagster's
`run_monitoring` daemon ends runs stuck STARTING or CANCELING by itself, but for a STARTED run it
asks the run launcher whether the worker is alive, and the default run launcher cannot tell. So
the project's launcher (run_launcher.py) answers with `lost_process` below, and the monitoring
daemon (no code server needed) fails the run with `lost_message` (DAGSTER_NOTES 5).

Which process executes a run: the first extraction step records it on the run's tags (host, pid,
and the process's start time since boot, so a reused pid is not taken for it). That is the run
worker a launcher started (a multiprocessing child of the code server), or the CLI process of
`dagster asset materialize`; a step child of a multiprocess executor is neither and records
nothing, since it exits while the run goes on. Before the first step has recorded, a launched
run's worker is still known: Dagster logs "Started process for run (pid: N)" and the gRPC address
it was launched through; with a local code server the launching host (tagged by run_launcher.py)
is the worker's host, and a pid whose process started after that event is a reused one.

Only runs of this host and of this process's pid namespace are judged, and only by tags the run
recorded itself (a re-execution copies its parent's tags; those name another run's process). A pid
means something only inside its pid namespace: a container sharing the host's name (`docker
--network host`, Kubernetes `hostNetwork`, a compose `hostname:`) has pids of its own, and its pid 1
seen from outside is another process or none. So the namespace (boot id and the namespace's inode)
is recorded beside the pid, and a run of another namespace is left to whoever shares it (its own
next step, sensor or daemon), to Dagster's run monitoring, or to Terminate. A worker known only
from the launch event lives in the code server's namespace: the launcher's, tagged by
run_launcher.py, when the code server is local; unknown when it is addressed by a host name.
Runs recorded before namespaces were (no namespace tag) are judged as they were then.
Where the launcher is not ours (an instance without the shipped settings), the next extraction
step and `slm4ie_stale_run_sensor` mark such runs failed instead (`reap_dead_runs`).
"""

import json
import multiprocessing
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from dagster import (
    AssetExecutionContext,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
)

# Bookkeeping, not for people: under Dagster's hidden-tag prefix `.dagster/` the UI's Runs list and
# run page leave them out (dagster/_core/storage/tags.py, TagType.HIDDEN; docs/dagster-notes.md).
HIDDEN = ".dagster/"
HOST_TAG = f"{HIDDEN}slm4ie/host"
PID_TAG = f"{HIDDEN}slm4ie/pid"
START_TAG = f"{HIDDEN}slm4ie/process_start"  # "<boot id>/<start time in clock ticks since boot>" (Linux)
RUN_TAG = f"{HIDDEN}slm4ie/process_run"  # the run the three above were recorded by
NAMESPACE_TAG = f"{HIDDEN}slm4ie/pid_namespace"  # "<boot id>/<inode>" of the pid's namespace
LAUNCHED_FROM_TAG = f"{HIDDEN}slm4ie/launched_from"  # host of the process that launched it (run_launcher.py)
LAUNCHED_NAMESPACE_TAG = f"{HIDDEN}slm4ie/launched_namespace"  # its pid namespace (run_launcher.py)
UNKNOWN_NAMESPACE = "unknown"  # a namespace no process can be judged in (never equal to a judge's)
GRPC_INFO_TAG = ".dagster/grpc_info"  # Dagster's: the code server address a run was launched through
WORKER_STARTED = "Started process for run"  # Dagster's engine event from a launched run worker
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
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


def pid_namespace() -> str:
    """This process's pid namespace as "<boot id>/<inode>", the scope in which its pids mean
    something; "" without /proc (no namespaces to tell apart); `UNKNOWN_NAMESPACE` when /proc is
    another namespace's (its numbers are not this process's pids) or cannot be read."""
    if not os.path.isdir("/proc/self"):
        return ""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
        own_proc = os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return UNKNOWN_NAMESPACE
    inode = link.partition("[")[2].rstrip("]")
    if not own_proc or not inode.isdigit():
        return UNKNOWN_NAMESPACE
    return f"{_boot_id()}/{inode}"


def judged_here(namespace: str | None) -> bool:
    """Whether a pid recorded in `namespace` can be judged by this process: the same namespace, or
    none recorded (tags written before namespaces were: judged as then). Never from a /proc that
    is not this namespace's."""
    here = pid_namespace()
    if here == UNKNOWN_NAMESPACE:
        return False
    return namespace is None or namespace == here


def process_tags(run_id: str) -> dict[str, str]:
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), START_TAG: process_start(pid),
            NAMESPACE_TAG: pid_namespace(), RUN_TAG: run_id}


def process_is_alive(pid: int, start: str, started_before: float | None = None) -> bool:
    """Whether the process recorded as (`pid`, `start`) still runs on this host; with no recorded
    start, a process that started after `started_before` (epoch seconds) is a reused pid."""
    if os.path.isdir("/proc/self"):
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):  # gone, or dead and not yet reaped by its parent
            return False
        if start:
            return start == f"{_boot_id()}/{stat[1]}"
        started = _started_at(int(stat[1]))
        return started_before is None or started is None or started <= started_before + 1.0
    try:
        os.kill(pid, 0)  # no /proc: liveness only, a reused pid cannot be told apart
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _started_at(ticks: int) -> float | None:
    """Epoch seconds of a process start given in clock ticks since boot; None when unknown."""
    try:
        with open("/proc/stat") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class RunProcess:
    """The process executing a run, as this instance knows it."""

    host: str
    pid: int
    start: str = ""  # boot id and start ticks, when the process recorded itself
    started_before: float | None = None  # when only the launch event names it: its time
    namespace: str | None = None  # its pid namespace (pid_namespace); None: recorded before namespaces were


def launched_worker(instance: DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """(pid, time) of Dagster's latest "Started process for run (pid: N)" event: a launched run's worker.
    Newest first: a run whose launch the queue retried has many engine events before it."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=500,
                                           ascending=False).records
    for record in records:
        entry = record.event_log_entry
        event = entry.dagster_event
        if event is None or not (event.message or "").startswith(WORKER_STARTED):
            continue
        pid = event.engine_event_data.metadata.get("pid")
        if pid is not None and str(pid.value).isdigit():
            return int(str(pid.value)), entry.timestamp
    return None


def worker_host(tags: dict[str, str]) -> tuple[str, str | None] | None:
    """(host, pid namespace) of a launched run's worker: the code server's. For a local code server,
    a child of the launching process: the launcher's host and namespace (tagged by run_launcher.py;
    no namespace tag: launched before namespaces were recorded). A code server named by a host name
    may be another namespace under that name: `UNKNOWN_NAMESPACE`. None when the host is unknown."""
    try:
        grpc = json.loads(tags.get(GRPC_INFO_TAG, ""))
    except ValueError:
        return None
    host = grpc.get("host") if isinstance(grpc, dict) else None
    if not host:
        return None
    if host in LOCAL_HOSTS or grpc.get("socket"):
        launched_from = tags.get(LAUNCHED_FROM_TAG)
        return (launched_from, tags.get(LAUNCHED_NAMESPACE_TAG)) if launched_from else None
    return str(host), UNKNOWN_NAMESPACE


def run_process(instance: DagsterInstance, run: DagsterRun) -> RunProcess | None:
    """Who executes `run`: the process its first extraction step recorded, else the run worker
    Dagster says it started; None while neither is known."""
    tags = _process_tags_of(run)
    if tags.get(RUN_TAG) == run.run_id:  # not copied from the run this one re-executes
        pid = tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) > 0 and tags.get(HOST_TAG):
            return RunProcess(tags[HOST_TAG], int(pid), tags.get(START_TAG, ""), namespace=tags.get(NAMESPACE_TAG))
    where = worker_host(dict(run.tags))
    worker = launched_worker(instance, run.run_id) if where else None
    if where is None or worker is None:
        return None
    return RunProcess(where[0], worker[0], started_before=worker[1], namespace=where[1])


def lost_process(instance: DagsterInstance, run: DagsterRun) -> RunProcess | None:
    """`run`'s process when it is known, of this host and pid namespace, and gone; None otherwise
    (alive, another host's or namespace's, or not known yet)."""
    process = run_process(instance, run)
    if process is None or process.host != socket.gethostname() or not judged_here(process.namespace):
        return None
    if process_is_alive(process.pid, process.start, process.started_before):
        return None
    return process


def lost_message(process: RunProcess, status: DagsterRunStatus) -> str:
    """What happened, for the run's failure event (the remedy is `WHAT_TO_DO`)."""
    return (f"slm4ie: the process executing this run (pid {process.pid} on {process.host}) is gone: it was "
            f"killed (SIGKILL, out of memory, its code server or host shut down) or crashed while the run was "
            f"{status.value}. Marked as ended so the run no longer holds its concurrency pool slot and queued runs "
            "can start.")


WHAT_TO_DO = ("What to do: launch the run again (Re-execute, or wait for the sensor to request it); parts it "
              "finished are reused. Published outputs are unaffected: an interrupted run never changes them, and "
              "the next run of each dataset removes what it left behind. If the process was killed for memory, "
              "lower `max_workers` in extract.yaml.")


def record_run_process(instance: DagsterInstance, run: DagsterRun) -> bool:
    """Tag `run` with the process executing it, once per run and process; False when not recorded
    (already done, or this is a step child process that ends before the run does)."""
    if run.run_id in _recorded or not _executes_run(instance, run.run_id):
        return False
    tags = process_tags(run.run_id)
    if any(run.tags.get(k) != v for k, v in tags.items()):
        instance.add_run_tags(run.run_id, tags)
    _recorded.add(run.run_id)
    return True


def _executes_run(instance: DagsterInstance, run_id: str) -> bool:
    """Whether this process executes the run: a process of its own (the CLI's), or the run worker a
    launcher started as a multiprocessing child of the code server; not a step child process."""
    if multiprocessing.parent_process() is None:
        return True
    worker = launched_worker(instance, run_id)
    return worker is not None and worker[0] == os.getpid()


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
    for tag in (HOST_TAG, HOST_TAG[len(HIDDEN):], LAUNCHED_FROM_TAG):  # and runs tagged before the tags were hidden
        runs.update((r.run_id, r) for r in instance.get_runs(filters=RunsFilter(statuses=list(ACTIVE),
                                                                                 tags={tag: host})))
    return list(runs.values())


def reap_dead_runs(instance: DagsterInstance, log: Log | None = None) -> list[str]:
    """Mark this host's active runs whose process is gone as failed (canceled when a cancel was
    pending), so they free their pool slot. Returns their run ids."""
    reaped: list[str] = []
    for run in _active_runs_of(instance, socket.gethostname()):
        lost = lost_process(instance, run)
        if lost is None:
            continue
        # the process is gone, so the status read now is final: a run that ended normally meanwhile
        # has written its end event before exiting and is left alone
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status not in ACTIVE:
            continue
        message = f"{lost_message(lost, current.status)} {WHAT_TO_DO}"
        if current.status == DagsterRunStatus.CANCELING:
            instance.report_run_canceled(current, message)
            outcome = "canceled"
        else:
            instance.report_run_failed(current, message)
            outcome = "failed"
        reaped.append(current.run_id)
        if log is not None:
            log(f"run {current.run_id} marked {outcome}: its process (pid {lost.pid} on {lost.host}) is gone")
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
