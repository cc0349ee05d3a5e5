"""Materialization metadata that people can read at a glance in the Dagster UI."""

from dagster import MetadataValue

from .pipeline import DatasetPlan, RunReport


def _ledger_md(drops: dict) -> MetadataValue:
    if not drops:
        return MetadataValue.md("nothing skipped")
    rows = "\n".join(f"| {reason} | {count} |" for reason, count in sorted(drops.items(), key=lambda kv: -kv[1]))
    return MetadataValue.md(f"| reason | skipped |\n|---|---|\n{rows}")


def _common(plan: DatasetPlan, manifest: dict) -> dict:
    docs = manifest.get("docs", 0)
    annotated = manifest.get("annotated_docs", 0)
    drops = manifest.get("drops", {})
    return {
        "documents": MetadataValue.int(docs),
        "annotated_documents": MetadataValue.int(annotated),
        "annotated_share": MetadataValue.float(round(annotated / docs, 4) if docs else 0.0),
        "tokens": MetadataValue.int(manifest.get("tokens", 0)),
        "files": MetadataValue.int(manifest.get("files", len(plan.shards))),
        "shards": MetadataValue.int(len(plan.shards)),
        "text_bytes": MetadataValue.int(manifest.get("text_bytes", 0)),
        "sidecar_bytes": MetadataValue.int(manifest.get("sidecar_bytes", 0)),
        "skipped_items": MetadataValue.int(sum(drops.values())),
        "drop_ledger": _ledger_md(drops),
        "duplicate_uids": MetadataValue.int(manifest.get("duplicate_uids", 0)),
        "text_path": MetadataValue.path(str(plan.spec.text_path)),
        "force": MetadataValue.bool(plan.force),
    }


def skipped_metadata(plan: DatasetPlan, manifest: dict) -> dict:
    md = _common(plan, manifest)
    md.update({
        "skipped": MetadataValue.bool(True),
        "shards_extracted": MetadataValue.int(0),
        "shards_up_to_date": MetadataValue.int(len(plan.shards)),
        "bytes_written": MetadataValue.int(0),
    })
    return md


def publish_metadata(plan: DatasetPlan, report: RunReport) -> dict:
    manifest = report.manifest or {}
    md = _common(plan, manifest)
    input_bytes = sum(m.get("input_bytes", 0) for m in report.parts)
    seconds = report.seconds
    md.update({
        "skipped": MetadataValue.bool(False),
        "shards_extracted": MetadataValue.int(len(report.extracted)),
        "shards_up_to_date": MetadataValue.int(report.shards - len(report.extracted)),
        "bytes_written": MetadataValue.int(manifest.get("text_bytes", 0) + manifest.get("sidecar_bytes", 0)),
        "duration_seconds": MetadataValue.float(round(seconds, 3)),
        "input_mb_per_second": MetadataValue.float(round(input_bytes / 1e6 / seconds, 2) if seconds > 0 else 0.0),
    })
    if manifest.get("duplicate_examples"):
        md["duplicate_uid_examples"] = MetadataValue.json(manifest["duplicate_examples"])
    if report.warnings:
        md["first_warnings"] = MetadataValue.json(report.warnings[:20])
    return md
