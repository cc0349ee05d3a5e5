"""Where the time of a CoNLL-U extraction goes: parse vs JSON encoding vs gzip, and the whole
pipeline (plain Python, no Dagster), on a large input made by repeating a real sample.

    .venv/bin/python bench/profile_conllu.py [--copies 20] [--source FILE] [--profile]

Wall time is reported next to CPU time because on a shared machine wall time mostly measures
the neighbours; the gzip of the sidecar runs on a helper thread, so the pipeline's CPU time
includes it while its wall time overlaps it with parsing.
"""

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slm4ie_assets.catalog import load_catalog  # noqa: E402
from slm4ie_assets.extractors.base import ExtractContext, InputFile  # noqa: E402
from slm4ie_assets.extractors.conllu import ConlluExtractor  # noqa: E402
from slm4ie_assets.gzipio import LEVEL  # noqa: E402
from slm4ie_assets.pipeline import extract_and_publish, plan_dataset  # noqa: E402
from slm4ie_assets.schema import annotation_record, dumps, text_record  # noqa: E402

DEFAULT_SOURCE = REPO.parent / "shared" / "corpora" / "raw" / "ssj500k" / "sl_ssj-ud-dev.conllu"


class Clock:
    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def rate(mb: float, seconds: float) -> str:
    return f"{seconds:6.2f}s {mb / max(seconds, 1e-9):6.1f} MB/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile the pipeline run")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="conllu-bench-") as tmp:
        root = Path(tmp)
        raw = root / "raw" / "big"
        raw.mkdir(parents=True)
        sample = args.source.read_bytes()
        target = raw / "big.conllu"
        with open(target, "wb") as fh:
            for _ in range(args.copies):
                fh.write(sample)
        mb = target.stat().st_size / 1e6
        (root / "extract.yaml").write_text("input_dir: raw\noutput_dir: out\n"
                                           "datasets:\n  big:\n    extractor: conllu\n    domain: mixed\n")
        print(f"input: {args.copies} x {args.source.name} = {mb:.1f} MB")

        ex = ConlluExtractor(None)
        file = InputFile(target, target.name)
        docs = tokens = 0
        with Clock() as parse:
            for doc in ex.extract(file, ExtractContext("big", raw)):
                docs += 1
                tokens += len(doc.annotations.forms)
        print(f"parse only      wall {rate(mb, parse.wall)}  cpu {rate(mb, parse.cpu)}  ({docs} docs, {tokens} tokens)")

        encoded = bytearray()
        with Clock() as encode:
            for doc in ex.extract(file, ExtractContext("big", raw)):
                encoded += dumps(text_record(doc, "big", "mixed", doc.doc_id))
                encoded += dumps(annotation_record(doc.doc_id, "big:" + doc.doc_id, doc.annotations))
        print(f"parse + orjson  wall {rate(mb, encode.wall)}  cpu {rate(mb, encode.cpu)}  "
              f"(encoding alone ~{encode.cpu - parse.cpu:.2f}s cpu, {len(encoded) / 1e6:.0f} MB of JSON)")
        with Clock() as gz:
            z = zlib.compressobj(LEVEL, zlib.DEFLATED, 31)
            z.compress(bytes(encoded))
            z.flush()
        print(f"gzip level {LEVEL} of that JSON  cpu {gz.cpu:.2f}s (on the writer's helper thread)")
        del encoded

        catalog = load_catalog(root / "extract.yaml")
        plan = plan_dataset(catalog.dataset("big"), force=True, workers=args.workers)
        profiler = cProfile.Profile() if args.profile else None
        with Clock() as pipe:
            if profiler is not None:
                profiler.enable()
            extract_and_publish(plan)
            if profiler is not None:
                profiler.disable()
        print(f"whole pipeline  wall {rate(mb, pipe.wall)}  cpu {rate(mb, pipe.cpu)}  (workers={args.workers})")
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
            print(out.getvalue())


if __name__ == "__main__":
    main()
