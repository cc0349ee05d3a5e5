"""The forkserver a run's pool forks its workers from (engine/worker_pool.py), and starting it early.

Starting the server is an interpreter start plus the imports in `PRELOAD` (~0.17 s on the 2-core
bench machine). The pool asks for it only after the run has imported the pipeline and planned,
so a run that starts it as soon as it knows it wants workers (`start_early`: the CLI's `extract`,
right after reading extract.yaml) has the server importing on another core while its own process
imports the pipeline, and the first task starts almost as soon as the pool opens
(docs/splitting.md, "Fixed costs"). This module imports only the standard library (and
utils/cpus.py, which does too), so that starting the server early costs the caller nothing it would
not import anyway.
"""

import multiprocessing
from multiprocessing import forkserver

from ..utils.cpus import usable_cpus

# What every worker needs (the part writer, the extractors, the stage clock), imported once by the
# server: a new worker then costs a fork, not an interpreter start and its imports.
PRELOAD = ["slm4ie_assets.engine.pool_worker", "slm4ie_assets.engine.stage_clock"]


def effective_workers(requested: int | None, default: int) -> int:
    """Workers for a run: `requested` (the CLI's --workers, an asset's config), else `default`
    (max_workers in extract.yaml); 0 or less means one per CPU this process may use (a job pinned
    to 16 cores of a 64-core node gets 16, not 64 workers contending for them)."""
    n = default if requested is None else requested
    return usable_cpus() if n <= 0 else max(1, n)


def pool_context() -> multiprocessing.context.BaseContext:
    """forkserver where the platform has it (it is safe with threads in the parent), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # read when the server starts: once per process
    return ctx


def start_early(workers: int) -> bool:
    """Start the server now if a run of `workers` may pool (more than one) and it is not running;
    returns at once (the server imports on its own). True if a server is running or starting. A
    run that ends up not pooling (one stale shard, nothing split) only leaves an idle server,
    which exits with this process."""
    if workers <= 1 or "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    pool_context()  # sets the preload, which the server reads when it starts
    forkserver.ensure_running()
    return True
