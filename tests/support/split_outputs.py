"""What the split tests share: one dataset extracted through the real pipeline with a given
`split_bytes`, its published outputs compared with an unsplit run's, and macocu's ranges extracted
one by one (each continuing from the earlier ranges' own or counted figures)."""

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from slm4ie_assets.catalog import DatasetSpec, load_catalog
from slm4ie_assets.extractors.drop_ledger import DropLedger
from slm4ie_assets.extractors.extract_context import ExtractContext, RangeCounts, RangeStart
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.macocu.doc_cuts import plan_doc_cuts
from slm4ie_assets.extractors.macocu.extractor import MacocuExtractor
from slm4ie_assets.parts.writer import count_range
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.planning.shards import range_files
from support.files import write_files

KEY = "d"


@dataclass
class Output:
    text: bytes
    sidecar: bytes | None
    manifest: dict
    shards: list
    warnings: list
    stage_seconds: dict | None = None  # the run's stage clock (RunReport.stage_seconds)


def extract(root: Path, extractor: str, files: dict[str, bytes], split_bytes: int, workers: int = 1,
            metadata: str = "") -> Output:
    """A fresh dataset under `root`, extracted through `extract_dataset` (forced)."""
    shutil.rmtree(root, ignore_errors=True)
    write_files(root / "raw" / KEY, files)
    (root / "extract.yaml").write_text(
        f"input_dir: raw\noutput_dir: out\nsplit_bytes: {split_bytes}\ndatasets:\n"
        f"  {KEY}:\n    extractor: {extractor}\n    domain: test\n{metadata}")
    catalog = load_catalog(root / "extract.yaml")
    report = extract_dataset(catalog.dataset(KEY), catalog, force=True, workers=workers)
    out = root / "out"
    sidecar = out / f"{KEY}.annotations.jsonl.gz"
    manifest = json.loads((out / ".slm4ie" / KEY / "current" / "manifest.json").read_bytes())
    manifest.pop("published_at")
    shards = manifest.pop("shards")
    return Output((out / f"{KEY}.jsonl").read_bytes(), sidecar.read_bytes() if sidecar.exists() else None,
                  manifest, shards, report.warnings, report.stage_seconds)


def assert_same(split: Output, whole: Output, why: str) -> None:
    assert split.text == whole.text, why
    assert split.sidecar == whole.sidecar, why
    assert split.manifest == whole.manifest, why
    assert split.warnings == whole.warnings, why


def ids_of(out: Output) -> list[str]:
    return re.findall(r'"doc_id":"((?:[^"\\]|\\.)*)"', out.text.decode())


def ranges_output(path: Path, cuts: tuple[int, ...], counted: bool) -> list:
    """Every range extracted in order, each continuing from the earlier ranges' counts: those of
    their own extraction, or (`counted`) of a count-only pass over each (part_writer.count_range), the
    schedule of a pool that counts every earlier range first."""
    extractor = MacocuExtractor()
    spec = DatasetSpec(key="d", extractor="macocu", domain="test", options=None, raw_dir=path.parent)
    out: list = []
    before = RangeCounts()
    for file in range_files(InputFile(path, path.name), cuts):
        ledger = DropLedger()
        ledger.start_file(before.drops)
        ctx = ExtractContext("d", path.parent, ledger, start=RangeStart.after(before))
        docs = [(d.doc_id, d.text) for d in extractor.extract(file, ctx)]
        out += [docs, dict(ledger.counts), ledger.warnings]
        own = RangeCounts(len(docs), extractor.splitter.lines(file), ledger.total, 0, ctx.carry)
        before = before + (count_range(spec, extractor, file) if counted else own)
    return out


def check_counted_equals_extracted(tmp_path: Path, data: bytes, splits) -> None:
    path = tmp_path / "c.xml"
    path.write_bytes(data)
    for split in splits:
        cuts = plan_doc_cuts(path, len(data), split)
        if len(cuts) == 2:
            continue  # stays whole: no ranges
        assert ranges_output(path, cuts, True) == ranges_output(path, cuts, False), f"split_bytes={split}"
