"""Materialization metadata that people can read at a glance in the Dagster UI."""

from itertools import islice
from pathlib import Path

import orjson
from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from .manifest import Manifest
from .part_meta import merged_drops
from .pipeline import DatasetPlan, RunReport, ShardBatch

PREVIEW_DOCS = 3
PREVIEW_CHARS = 240
_LEDGER_SCHEMA = TableSchema(columns=[TableColumn("reason", "string"), TableColumn("skipped", "int")])


def drop_ledger_table(drops: dict) -> MetadataValue:
    rows = sorted(drops.items(), key=lambda kv: (-kv[1], kv[0]))
    return MetadataValue.table([TableRecord({"reason": r, "skipped": n}) for r, n in rows], schema=_LEDGER_SCHEMA)


def preview(text_path: Path) -> MetadataValue:
    """The first documents, shortened, so a reader sees what the dataset looks like."""
    lines = []
    try:
        with open(text_path, "rb") as fh:
            for raw in islice(fh, PREVIEW_DOCS):
                rec = orjson.loads(raw)
                text = rec["text"] if isinstance(rec["text"], str) else str(rec["text"])
                short = text[:PREVIEW_CHARS].replace("\n", " ⏎ ") + ("…" if len(text) > PREVIEW_CHARS else "")
                lines.append(f"- **{rec['doc_id']}**: {short}")
    except OSError:
        return MetadataValue.md("(not published)")
    return MetadataValue.md("\n".join(lines) if lines else "(no documents)")


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
        "text_path": MetadataValue.path(str(plan.spec.text_path)),
        "preview": preview(plan.spec.text_path),
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
        "input_mb_per_second": MetadataValue.float(round(input_bytes / 1e6 / seconds, 2) if seconds > 0 else 0.0),
    })
    if manifest is not None and manifest.duplicate_examples:
        md["duplicate_uid_examples"] = MetadataValue.json(list(manifest.duplicate_examples))
    if report.warnings:
        md["first_warnings"] = MetadataValue.json(report.warnings[:20])
    return md


def shard_batch_metadata(batch: ShardBatch, report: RunReport) -> dict:
    """Totals for a `shards/<key>` run (one multi-partition step cannot report per partition)."""
    drops = merged_drops(report.parts)
    return {
        "shards": MetadataValue.int(len(batch.shards)),
        "shards_extracted": MetadataValue.int(len(report.extracted)),
        "shards_up_to_date": MetadataValue.int(len(batch.shards) - len(report.extracted)),
        "documents": MetadataValue.int(sum(m.docs for m in report.parts)),
        "annotated_documents": MetadataValue.int(sum(m.annotated_docs for m in report.parts)),
        "tokens": MetadataValue.int(sum(m.tokens for m in report.parts)),
        "part_bytes": MetadataValue.int(sum(m.text_bytes for m in report.parts)),
        "skipped_items": MetadataValue.int(sum(drops.values())),
        "drop_ledger": drop_ledger_table(drops),
        "duration_seconds": MetadataValue.float(round(report.seconds, 3)),
        "force": MetadataValue.bool(batch.force),
    }
