"""What an operator reads first: a bad extract.yaml and an expected run failure, through every entry
point, as real subprocesses of the venv's `dg` and `dagster` (README, "Handle a bad input"; issue "The
operator's path"). A bad catalog is its file:line list, once, with no traceback and a non-zero exit;
the literal command prints no supersession warning and its one message sits in the first 15 lines."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.files import write_config, write_files
from support.paths import REPO, VENV_BIN

pytestmark = pytest.mark.slow

PROBLEM = "extract.yaml:4: datasets.kas.domain: missing"


def env_for(catalog: Path, home: Path) -> dict:
    """A shell with .venv activated, our catalog, a home of its own (telemetry off: dg reads it there)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(catalog), DAGSTER_HOME=str(home), VIRTUAL_ENV=str(VENV_BIN.parent),
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200")
    return env


def run(args: list, env: dict) -> tuple[int, list[str]]:
    res = subprocess.run(["nice", str(VENV_BIN / args[0]), *args[1:]], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    return res.returncode, (res.stdout + res.stderr).splitlines()


@pytest.fixture
def bad_catalog(tmp_path) -> dict:
    (tmp_path / "raw" / "kas").mkdir(parents=True)
    return env_for(write_config(tmp_path, {"kas": {"extractor": "text"}}), tmp_path / "home")


@pytest.mark.parametrize("command", [
    ["dg", "check", "defs"],
    ["dg", "launch", "--assets", "extracted/kas"],
    pytest.param(["dagster", "asset", "materialize", "--select", "extracted/kas"], marks=pytest.mark.long),
    pytest.param(["dagster", "definitions", "validate"], marks=pytest.mark.long),
], ids=lambda c: " ".join(c[:2]))  # CI: dg's two; `make test-long`: dagster's two as well (CI time)
def test_a_bad_catalog_is_its_file_line_list_once_without_a_traceback(bad_catalog, command):
    rc, lines = run(command, bad_catalog)
    text = "\n".join(lines)
    assert rc != 0, text
    assert sum(PROBLEM in line for line in lines) == 1, text
    assert "Traceback" not in text and "Stack Trace" not in text and "File \"" not in text, text
    assert "1 problem(s) in the extraction config" in text


def test_the_literal_command_has_no_supersession_warning_and_says_what_to_do_early(tmp_path):
    env = env_for(write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}}), tmp_path / "home")
    rc, lines = run(["dagster", "asset", "materialize", "--select", "extracted/kas"], env)
    first = "\n".join(lines[:15])
    assert rc != 0
    assert "superseded" not in "\n".join(lines) and "SupersessionWarning" not in "\n".join(lines)
    assert f"raw folder {tmp_path / 'raw' / 'kas'} does not exist" in first and "What to do: " in first, first


def test_dg_launch_says_what_to_do_early_too(tmp_path):
    env = env_for(write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}}), tmp_path / "home")
    rc, lines = run(["dg", "launch", "--assets", "extracted/kas"], env)
    first = "\n".join(lines[:15])
    assert rc != 0 and "What to do: " in first, first


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOAD_ERROR = """{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError {
  __typename ... on PythonError { message stack causes { message stack } } } } } } }"""


def location_error(port: int) -> dict | None:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": LOAD_ERROR}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        entries = json.loads(resp.read())["data"]["workspaceOrError"]["locationEntries"]
    error = entries[0]["locationOrLoadError"] if entries else None
    return error if error and error["__typename"] == "PythonError" else None


@pytest.mark.long  # CI time (~40 s); a bad catalog's one message stays in CI through dg check and dg launch
def test_dg_dev_shows_a_bad_catalog_as_the_location_error_with_one_frame_of_ours(tmp_path):
    """The UI's code-location error: Dagster always keeps a stack there; ours is the one `raise`."""
    (tmp_path / "raw" / "kas").mkdir(parents=True)
    env = env_for(write_config(tmp_path, {"kas": {"extractor": "text"}}), tmp_path / "home")
    port = free_port()
    log = tmp_path / "dev.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(["nice", str(VENV_BIN / "dg"), "dev", "-h", "127.0.0.1", "-p", str(port)], cwd=REPO,
                                env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        error = None
        deadline = time.monotonic() + 240
        while error is None and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-4000:]
            try:
                error = location_error(port)
            except (OSError, urllib.error.URLError, KeyError, TypeError, ValueError):
                time.sleep(1)
        assert error is not None, log.read_text()[-4000:]
        cause = error["causes"][0]  # under Dagster's own DagsterUserCodeLoadError
        assert error["message"].count(PROBLEM) + cause["message"].count(PROBLEM) == 1, error
        ours = [frame for frame in cause["stack"] if "site-packages" not in frame and "importlib" not in frame]
        assert len(ours) == 1 and "definitions.py" in ours[0], ours
        console = log.read_text()
        assert console.count(PROBLEM) >= 1 and "catalog/spec.py" not in console, console[-4000:]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_a_working_catalog_still_loads_everywhere(tmp_path):
    write_files(tmp_path / "raw" / "kas", {"a.txt": "Prvi.\n"})
    env = env_for(write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}}), tmp_path / "home")
    rc, lines = run(["dg", "check", "defs"], env)
    assert rc == 0 and "All definitions loaded successfully." in lines, lines
