"""A dataset written into tmp_path and run through the real plain pipeline, and its outputs read back."""

import shutil
from pathlib import Path

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_and_publish, extract_dataset, plan_dataset
from support.files import read_jsonl, read_sidecar, write_config, write_files


class Corpus:
    """A dataset written into tmp_path and extracted through the real pipeline."""

    def __init__(self, root: Path):
        self.root = root

    def run(self, key: str, extractor: str, files: dict, domain: str = "test", metadata=None, force: bool = True,
            workers: int = 1, **dataset):
        raw = self.root / "raw" / key
        if raw.exists():
            shutil.rmtree(raw)
        raw.mkdir(parents=True)
        write_files(raw, files)
        entry = {"extractor": extractor, "domain": domain, **dataset}
        if metadata is not None:
            entry["metadata"] = metadata
        cfg = write_config(self.root, {key: entry})
        catalog = load_catalog(cfg)
        report = extract_dataset(catalog.dataset(key), catalog, force=force, workers=workers)
        return Result(self.root / "out", key, report)


class Result:
    def __init__(self, out: Path, key: str, report, plan=None):
        self.out, self.key, self.report, self.plan = out, key, report, plan
        self.lines = read_jsonl(out / f"{key}.jsonl")
        self.sidecar = read_sidecar(out / f"{key}.annotations.jsonl.gz")
        self.manifest = report.manifest

    @property
    def texts(self) -> list:
        return [r["text"] for r in self.lines]

    @property
    def ids(self) -> list:
        return [r["doc_id"] for r in self.lines]

    @property
    def metas(self) -> list:
        return [r.get("metadata") for r in self.lines]

    @property
    def drops(self) -> dict:
        return self.manifest.drops

    @property
    def warnings(self) -> list:
        return self.report.warnings


def extract_raw(root: Path, key: str, extractor: str, domain: str, files: dict | None = None,
                workers: int = 1) -> Result:
    """Add `files` to raw/<key>/ (what is there stays) and run plan, extract and publish, forced."""
    raw = root / "raw" / key
    raw.mkdir(parents=True, exist_ok=True)
    write_files(raw, files or {})
    catalog = load_catalog(write_config(root, {key: {"extractor": extractor, "domain": domain}}))
    plan = plan_dataset(catalog.dataset(key), force=True, workers=workers)
    return Result(root / "out", key, extract_and_publish(plan), plan)


def over_cap_expectation(whole: Result, cap: int, where: str) -> tuple[list, list]:
    """The lines and the too-large warnings a `max_document_bytes` cap should give, from the uncapped
    run: a document whose text is over `cap` UTF-8 bytes is dropped (docs/memory.md). `where` is the
    warning's `dataset/file`."""
    lines, warnings = [], []
    for line in whole.lines:
        size = len(line["text"].encode())
        if size > cap:
            warnings.append(f"{where}: document {line['doc_id']!r}: its text is {size:,} bytes, over "
                            f"max_document_bytes ({cap:,}); skipped [document_too_large]")
        else:
            lines.append(line)
    return lines, warnings
