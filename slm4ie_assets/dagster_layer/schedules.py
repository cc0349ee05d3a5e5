"""Periodic forced re-extraction: one schedule per dataset whose extract.yaml entry has `schedule:`.

Forcing rebuilds every part and republishes even when nothing changed on disk, which picks up
extractor fixes that did not bump the format version. No `schedule:`, no schedule.
"""

from dagster import AssetSelection, DefaultScheduleStatus, ScheduleDefinition

from ..catalog import Catalog, DatasetSpec
from .assets import extracted_key

FORCE_RUN_CONFIG = {"resources": {"extract": {"config": {"force": True}}}}


def build_schedule(spec: DatasetSpec) -> ScheduleDefinition:
    return ScheduleDefinition(
        name=f"reextract_{spec.key}_schedule",
        cron_schedule=spec.schedule,
        execution_timezone="UTC",
        target=AssetSelection.assets(extracted_key(spec.key)),
        run_config=FORCE_RUN_CONFIG,
        tags={"slm4ie/dataset": spec.key, "slm4ie/trigger": "schedule"},
        default_status=DefaultScheduleStatus.RUNNING,
        description=f"Forced re-extraction of {spec.key} on `{spec.schedule}` (UTC), from extract.yaml.",
    )


def build_schedules(catalog: Catalog) -> list[ScheduleDefinition]:
    return [build_schedule(spec) for spec in catalog.datasets.values() if spec.schedule]
