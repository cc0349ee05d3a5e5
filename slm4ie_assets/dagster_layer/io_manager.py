"""The IO manager that owns the published text/sidecar pair.

Assets hand it a lazy `DatasetPlan` (no data); it decides skip-unless-force from the manifest, brings
stale parts up to date, publishes atomically and reports what happened as materialization metadata.
"""

from dataclasses import dataclass
from pathlib import Path

from dagster import ConfigurableIOManager, InputContext, OutputContext

from ..catalog import DatasetSpec, load_catalog
from ..pipeline import DatasetPlan, RunReport, ShardBatch, extract_and_publish, extract_shard_batch
from ..store.dataset_store import READ_ERRORS, DatasetStore, read_manifest
from ..store.manifest import Manifest
from .assets import ShardEventRecorder
from .materialization_metadata import part_metadata, publish_metadata, shard_batch_metadata, skipped_metadata
from .user_errors import expected_errors_as_failures

MAX_LOGGED_WARNINGS = 50


@dataclass(frozen=True)
class PublishedDataset:
    """What a downstream asset receives: the published pair, by its paths inside the version folder
    that was current when the input was loaded (`out/.slm4ie/<key>/versions/<v>/`), not the
    top-level `extracted/<key>.jsonl` links, which a later publish re-points. So the text file, the
    sidecar and the manifest always belong together: a republish while the step runs never hands
    it a new text beside an old sidecar. Once a newer version is published the old folder is
    removed; files already open stay readable, a path opened later raises FileNotFoundError."""

    key: str
    text_path: Path
    sidecar_path: Path | None
    manifest: Manifest
    version: str  # the version folder's name


class ExtractIOManager(ConfigurableIOManager):
    @expected_errors_as_failures
    def handle_output(self, context: OutputContext, obj: DatasetPlan | ShardBatch) -> None:
        if isinstance(obj, ShardBatch):
            return self._extract_shards(context, obj)
        if not isinstance(obj, DatasetPlan):
            raise TypeError(f"extract_io stores DatasetPlan or ShardBatch values, got {type(obj).__name__}")
        if obj.up_to_date:
            manifest = DatasetStore(obj.spec).published_manifest()
            context.log.info(f"{obj.spec.key}: published output matches all {len(obj.shards)} shard(s); skipped "
                             "(materialize with force to re-extract)")
            context.add_output_metadata(skipped_metadata(obj, manifest))
            return
        recorder = ShardEventRecorder(context, obj)
        report = extract_and_publish(obj, log=context.log.info, on_part=recorder)
        if recorder.unrecorded:
            context.log.info(f"{obj.spec.key}: {recorder.unrecorded} rebuilt shard(s) not recorded one by one as "
                             "shards/ partition materializations (bulk rebuild; see SHARD_EVENT_LIMIT)")
        # bookkeeping goes to the debug log, not the metadata people read: the recorded events are
        # the shards/ partition materializations themselves
        context.log.debug(f"{obj.spec.key}: {recorder.recorded} shard partition materialization(s) recorded")
        if recorder.recorded:  # this step's provenance must point past the partitions it just recorded
            context.step_context.wipe_input_asset_version_info(recorder.asset_key)  # DAGSTER_NOTES 6
        for w in report.warnings[:MAX_LOGGED_WARNINGS]:
            context.log.warning(w)
        extra = sum(sum(m.drops.values()) for m in report.parts) - min(len(report.warnings), MAX_LOGGED_WARNINGS)
        if extra > 0:
            context.log.warning(f"{obj.spec.key}: {extra} more skipped item(s); see the drop ledger in the metadata")
        if report.skipped:
            context.add_output_metadata(skipped_metadata(obj, report.manifest))
        else:
            context.add_output_metadata(publish_metadata(obj, report))

    def _extract_shards(self, context: OutputContext, batch: ShardBatch) -> None:
        """A shards/<key> run: bring the selected parts up to date; publishing is extracted/<key>'s job."""
        report = extract_shard_batch(batch, log=context.log.info)
        for w in report.warnings[:MAX_LOGGED_WARNINGS]:
            context.log.warning(w)
        context.log.info(f"{batch.spec.key}: {len(report.extracted)} of {len(batch.shards)} shard(s) extracted"
                         + ("" if report.extracted else " (all current; materialize with force to re-extract)"))
        context.add_output_metadata(shard_batch_metadata(batch, report))
        record_partition_metadata(context, batch, report)

    def load_input(self, context: InputContext) -> PublishedDataset:
        key = context.asset_key.path[-1]
        return published_dataset(load_catalog().dataset(key))


def record_partition_metadata(context: OutputContext, batch: ShardBatch, report: RunReport) -> None:
    """Each partition of a shards/<key> step gets its own part's numbers (DAGSTER_NOTES 6): Dagster
    merges partition-scoped asset metadata over the step's output metadata, event by event. The
    call lives on the step context (`AssetExecutionContext.add_asset_metadata` is the same call)."""
    store = DatasetStore(batch.spec)
    rebuilt = dict(zip(report.extracted, report.parts, strict=True))
    for shard in batch.shards:
        meta = rebuilt.get(shard.key) or store.read_part_meta(shard.key)
        if meta is None:  # only if the part vanished after the run: nothing true to report
            continue
        context.step_context.add_asset_metadata(part_metadata(batch.spec, meta, shard.key in rebuilt),
                                                asset_key=context.asset_key, partition_key=shard.key)


def published_dataset(spec: DatasetSpec) -> PublishedDataset:
    """The current version of `spec`'s published pair, resolved once (see PublishedDataset)."""
    store = DatasetStore(spec)
    error = None
    for _ in range(5):  # a publish may swap `current` and remove the folder just resolved: look again
        try:
            version = store.current.resolve(strict=True)
            manifest = read_manifest(version)
            break
        except READ_ERRORS as exc:
            error = exc
    else:
        raise FileNotFoundError(f"dataset {spec.key!r} has not been published yet (no {spec.text_path})") from error
    sidecar = version / spec.sidecar_path.name if manifest.has_sidecar else None
    return PublishedDataset(spec.key, version / spec.text_path.name, sidecar, manifest, version.name)
