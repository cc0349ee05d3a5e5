"""What `slm4ie extract` and `slm4ie publish` did, recorded in a Dagster instance as if runs had done it.

A cluster that runs the plain CLI (a Slurm array of `--slice I/N` tasks, then `publish`) leaves
nothing in the Dagster UI unless it says so: each part a slice wrote becomes a materialization of
its `shards/<key>` partition, and each publish a materialization of `extracted/<key>`, with the
metadata and Dagster version tags the assets' own runs give them (dagster_layer/materialization_metadata.py,
dagster_layer/lineage.py), reported without a run (`report_runless_asset_event`). Shard partitions that do not
exist yet are added first: a partition the sensor never registered cannot carry an event.
Only cli/record.py imports this module, and only when an instance is configured (README).
"""

from dagster import AssetMaterialization, DagsterInstance, MetadataValue

from ..catalog import DatasetSpec
from ..pipeline import DatasetPlan, RunReport
from ..store.part_meta import PartMeta
from .assets import extracted_key, partitions_name, shards_key
from .dagster_versions import code_version, plan_version
from .lineage import CODE_VERSION_TAG, DATA_VERSION_TAG, USER_PROVIDED_TAG, observed_raw_version, part_event_tags
from .materialization_metadata import part_metadata, publish_metadata


def ensure_partitions(instance: DagsterInstance, spec: DatasetSpec, keys: list[str]) -> list[str]:
    """Add the shard partitions among `keys` that the instance lacks; returns those added."""
    name = partitions_name(spec.key)
    known = set(instance.get_dynamic_partitions(name))
    missing = [k for k in dict.fromkeys(keys) if k not in known]
    if missing:
        instance.add_dynamic_partitions(name, missing)
    return missing


def record_parts(instance: DagsterInstance, spec: DatasetSpec, metas: list[PartMeta], command: str) -> int:
    """One `shards/<key>` partition materialization per part written; returns how many."""
    ensure_partitions(instance, spec, [m.shard for m in metas])
    raw_seen = observed_raw_version(instance, spec.key)
    for meta in metas:
        instance.report_runless_asset_event(AssetMaterialization(
            asset_key=shards_key(spec.key), partition=meta.shard,
            metadata={**part_metadata(spec, meta, rebuilt=True), "recorded_by": MetadataValue.text(command)},
            tags=part_event_tags(spec, meta, raw_seen)))
    return len(metas)


def record_publish(instance: DagsterInstance, plan: DatasetPlan, report: RunReport, command: str) -> None:
    """One `extracted/<key>` materialization for a publish, its shard partitions made to exist."""
    spec = plan.spec
    ensure_partitions(instance, spec, [s.key for s in plan.shards])
    instance.report_runless_asset_event(AssetMaterialization(
        asset_key=extracted_key(spec.key),
        metadata={**publish_metadata(plan, report), "recorded_by": MetadataValue.text(command)},
        tags={CODE_VERSION_TAG: code_version(spec), DATA_VERSION_TAG: plan_version(spec, plan.shards),
              USER_PROVIDED_TAG: "true"}))


def open_instance() -> DagsterInstance:
    """The instance of $DAGSTER_HOME, as every `dagster` command opens it (use as a context manager)."""
    return DagsterInstance.get()
