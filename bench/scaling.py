"""Scaling: where a run's time goes as workers grow, and what the 2-core figures project for more.

    python -m bench.scaling [--cases text:300:1:32,conllu:64:32:default] [--workers 1,2] [--runs 3]
                            [--data DIR] [--out FILE] [--project 4,8,16]

A case is `format:MB:files:split`, where split is `default` (no `split_bytes` in extract.yaml: 8 MiB
ranges on every host since issue 41, 32 MiB before; docs/splitting.md) or a size in MiB. Inputs
are generated once per case (bench.generate's writers; a big text file is one generated 64 MB
block written again and again, which the extraction cannot tell from fresh text). The baseline of
every case is one worker with splitting off (`split_bytes: 0`): the reference bytes and time.

Each measured run is a fresh child process (`python -m bench.scaling --child ...`) that does what
`slm4ie extract` does (reads extract.yaml, starts the pool's server early, imports the pipeline)
and calls `extract_dataset(force=True)`, so imports, pool start-up, planning and publishing are all
in the wall time; the parent hashes the output after the child's clock stops. The runs of a case
are interleaved (1w, 2w, 1w, 2w, ...), so a drift in the machine's speed reaches both sides of
every ratio. The child reports the pipeline's own stage clock (`RunReport.stage_seconds`, see
engine/stage_clock.py): the serial stages (plan, pool start, the publish tail after the last part)
in wall seconds, the pooled ones (count, extract) in worker seconds summed over the workers, and
the pool's CPU seconds per pooled stage (`RunReport.stage_cpu`). The parent adds CPU seconds of the
whole process tree (os.wait4), the peak RSS of its largest process, and checks that the published
bytes equal the baseline's. "CPU ms / range" is what splitting added to the run's CPU, per shard
it added: (CPU - the baseline's CPU) / (shards - the baseline's shards); with two workers it holds
the count and the pool too.

The projected rows (`--project`, "projected" in the run column, no bytes checked) are Amdahl's
law over the last measured row's stages, in CPU seconds so that a busy host's neighbours do not
inflate them: the serial wall seconds stay, except the publish tail, which grows with the share of
the output the last chains hold back from the stager ((W-1)/W with W chains of one file); the
pooled CPU seconds are shared by the workers, at most one per shard (10 ranges keep 10 of 16
busy), and the count CPU grows with the bytes counted, which the parent takes from the range
scheduler's own plan for W workers (`RangeBook.to_count`, `chains_per_file`). The shards are those
planned here: since issue 32 a 16-core host plans the same ones. A projection from this machine's
figures, not a measurement.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(tempfile.gettempdir()) / "slm4ie-scaling"
DEFAULT_CASES = "text:300:1:32,text:300:1:default,conllu:64:32:default"
BLOCK_MB = 64  # a big text file repeats one generated block of this size
SERIAL_STAGES = ("plan", "pool_start", "publish")
POOLED_STAGES = ("count", "extract")


@dataclass(frozen=True)
class Case:
    fmt: str
    mb: int
    files: int
    split_mib: int | None  # None: the default (shards.range_bytes: 8 MiB ranges, whatever the host)

    @property
    def name(self) -> str:
        split = "default" if self.split_mib is None else f"{self.split_mib}MiB"
        return f"{self.fmt}-{self.mb}MB-{self.files}f-{split}"

    @classmethod
    def parse(cls, text: str) -> "Case":
        fmt, mb, files, split = text.split(":")
        if fmt not in ("text", "conllu"):
            raise SystemExit(f"case {text!r}: the format must be text or conllu")
        return cls(fmt, int(mb), int(files), None if split == "default" else int(split))


# ----------------------------------------------------------------------------- inputs


def make_inputs(root: Path, case: Case) -> Path:
    """raw/<fmt>/ of `case` under `root` (reused when a stamp says it is complete)."""
    raw = root / case.fmt / f"{case.fmt}_{case.mb}mb_{case.files}f"
    stamp = raw / ".complete"
    if stamp.exists():
        return raw
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir(parents=True)
    per_file = case.mb * 1_000_000 // case.files
    if case.fmt == "text":
        _repeated_text(raw, per_file, case.files)
    else:
        _conllu_files(raw, per_file, case.files)
    stamp.write_text("")
    return raw


def _repeated_text(raw: Path, per_file: int, files: int) -> None:
    from bench.gen_tei import Words
    from bench.generate import gen_text

    rng = random.Random(7)
    block = raw.parent / f".block-{min(per_file, BLOCK_MB * 1_000_000)}.txt"
    if not block.exists():
        gen_text(block, min(per_file, BLOCK_MB * 1_000_000), Words(rng), rng, "block")
    data = block.read_bytes()  # ends with a blank line, so copies join on a block boundary
    for i in range(files):
        with open(raw / f"text_{i:02d}.txt", "wb") as fh:
            written = 0
            while written < per_file:
                fh.write(data)
                written += len(data)


def _one_conllu(args: tuple[Path, int, int]) -> None:
    from bench.gen_tei import Words
    from bench.generate import gen_conllu

    path, size, seed = args
    rng = random.Random(seed)
    gen_conllu(path, size, Words(rng), rng, path.stem)


def _conllu_files(raw: Path, per_file: int, files: int) -> None:
    from concurrent.futures import ProcessPoolExecutor

    weights = [files + i for i in range(files)]  # unequal sizes, as real corpora have
    sizes = [per_file * files * w // sum(weights) for w in weights]
    jobs = [(raw / f"conllu_{i:02d}.conllu", size, i) for i, size in enumerate(sizes)]
    with ProcessPoolExecutor(max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        list(pool.map(_one_conllu, jobs))


def write_catalog(root: Path, case: Case, raw: Path, split_bytes: int | None) -> Path:
    """An extract.yaml whose one dataset is `raw` (split_bytes None: left out, the default)."""
    lines = [f"input_dir: {raw.parent}", f"output_dir: {root / 'out'}", "datasets:",
             f"  {raw.name}:", f"    extractor: {case.fmt}", "    domain: mixed"]
    if split_bytes is not None:
        lines.append(f"    split_bytes: {split_bytes}")
    path = root / f"extract-{case.name}-{split_bytes}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- child


def child(yaml_path: str, workers: int) -> None:
    """One measured run: the whole job as the CLI would run it, and the stage clock."""
    sys.path.insert(0, str(REPO))
    from bench.children import reap_pool_workers
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.engine.pool_server import start_early

    catalog = load_catalog(yaml_path)
    start_early(workers)  # as `slm4ie extract` does, before it imports the pipeline
    from slm4ie_assets.pipeline import extract_dataset

    (key,) = catalog.datasets
    report = extract_dataset(catalog.dataset(key), catalog, force=True, workers=workers)
    reap_pool_workers()  # so the parent's os.wait4 counts the workers' CPU
    print(json.dumps({"shards": report.shards, "stages": report.stage_seconds, "stage_cpu": report.stage_cpu,
                      "text": str(catalog.dataset(key).text_path)}))


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256 (bench.paired compares trees by it too)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------- parent


def measure(yaml_path: Path, workers: int) -> dict:
    """One child: its JSON line, wall and CPU seconds of its whole tree (os.wait4: pool workers
    included), and the peak RSS of its largest process."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "bench.scaling", "--child", str(yaml_path), str(workers)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"child {yaml_path} x{workers} failed:\n{err.read().decode(errors='replace')[-3000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    text = Path(result["text"])  # hashed here, after the child's clock: checking the bytes is not the job
    result.update(wall=wall, cpu=ru.ru_utime + ru.ru_stime, maxrss_mb=ru.ru_maxrss / 1024, digest=file_digest(text))
    return result


def run_case(root: Path, case: Case, workers_list: list[int], runs: int) -> list[dict]:
    raw = make_inputs(root, case)
    mb = sum(p.stat().st_size for p in raw.iterdir() if p.is_file() and not p.name.startswith(".")) / 1e6
    baseline_yaml = write_catalog(root, case, raw, 0)
    split = None if case.split_mib is None else case.split_mib << 20
    configs = [("1w unsplit", baseline_yaml, 1)] + [
        (f"{w}w", write_catalog(root, case, raw, split), w) for w in workers_list]
    results: dict[str, list[dict]] = {label: [] for label, _, _ in configs}
    for _ in range(runs):  # interleaved, so that a drift in the machine's speed reaches every ratio alike
        for label, yaml_path, w in configs:
            shutil.rmtree(root / "out", ignore_errors=True)  # every run from nothing: no old version to retire
            results[label].append(measure(yaml_path, w))
    rows = []
    for label, _, w in configs:
        done = results[label]
        stages = {k: statistics.median(r["stages"].get(k, 0.0) for r in done)
                  for k in SERIAL_STAGES + POOLED_STAGES + ("stage",)}
        stage_cpu = {k: statistics.median(r.get("stage_cpu", {}).get(k, 0.0) for r in done) for k in POOLED_STAGES}
        rows.append({"case": case.name, "run": label, "workers": w, "mb": mb, "shards": done[0]["shards"],
                     "yaml": str(yaml_path), "stage_cpu": stage_cpu,
                     "wall": statistics.median(r["wall"] for r in done),
                     "cpu": statistics.median(r["cpu"] for r in done),
                     "maxrss_mb": max(r["maxrss_mb"] for r in done), "stages": stages,
                     "digest": done[0]["digest"], "digests_agree": len({r["digest"] for r in done}) == 1})
        print(_line(rows[0], rows[-1]), file=sys.stderr, flush=True)
    return rows


def _line(base: dict, row: dict) -> str:
    return (f"{row['case']} {row['run']}: {row['mb'] / row['wall']:.1f} MB/s, "
            f"speed-up {base['wall'] / row['wall']:.2f}x, CPU {row['cpu'] / base['cpu']:.2f}x, "
            f"{row['shards']} shards, stages "
            + " ".join(f"{k}={v:.2f}" for k, v in row["stages"].items()))


def counted_bytes(yaml_path: str, workers: int) -> int:
    """The bytes the range scheduler counts before extracting with `workers` (its own plan)."""
    sys.path.insert(0, str(REPO))
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.engine.range_scheduler import RangeBook, chains_per_file
    from slm4ie_assets.extractors.registry import get_extractor_class
    from slm4ie_assets.extractors.splitting import RangeStrategy
    from slm4ie_assets.planning.shards import list_shards

    catalog = load_catalog(yaml_path)
    (key,) = catalog.datasets
    spec = catalog.dataset(key)
    splitter = get_extractor_class(spec.extractor).splitter
    if splitter is None or splitter.strategy is RangeStrategy.SPECULATION:
        return 0  # clean files of a speculative format count nothing
    shards = list_shards(spec, catalog.shard_group_threshold)
    ranges = RangeBook([s.files[0] for s in shards]).to_count(chains_per_file(shards, workers))
    return sum((f.range.end or 0) - f.range.start for f in ranges if f.range is not None)


def project(base: dict, row: dict, target: int) -> tuple[float, float]:
    """(speed-up, CPU / baseline) of `target` workers, projected from one measured row (Amdahl over
    its stages, in CPU seconds; module docstring)."""
    w = max(1, row["workers"])
    stages, cpu = row["stages"], row["stage_cpu"]
    counted_now, counted_then = counted_bytes(row["yaml"], w), counted_bytes(row["yaml"], target)
    count_then = cpu["count"] * counted_then / counted_now if counted_now else 0.0
    held_now, held_then = (w - 1) / w, (target - 1) / target  # the output the last chains hold back
    tail = base["stages"]["publish"] + (stages["publish"] - base["stages"]["publish"]) * (
        held_then / held_now if held_now else 1.0)
    busy = min(target, max(1, row["shards"]))  # no more workers at work than there are shards
    wall = stages["plan"] + stages["pool_start"] + tail + (cpu["extract"] + count_then) / busy
    run_cpu = row["cpu"] + count_then - cpu["count"]
    return base["wall"] / wall, run_cpu / base["cpu"]


def table(rows: list[dict], targets: list[int]) -> str:
    head = ("| case | run | shards | MB/s | speed-up | CPU / 1w | CPU ms / range | plan | pool start | count (w-s) "
            "| extract (w-s) | stage | publish | peak RSS MB | bytes = 1w |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for i, row in enumerate(rows):
        if row["run"] == "1w unsplit":
            base = row
        st = row["stages"]
        extra = row["shards"] - base["shards"]  # the ranges splitting added
        per_range = f"{1000 * (row['cpu'] - base['cpu']) / extra:.1f}" if extra > 0 else ""
        out.append(f"| {row['case']} | {row['run']} | {row['shards']} | {row['mb'] / row['wall']:.1f} "
                   f"| {base['wall'] / row['wall']:.2f}x | {row['cpu'] / base['cpu']:.2f} | {per_range} "
                   f"| {st['plan']:.2f} | {st['pool_start']:.2f} | {st['count']:.2f} | {st['extract']:.2f} "
                   f"| {st['stage']:.2f} | {st['publish']:.2f} | {row['maxrss_mb']:.0f} "
                   f"| {'yes' if row['digest'] == base['digest'] else 'NO'} |")
        last = i + 1 == len(rows) or rows[i + 1]["run"] == "1w unsplit"
        if last and row is not base and row["workers"] > 1:
            for target in (t for t in targets if t > row["workers"]):
                speed, cpu = project(base, row, target)
                out.append(f"| {row['case']} | {target}w (projected from {row['run']}) | {row['shards']} "
                           f"| {row['mb'] * speed / base['wall']:.1f} | {speed:.2f}x | {cpu:.2f} | | | | | | | | "
                           "| — |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--workers", default="2", help="comma-separated worker counts (1 unsplit always runs)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--project", default="16", help="comma-separated worker counts to project to (none: '')")
    ap.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    targets = [int(t) for t in args.project.split(",") if t]
    rows = []
    for text in args.cases.split(","):
        case = Case.parse(text)
        shutil.rmtree(args.data / "out", ignore_errors=True)
        rows += run_case(args.data, case, workers, args.runs)
        report = table(rows, targets)
        if args.out:  # after every case, so a run cut short keeps what it measured
            args.out.write_text(f"{report}\n")
    print(report)
    baseline = {r["case"]: r["digest"] for r in rows if r["run"] == "1w unsplit"}
    exact = all(r["digest"] == baseline[r["case"]] and r["digests_agree"] for r in rows)
    if not exact:
        print("published bytes differ from the 1-worker unsplit run's: see the 'bytes = 1w' column", file=sys.stderr)
    return 0 if exact else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
