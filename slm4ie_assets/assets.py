"""Asset factories: one `extracted/<key>` asset per dataset in extract.yaml.

The asset body only plans (stat calls, archive unpacking); the IO manager extracts and publishes,
so a current dataset is skipped without opening a raw file.
"""

from dagster import AssetExecutionContext, AssetKey, AssetsDefinition, MetadataValue, Output, asset

from .catalog import Catalog, DatasetSpec
from .locks import dataset_lock
from .pipeline import effective_workers, lock_path, plan_dataset, require_raw_dir, unpack
from .resources import ExtractSettings

EXTRACT_POOL = "slm4ie_extract"
GROUP = "extracted"


def extracted_key(key: str) -> AssetKey:
    return AssetKey(["extracted", key])


def _description(spec: DatasetSpec) -> str:
    return (
        f"`{spec.key}` ({spec.domain}) extracted with the `{spec.extractor}` extractor from `{spec.raw_dir}`.\n\n"
        f"Publishes `{spec.text_path}` (one Document per line) and, when any document carries token "
        f"annotations, the line-aligned `{spec.sidecar_path}`. Skipped when the published output matches "
        "the raw files; set `force` in the `extract` resource config to re-extract."
    )


def build_extracted_asset(spec: DatasetSpec, catalog: Catalog) -> AssetsDefinition:
    @asset(
        key=extracted_key(spec.key),
        group_name=GROUP,
        io_manager_key="extract_io",
        pool=EXTRACT_POOL,
        description=_description(spec),
        kinds={"python", "jsonl"},
        tags={"slm4ie/extractor": spec.extractor, "slm4ie/domain": spec.domain},
        metadata={
            "extractor": spec.extractor,
            "domain": spec.domain,
            "raw_dir": MetadataValue.path(str(spec.raw_dir)),
            "text_path": MetadataValue.path(str(spec.text_path)),
            "sidecar_path": MetadataValue.path(str(spec.sidecar_path)),
            "strict": spec.strict,
        },
    )
    def _extracted(context: AssetExecutionContext, extract: ExtractSettings) -> Output:
        require_raw_dir(spec)
        with dataset_lock(lock_path(spec), spec.key, log=context.log.info):
            report = unpack(spec, catalog, log=context.log.info)
        for w in report.get("warnings", []):
            context.log.warning(w)
        workers = effective_workers(extract.max_workers, catalog.max_workers)
        plan = plan_dataset(spec, force=extract.force, workers=workers)
        context.log.info(
            f"{spec.key}: {len(plan.shards)} shard(s), {len(plan.stale)} to extract, "
            f"{'up to date' if plan.up_to_date else 'will publish'}; {workers} worker(s)"
            + ("; force" if extract.force else "")
        )
        return Output(plan)

    return _extracted
