#!/usr/bin/env python3
"""What the Dagster layer costs on a dataset of many one-file shards.

    python bench/bench_sensor.py [--files 5000] [--workers 2] [--keep DIR]

Builds a text dataset of N small files (one shard each) under a temp folder, a real sqlite
instance in a temp DAGSTER_HOME, then measures:
  1. the first full extraction (`extracted/<key>` materialized in process, checks included) and its
     split: registering N partitions, extracting + publishing (IO manager), checks, the rest
     (Dagster run overhead and event writes); and what recording one partition event per shard
     would have cost (measured on a sample, extrapolated);
  2. sensor ticks: the first one (no cursor: every part meta read) and an idle one (nothing new),
     plus one after a file was added; the cursor size;
  3. the asset checks' streaming throughput on the published files, and (4.) on an annotated
     jsonl dataset whose sidecar carries token arrays.
Targets (set for the sensor design): an idle tick under 2 s with 5,000 shards; the first extraction not dominated
by event writes.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("beseda", "dokument", "slovenščina", "korpus", "stavek", "jezik", "model", "besedilo", "podatki", "vir")


def make_dataset(raw: Path, files: int) -> int:
    total = 0
    for i in range(files):
        sub = raw / f"d{i // 500:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        docs = []
        for j in range(3):
            words = " ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(40 + (i + j) % 30))
            docs.append(f"{words}.\n{words[::-1]}.")
        data = ("\n\n".join(docs) + "\n").encode()
        (sub / f"f{i:06d}.txt").write_bytes(data)
        total += len(data)
    return total


def make_annotated(raw: Path, mb: int) -> None:
    """jsonl records with token annotations on two of three records (the rest get stubs)."""
    written, i = 0, 0
    target = mb * 1_000_000
    while written < target:
        with open(raw / f"part{i:03d}.jsonl", "w", encoding="utf-8") as fh:
            for j in range(2000):
                n = 20 + (i * 31 + j) % 60
                forms = [WORDS[(j + k) % len(WORDS)] for k in range(n)]
                rec = {"doc_id": f"{i}-{j}", "text": " ".join(forms)}
                if j % 3:
                    toks = [{"form": f, "lemma": f[:4], "upos": "NOUN", "feats": "Case=Nom|Number=Sing"} for f in forms]
                    rec["paragraphs"] = [{"sentences": [{"tokens": toks[:n // 2]}, {"tokens": toks[n // 2:]}]}]
                line = json.dumps(rec, ensure_ascii=False) + "\n"
                fh.write(line)
                written += len(line)
        i += 1


def timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--annotated-mb", type=int, default=50, help="size of the annotated dataset for the checks")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = ap.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_sensor_"))
    root.mkdir(parents=True, exist_ok=True)
    home = root / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    raw = root / "raw" / "bulk"
    if raw.exists():
        shutil.rmtree(raw)
    shutil.rmtree(root / "out", ignore_errors=True)
    input_bytes = make_dataset(raw, args.files)
    cfg = root / "extract.yaml"
    cfg.write_text(json.dumps({"input_dir": "raw", "output_dir": "out", "max_workers": args.workers,
                               # one file per shard, also after an add
                               "shard_group_threshold": max(1000, 2 * args.files),
                               "datasets": {"bulk": {"extractor": "text", "domain": "web"}}}))

    from dagster import (
        AssetKey,
        AssetMaterialization,
        AssetSelection,
        DagsterInstance,
        build_sensor_context,
        materialize,
    )

    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.dagster_layer.assets import SHARD_EVENT_LIMIT, extracted_key, partitions_name
    from slm4ie_assets.dagster_layer.checks import inspect_published
    from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
    from slm4ie_assets.dagster_layer.resources import ExtractSettings
    from slm4ie_assets.definitions import build_definitions
    from slm4ie_assets.planning.shards import list_shards

    catalog = load_catalog(cfg)
    spec = catalog.dataset("bulk")
    defs = build_definitions(catalog)
    instance = DagsterInstance.get()
    print(f"dataset: {args.files} files, {input_bytes / 1e6:.1f} MB, {args.workers} worker(s); instance {home}")

    # --- 1. the first full extraction
    shards, t_list = timed(list_shards, spec, catalog.shard_group_threshold)
    scratch = f"{partitions_name('bulk')}_probe"
    _, t_sync = timed(instance.add_dynamic_partitions, scratch, [s.key for s in shards])
    result, t_run = timed(materialize, [*defs.assets, *defs.asset_checks], instance=instance,
                          selection=AssetSelection.assets(extracted_key("bulk")),
                          resources={"extract": ExtractSettings(max_workers=args.workers),
                                     "extract_io": ExtractIOManager()})
    md = {}
    n_events = 0
    for ev in result.get_asset_materialization_events():
        m = ev.event_specific_data.materialization
        n_events += 1
        if m.asset_key == extracted_key("bulk"):
            md = {k: v.value for k, v in m.metadata.items()}
    step_times = {}
    for ev in result.all_events:
        if ev.event_type_value == "STEP_SUCCESS":
            step_times[ev.step_key] = ev.event_specific_data.duration_ms / 1000
    t_extract = md["duration_seconds"]
    t_checks = step_times.get("bulk_published_checks", 0.0)
    sample = 50
    t0 = time.perf_counter()
    for _ in range(sample):
        instance.report_runless_asset_event(AssetMaterialization(AssetKey(["bench", "probe"]), partition=None))
    per_event = (time.perf_counter() - t0) / sample
    print("\n1. first full extraction (extracted/bulk, in process)")
    print(f"   run wall time               {t_run:8.2f} s")
    print(f"   - listing + stat of files   {t_list:8.2f} s  (planning; also inside the run)")
    print(f"   - registering partitions    {t_sync:8.2f} s  (add_dynamic_partitions, {len(shards)} keys)")
    print(f"   - extract + publish (IO mgr){t_extract:8.2f} s  ({input_bytes / 1e6 / t_extract:.1f} MB/s input)")
    print(f"   - checks step               {t_checks:8.2f} s")
    print(f"   - rest (Dagster overhead)   {t_run - t_extract - t_checks:8.2f} s")
    print(f"   materialization events      {n_events:8d}    (shard events recorded: {n_events - 1},"
          f" limit {SHARD_EVENT_LIMIT})")
    print(f"   one event costs             {per_event * 1000:8.1f} ms -> one per shard would add "
          f"{per_event * len(shards):.1f} s")

    # --- 2. sensor ticks
    sensor = defs.get_sensor_def("raw_bulk_sensor")

    def tick(cursor):
        ctx = build_sensor_context(instance_ref=instance.get_ref(), cursor=cursor, definitions=defs)
        return timed(sensor.evaluate_tick, ctx)

    first, t_first = tick(None)
    idle, t_idle = tick(first.cursor)
    idle2, t_idle2 = tick(idle.cursor)
    (raw / "d000" / "zz_new.txt").write_text("nov dokument\n")
    added, t_added = tick(idle2.cursor)
    print("\n2. sensor ticks")
    print(f"   first tick (no cursor)      {t_first:8.2f} s  runs requested: {len(first.run_requests)}")
    print(f"   idle tick (nothing new)     {t_idle:8.2f} s  / {t_idle2:.2f} s  runs requested: "
          f"{len(idle.run_requests) + len(idle2.run_requests)}  target < 2 s")
    print(f"   tick after adding a file    {t_added:8.2f} s  runs requested: "
          f"{[(r.partition_key, r.tags.get('slm4ie/trigger')) for r in added.run_requests]}")
    print(f"   cursor size                 {len(idle.cursor):8d} characters (independent of the file count)")

    # --- 3. checks throughput
    findings, t_check = timed(inspect_published, spec)
    size = spec.text_path.stat().st_size + (spec.sidecar_path.stat().st_size if spec.sidecar_path.exists() else 0)
    print("\n3. checks (streaming the published files)")
    print(f"   {findings.text_lines} lines, {size / 1e6:.1f} MB in {t_check:.2f} s = {size / 1e6 / t_check:.1f} MB/s")
    # --- 4. checks on an annotated dataset (sidecar with token arrays)
    ann_raw = root / "raw" / "ann"
    shutil.rmtree(ann_raw, ignore_errors=True)
    ann_raw.mkdir(parents=True)
    make_annotated(ann_raw, args.annotated_mb)
    doc = json.loads(cfg.read_text())
    doc["datasets"]["ann"] = {"extractor": "jsonl", "domain": "web"}
    cfg.write_text(json.dumps(doc))
    from slm4ie_assets.pipeline import extract_dataset

    catalog = load_catalog(cfg)
    ann = catalog.dataset("ann")
    extract_dataset(ann, catalog, force=True, workers=args.workers)
    findings, t_check = timed(inspect_published, ann)
    text_b, side_b = ann.text_path.stat().st_size, ann.sidecar_path.stat().st_size
    import gzip

    with gzip.open(ann.sidecar_path, "rb") as fh:
        side_raw = sum(len(chunk) for chunk in iter(lambda: fh.read(1 << 20), b""))
    print("\n4. checks on an annotated dataset")
    print(f"   {findings.text_lines} lines; text {text_b / 1e6:.1f} MB + sidecar {side_b / 1e6:.1f} MB gz "
          f"({side_raw / 1e6:.1f} MB raw) in {t_check:.2f} s = {(text_b + side_raw) / 1e6 / t_check:.1f} MB/s "
          f"of JSON lines; problems: {findings.aligned.count + findings.schema.count}")
    instance.dispose()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
