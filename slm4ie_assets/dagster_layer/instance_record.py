"""What `slm4ie extract` and `slm4ie publish` did, recorded in a Dagster instance as if runs had done it.

A cluster that runs the plain CLI (a Slurm array of `--slice I/N` tasks, then `publish`) leaves
nothing in the Dagster UI unless it says so: each part a slice wrote becomes a materialization of
its `shards/<key>` partition, and each publish a materialization of `extracted/<key>`, with the
metadata and Dagster version tags the assets' own runs give them (dagster_layer/materialization_metadata.py,
dagster_layer/lineage.py), reported without a run (`report_runless_asset_event`). Shard partitions that do not
exist yet are added first: a partition the sensor never registered cannot carry an event.
Only cli/record.py imports this module, and only when an instance is configured (README).

The instance is $DAGSTER_HOME's, its storage where `dagster` commands run from $DAGSTER_HOME keep
it: a relative path in its dagster.yaml (the project root's says `base_dir: .dagster/storage`) is
taken from $DAGSTER_HOME, not from the folder the CLI was started in. Dagster itself reads such a
path from the working folder, so `slm4ie extract` started elsewhere made a new, empty instance there
while it said it recorded into $DAGSTER_HOME. The message names the storage written (`stored_in`).
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetMaterialization, DagsterInstance, MetadataValue
from dagster._core.instance.ref import InstanceRef
from dagster_shared.yaml_utils import load_yaml_from_globs

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


# The instance settings whose `base_dir` values are paths (storage, logs, artifacts; any nesting).
PATH_SECTIONS = ("storage", "run_storage", "event_log_storage", "schedule_storage", "local_artifact_storage",
                 "compute_logs")


def open_instance(home: Path) -> DagsterInstance:
    """The instance of `home` ($DAGSTER_HOME), its relative paths taken from `home` (use as a context
    manager)."""
    settings = load_yaml_from_globs(str(home / "dagster.yaml")) or {}
    overrides = {name: _anchored(settings[name], home) for name in PATH_SECTIONS if name in settings}
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))


def _anchored(value: Any, home: Path) -> Any:
    """`value` with every relative `base_dir` string made absolute under `home`."""
    if isinstance(value, Mapping):
        return {key: (str(home / item) if key == "base_dir" and isinstance(item, str) and not os.path.isabs(item)
                      else _anchored(item, home)) for key, item in value.items()}
    return value


def stored_in(instance: DagsterInstance) -> str:
    """Where `instance` keeps its runs and events, in words: the folder of a file-based storage (as
    an absolute path), else the storage's class (a database)."""
    ref = instance.get_ref()
    data = ref.storage_data or ref.event_storage_data
    config = (yaml.safe_load(data.config_yaml) or {}) if data is not None else {}
    base_dir = config.get("base_dir") if isinstance(config, dict) else None
    if isinstance(base_dir, str):
        return os.path.abspath(base_dir)
    return data.class_name if data is not None else "an unknown storage"
