"""The plain `slm4ie` CLI never loads Dagster (issue 35 point 5): not to print an expected error
(remedies.py words it), not to extract, look or count. Real subprocesses of the venv's entry point
under PYTHONPROFILEIMPORTTIME, which names every module the process (and the pool's forkserver,
which inherits the variable and stderr) imports. The one exception, recording into a Dagster
instance (cli/record.py), needs DAGSTER_HOME with a dagster.yaml: every run here unsets it, and one
points it at a folder without one."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from support.files import write_config, write_files
from support.paths import VENV_BIN

SLM4IE = VENV_BIN / "slm4ie"
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)


def imported_modules(stderr: str) -> set[str]:
    """The modules PYTHONPROFILEIMPORTTIME reports on stderr."""
    return {match.group(1) for match in IMPORT_LINE.finditer(stderr)}


def dagster_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] == "dagster" or m.startswith("dagster_"))


def slm4ie(args: list[str], config: Path, dagster_home: Path | None = None) -> tuple[subprocess.CompletedProcess,
                                                                                       set[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env |= {"SLM4IE_EXTRACT_CONFIG": str(config), "PYTHONPROFILEIMPORTTIME": "1"}
    if dagster_home is not None:
        env["DAGSTER_HOME"] = str(dagster_home)
    res = subprocess.run([str(SLM4IE), *args], env=env, capture_output=True, text=True, timeout=120,
                         cwd=config.parent)
    modules = imported_modules(res.stderr)
    assert "slm4ie_assets.cli.main" in modules, f"no import report from `slm4ie {' '.join(args)}`: {res.stderr}"
    return res, modules


IMPORT_RECORD = re.compile(r"import time:\s+(?:self \[us\]|\d+) \|\s+(?:cumulative|\d+) \|"
                           r"[^\S\n]*(?:imported package|\S*)")


def messages(res: subprocess.CompletedProcess) -> list[str]:
    """stderr without the import report. The forkserver writes its records to the same pipe while the
    CLI writes its message, so a record can land between a line and its newline (seen in CI: the
    message, then `import time: … xxhash._xxhash`): records are cut out wherever they are."""
    return [line for line in IMPORT_RECORD.sub("", res.stderr).splitlines() if line]


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """`notes` has a raw folder of two text files; `absent` has none (an expected error)."""
    write_files(tmp_path / "raw" / "notes", {"a.txt": "prvi dokument\n\ndrugi dokument\n", "b/c.txt": "tretji\n"})
    return write_config(tmp_path, {"notes": {"extractor": "text", "domain": "web"},
                                   "absent": {"extractor": "text", "domain": "web"}})


def test_an_expected_error_is_worded_without_dagster(catalog):
    res, modules = slm4ie(["extract", "absent"], catalog)
    assert res.returncode == 1, res.stdout + res.stderr
    assert messages(res) == [f"slm4ie: dataset 'absent': raw folder {catalog.parent / 'raw' / 'absent'} does not "
                             "exist (put the text input files under it). What to do: create the folder with the "
                             "dataset's input files (or correct `input_dir` in extract.yaml), then materialize again."]
    assert "slm4ie_assets.remedies" in modules and "slm4ie_assets.dagster_layer.user_errors" not in modules
    assert dagster_modules(modules) == []


def test_extract_inspect_stats_and_status_run_without_dagster(catalog):
    home_without_instance = catalog.parent / "dagster_home"  # DAGSTER_HOME set, but no dagster.yaml: no record
    home_without_instance.mkdir()
    res, modules = slm4ie(["extract", "notes", "--workers", "2"], catalog, dagster_home=home_without_instance)
    assert res.returncode == 0 and "published" in res.stdout, res.stdout + res.stderr
    assert "slm4ie_assets.pipeline" in modules  # the whole extraction ran in this process tree
    assert dagster_modules(modules) == [], "slm4ie extract"
    for args in (["inspect", "notes"], ["stats"], ["stats", "notes"], ["status", "notes"], ["publish", "notes"]):
        res, modules = slm4ie(args, catalog)
        assert res.returncode == 0, res.stdout + res.stderr
        assert dagster_modules(modules) == [], f"slm4ie {' '.join(args)}"


def test_the_import_report_names_dagster_when_it_is_imported():
    """The check above can fail: the same report, from a process that imports Dagster."""
    res = subprocess.run([str(VENV_BIN / "python"), "-X", "importtime", "-c", "import dagster"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "dagster" in dagster_modules(imported_modules(res.stderr))
    assert imported_modules("import time:       250 |        980 |   dagster_shared.seven\n") == {
        "dagster_shared.seven"}
