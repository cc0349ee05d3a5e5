"""Does memory stay flat as input grows? Peak RSS at 1x and 5x the benchmark input, serially.

    python -m bench.rss_growth [--scale 1.0] [--times 5] [--only conllu,text] [--data DIR]

The 5x input is the generated 1x input plus hard-linked copies of every input file under
prefixed names in the same folders (for huggingface: symlinked config folders), so it costs no
disk and keeps each subcorpus' layout. A second variant concatenates the 1x files of the
line-oriented formats (text, jsonl, conllu) into one big file, so a single file's growth is
tested too. Each run is a fresh `python -m bench.run --child` process; RSS is `wait4`'s
ru_maxrss (the largest process). Prints a table and writes bench/RSS_GROWTH.md.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.generate import DATASETS, input_bytes
from bench.run import DEFAULT_DATA, REPO, measure

ONE_FILE = {"text", "jsonl", "conllu"}  # formats where concatenating files gives one valid file


def _multiply(src: Path, dst: Path, key: str, times: int) -> None:
    """`dst/raw/<key>`: the files of `src/raw/<key>` and `times - 1` linked copies of each."""
    raw_src, raw_dst = src / "raw" / key, dst / "raw" / key
    shutil.rmtree(raw_dst, ignore_errors=True)
    raw_dst.mkdir(parents=True)
    if DATASETS[key][0] == "huggingface":
        for config in sorted(p for p in raw_src.iterdir() if p.is_dir()):
            for i in range(times):
                (raw_dst / (config.name if i == 0 else f"x{i}_{config.name}")).symlink_to(config.resolve())
        return
    for path in sorted(p for p in raw_src.rglob("*") if p.is_file()):
        rel = path.relative_to(raw_src)
        (raw_dst / rel.parent).mkdir(parents=True, exist_ok=True)
        for i in range(times):
            os.link(path, raw_dst / rel.parent / (rel.name if i == 0 else f"x{i}_{rel.name}"))


def _concatenate(src: Path, dst: Path, key: str, times: int) -> None:
    """`dst/raw/<key>`: one file holding every 1x file `times` times over."""
    raw_src, raw_dst = src / "raw" / key, dst / "raw" / key
    shutil.rmtree(raw_dst, ignore_errors=True)
    raw_dst.mkdir(parents=True)
    files = sorted(p for p in raw_src.rglob("*") if p.is_file())
    with open(raw_dst / ("all" + files[0].suffix), "wb") as out:
        for _ in range(times):
            for path in files:
                with open(path, "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
                out.write(b"\n")  # a blank line ends a block / a sentence in every ONE_FILE format


def _yaml(root: Path, key: str) -> Path:
    path = root / "extract.yaml"
    path.write_text(f"input_dir: raw\noutput_dir: out\ndatasets:\n  {key}:\n"
                    f"    extractor: {DATASETS[key][0]}\n    domain: mixed\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--times", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "RSS_GROWTH.md")
    args = ap.parse_args(argv)
    keys = [k for k in args.only.split(",") if k] or list(DATASETS)
    base = args.data / f"scale-{args.scale:g}"
    subprocess.run([sys.executable, "-m", "bench.generate", str(base), "--scale", str(args.scale),
                    "--only", ",".join(keys)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    rows = []
    for key in keys:
        variants = [("many files", _multiply)] + ([("one file", _concatenate)] if key in ONE_FILE else [])
        small_root = args.data / f"rss-{key}-1x"
        _multiply(base, small_root, key, 1)
        small = measure([str(_yaml(small_root, key)), key, "1"])
        small_mb = input_bytes(base, key) / 1e6
        for label, build in variants:
            big_root = args.data / f"rss-{key}-{args.times}x-{label.replace(' ', '-')}"
            build(base, big_root, key, args.times)
            big = measure([str(_yaml(big_root, key)), key, "1"])
            big_mb = sum(p.stat().st_size for p in (big_root / "raw" / key).rglob("*") if p.is_file()) / 1e6
            if DATASETS[key][0] == "huggingface":
                big_mb = small_mb * args.times
            growth = big["maxrss"] / small["maxrss"] - 1
            rows.append((key, label, small_mb, small["maxrss"], big_mb, big["maxrss"], growth))
            print(f"{key} ({label}): {small_mb:.0f} MB -> {small['maxrss'] / 1e6:.0f} MB RSS; "
                  f"{big_mb:.0f} MB -> {big['maxrss'] / 1e6:.0f} MB RSS ({growth:+.0%})", file=sys.stderr)
            shutil.rmtree(big_root, ignore_errors=True)
        shutil.rmtree(small_root, ignore_errors=True)
    lines = [
        "# Peak RSS as input grows",
        "",
        f"Generated by `python -m bench.rss_growth --scale {args.scale:g} --times {args.times}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Serial runs, fresh interpreter each; RSS is the "
        "largest process (wait4 ru_maxrss). `many files`: the 1x files plus hard-linked copies; `one file`: "
        "the 1x files concatenated into one.",
        "",
        "| dataset | variant | input MB (1x) | RSS MB (1x) | input MB (big) | RSS MB (big) | growth "
        "| limit 400 MB, +20% |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    ok = True
    for key, label, smb, srss, bmb, brss, growth in rows:
        fine = brss < 400e6 and growth < 0.20
        ok &= fine
        lines.append(f"| {key} | {label} | {smb:.0f} | {srss / 1e6:.0f} | {bmb:.0f} | {brss / 1e6:.0f} | "
                     f"{growth:+.0%} | {'ok' if fine else 'OVER'} |")
    text = "\n".join(lines) + "\n"
    args.results.write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
