"""Paired, interleaved runs of several trees of this repository on the same inputs: wall and
process-tree CPU of each configuration, medians, and each tree's ratios to the first tree's.

    python -m bench.paired --trees new=.,old=<a worktree of 55b55f4> --configs text:300:1:0:1,text:300:1:default:2
                           [--runs 5] [--data DIR] [--out FILE]

A tree is a checkout of this repository with its own `.venv` (`git worktree add DIR COMMIT`, then
`make venv` there). A configuration is `format:MB:files:split:workers`, the inputs and split of
bench/scaling.py's cases (split: `0` unsplit, `default`, or MiB) plus the worker count. Every run
is one `python -m bench.scaling --child` of a tree, a fresh process from an empty output folder,
doing what `slm4ie extract` does; the order is round-robin over configurations and trees (config 1
tree A, config 1 tree B, config 2 tree A, ...), so a drift in the machine's speed reaches every
pair alike. CPU is the whole process tree's (os.wait4: pool workers included), which neighbours on
a shared host disturb far less than the wall. The published text of every run is hashed, and the
trees must agree. Inputs are bench/scaling.py's, generated once under `--data`.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.scaling import DEFAULT_DATA, Case, file_digest, make_inputs, write_catalog


def run_once(tree: Path, yaml_path: Path, workers: int) -> dict:
    """One child of `tree`: wall, CPU of its process tree, stages, and the published text's digest."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    started = time.perf_counter()
    proc = subprocess.Popen([str(tree / ".venv" / "bin" / "python"), "-m", "bench.scaling", "--child",
                             str(yaml_path), str(workers)], cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{tree} {yaml_path} x{workers} failed:\n{err.decode(errors='replace')[-3000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "shards": result["shards"],
            "stages": result["stages"], "digest": file_digest(Path(result["text"]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", required=True, help="name=path,... (the first is the reference)")
    ap.add_argument("--configs", required=True, help="format:MB:files:split:workers,...")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.trees.split(","))]
    configs = []
    for text in args.configs.split(","):
        fmt, mb, files, split, workers = text.split(":")
        case = Case.parse(f"{fmt}:{mb}:{files}:{'default' if split in ('default', '0') else split}")
        raw = make_inputs(args.data, case)
        split_bytes = 0 if split == "0" else None if split == "default" else int(split) << 20
        configs.append((text, write_catalog(args.data, case, raw, split_bytes), int(workers)))
    results: dict[tuple[str, str], list[dict]] = {}
    for i in range(args.runs):
        for text, yaml_path, workers in configs:
            for name, tree in trees:
                shutil.rmtree(args.data / "out", ignore_errors=True)
                r = run_once(tree, yaml_path, workers)
                results.setdefault((text, name), []).append(r)
                print(f"run {i} {text} {name}: wall {r['wall']:.2f} s, CPU {r['cpu']:.2f} s, {r['shards']} shards",
                      file=sys.stderr, flush=True)
    head = ("| configuration | tree | shards | wall s (median) | CPU s (median) | wall / first tree "
            "| CPU / first tree | speed-up / first config | CPU / first config | same bytes |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    same = True

    def median(text: str, name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[(text, name)])

    for text, _, _ in configs:
        ref = results[(text, trees[0][0])]
        for name, _ in trees:
            rs = results[(text, name)]
            wall, cpu = median(text, name, "wall"), median(text, name, "cpu")
            first = configs[0][0]
            agree = {r["digest"] for r in rs} == {ref[0]["digest"]}
            same = same and agree
            ref_wall, ref_cpu = median(text, trees[0][0], "wall"), median(text, trees[0][0], "cpu")
            lines.append(f"| {text} | {name} | {rs[0]['shards']} | {wall:.2f} | {cpu:.2f} "
                         f"| {wall / ref_wall:.3f} | {cpu / ref_cpu:.3f} "
                         f"| {median(first, name, 'wall') / wall:.2f}x | {cpu / median(first, name, 'cpu'):.2f} "
                         f"| {'yes' if agree else 'NO'} |")
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
