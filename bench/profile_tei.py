#!/usr/bin/env python3
"""Throughput and peak memory of the tei extractor on one file.

    python bench/profile_tei.py FILE.xml [--mode pipeline|extract|floor] [--profile]

pipeline  the whole serial pipeline (extract, encode, gzip, publish) into a temporary output dir
extract   the extractor alone: documents are produced and thrown away
floor     a bare lxml iterparse walk over every element, clearing as it goes (the parse cost
          any lxml-based reader pays)

Prints wall and CPU seconds, MB/s (by both), and this process's peak RSS. Run one measurement per
process, so the peak belongs to that measurement alone. CPU time is the honest number on a busy
machine; wall time includes waiting for the CPU.
"""

import argparse
import cProfile
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run_pipeline(path: Path) -> int:
    import yaml

    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import extract_and_publish, plan_dataset

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw" / "bench"
        raw.mkdir(parents=True)
        (raw / path.name).symlink_to(path.resolve())
        cfg = Path(tmp) / "extract.yaml"
        cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                       "datasets": {"bench": {"extractor": "tei", "domain": "test"}}}))
        catalog = load_catalog(cfg)
        report = extract_and_publish(plan_dataset(catalog.dataset("bench"), force=True, workers=1))
        return report.manifest.docs


def run_extract(path: Path) -> int:
    from slm4ie_assets.extractors.extract_context import ExtractContext
    from slm4ie_assets.extractors.input_file import InputFile
    from slm4ie_assets.extractors.tei.extractor import TeiExtractor

    ex = TeiExtractor(None)
    ctx = ExtractContext("bench", path.parent)
    n = 0
    for _doc in ex.extract(InputFile(path, path.name), ctx):
        n += 1
    return n


def run_floor(path: Path) -> int:
    from lxml import etree

    n = 0
    for _, el in etree.iterparse(str(path), events=("end",), resolve_entities=False, no_network=True, load_dtd=False):
        n += 1
        el.clear()
        parent = el.getparent()
        if parent is not None:
            while el.getprevious() is not None:
                del parent[0]
    return n


MODES = {"pipeline": run_pipeline, "extract": run_extract, "floor": run_floor}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--mode", choices=sorted(MODES), default="pipeline")
    ap.add_argument("--profile", action="store_true", help="print the top of a cProfile report")
    args = ap.parse_args(argv)
    size = args.file.stat().st_size
    prof = cProfile.Profile() if args.profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    count = MODES[args.mode](args.file)
    if prof is not None:
        prof.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.mode}: {args.file.name} {size / 1e6:.1f} MB -> {count} items; wall {wall:.2f}s "
          f"({size / 1e6 / wall:.1f} MB/s), cpu {cpu:.2f}s ({size / 1e6 / cpu:.1f} MB/s), peak RSS {peak_mb:.0f} MB")
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
