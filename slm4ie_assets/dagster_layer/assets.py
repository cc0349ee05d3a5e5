"""Asset factories: `shards/<key>` (one dynamic partition per shard) and `extracted/<key>` per dataset.

Asset bodies only plan (stat calls, archive unpacking, partition bookkeeping); the IO manager
extracts and publishes, so a current dataset is skipped without opening a raw file.
"""

import warnings
from collections.abc import Mapping

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    AssetSelection,
    AutomationCondition,
    BackfillPolicy,
    BetaWarning,
    DataVersion,
    DynamicPartitionsDefinition,
    Failure,
    MetadataValue,
    Output,
    OutputContext,
    asset,
)

from ..catalog import Catalog, DatasetSpec
from ..engine.pool_server import effective_workers
from ..pipeline import DatasetPlan, ShardBatch, lock_path, plan_dataset, require_raw_dir, unpack
from ..planning.shards import Shard, check_shard_key, list_shards
from ..store.locks import dataset_lock
from ..store.part_meta import PartMeta
from .column_schemas import COLUMN_SCHEMA, DOCUMENT_SCHEMA, SIDECAR_COLUMN_SCHEMA, SIDECAR_SCHEMA
from .dagster_versions import batch_version, code_version, plan_version
from .instance_settings import POOL, warn_once_per_run
from .lineage import observe_raw_in_step, part_event_tags, raw_key, step_input_version
from .materialization_metadata import part_metadata
from .resources import ExtractSettings
from .stale_runs import before_extraction
from .user_errors import expected_errors_as_failures

EXTRACT_POOL = POOL
GROUP = "extracted"
SHARDS_GROUP = "shards"
# A partition event costs 28 ms (DAGSTER_NOTES 2) to 130 ms (this machine) on sqlite. extracted/<key>
# records the shards it rebuilt one by one only up to this many (3-13 s); a bigger rebuild (a first
# full extraction) is reported on extracted/<key> alone, so it is never dominated by event writes.
# The sensor hands bigger batches of new shards to extracted/<key> for the same reason.
SHARD_EVENT_LIMIT = 100


def extracted_key(key: str) -> AssetKey:
    return AssetKey(["extracted", key])


def shards_key(key: str) -> AssetKey:
    return AssetKey(["shards", key])


def partitions_name(key: str) -> str:
    """Dynamic partition names are instance-global: prefix them so other code locations can share it."""
    return f"slm4ie_shards__{key}"


def shard_partitions(key: str) -> DynamicPartitionsDefinition:
    return DynamicPartitionsDefinition(name=partitions_name(key))


def publish_condition(key: str) -> AutomationCondition:
    """Eager, minus "no dependency partition missing": extracted/<key> brings every shard up to date
    itself, and shards it built in bulk (or found current) are never materialized as partitions.
    A new `raw/<key>` observation alone starts nothing: the raw sensor already requests the runs a
    raw change needs (DAGSTER_NOTES 6); it only marks extracted/<key> stale in the UI."""
    updated = AutomationCondition.any_deps_updated().ignore(AssetSelection.assets(raw_key(key)))
    return (AutomationCondition.eager().without(~AutomationCondition.any_deps_missing())
            .replace("any_deps_updated", updated))


# One sentence each, under the 100 characters `dg list defs` prints of a description (it cuts the rest
# with "…"); the asset's page in the UI shows it under "Description". The `about` metadata entry
# says more, with the dataset's own names.
DESCRIPTION = "Published documents: one JSON line each, plus an annotations sidecar when the input is annotated"
SHARDS_DESCRIPTION = "Extracted parts, one per input file or file group; the published dataset joins them in file order"


def _about(spec: DatasetSpec) -> str:
    return (f"The published documents of {spec.key} ({spec.domain}, {spec.extractor}): one JSON line per "
            "document, with an annotations sidecar when the input has annotations")


def _shards_about(spec: DatasetSpec) -> str:
    return (f"The shards of {spec.key}: one extracted part per input file or file group, the units a run "
            f"re-extracts; extracted/{spec.key} joins the current parts")


def versioned_output(value: DatasetPlan | ShardBatch, version: str) -> Output:
    """The output with its data version (dagster_layer/dagster_versions.py). `Output(data_version=)` is beta in 1.13 and
    warns on every run; the warning says nothing to an operator."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        return Output(value, data_version=DataVersion(version))


_PARTITION_ADD_TRIES = 3


def sync_partitions(instance, key: str, planned: list[str]) -> tuple[list[str], list[str]]:
    """Make the dataset's dynamic partitions equal the planned shard keys; returns (added, deleted).

    Two runs of one dataset may plan at once (the plan takes no exclusive lock): Dagster's add
    reads, then inserts, so the second run's insert of a key the first just added fails on the
    storage's unique key. The add is then planned again from what is there now; an error that
    persists (the storage down) is raised."""
    name = partitions_name(key)
    want = set(planned)
    for attempt in range(_PARTITION_ADD_TRIES):
        existing = instance.get_dynamic_partitions(name)
        have = set(existing)
        added = [k for k in planned if k not in have]
        try:
            if added:
                instance.add_dynamic_partitions(name, added)
            break
        except Exception:
            if attempt == _PARTITION_ADD_TRIES - 1:
                raise
    deleted = [k for k in existing if k not in want]
    for k in deleted:  # no bulk API; ~4 ms each
        instance.delete_dynamic_partition(name, k)
    return added, deleted


class ShardEventRecorder:
    """`on_part` callback for the IO manager: records each shard extracted/<key> rebuilt as a
    materialization of its shards/<key> partition, unless the rebuild is bigger than the limit."""

    def __init__(self, context: OutputContext, plan: DatasetPlan, limit: int | None = None):
        self.context = context
        self.spec = plan.spec
        self.asset_key = shards_key(plan.spec.key)
        self.enabled = len(plan.stale) <= (SHARD_EVENT_LIMIT if limit is None else limit)
        # the raw version this step's own provenance records (fetched when the step started)
        self.raw_version = step_input_version(context, raw_key(plan.spec.key)) if self.enabled else None
        self.recorded = 0
        self.unrecorded = 0

    def __call__(self, shard: Shard, meta: PartMeta) -> None:
        if not self.enabled:
            self.unrecorded += 1
            return
        self.context.log_event(AssetMaterialization(
            asset_key=self.asset_key, partition=shard.key,
            description="rebuilt by extracted/" + self.spec.key,
            metadata=part_metadata(self.spec, meta, rebuilt=True),
            tags=part_event_tags(self.spec, meta, self.raw_version),
        ))
        self.recorded += 1


def build_extracted_asset(spec: DatasetSpec, catalog: Catalog) -> AssetsDefinition:
    @asset(
        key=extracted_key(spec.key),
        deps=[shards_key(spec.key), raw_key(spec.key)],
        automation_condition=publish_condition(spec.key),
        code_version=code_version(spec),
        owners=list(spec.owners),
        group_name=GROUP,
        io_manager_key="extract_io",
        pool=EXTRACT_POOL,
        description=DESCRIPTION,
        kinds={"jsonl"},
        tags={"slm4ie/extractor": spec.extractor, "slm4ie/domain": spec.domain},
        metadata={
            "about": _about(spec),
            "extractor": spec.extractor,
            "domain": spec.domain,
            "raw_dir": MetadataValue.path(str(spec.raw_dir)),
            # no sidecar_path: a dataset without annotations has none, and the UI would link it anyway;
            # each materialization names it when its version has one (materialization_metadata.output_paths)
            "text_path": MetadataValue.path(str(spec.text_path)),
            "strict": spec.strict,
            COLUMN_SCHEMA: MetadataValue.table_schema(DOCUMENT_SCHEMA),
            SIDECAR_COLUMN_SCHEMA: MetadataValue.table_schema(SIDECAR_SCHEMA),
        },
    )
    @expected_errors_as_failures
    def _extracted(context: AssetExecutionContext, extract: ExtractSettings) -> Output:
        before_extraction(context)  # record this run's process; free the pool slots of dead runs
        warn_once_per_run(context.instance, context.run.run_id, context.log.warning)
        require_raw_dir(spec)
        def unpack_log(message: str) -> None:  # archives logs each warning once, prefixed
            if message.startswith("WARNING "):
                context.log.warning(message[len("WARNING "):])
            else:
                context.log.info(message)

        with dataset_lock(lock_path(spec), spec.key, log=context.log.info):
            archives = unpack(spec, catalog, log=unpack_log, workers=extract.max_workers)
        workers = effective_workers(extract.max_workers, catalog.max_workers)
        plan = plan_dataset(spec, force=extract.force, workers=workers, group_threshold=catalog.shard_group_threshold,
                            progress_seconds=extract.progress_seconds, archive_drops=archives.drops,
                            hold_arriving=started_by_sensor(context.run.tags))
        if plan.held:
            context.log.info(f"{spec.key}: {len(plan.held)} shard(s) held back, file(s) still arriving "
                             f"({plan.arriving}): a sensor started this run, so only whole files are published; "
                             f"raw_{spec.key}_sensor plans them once they have settled")
        added, deleted = sync_partitions(context.instance, spec.key, [s.key for s in plan.shards])
        observe_raw_in_step(context, spec, plan.shards)
        context.log.info(
            f"{spec.key}: {len(plan.shards)} shard(s) ({len(added)} new, {len(deleted)} gone), "
            f"{len(plan.stale)} to extract, {'up to date' if plan.up_to_date else 'will publish'}; "
            f"{workers} worker(s)" + ("; force" if extract.force else "")
        )
        # the version of what the IO manager publishes (or finds published): dagster_layer/dagster_versions.py
        return versioned_output(plan, plan_version(spec, plan.shards))

    return _extracted


# what Dagster tags a run with when a sensor (the raw sensors, the republish automation sensor) or
# the asset daemon requested it; a run started from the UI, the CLI or a schedule carries neither
_SENSOR_RUN_TAGS = ("dagster/sensor_name", "dagster/auto_materialize")


def started_by_sensor(tags: Mapping[str, str]) -> bool:
    """Whether a sensor started the run: its planning then holds back files still arriving."""
    return any(tag in tags for tag in _SENSOR_RUN_TAGS)


def plan_shard_batch(context: AssetExecutionContext, spec: DatasetSpec, catalog: Catalog,
                     extract: ExtractSettings) -> ShardBatch:
    """The shards behind the run's partition keys; a key without a shard fails the run, naming it."""
    before_extraction(context)
    warn_once_per_run(context.instance, context.run.run_id, context.log.warning)
    require_raw_dir(spec)
    keys = list(context.partition_keys)
    shards = list_shards(spec, catalog.shard_group_threshold)
    observe_raw_in_step(context, spec, shards)
    by_key = {s.key: s for s in shards}
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        invalid = []
        for k in unknown:
            try:
                check_shard_key(k)
            except ValueError as exc:
                invalid.append(str(exc))
        shown = ", ".join(repr(k) for k in unknown[:10])
        if len(unknown) > 10:
            shown += f" and {len(unknown) - 10} more"
        raise Failure(
            description=(f"{spec.key}: no shard of {spec.raw_dir} has the partition key(s) {shown}: the file is "
                         "gone, was renamed, or the key was typed by hand. What to do: materialize "
                         f"extracted/{spec.key} to resynchronise the partitions with the raw files."
                         + "".join(f" {msg}." for msg in invalid[:3])),
            metadata={"unknown_keys": MetadataValue.json(unknown[:100])},
            allow_retries=False,
        )
    workers = effective_workers(extract.max_workers, catalog.max_workers)
    context.log.info(f"{spec.key}: {len(keys)} shard partition(s) requested; {workers} worker(s)"
                     + ("; force" if extract.force else ""))
    return ShardBatch(spec, [by_key[k] for k in keys], extract.force, workers, extract.progress_seconds)


def backfill_policy(spec: DatasetSpec) -> BackfillPolicy:
    """Fan-out (D24): runs of at most `max_shards_per_run` shards, which the run queue runs side by
    side (local processes, or pods under the K8s run launcher); 0 keeps one run per contiguous range,
    which the CLI's `--partition-range` requires."""
    if spec.max_shards_per_run:
        return BackfillPolicy.multi_run(max_partitions_per_run=spec.max_shards_per_run)
    return BackfillPolicy.single_run()


def build_shards_asset(spec: DatasetSpec, catalog: Catalog) -> AssetsDefinition:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # backfill_policy is beta in 1.13: a warning at every load

        @asset(
            key=shards_key(spec.key),
            deps=[raw_key(spec.key)],
            code_version=code_version(spec),
            owners=list(spec.owners),
            partitions_def=shard_partitions(spec.key),
            backfill_policy=backfill_policy(spec),
            group_name=SHARDS_GROUP,
            io_manager_key="extract_io",
            pool=EXTRACT_POOL,
            description=SHARDS_DESCRIPTION,
            kinds={"jsonl"},
            tags={"slm4ie/extractor": spec.extractor, "slm4ie/domain": spec.domain},
            metadata={"about": _shards_about(spec), "extractor": spec.extractor, "domain": spec.domain,
                      "raw_dir": MetadataValue.path(str(spec.raw_dir)),
                      COLUMN_SCHEMA: MetadataValue.table_schema(DOCUMENT_SCHEMA)},
        )
        @expected_errors_as_failures
        def _shards(context: AssetExecutionContext, extract: ExtractSettings) -> Output:
            batch = plan_shard_batch(context, spec, catalog, extract)
            return versioned_output(batch, batch_version(spec, batch.shards))

    return _shards
