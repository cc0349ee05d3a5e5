"""The measured child processes of bench.run; each prints one JSON line.

`child_extract` is one whole-process run (what the CLI does). `child_profile` is the efficiency
pair, timed inside one process after its imports and a warm-up, so interpreter start-up is in
neither number: first the floor (the extractor over every input file, each document through the
pipeline's own `encode_document`, nothing written), then `extract_dataset(force=True, workers=1)`
unsplit. Wall and CPU seconds of both are reported; efficiency = floor seconds / pipeline seconds.
"""

import dataclasses
import gzip
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Clock:
    """Wall and CPU seconds of this process since `start`."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), _cpu()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, _cpu() - self.cpu


def _spec(yaml_path: str, key: str, split_bytes: int):
    sys.path.insert(0, str(REPO))
    from slm4ie_assets.catalog import load_catalog

    cat = load_catalog(yaml_path)
    return cat, dataclasses.replace(cat.dataset(key), split_bytes=split_bytes)


def reap_pool_workers() -> None:
    """Stop this process's forkserver and reap it. The pool's workers are its children
    (slm4ie_assets/engine/worker_pool.py): reaped, their CPU seconds reach this process's rusage and so the
    parent's os.wait4; an exiting server left unreaped takes them out of the measurement. A private
    call of multiprocessing, fine in a bench."""
    from multiprocessing import forkserver

    forkserver._forkserver._stop()  # type: ignore[attr-defined]


def child_extract(yaml_path: str, key: str, workers: int, split_bytes: int) -> None:
    """One measured run: the whole job as the CLI would do it."""
    cat, spec = _spec(yaml_path, key, split_bytes)
    from slm4ie_assets.pipeline import extract_dataset

    report = extract_dataset(spec, cat, force=True, workers=workers)
    reap_pool_workers()
    m = report.manifest
    print(json.dumps({"docs": m.docs, "tokens": m.tokens, "text_bytes": m.text_bytes, "shards": report.shards,
                      "sidecar_bytes": m.sidecar_bytes, "drops": m.drops}))


def _documents(spec, encode: bool):
    """Every document of the dataset's files (unsplit), optionally encoded as the part writer does."""
    from slm4ie_assets.extractors.drop_ledger import DropLedger
    from slm4ie_assets.extractors.extract_context import ExtractContext
    from slm4ie_assets.extractors.registry import make_extractor
    from slm4ie_assets.parts.document_encoder import Drop, encode_document

    ex = make_extractor(spec.extractor, spec.options)
    ex.prepare(spec.raw_dir)
    for f in ex.list_inputs(spec.raw_dir).files:
        ctx = ExtractContext(spec.key, spec.raw_dir, DropLedger())
        index, prefix = 0, f.rel_stem
        for doc in ex.extract(f, ctx):
            if encode:
                if type(encode_document(doc, spec.key, spec.domain, prefix, index)) is Drop:
                    continue
                index += 1
            yield doc


def _timed(fn) -> tuple[float, float, object]:
    clock = Clock()
    result = fn()
    return (*clock.read(), result)


def child_profile(yaml_path: str, key: str, with_parse: bool) -> None:
    """The efficiency pair (floor, then pipeline) and, `with_parse`, the extractor alone and the
    sidecar's compression for the "where the time goes" table."""
    cat, spec = _spec(yaml_path, key, 0)
    import slm4ie_assets.archives  # noqa: F401  (a lazy import of the pipeline: start-up, not work)
    from slm4ie_assets.pipeline import extract_dataset

    next(iter(_documents(spec, True)), None)  # warm-up: lazy imports (lxml, datasets) are not parsing time
    out: dict = {}
    if with_parse:
        out["parse_wall"], out["parse_cpu"], out["docs"] = _timed(lambda: sum(1 for _ in _documents(spec, False)))
    out["floor_wall"], out["floor_cpu"], _ = _timed(lambda: sum(1 for _ in _documents(spec, True)))
    out["pipe_wall"], out["pipe_cpu"], _ = _timed(lambda: extract_dataset(spec, cat, force=True, workers=1))
    if with_parse:
        out.update(_sidecar_compression(spec.sidecar_path))
    print(json.dumps(out))


def _sidecar_compression(side: Path) -> dict:
    """CPU seconds of compressing the sidecar's bytes again as gzipio does, and its size vs gzip -9."""
    from slm4ie_assets.utils.gzipio import LEVEL, new_compressor

    if not side.exists():
        return {}
    raw = gzip.decompress(side.read_bytes())
    t = _cpu()
    z = new_compressor(LEVEL)
    for i in range(0, len(raw), 1 << 20):
        z.compress(raw[i:i + (1 << 20)])
    z.flush()
    return {"compress": _cpu() - t, "sidecar_raw": len(raw), "sidecar": side.stat().st_size,
            "sidecar_gzip9": len(gzip.compress(raw, 9, mtime=0))}


def main(argv: list[str]) -> None:
    if argv[0] == "--profile":
        child_profile(argv[1], argv[2], argv[3] == "1")
    else:
        child_extract(argv[0], argv[1], int(argv[2]), int(argv[3]))
