"""A quiet start for `dg` and `dagster dev` in the project root (docs/dagster-notes.md, DAGSTER_NOTES 1).

The venv's start-up hook (tools/slm4ie_dagster_module.pth) calls `install()` in those processes only,
before Dagster is imported. Two things Dagster says there are about our own layout, not the user's:
  - `dagster dev` (and `dg dev`, which runs it in its own process) warns that the root
    `dagster.yaml` "will not be used" whenever DAGSTER_HOME is set. With DAGSTER_HOME holding a
    `dagster.yaml` of its own (`make home`) that is the intended set-up; without one the warning stays,
    and the first extraction step names what the instance lacks (dagster_layer/instance_settings.py).
  - `dg` reads the telemetry setting from `$DAGSTER_HOME/dagster.yaml` only. With DAGSTER_HOME unset,
    Dagster's commands take the instance's settings from `./dagster.yaml` (a temporary instance
    configured by the working folder's file), which turns telemetry off, yet `dg` printed its
    telemetry banner on its first call and logged usage. Here `dg` reads the same file Dagster does.
Cheap to import: `yaml` and Dagster's telemetry module are loaded only for `dg` with DAGSTER_HOME unset.
"""

import logging
import os
from pathlib import Path

UNUSED_ROOT_FILE = "will not be used to configure Dagster"


class _OwnLayoutFilter(logging.Filter):
    """Drops `dagster dev`'s warning about the working folder's dagster.yaml while DAGSTER_HOME has its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (UNUSED_ROOT_FILE in record.getMessage() and home_has_instance_file())


def home_has_instance_file() -> bool:
    home = os.environ.get("DAGSTER_HOME")
    return home is not None and home != "" and any((Path(home) / n).is_file() for n in ("dagster.yaml", "dagster.yml"))


def telemetry_off_in(path: Path) -> bool:
    """Whether the instance file at `path` sets `telemetry: enabled: false`."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    telemetry = doc.get("telemetry") if isinstance(doc, dict) else None
    return isinstance(telemetry, dict) and telemetry.get("enabled") is False


def _follow_the_working_folders_instance() -> None:
    """dg's telemetry check, with DAGSTER_HOME unset, reads ./dagster.yaml as Dagster's own commands do."""
    from dagster_shared import telemetry

    original = getattr(telemetry, "get_telemetry_enabled_from_dagster_yaml", None)
    if original is None:  # another Dagster: leave it alone
        return

    def enabled_from_instance_file() -> bool:
        if not os.environ.get("DAGSTER_HOME") and telemetry_off_in(Path.cwd() / "dagster.yaml"):
            return False
        return original()

    telemetry.get_telemetry_enabled_from_dagster_yaml = enabled_from_instance_file


def install(command: str) -> None:
    """`command`: the program's name, `dg` or `dagster` (the hook calls this for `dg` and `dagster dev`)."""
    logging.getLogger("dagster").addFilter(_OwnLayoutFilter())
    if command == "dg" and not os.environ.get("DAGSTER_HOME"):
        _follow_the_working_folders_instance()
