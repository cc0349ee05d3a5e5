"""The benchmark suite: every extractor, serial and with 2 workers, whole-process timings.

    python -m bench.run [--scale 1.0] [--runs 3] [--workers 1,2] [--only conllu,text] [--data DIR]
                        [--no-split] [--results bench/RESULTS.md] [--note "measured under load"]

Inputs come from bench.generate (about 200 MB per dataset at scale 1, text 500 MB; reused when
already generated with the same size). Each measured run is a fresh `python -m bench.run --child`
process calling `slm4ie_assets.pipeline.extract_dataset(force=True)`, so imports, pool start-up
and publishing are all included. The table reports the median of `--runs` runs.

Peak RSS: `os.wait4` returns the child's rusage, and on Linux its `ru_maxrss` is the maximum
over the child and every descendant it waited for (the kernel folds each reaped process's peak
into its parent's `cmaxrss`), so it is the largest single process of the tree, pool workers
included. Two workers run at the same time, so the tree's peak is up to their sum: a sampler
also reads /proc every 50 ms and keeps the largest sum of RSS over the child and its
descendants ("tree RSS").

CPU MB/s (input MB per CPU second of the whole tree, from the same rusage) is what to compare on a
shared machine, where wall time mostly measures the neighbours.

The split (parse / encode / compress) comes from a separate instrumented serial run in one child:
the extractor alone (documents produced and discarded), the extractor plus orjson encoding of the
text and sidecar lines (no files), the whole pipeline; and the sidecar's gzip measured by
compressing its uncompressed bytes again the way gzipio does. Times there are CPU seconds. The
sidecar is also compared with `gzip -9` of the same bytes.
"""

import argparse
import gzip
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.generate import DATASETS, input_bytes

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(tempfile.gettempdir()) / "slm4ie-bench"

# serial MB/s targets of the whole pipeline (README, "Performance"), and the reference implementation's rates
TARGETS = {"conllu": 36, "tei_perfile": 14, "tei_utterances": 30, "macocu": 28, "text": 110,
           "jsonl_paragraphs": 50, "jsonl": 120, "huggingface": 80, "coleslaw": 150}
REFERENCE = {"conllu": 7, "tei_perfile": 6, "tei_utterances": 15, "macocu": 21, "text": 33,
             "jsonl_paragraphs": 10, "jsonl": 31, "huggingface": 22, "coleslaw": 40}


# ----------------------------------------------------------------------------- children


def child_extract(yaml_path: str, key: str, workers: int) -> None:
    """One measured run: the whole job as the CLI would do it."""
    sys.path.insert(0, str(REPO))
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import extract_dataset

    cat = load_catalog(yaml_path)
    report = extract_dataset(cat.dataset(key), cat, force=True, workers=workers)
    m = report.manifest
    print(json.dumps({"docs": m.docs, "tokens": m.tokens, "text_bytes": m.text_bytes,
                      "sidecar_bytes": m.sidecar_bytes, "drops": m.drops}))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_split(yaml_path: str, key: str) -> None:
    """The instrumented serial run: parse, parse+encode, whole pipeline, sidecar compression."""
    sys.path.insert(0, str(REPO))
    import orjson

    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.extractors.base import DropLedger, ExtractContext
    from slm4ie_assets.extractors.registry import make_extractor
    from slm4ie_assets.gzipio import LEVEL, new_compressor
    from slm4ie_assets.pipeline import extract_dataset
    from slm4ie_assets.schema import annotation_record

    cat = load_catalog(yaml_path)
    spec = cat.dataset(key)
    ex = make_extractor(spec.extractor, spec.options)
    ex.prepare(spec.raw_dir)
    files = ex.list_inputs(spec.raw_dir).files

    def docs():
        ctx = ExtractContext(key, spec.raw_dir, DropLedger())
        for f in files:
            yield from ex.extract(f, ctx)

    next(iter(docs()), None)  # warm-up: lazy imports (lxml, datasets) are not parsing time

    t = _cpu()
    n = 0
    for _ in docs():
        n += 1
    parse = _cpu() - t

    t = _cpu()
    nl = orjson.OPT_APPEND_NEWLINE
    for d in docs():
        doc_id = d.doc_id or "x"
        uid = f"{key}:{doc_id}"
        rec = {"text": d.text, "source": key, "domain": spec.domain, "doc_id": doc_id, "uid": uid}
        if d.metadata:
            rec["metadata"] = d.metadata
        orjson.dumps(rec, option=nl)
        if d.annotations is not None and d.annotations.forms:
            orjson.dumps(annotation_record(doc_id, uid, d.annotations), option=nl)
    parse_encode = _cpu() - t

    t = _cpu()
    extract_dataset(spec, cat, force=True, workers=1)
    pipeline = _cpu() - t

    out = {"parse": parse, "encode": max(0.0, parse_encode - parse), "pipeline": pipeline, "docs": n}
    side = spec.sidecar_path
    if side.exists():
        raw = gzip.decompress(side.read_bytes())
        t = _cpu()
        z = new_compressor(LEVEL)
        for i in range(0, len(raw), 1 << 20):
            z.compress(raw[i:i + (1 << 20)])
        z.flush()
        out["compress"] = _cpu() - t
        out["sidecar_raw"] = len(raw)
        out["sidecar"] = side.stat().st_size
        out["sidecar_gzip9"] = len(gzip.compress(raw, 9, mtime=0))
    print(json.dumps(out))


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


def bench_dataset(root: Path, yaml_path: Path, key: str, workers_list: list[int], runs: int, split: bool) -> dict:
    mb = input_bytes(root, key) / 1e6
    row: dict = {"key": key, "mb": mb, "by_workers": {}, "digests": {}}
    for w in workers_list:
        results = [measure([str(yaml_path), key, str(w)]) for _ in range(runs)]
        row["digests"][w] = output_digest(root, key)
        row["by_workers"][w] = {
            "wall": statistics.median(r["wall"] for r in results),
            "cpu": statistics.median(r["cpu"] for r in results),
            "maxrss": max(r["maxrss"] for r in results),
            "tree_rss": max(r["tree_rss"] for r in results),
            "docs": results[0]["docs"],
            "tokens": results[0]["tokens"],
            "sidecar_bytes": results[0]["sidecar_bytes"],
        }
        print(f"{key} workers={w}: {mb / row['by_workers'][w]['wall']:.1f} MB/s wall, "
              f"{mb / row['by_workers'][w]['cpu']:.1f} MB/s cpu", file=sys.stderr)
    if split:
        row["split"] = measure(["--split", str(yaml_path), key])
    return row


def _mb(n: float) -> str:
    return f"{n / 1e6:.0f}"


def render(rows: list[dict], args, started: str, load: tuple) -> str:
    w1, w2 = 1, 2
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `python -m bench.run {' '.join(sys.argv[1:])}` on {started}; "
        f"{os.cpu_count()} CPUs; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.",
        "",
    ]
    if args.note:
        lines += [f"**{args.note}**", ""]
    lines += [
        f"Medians of {args.runs} whole-process runs (fresh interpreter, `extract_dataset(force=True)`). "
        "MB = 10^6 input bytes. `cpu MB/s` = input MB per CPU second of the whole process tree. "
        "`RSS` = largest single process (wait4 ru_maxrss); `tree RSS` = largest sampled sum over the tree.",
        "",
        "| dataset | input MB | docs | serial MB/s | cpu MB/s | target | ref | docs/s | 2 workers MB/s | speed-up "
        "| RSS MB (1w) | tree RSS MB (2w) | identical 1w/2w |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        a = r["by_workers"].get(w1)
        b = r["by_workers"].get(w2)
        mb = r["mb"]
        ser = mb / a["wall"] if a else float("nan")
        par = mb / b["wall"] if b else float("nan")
        same = "yes" if len(set(r["digests"].values())) == 1 else "NO"
        lines.append(
            f"| {r['key']} | {mb:.0f} | {(a or b)['docs']} | {ser:.1f} | {mb / a['cpu'] if a else float('nan'):.1f} "
            f"| {TARGETS[r['key']]} | {REFERENCE[r['key']]} | {(a or b)['docs'] / a['wall'] if a else 0:.0f} "
            f"| {par:.1f} | {par / ser if a and b else float('nan'):.2f}x "
            f"| {_mb(a['maxrss']) if a else '-'} | {_mb(b['tree_rss']) if b else '-'} | {same} |")
    if any("split" in r for r in rows):
        lines += [
            "",
            "## Where the time goes (one instrumented serial run, CPU seconds)",
            "",
            "parse = extractor alone; encode = orjson of text + sidecar lines on top of parsing; "
            "compress = sidecar gzip (zlib-ng level 6, on a helper thread in the pipeline); "
            "rest = pipeline CPU minus those (files, uid hashes, publish, interpreter start).",
            "",
            "| dataset | parse s | parse MB/s | encode s | compress s | rest s | pipeline cpu s | sidecar MB "
            "| vs gzip -9 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            s = r.get("split")
            if not s:
                continue
            comp = s.get("compress", 0.0)
            rest = s["pipeline"] - s["parse"] - s["encode"] - comp
            ratio = f"{s['sidecar'] / s['sidecar_gzip9']:.3f}x" if s.get("sidecar_gzip9") else "-"
            side = f"{s['sidecar'] / 1e6:.1f}" if s.get("sidecar") else "-"
            lines.append(f"| {r['key']} | {s['parse']:.2f} | {r['mb'] / max(s['parse'], 1e-9):.1f} | "
                         f"{s['encode']:.2f} | {comp:.2f} | {rest:.2f} | {s['pipeline']:.2f} | {side} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        if argv[1] == "--split":
            child_split(argv[2], argv[3])
        else:
            child_extract(argv[1], argv[2], int(argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="input size factor (1.0: ~200 MB each, text 500 MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--files", type=int, default=4, help="files per dataset (for the 2-worker runs)")
    ap.add_argument("--only", default="", help="comma-separated dataset keys")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"generated inputs (default {DEFAULT_DATA})")
    ap.add_argument("--no-split", action="store_true", help="skip the instrumented parse/encode/compress run")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "RESULTS.md")
    ap.add_argument("--note", default="", help="a line printed above the table (e.g. 'measured under load')")
    args = ap.parse_args(argv)
    keys = [k for k in args.only.split(",") if k] or list(DATASETS)
    root = args.data / f"scale-{args.scale:g}"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    # generated in a child: a parent grown by `datasets` would lend its RSS to every forked child's ru_maxrss
    subprocess.run([sys.executable, "-m", "bench.generate", str(root), "--scale", str(args.scale), "--files",
                    str(args.files), "--only", ",".join(keys)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    yaml_path = root / "extract.yaml"
    workers = [int(w) for w in args.workers.split(",")]
    rows = [bench_dataset(root, yaml_path, k, workers, args.runs, not args.no_split) for k in keys]
    text = render(rows, args, started, load)
    args.results.write_text(text)
    print(text)
    bad = [r["key"] for r in rows if len(set(r["digests"].values())) > 1]
    if bad:
        print(f"OUTPUT DIFFERS between worker counts: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
