"""What starting the extraction pool costs: spawned interpreters against forkserver workers.

    python -m bench.pool_start [--workers 2,16]

Each measurement is a fresh process (`--child METHOD N`) that opens a process pool of N workers of
the start method (for forkserver preloading what engine/pool_server.py preloads, as the run's
engine/worker_pool.py does; the pool here is the standard library's, the start-up cost is the
method's), gives every worker a task that imports what an extraction task needs, and reports the
wall seconds until all tasks are done and the CPU seconds of the workers (reaped: a forkserver is
stopped first, so its children's CPU reaches this process).
"""

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _task(_: int) -> int:
    import slm4ie_assets.engine.pool_worker  # noqa: F401  (already there in a preloaded forkserver worker)

    return os.getpid()


def child(method: str, workers: int) -> None:
    sys.path.insert(0, str(REPO))
    from slm4ie_assets.engine.pool_server import PRELOAD

    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    started = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        list(pool.map(_task, range(workers * 4), chunksize=1))
    wall = time.perf_counter() - started
    if method == "forkserver":
        from bench.children import reap_pool_workers

        reap_pool_workers()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="2,16")
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    print("| start method | workers | wall s | workers' CPU s |\n|---|---:|---:|---:|")
    for workers in (int(w) for w in args.workers.split(",")):
        for method in ("spawn", "forkserver"):
            out = subprocess.run([sys.executable, "-m", "bench.pool_start", "--child", method, str(workers)],
                                 cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            print(f"| {method} | {workers} | {result['wall']:.2f} | {result['cpu']:.2f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
