"""Lineage in Dagster's terms: the external `raw/<key>` asset, its observations, and the version tags
of the shard events the project records itself (DAGSTER_NOTES 6).

Dagster writes code and data version tags on the materializations it generates from an asset's
output. The events we log ourselves (a `shards/<key>` partition rebuilt inside an `extracted/<key>`
run) and the `raw/<key>` observations (from the raw sensor, the observe function, and every run,
which lists the raw tree anyway) carry the same tags, built here from `dagster_layer/dagster_versions.py`, so the UI's
staleness ("has a new dependency data version", "has a new code version") covers them too.
"""

import warnings

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    DagsterInstance,
    DataVersion,
    MetadataValue,
    ObserveResult,
    OutputContext,
    multi_observable_source_asset,
)

from ..catalog import Catalog, DatasetSpec
from ..pipeline import lock_path, require_raw_dir, unpack
from ..planning.shards import Shard, list_shards
from ..store.locks import dataset_lock
from ..store.part_meta import PartMeta
from .dagster_versions import code_version, part_version, raw_version

# Dagster's tag names for versions and provenance (dagster._core.definitions.data_version); the
# lineage tests read staleness back through Dagster's own resolver, so a rename there fails them.
DATA_VERSION_TAG = "dagster/data_version"
CODE_VERSION_TAG = "dagster/code_version"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
NULL_POINTER = "NULL"
RAW_GROUP = "raw"


def raw_key(key: str) -> AssetKey:
    return AssetKey(["raw", key])


def build_raw_asset(spec: DatasetSpec, catalog: Catalog) -> AssetsDefinition:
    """`raw/<key>`: the raw folder as an observable external asset. Dagster's staleness reads
    observations only of observable assets, so it has an observe function: the same unpack and
    listing as a `raw_<key>_sensor` tick (the UI's "Observe" button gives the same version)."""
    asset_spec = AssetSpec(
        key=raw_key(spec.key),
        group_name=RAW_GROUP,
        # one sentence under the 100 characters `dg list defs` prints; the folder and the longer text are in the
        # metadata. raw_<key>_sensor observes it whenever the files change (data version: a digest of
        # shard keys and stat fingerprints, dagster_layer/dagster_versions.py); extracted/<key> then shows as stale
        description="The input files in the dataset's raw folder, as its raw sensor last observed them",
        owners=list(spec.owners),
        kinds={"folder"},
        tags={"slm4ie/extractor": spec.extractor, "slm4ie/domain": spec.domain},
        metadata={"about": f"The raw input files of {spec.key}, as they are in their folder (not built by Dagster)",
                  "raw_dir": MetadataValue.path(str(spec.raw_dir)), "extractor": spec.extractor},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)  # multi_observable_source_asset is beta in 1.13

        @multi_observable_source_asset(specs=[asset_spec], name=f"observe_raw_{spec.key}")
        def _raw(context):
            require_raw_dir(spec)
            with dataset_lock(lock_path(spec), spec.key, log=context.log.info):
                unpack(spec, catalog, log=context.log.info)
                shards = list_shards(spec, catalog.shard_group_threshold)
            yield ObserveResult(asset_key=asset_spec.key, data_version=DataVersion(raw_version(shards)),
                                metadata=raw_observation(spec, shards).metadata)

    return _raw


def raw_observation(spec: DatasetSpec, shards: list[Shard]) -> AssetObservation:
    """What a sensor tick, the observe function or a run reports for the tree it just listed."""
    return AssetObservation(
        asset_key=raw_key(spec.key),
        metadata={"shards": MetadataValue.int(len(shards)),
                  "input_bytes": MetadataValue.int(sum(s.size for s in shards)),
                  "raw_dir": MetadataValue.path(str(spec.raw_dir))},
        tags={DATA_VERSION_TAG: raw_version(shards), USER_PROVIDED_TAG: "true"},
    )


def observed_raw_version(instance: DagsterInstance, key: str) -> str | None:
    """The data version of the latest `raw/<key>` observation (None: never observed)."""
    records = instance.fetch_observations(raw_key(key), limit=1).records
    if not records or records[0].asset_observation is None:
        return None
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG)


def observe_raw_in_step(context: AssetExecutionContext, spec: DatasetSpec, shards: list[Shard]) -> None:
    """A run has just listed the raw tree itself: record it as the current `raw/<key>` version (when
    it differs from the last observation), so the run's provenance names the tree it was built from
    and it is fresh afterwards even if no sensor tick saw the change first (or no sensor runs).
    Dagster fetched the upstream versions when the step started, so that cached one is dropped."""
    observation = raw_observation(spec, shards)
    if observation.data_version == observed_raw_version(context.instance, spec.key):
        return
    context.log_event(observation)
    context.get_step_execution_context().wipe_input_asset_version_info(observation.asset_key)


def step_input_version(context: OutputContext, upstream: AssetKey) -> str | None:
    """The data version of `upstream` that Dagster recorded for this step's own provenance."""
    info = context.step_context.maybe_fetch_and_get_input_asset_version_info(upstream)
    return info.data_version.value if info is not None and info.data_version is not None else None


def part_event_tags(spec: DatasetSpec, meta: PartMeta, raw_version_seen: str | None) -> dict[str, str]:
    """The tags Dagster would write on a materialization of this part's partition: its own data
    version, the shards asset's code version, and the `raw/<key>` version it was built from."""
    raw = raw_key(spec.key).to_user_string()
    return {
        CODE_VERSION_TAG: code_version(spec),
        f"dagster/input_data_version/{raw}": raw_version_seen or "INITIAL",
        f"dagster/input_event_pointer/{raw}": NULL_POINTER,
        DATA_VERSION_TAG: part_version(meta),
        USER_PROVIDED_TAG: "true",
    }
