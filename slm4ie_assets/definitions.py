"""The code location: Definitions built from extract.yaml (or $SLM4IE_EXTRACT_CONFIG).

A bad config fails here, at load, with one message listing every problem (D15), and no traceback
where Dagster allows it (user_errors.config_error_at_load).
"""

from dagster import Definitions, in_process_executor

from .catalog import Catalog, CatalogError, load_catalog
from .dagster_layer.assets import build_extracted_asset, build_shards_asset
from .dagster_layer.checks import build_extracted_checks
from .dagster_layer.io_manager import ExtractIOManager
from .dagster_layer.lineage import build_raw_asset
from .dagster_layer.resources import ExtractSettings
from .dagster_layer.schedules import build_schedules
from .dagster_layer.sensors import build_automation_sensor, build_raw_sensor, build_stale_run_sensor
from .dagster_layer.user_errors import config_error_at_load


def build_definitions(catalog: Catalog | None = None) -> Definitions:
    catalog = catalog or load_catalog()
    specs = list(catalog.datasets.values())
    assets: list = [build_raw_asset(spec, catalog) for spec in specs]  # external: observed by the raw sensors
    assets += [build_shards_asset(spec, catalog) for spec in specs]
    assets += [build_extracted_asset(spec, catalog) for spec in specs]
    sensors = [build_raw_sensor(spec, catalog) for spec in specs]
    if specs:
        sensors.append(build_automation_sensor(catalog))
    sensors.append(build_stale_run_sensor())
    return Definitions(
        assets=assets,
        asset_checks=[build_extracted_checks(spec) for spec in specs],
        sensors=sensors,
        schedules=build_schedules(catalog),
        resources={"extract": ExtractSettings(), "extract_io": ExtractIOManager()},
        # One process runs a run's steps one after another: datasets selected together never
        # oversubscribe cores (each uses all its worker processes), and no step pays for a fresh
        # interpreter. Across runs the `slm4ie_extract` pool in dagster.yaml does the same.
        executor=in_process_executor,
    )


try:
    defs = build_definitions()
except CatalogError as bad_config:
    # raised here, at module level and `from None`: the one frame of ours a stack can show
    raise config_error_at_load(bad_config) from None
