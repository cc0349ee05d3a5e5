"""Processes a test started or a run forked: a pool's workers from /proc, and a whole process group
stopped (a daemon or `dagster dev` with its webserver, code servers and run workers)."""

import os
import signal
import subprocess


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            found += map(int, fh.read().split())
    return found


def pool_workers() -> list[int]:
    """This process's pool workers: the children of its forkserver (engine/worker_pool.py), or spawned
    children where the platform has no forkserver (not multiprocessing's resource tracker)."""
    found = []
    for pid in children(os.getpid()):
        with open(f"/proc/{pid}/cmdline", "rb") as cmd:
            line = cmd.read()
        if b"spawn_main" in line:
            found.append(pid)
        elif b"forkserver" in line:
            found += children(pid)
    return found


def stop_group(leader: subprocess.Popen) -> None:
    """The process group a test started with `start_new_session=True`: SIGTERM, SIGKILL after 20 s."""
    os.killpg(leader.pid, signal.SIGTERM)
    try:
        leader.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
