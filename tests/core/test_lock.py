"""uv.lock is what a fresh install gets (README, "Installing: the lock"): it must agree with
pyproject.toml, and the venv the tests run in must hold exactly its versions."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import tomllib

import pytest

from support.paths import REPO

LOCK = REPO / "uv.lock"


def uv_binary() -> str:
    found = REPO / ".uv" / "bin" / "uv"
    if found.exists():
        return str(found)
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    if os.environ.get("CI"):
        pytest.fail("uv is missing: `make venv` bootstraps it into .uv/")
    pytest.skip("uv is not installed here (`make venv` bootstraps it into .uv/)")


def locked_versions() -> dict[str, set[str]]:
    """name -> its locked versions (more than one where they differ by Python version, as numpy's)."""
    versions: dict[str, set[str]] = {}
    for package in tomllib.loads(LOCK.read_text())["package"]:
        if "version" in package and package["name"] != "slm4ie-assets":
            versions.setdefault(normal(package["name"]), set()).add(package["version"])
    return versions


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lock_agrees_with_pyproject():
    """`uv lock --check` fails when a dependency was added, removed or re-ranged in pyproject.toml
    without `make lock`."""
    res = subprocess.run([uv_binary(), "lock", "--check"], cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, UV_PYTHON_DOWNLOADS="never"))
    assert res.returncode == 0, f"pyproject.toml and uv.lock disagree; run `make lock`:\n{res.stderr[-2000:]}"


@pytest.mark.skipif(os.environ.get("SLM4IE_UNLOCKED") == "1",
                    reason="a venv deliberately off the lock (make test-newest)")
def test_this_venv_holds_the_locked_versions():
    locked = locked_versions()
    installed = {normal(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    off = {name: (installed[name], sorted(versions)) for name, versions in locked.items()
           if name in installed and installed[name] not in versions}
    assert not off, f"installed versions differ from uv.lock (installed, locked): {off}; run `make venv`"
    for direct in ("dagster", "lxml", "datasets", "pyarrow", "orjson", "zstandard", "pyyaml", "croniter"):
        assert normal(direct) in installed, f"{direct} is locked but not installed"


def test_every_dependency_is_pinned_in_the_lock():
    locked = set(locked_versions())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [d for extra in project["optional-dependencies"].values() for d in extra]
    names = {normal(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in wanted}
    assert names <= locked, f"not in uv.lock: {sorted(names - locked)}"
