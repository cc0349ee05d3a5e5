"""Materialization metadata that people can read at a glance in the Dagster UI."""

from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from ..catalog import DatasetSpec
from ..pipeline import DatasetPlan, RunReport, ShardBatch
from ..store.dataset_store import DatasetStore
from ..store.length_stats import PERCENTILES
from ..store.manifest import Manifest
from ..store.part_meta import PartMeta
from ..store.preview import length_rows, sample_documents, sample_markdown
from .column_schemas import COLUMN_SCHEMA, DOCUMENT_SCHEMA, ROW_COUNT, SIDECAR_COLUMN_SCHEMA, SIDECAR_SCHEMA

_LEDGER_SCHEMA = TableSchema(columns=[TableColumn("reason", "string"), TableColumn("skipped", "int")])


def drop_ledger_table(drops: dict) -> MetadataValue:
    rows = sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))
    return MetadataValue.table([TableRecord({"reason": r, "skipped": n}) for r, n in rows], schema=_LEDGER_SCHEMA)


def preview(spec: DatasetSpec, manifest: Manifest | None) -> MetadataValue:
    """A fixed sample of documents spread over the dataset, with the first tokens of annotated
    ones, so a reader sees what the dataset looks like (store/preview.py)."""
    if manifest is None:
        return MetadataValue.md("(not published)")
    return MetadataValue.md(sample_markdown(sample_documents(spec, manifest), manifest.docs, spec.text_path.name))


_LENGTH_NOTE = "nearest rank; exact below 256, else within 0.4%"  # log buckets, store/length_stats.py
_LENGTH_SCHEMA = TableSchema(columns=[
    TableColumn("measure", "string"), TableColumn("documents", "int"), TableColumn("min", "int"),
    *(TableColumn(f"p{q}", "int", description=_LENGTH_NOTE) for q in PERCENTILES), TableColumn("max", "int"),
])


def length_distribution(spec: DatasetSpec, manifest: Manifest | None) -> MetadataValue:
    """Characters per document and tokens per annotated document: min, percentiles, max; or, for a
    version published from parts written before lengths were recorded, why there is no table."""
    if manifest is None:
        rows = []
    elif manifest.lengths is None:
        return MetadataValue.text(_lengths_unavailable(spec, manifest))
    else:
        rows = length_rows(manifest.lengths.characters, manifest.lengths.tokens)
    return MetadataValue.table([TableRecord(r) for r in rows], schema=_LENGTH_SCHEMA)


def _lengths_unavailable(spec: DatasetSpec, manifest: Manifest) -> str:
    store = DatasetStore(spec)
    metas = [store.read_part_meta(key) for key, _ in manifest.shards]
    without = sum(1 for m in metas if m is not None and m.lengths is None)
    why = (f"{without} of {len(metas)} parts were written" if without
           else "this version was published from parts written")  # parts forced since then
    return f"Length distribution unavailable: {why} before lengths were recorded. Materializing with force fills it in."


def _common(plan: DatasetPlan, manifest: Manifest | None) -> dict:
    if manifest is None:  # a concurrent publish removed the version just resolved: report zeros
        docs = annotated = tokens = text_bytes = sidecar_bytes = duplicates = 0
        files = len(plan.shards)
        drops: dict[str, int] = {}
    else:
        docs, annotated, tokens, files = manifest.docs, manifest.annotated_docs, manifest.tokens, manifest.files
        text_bytes, sidecar_bytes, drops = manifest.text_bytes, manifest.sidecar_bytes, manifest.drops
        duplicates = manifest.duplicate_uids
    empty = drops.get("empty_text", 0)
    return {
        "documents": MetadataValue.int(docs),
        "annotated_documents": MetadataValue.int(annotated),
        "annotated_share": MetadataValue.float(round(annotated / docs, 4) if docs else 0.0),
        "tokens": MetadataValue.int(tokens),
        "files": MetadataValue.int(files),
        "shards": MetadataValue.int(len(plan.shards)),
        "text_bytes": MetadataValue.int(text_bytes),
        "sidecar_bytes": MetadataValue.int(sidecar_bytes),
        "empty_text_rate": MetadataValue.float(round(empty / (docs + empty), 4) if docs + empty else 0.0),
        "skipped_items": MetadataValue.int(sum(drops.values())),
        "drop_ledger": drop_ledger_table(drops),
        "duplicate_uids": MetadataValue.int(duplicates),
        **output_paths(plan.spec, manifest),
        ROW_COUNT: MetadataValue.int(docs),
        COLUMN_SCHEMA: MetadataValue.table_schema(DOCUMENT_SCHEMA),
        "preview": preview(plan.spec, manifest),
        "length_distribution": length_distribution(plan.spec, manifest),
        "force": MetadataValue.bool(plan.force),
    }


def skipped_metadata(plan: DatasetPlan, manifest: Manifest | None) -> dict:
    md = _common(plan, manifest)
    md.update({
        "skipped": MetadataValue.bool(True),
        "shards_extracted": MetadataValue.int(0),
        "shards_up_to_date": MetadataValue.int(len(plan.shards)),
        "bytes_written": MetadataValue.int(0),
    })
    return md


def publish_metadata(plan: DatasetPlan, report: RunReport) -> dict:
    manifest = report.manifest
    md = _common(plan, manifest)
    input_bytes = sum(m.input_bytes for m in report.parts)
    seconds = report.seconds
    md.update({
        "skipped": MetadataValue.bool(False),
        "shards_extracted": MetadataValue.int(len(report.extracted)),
        "shards_up_to_date": MetadataValue.int(report.shards - len(report.extracted)),
        "bytes_written": MetadataValue.int(manifest.text_bytes + manifest.sidecar_bytes if manifest else 0),
        "duration_seconds": MetadataValue.float(round(seconds, 3)),
        "input_mb_per_second": MetadataValue.float(mb_per_second(input_bytes, seconds)),
    })
    if manifest is not None and manifest.duplicate_examples:
        md["duplicate_uid_examples"] = MetadataValue.json(list(manifest.duplicate_examples))
    if report.warnings:
        md["first_warnings"] = MetadataValue.json(report.warnings[:20])
    return md


def mb_per_second(nbytes: int, seconds: float) -> float:
    """MB/s to three significant digits: a sample corpus's few kB read as 0.00412, not 0."""
    if seconds <= 0 or nbytes <= 0:
        return 0.0
    return float(f"{nbytes / 1e6 / seconds:.3g}")


def output_paths(spec: DatasetSpec, manifest: Manifest | None) -> dict:
    """The published files, as path metadata; the sidecar only when this version has one."""
    paths: dict[str, MetadataValue] = {"text_path": MetadataValue.path(str(spec.text_path))}
    if manifest is not None and manifest.has_sidecar:
        paths["sidecar_path"] = MetadataValue.path(str(spec.sidecar_path))
        paths[SIDECAR_COLUMN_SCHEMA] = MetadataValue.table_schema(SIDECAR_SCHEMA)
    return paths


def shard_batch_metadata(batch: ShardBatch, report: RunReport) -> dict:
    """What a `shards/<key>` run did as a whole. Dagster copies it onto every partition, so each
    label says `batch_`; each partition's own numbers come from `part_metadata` (DAGSTER_NOTES 6)."""
    return {
        "batch_shards": MetadataValue.int(len(batch.shards)),
        "batch_shards_extracted": MetadataValue.int(len(report.extracted)),
        "batch_shards_up_to_date": MetadataValue.int(len(batch.shards) - len(report.extracted)),
        "batch_documents_extracted": MetadataValue.int(sum(m.docs for m in report.parts)),
        "batch_seconds": MetadataValue.float(round(report.seconds, 3)),
        "force": MetadataValue.bool(batch.force),
    }


def part_metadata(spec: DatasetSpec, meta: PartMeta, rebuilt: bool) -> dict:
    """One `shards/<key>` partition's own numbers, from its part meta (rebuilt now or already current)."""
    paths = DatasetStore(spec).part_paths(meta.shard)
    md = {
        "rebuilt": MetadataValue.bool(rebuilt),
        "documents": MetadataValue.int(meta.docs),
        ROW_COUNT: MetadataValue.int(meta.docs),
        "annotated_documents": MetadataValue.int(meta.annotated_docs),
        "tokens": MetadataValue.int(meta.tokens),
        "files": MetadataValue.int(len(meta.files)),
        "text_bytes": MetadataValue.int(meta.text_bytes),
        "input_bytes": MetadataValue.int(meta.input_bytes),
        "skipped_items": MetadataValue.int(sum(meta.drops.values())),
        "drop_ledger": drop_ledger_table(meta.drops),
        "seconds": MetadataValue.float(round(meta.seconds, 3)),
        "fingerprint": MetadataValue.text(meta.fingerprint),
        "part_path": MetadataValue.path(str(paths.text)),
    }
    if meta.has_annotations:
        md["part_sidecar_path"] = MetadataValue.path(str(paths.annotations))
    return md
