"""Run-level settings: one resource, so one run-config shape works on the CLI, in the launchpad and
in sensors: `{"resources": {"extract": {"config": {"force": true, "max_workers": 2}}}}`
(also `progress_seconds`).

Defaults live on the class because run config replaces constructor values (DAGSTER_NOTES 3).
"""

from dagster import ConfigurableResource
from pydantic import Field


class ExtractSettings(ConfigurableResource):
    force: bool = Field(
        default=False,
        description="Re-extract every shard and republish even when outputs are current.",
    )
    max_workers: int | None = Field(
        default=None,
        description="Worker processes for this run; 0 = all cores; unset = extract.yaml's max_workers.",
    )
    progress_seconds: float | None = Field(
        default=None,
        description="Seconds between progress lines in the run log (at least 0.01); "
                    "unset = $SLM4IE_PROGRESS_SECONDS, else 10.",
    )
