"""The code location: Definitions built from extract.yaml (or $SLM4IE_EXTRACT_CONFIG).

A bad config fails here, at load, with one message listing every problem (D15), and no traceback
where Dagster allows it (user_errors.config_error_at_load).
"""

import os
import sys

from dagster import Definitions, in_process_executor

from .catalog import Catalog, CatalogError, load_catalog
from .dagster_layer.assets import build_extracted_asset, build_shards_asset
from .dagster_layer.checks import build_extracted_checks
from .dagster_layer.io_manager import ExtractIOManager
from .dagster_layer.lineage import build_raw_asset
from .dagster_layer.resources import ExtractSettings
from .dagster_layer.schedules import build_schedules
from .dagster_layer.sensors import build_automation_sensor, build_raw_sensor, build_stale_run_sensor
from .dagster_layer.user_errors import VALIDATION_ENV, config_error_at_load
from .pipeline import MissingRawDir, require_raw_dir


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


def warn_missing_raw_folders(catalog: Catalog) -> list[str]:
    """Under `dg check defs` (and `dagster definitions validate`): one warning line per dataset whose
    raw folder is missing, on stderr; the check stays successful (the definitions are fine, and the
    folder may come later), but the first launch would fail on it."""
    lines = []
    for spec in catalog.datasets.values():
        try:
            require_raw_dir(spec)
        except MissingRawDir as exc:
            lines.append(f"Warning: {exc}; its runs fail until it does. What to do: create it with the input "
                         "files, or correct `input_dir` in extract.yaml (the raw folder is `input_dir`/<key>).")
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    return lines


try:
    _catalog = load_catalog()
    defs = build_definitions(_catalog)
except CatalogError as bad_config:
    # raised here, at module level and `from None`: the one frame of ours a stack can show
    raise config_error_at_load(bad_config) from None
if os.environ.get(VALIDATION_ENV) == "1":
    warn_missing_raw_folders(_catalog)
