"""The CPUs this process may run on, the one count every pool and thread budget starts from."""

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the platform says; a container's
    cgroup quota is not seen): a job pinned to 16 cores of a 64-core node counts 16."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
