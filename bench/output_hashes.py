"""Hashes of the published files of every bench dataset, for "a refactor changes no output byte".

    python -m bench.output_hashes [--scale 0.02] [--files 4] [--workers 1] [--split-bytes N] [--fan-out N]
                                  [--only a,b] [--data DIR] [--out FILE]

Generates the bench inputs (bench.generate, reused when already there), extracts every dataset
with `extract_dataset(force=True)` into a fresh output folder and prints one line per published
file: sha256, size, path. The manifest is hashed with `published_at` left out, because that field
is the wall-clock time of the publish and is meant to differ between runs. Run it before and after
a change and diff the two outputs; any difference is a changed output byte. `--split-bytes N` writes
`split_bytes: N` into the generated extract.yaml: split files must give the same hashes as unsplit
ones (docs/splitting.md), but for the manifest's shard list, so with it the manifest line hashes the
manifest without `shards` too. `--fan-out N` extracts each dataset as N concurrent shard runs (N
processes, each `extract_shard_batch` over a contiguous chunk of the shards, as N fan-out runs of
`shards/<key>` would, D24), then publishes once: the hashes must equal a one-worker run's.
"""

import argparse
import hashlib
import json
import multiprocessing
import shutil
import sys
import tempfile
from pathlib import Path

from bench.generate import DATASETS, generate

REPO = Path(__file__).resolve().parents[1]
VOLATILE_MANIFEST_KEYS = ("published_at",)
SPLIT_VOLATILE_KEYS = ("published_at", "shards")  # with --split-bytes: the range shards are listed


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_digest(path: Path, volatile: tuple[str, ...] = VOLATILE_MANIFEST_KEYS) -> str:
    """The manifest's content without its publish time (and what else `volatile` names), as canonical JSON."""
    content = json.loads(path.read_bytes())
    for key in volatile:
        content.pop(key, None)
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def published_lines(output_dir: Path, key: str, volatile: tuple[str, ...] = VOLATILE_MANIFEST_KEYS) -> list[str]:
    lines = []
    for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
        path = output_dir / name
        if path.exists():
            lines.append(f"{sha256_file(path)} {path.stat().st_size:>11} {name}")
    manifest = output_dir / ".slm4ie" / key / "current" / "manifest.json"
    if manifest.exists():
        lines.append(f"{manifest_digest(manifest, volatile)} {'-':>11} {key}/manifest.json "
                     f"(without {' and '.join(volatile)})")
    return lines


def _shard_run(config: str, key: str, first: int, end: int) -> None:
    """One fan-out run: the shards [first, end) of the dataset, parts only (no publish)."""
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import ShardBatch, extract_shard_batch
    from slm4ie_assets.planning.shards import list_shards

    catalog = load_catalog(Path(config))
    spec = catalog.dataset(key)
    shards = list_shards(spec, catalog.shard_group_threshold)[first:end]
    extract_shard_batch(ShardBatch(spec, shards, force=True, workers=1))


def extract_fanned_out(catalog, key: str, runs: int) -> None:
    """`runs` shard runs at once in separate processes, then one publish from their parts."""
    from slm4ie_assets.pipeline import extract_dataset, lock_path, unpack
    from slm4ie_assets.planning.shards import list_shards
    from slm4ie_assets.store.locks import dataset_lock

    spec = catalog.dataset(key)
    with dataset_lock(lock_path(spec), key):
        unpack(spec, catalog)
    n = len(list_shards(spec, catalog.shard_group_threshold))
    bounds = [n * i // runs for i in range(runs + 1)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_shard_run, args=(str(catalog.path), key, bounds[i], bounds[i + 1]))
             for i in range(runs) if bounds[i] < bounds[i + 1]]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"{key}: a fan-out shard run failed (exit code {p.exitcode})")
    report = extract_dataset(spec, catalog, force=False, workers=1)
    if report.extracted:
        raise SystemExit(f"{key}: the publish had to extract {len(report.extracted)} part(s) itself")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.02)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "slm4ie-hash-inputs")
    ap.add_argument("--out", type=Path, help="also write the lines to this file")
    ap.add_argument("--split-bytes", type=int, help="write `split_bytes: N` into the generated extract.yaml")
    ap.add_argument("--fan-out", type=int, default=0, help="N concurrent shard runs per dataset, then one publish")
    ap.add_argument("--only", help="comma-separated dataset names (default: all)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import extract_dataset

    yaml_path = generate(args.data, scale=args.scale, files=args.files)
    volatile = VOLATILE_MANIFEST_KEYS
    if args.split_bytes is not None:
        text = yaml_path.read_text()
        yaml_path.write_text(text.replace("\ndatasets:\n", f"\nsplit_bytes: {args.split_bytes}\ndatasets:\n", 1))
        volatile = SPLIT_VOLATILE_KEYS
    catalog = load_catalog(yaml_path)
    output_dir = catalog.dataset(next(iter(DATASETS))).output_dir
    shutil.rmtree(output_dir, ignore_errors=True)
    lines: list[str] = []
    for key in (args.only.split(",") if args.only else DATASETS):
        if args.fan_out:
            extract_fanned_out(catalog, key, args.fan_out)
        else:
            extract_dataset(catalog.dataset(key), catalog, force=True, workers=args.workers)
        lines += published_lines(output_dir, key, volatile)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
