"""The benchmark suite: every extractor, serial and with 2 workers, whole-process timings, and the
pipeline's efficiency against its floor.

    python -m bench.run [--scale 1.0] [--runs 3] [--workers 1,2] [--only conllu,text] [--data DIR]
                        [--split-bytes N] [--no-profile] [--results bench/RESULTS.md | --no-write]
                        [--note "measured under load"]

Inputs come from bench.generate (about 200 MB per dataset at scale 1, text 500 MB, reused when
already generated with the same size): the multi-file datasets and SPLIT_DATASETS, one big file
each (text_1file 500 MB), which use a second core only through splitting. Each measured run is a
fresh `python -m bench.run --child` process calling `slm4ie_assets.pipeline.extract_dataset(force=True)`,
so imports, pool start-up and publishing are all included. One worker runs unsplit
(`split_bytes: 0`, the reference bytes); two workers run with `--split-bytes` (default
DEFAULT_SPLIT_MIB MiB x scale: every single-file dataset in at least 4 ranges, text_1file in 10, the
multi-file datasets' larger files in 2-4), and their output must be byte-identical to the 1-worker
run's. The table reports the median of `--runs` runs, and prints to stdout (RESULTS.md too, unless
`--no-write`).

Pipeline efficiency, "in the same run": one child process (`bench.children.child_profile`, run
`--runs` times) times, after its imports and a warm-up document, first the floor (the extractor
over every file, each document through `encode_document`, nothing written), then
`extract_dataset(force=True, workers=1)` unsplit. Interpreter start-up is in neither. Efficiency =
floor seconds / pipeline seconds, in wall time (the target) and in process CPU (helper threads
included; the number to read on a shared machine, where wall time mostly measures the neighbours).

Peak RSS: `os.wait4` returns the child's rusage, and on Linux its `ru_maxrss` is the maximum
over the child and every descendant it waited for (the kernel folds each reaped process's peak
into its parent's `cmaxrss`), so it is the largest single process of the tree, pool workers
included. Two workers run at the same time, so the tree's peak is up to their sum: a sampler
also reads /proc every 50 ms and keeps the largest sum of RSS over the child and its
descendants ("tree RSS").

The "where the time goes" table comes from the first profile run, which also times the
extractor alone; times there are CPU seconds, and the sidecar's gzip is measured by compressing
its uncompressed bytes again the way gzipio does. The sidecar is also compared with `gzip -9`.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.generate import ALL_DATASETS, input_bytes
from bench.table import render

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(tempfile.gettempdir()) / "slm4ie-bench"
DEFAULT_SPLIT_MIB = 48  # x scale; see the docstring


# ----------------------------------------------------------------------------- parent


def _tree_rss(root_pid: int) -> int:
    """Sum of RSS bytes of `root_pid` and its descendants, walking /proc/<pid>/task/*/children
    (cheap enough to sample often without taking CPU from the measured processes)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * page
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def measure(args: list[str]) -> dict:
    """Run one child; wall seconds, CPU seconds and peak RSS of its whole tree, and its JSON line."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench.run", "--child", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak_tree = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            try:
                peak_tree[0] = max(peak_tree[0], _tree_rss(proc.pid))
            except Exception:
                pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{err.decode(errors='replace')[-3000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result.update(wall=wall, cpu=ru.ru_utime + ru.ru_stime, maxrss=ru.ru_maxrss * 1024, tree_rss=peak_tree[0])
    return result


def output_digest(root: Path, key: str) -> str:
    h = hashlib.sha256()
    for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
        p = root / "out" / name
        if p.exists():
            with open(p, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    h.update(chunk)
    return h.hexdigest()[:16]


def bench_dataset(root: Path, yaml_path: Path, key: str, workers_list: list[int], runs: int, profile: bool,
                  split_bytes: int) -> dict:
    mb = input_bytes(root, key) / 1e6
    row: dict = {"key": key, "mb": mb, "by_workers": {}, "digests": {}}
    for w in workers_list:
        split = 0 if w == 1 else split_bytes
        results = [measure([str(yaml_path), key, str(w), str(split)]) for _ in range(runs)]
        row["digests"][w] = output_digest(root, key)
        row["by_workers"][w] = {
            "wall": statistics.median(r["wall"] for r in results),
            "cpu": statistics.median(r["cpu"] for r in results),
            "maxrss": max(r["maxrss"] for r in results),
            "tree_rss": max(r["tree_rss"] for r in results),
            **{k: results[0][k] for k in ("docs", "tokens", "sidecar_bytes", "shards")},
        }
        print(f"{key} workers={w}: {mb / row['by_workers'][w]['wall']:.1f} MB/s wall, "
              f"{mb / row['by_workers'][w]['cpu']:.1f} MB/s cpu", file=sys.stderr)
    if profile:
        row["profile"] = [measure(["--profile", str(yaml_path), key, "1" if i == 0 else "0"]) for i in range(runs)]
        eff = [r["floor_wall"] / r["pipe_wall"] for r in row["profile"]]
        print(f"{key} efficiency: {statistics.median(eff):.2f} wall", file=sys.stderr)
    return row


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        from bench.children import main as child_main

        child_main(argv[1:])
        return 0
    args = _parse_args(argv)
    keys = [k for k in args.only.split(",") if k] or list(ALL_DATASETS)
    root = args.data / f"scale-{args.scale:g}"
    split_bytes = args.split_bytes if args.split_bytes is not None else max(1 << 20, int(
        DEFAULT_SPLIT_MIB * args.scale) << 20)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    # generated in a child: a parent grown by `datasets` would lend its RSS to every forked child's ru_maxrss
    subprocess.run([sys.executable, "-m", "bench.generate", str(root), "--scale", str(args.scale), "--files",
                    str(args.files), "--only", ",".join(keys)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    yaml_path = root / "extract.yaml"
    workers = [int(w) for w in args.workers.split(",")]
    rows = [bench_dataset(root, yaml_path, k, workers, args.runs, not args.no_profile, split_bytes) for k in keys]
    text = render(rows, args, started, load, split_bytes)
    if not args.no_write:
        args.results.write_text(text)
    print(text)
    bad = [r["key"] for r in rows if len(set(r["digests"].values())) > 1]
    if bad:
        print(f"OUTPUT DIFFERS between worker counts: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def _parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="input size factor (1.0: ~200 MB each, text 500 MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--files", type=int, default=4, help="files per multi-file dataset")
    ap.add_argument("--only", default="", help="comma-separated dataset keys (default: all, split ones too)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"generated inputs (default {DEFAULT_DATA})")
    ap.add_argument("--split-bytes", type=int, default=None,
                    help=f"split_bytes of the 2-worker runs (default {DEFAULT_SPLIT_MIB} MiB x scale, at least 1 MiB)")
    ap.add_argument("--no-profile", action="store_true", help="skip the efficiency and where-the-time-goes runs")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "RESULTS.md")
    ap.add_argument("--no-write", action="store_true", help="print the table only; leave --results as it is")
    ap.add_argument("--note", default="", help="a line printed above the table (e.g. 'measured under load')")
    return ap.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
