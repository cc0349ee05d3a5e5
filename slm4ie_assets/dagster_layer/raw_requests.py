"""What a raw sensor's tick hands Dagster, whether it read a raw folder in place (sensors.py) or
listed a bucket (bucket_sensor.py): a skip with its reason, or the one run of `extracted/<key>`,
with the same tags and run-key scheme either way (`<trigger>@<state>#<requesting tick>`)."""

from collections.abc import Sequence
from dataclasses import replace

from dagster import RunRequest, SensorResult, SkipReason

from ..catalog import DatasetSpec
from .assets import extracted_key
from .sensor_cursor import RawCursor


def skipped(reason: str, cursor: RawCursor) -> SensorResult:
    """A tick that plans nothing: its reason, also kept as the cursor's verdict (the plan unchanged)."""
    return SensorResult(skip_reason=SkipReason(reason), cursor=replace(cursor, last_tick=reason).encode())


def lock_held(spec: DatasetSpec) -> str:
    return f"{spec.key}: a run holds the dataset lock (parts are being rewritten); looking again next tick"


def trigger_word(published: bool, new: Sequence[object], changed: Sequence[object], gone: Sequence[object]) -> str:
    """The `slm4ie/trigger` tag: why the run was requested."""
    if not published:
        return "initial"
    words = [w for w, found in (("new", new), ("changed", changed), ("deleted", gone)) if found]
    return "+".join(words) or "republish"


def extracted_run(spec: DatasetSpec, trigger: str, state: str, tick: int) -> RunRequest:
    """The one run of extracted/<key>, which extracts what is stale and publishes; `state` digests
    what the tick saw, `tick` (the count of requesting ticks, this one included) ends the key."""
    return RunRequest(run_key=f"{trigger}@{state}#{tick}", asset_selection=[extracted_key(spec.key)],
                      tags={"slm4ie/dataset": spec.key, "slm4ie/trigger": trigger})
