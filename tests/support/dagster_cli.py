"""The real `dagster` CLI of this venv, with an environment naming the catalog and the instance."""

import os
import subprocess
from pathlib import Path

from support.paths import REPO, VENV_BIN


def dagster_env(config: Path, dagster_home: Path | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env["SLM4IE_EXTRACT_CONFIG"] = str(config)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    if dagster_home is not None:
        env["DAGSTER_HOME"] = str(dagster_home)
        (dagster_home / "dagster.yaml").touch()
    env.update(extra)
    return env


def run_dagster(args: list, env: dict, cwd: Path = REPO, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real `dagster` CLI of this venv, as a user types it."""
    return subprocess.run([str(VENV_BIN / "dagster"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
