"""Which extract.yaml `slm4ie` reads: `--config`, else `$SLM4IE_EXTRACT_CONFIG`, else `./extract.yaml`
in the working folder, and only then the project's own file.

The Dagster code location keeps `catalog.default_config_path` (the environment variable, else the
project's file): it is started from the project folder. A person running `slm4ie` from a corpus
folder means that folder's catalog, so the CLI looks there first, and says which file it read.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from ..catalog import CONFIG_ENV, PROJECT_ROOT
from .output import UsageError


@dataclass(frozen=True)
class CatalogChoice:
    """The catalog file and why it was chosen (for the line naming it)."""

    path: Path
    source: str

    def line(self) -> str:
        return f"slm4ie: catalog {self.path} ({self.source})"


def choose_catalog(option: str | None, cwd: Path | None = None) -> CatalogChoice:
    """The catalog to read; a `--config` or `$SLM4IE_EXTRACT_CONFIG` naming no file is a bad argument
    (`UsageError`), never a reason to fall back to another catalog."""
    if option is not None:
        return _named(CatalogChoice(Path(option).expanduser().resolve(), "--config"), f"--config {option}")
    env = os.environ.get(CONFIG_ENV)
    if env:
        return _named(CatalogChoice(Path(env).expanduser().resolve(), f"${CONFIG_ENV}"), f"${CONFIG_ENV}={env}")
    local = (cwd or Path.cwd()) / "extract.yaml"
    if local.is_file():
        return CatalogChoice(local.resolve(), "./extract.yaml")
    return CatalogChoice(PROJECT_ROOT / "extract.yaml", "the project's own; no ./extract.yaml here")


def _named(choice: CatalogChoice, given: str) -> CatalogChoice:
    if choice.path.is_file():
        return choice
    what = "is a folder, not a catalog file" if choice.path.is_dir() else "names no file"
    raise UsageError(f"slm4ie: {given}: {choice.path} {what} (an extract.yaml; see slm4ie --help)")
