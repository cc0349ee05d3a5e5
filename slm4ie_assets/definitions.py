"""The code location: Definitions built from extract.yaml (or $SLM4IE_EXTRACT_CONFIG).

A bad config fails here, at load, with one message listing every problem (D15).
"""

from dagster import Definitions, multiprocess_executor

from .assets import build_extracted_asset
from .catalog import load_catalog
from .io_manager import ExtractIOManager
from .resources import ExtractSettings


def build_definitions(catalog=None) -> Definitions:
    catalog = catalog or load_catalog()
    assets = [build_extracted_asset(spec, catalog) for spec in catalog.datasets.values()]
    return Definitions(
        assets=assets,
        resources={"extract": ExtractSettings(), "extract_io": ExtractIOManager()},
        # Datasets selected together run one after another, each with all its worker processes;
        # across runs the `slm4ie_extract` pool in dagster.yaml does the same for queued runs.
        executor=multiprocess_executor.configured({"max_concurrent": 1}),
    )


defs = build_definitions()
