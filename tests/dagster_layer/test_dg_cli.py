"""The `dg` CLI from the project root, run as a user types it, in real subprocesses (README, "A five-minute tour").

dg finds the code location through `[tool.dg]` in pyproject.toml alone, so no -m and no
DAGSTER_MODULE_NAME is given anywhere here. Each test uses its own catalog (SLM4IE_EXTRACT_CONFIG) and
its own DAGSTER_HOME, so nothing lands in the checkout's `.dagster/`.
"""

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from contextlib import closing
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
FORCE = json.dumps({"resources": {"extract": {"config": {"force": True}}}})


def conllu_file(doc: str, sentences: list[list[str]]) -> str:
    """A CoNLL-U document (newdoc) whose sentences are plain tokens, so the run writes a sidecar."""
    lines = [f"# newdoc id = {doc}"]
    for s, forms in enumerate(sentences, 1):
        lines.append(f"# sent_id = {doc}.s{s}")
        lines += [f"{i}\t{form}\t{form.lower()}\tX\tX\t_\t0\troot\t_\t_" for i, form in enumerate(forms, 1)]
        lines.append("")
    return "\n".join(lines) + "\n"


def make_catalog(root: Path, raw: Path, out: Path, datasets: dict) -> Path:
    path = root / "extract.yaml"
    doc = {"input_dir": str(raw), "output_dir": str(out), "datasets": datasets}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def make_home(path: Path) -> Path:
    """An instance directory; telemetry off, because dg reads that setting only from $DAGSTER_HOME."""
    path.mkdir(parents=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return path


def cli_env(catalog: Path, home: Path | None, **extra: str) -> dict:
    """The environment of a shell with .venv activated and nothing DAGSTER_/SLM4IE_ of ours.

    home=None leaves DAGSTER_HOME unset: the root dagster.yaml then keeps the instance in .dagster/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(catalog), VIRTUAL_ENV=str(VENV_BIN.parent),
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200", **extra)
    if home is not None:
        env["DAGSTER_HOME"] = str(home)
    return env


def run(tool: str, args: list, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    """The venv's `dg` or `dagster`, niced (the test machine is shared), from the project root."""
    return subprocess.run(["nice", str(VENV_BIN / tool), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_side_by_side(*commands: tuple[str, list, dict], timeout: int = 300) -> list[subprocess.CompletedProcess]:
    """Independent commands (tool, args, env) as concurrent processes, each exactly as `run` starts it:
    most of a CLI's time is its start-up (imports, loading the definitions), so waiting for each in
    turn only makes the test longer. Every command gets its own DAGSTER_HOME, so no two share an
    instance's storage. Their results, in the order given."""
    homes = [env.get("DAGSTER_HOME") for _, _, env in commands]
    assert None not in homes and len(set(homes)) == len(homes), f"each command needs a home of its own: {homes}"
    procs = [subprocess.Popen(["nice", str(VENV_BIN / tool), *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
             for tool, args, env in commands]
    deadline = time.monotonic() + timeout
    results = []
    try:
        for proc, (tool, args, _) in zip(procs, commands, strict=True):
            try:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{tool} {' '.join(args)} ran past {timeout}s") from None
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return results


def ok(res: subprocess.CompletedProcess) -> str:
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-6000:]
    return log


def published(out: Path, key: str) -> dict:
    """What a reader sees: the published files' bytes, and the manifest without its timestamp."""
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name.startswith(f"{key}.")}
    manifest = (out / f"{key}.jsonl").resolve().parent / "manifest.json"
    if manifest.exists():
        files["manifest"] = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "published_at"}
    return files


@pytest.fixture
def project(tmp_path):
    """Two datasets over one raw/: `ann` (conllu, with a sidecar) and `kas` (text)."""
    raw = tmp_path / "raw"
    (raw / "ann").mkdir(parents=True)
    (raw / "kas").mkdir(parents=True)
    (raw / "ann" / "a.conllu").write_text(conllu_file("a", [["Dober", "dan", "."], ["Kako", "si", "?"]]))
    (raw / "ann" / "b.conllu").write_text(conllu_file("b", [["Hvala", "."]]))
    (raw / "kas" / "a.txt").write_text("Prvi.\n\nDrugi.\n")
    return tmp_path


DATASETS = {"ann": {"extractor": "conllu", "domain": "test"}, "kas": {"extractor": "text", "domain": "academic"}}


def test_dg_check_defs_and_list_defs_see_the_catalog(project):
    catalog = make_catalog(project, project / "raw", project / "out", DATASETS)
    # a bad catalog beside it (its own folder: make_catalog writes extract.yaml)
    (project / "bad").mkdir()
    bad = make_catalog(project / "bad", project / "raw", project / "out", {"kas": {"extractor": "text"}})
    # and one naming two datasets whose raw folders do not exist (yet)
    (project / "unready").mkdir()
    unready = make_catalog(project / "unready", project / "raw", project / "out",
                           {**DATASETS, "nov": {"extractor": "text", "domain": "d"},
                            "web": {"extractor": "jsonl", "domain": "d"}})
    checked, listed_json, listed_table, res, warned = run_side_by_side(
        ("dg", ["check", "defs"], cli_env(catalog, make_home(project / "home"))),
        ("dg", ["list", "defs", "--json"], cli_env(catalog, make_home(project / "home_json"))),
        ("dg", ["list", "defs"], cli_env(catalog, make_home(project / "home_table"))),
        ("dg", ["check", "defs"], cli_env(bad, make_home(project / "home_bad"))),
        ("dg", ["check", "defs"], cli_env(unready, make_home(project / "home_unready"))))
    assert "All definitions loaded successfully" in ok(checked) and "Warning" not in checked.stderr

    # the missing raw folders: still a success, and one line each naming the dataset and the folder
    assert "All definitions loaded successfully" in ok(warned)
    lines = [line for line in (warned.stdout + warned.stderr).splitlines() if "raw folder" in line]
    assert len(lines) == 2, warned.stdout + warned.stderr
    for key, line in zip(("nov", "web"), lines, strict=True):
        assert line.startswith(f"Warning: dataset '{key}': raw folder {project / 'raw' / key} does not exist"), line
        assert "What to do: create it with the input files, or correct `input_dir` in extract.yaml" in line

    listed = json.loads(listed_json.stdout)
    keys = {a["asset_key"] for a in listed["assets"]}
    ours = {"extracted/ann", "shards/ann", "extracted/kas", "shards/kas"}
    assert ours <= keys and all(k.split("/")[0] in ("extracted", "shards", "raw") for k in keys), keys
    table = ok(listed_table)  # what a person reads
    assert all(key in table for key in ours) and "raw_kas_sensor" in table

    # the bad catalog fails the check at load, with the catalog's own message
    assert res.returncode != 0
    assert "datasets.kas.domain: missing" in res.stdout + res.stderr


@pytest.mark.long  # CI time (~70 s); dg launch runs in CI through the README tour
def test_dg_launch_publishes_the_same_bytes_as_the_literal_dagster_command(project):
    raw = project / "raw"
    # the literal command as the README has it (the venv's start-up hook supplies the module), into a/
    literal = make_home(project / "a" / "home").parent
    env_literal = cli_env(make_catalog(literal, raw, literal / "out", DATASETS), literal / "home")
    # dg into b/, over the same raw files; the two first runs side by side (each its own home and out/)
    root = make_home(project / "b" / "home").parent
    out = root / "out"
    env = cli_env(make_catalog(root, raw, out, DATASETS), root / "home")
    by_literal, by_dg = run_side_by_side(("dagster", ["asset", "materialize", "--select", "extracted/ann"],
                                          env_literal), ("dg", ["launch", "--assets", "extracted/ann"], env))
    ok(by_literal)
    expected = published(literal / "out", "ann")
    assert {"ann.jsonl", "ann.annotations.jsonl.gz", "manifest"} <= expected.keys()

    log = ok(by_dg)
    assert "RUN_SUCCESS" in log and "2 to extract" in log
    assert published(out, "ann") == expected
    assert not (out / "kas.jsonl").exists()  # only the selected dataset ran

    log = ok(run("dg", ["launch", "--assets", "extracted/ann"], env))
    assert "skipped" in log and "0 to extract" in log
    assert published(out, "ann") == expected

    log = ok(run("dg", ["launch", "--assets", "extracted/ann", "--config-json", FORCE], env))
    assert "2 to extract" in log and "force" in log
    assert published(out, "ann") == expected


def test_dg_launch_with_dagster_home_unset_records_the_run_in_the_root_instance(project):
    """Also a first `dg` call of a new user (a fresh HOME): the root dagster.yaml turns telemetry off, and dg
    follows it (dagster_layer/quiet_start.py): no telemetry banner, no telemetry id written."""
    (project / "user").mkdir()
    env = cli_env(make_catalog(project, project / "raw", project / "out", DATASETS), None, HOME=str(project / "user"))
    log = ok(run("dg", ["launch", "--assets", "extracted/kas"], env))
    assert "Telemetry" not in log and "usage statistics" not in log
    assert not (project / "user" / ".dagster").exists()
    run_id = re.search(r"__ASSET_JOB - ([0-9a-f-]{36}) - .*RUN_SUCCESS", log).group(1)
    assert [r["doc_id"] for r in map(json.loads, (project / "out" / "kas.jsonl").read_text().splitlines())] == \
        ["a:000000", "a:000001"]
    runs_db = REPO / ".dagster" / "storage" / "history" / "runs.db"
    with closing(sqlite3.connect(f"file:{runs_db}?mode=ro", uri=True)) as db:
        assert db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchall() == [("SUCCESS",)]


def test_the_start_up_hook_leaves_dg_alone(tmp_path):
    """tools/slm4ie_dagster_module.pth sets DAGSTER_MODULE_NAME for `dagster asset|job` only.

    A stand-in script named like each CLI, run by the venv's interpreter with the same argv the real
    entry point gets, prints what the hook left in the environment."""
    probe = "import os\nprint(os.environ.get('DAGSTER_MODULE_NAME'))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
    seen = {}
    for name, args in (("dg", ["launch", "--assets", "extracted/kas"]), ("dg", ["dev", "-p", "3000"]),
                       ("dagster", ["asset", "materialize", "--select", "extracted/kas"])):
        script = tmp_path / name
        script.write_text(probe)
        res = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True)
        seen[(name, args[0])] = res.stdout.strip()
    assert seen == {("dg", "launch"): "None", ("dg", "dev"): "None",
                    ("dagster", "asset"): "slm4ie_assets.definitions"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["data"]


LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on RepositoryLocation {
    repositories { assetNodes { assetKey { path } } } } } } } } }"""


def marked_pids(marker: str) -> list[int]:
    """Live processes whose environment carries `marker` (every child of dg dev inherits it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"dg dev exited ({proc.returncode}) before {what}:\n{log.read_text()[-6000:]}"
        try:
            value = predicate()
            if value:
                return value
        except (OSError, urllib.error.URLError, KeyError, TypeError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-6000:]}")


def loaded_location(port: int):
    entries = graphql(port, LOCATIONS)["workspaceOrError"]["locationEntries"]
    if entries and all(e["loadStatus"] == "LOADED" for e in entries):
        return entries
    return None


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find leftover processes")
def test_dg_dev_serves_the_project_quietly_and_stops_cleanly_on_ctrl_c(tmp_path):
    """README's set-up: an instance from `make home`, a new user (fresh HOME), `dg dev` in the project root.
    It starts without a warning (not the one about the root dagster.yaml, which DAGSTER_HOME replaces:
    dagster_layer/quiet_start.py) and without the telemetry banner."""
    marker = f"SLM4IE_DG_DEV_TEST={uuid.uuid4().hex}"
    name, value = marker.split("=")
    # empty raw folders: dg dev runs the daemon, whose raw sensors would otherwise start extraction runs
    for key in DATASETS:
        (tmp_path / "raw" / key).mkdir(parents=True)
    catalog = make_catalog(tmp_path, tmp_path / "raw", tmp_path / "out", DATASETS)
    home = tmp_path / "home"
    subprocess.run(["make", "-s", "home", f"DAGSTER_HOME={home}"], cwd=REPO, check=True, capture_output=True)
    (tmp_path / "user").mkdir()
    env = cli_env(catalog, home, HOME=str(tmp_path / "user"), **{name: value})
    port = free_port()
    log = tmp_path / "dg_dev.log"
    with log.open("w") as sink:
        # SIGINT back to its default first: a shell running this suite in the background ignores it, and
        # the child would inherit that and never see the Ctrl-C
        proc = subprocess.Popen(["nice", str(VENV_BIN / "dg"), "dev", "-h", "127.0.0.1", "-p", str(port)], cwd=REPO,
                                env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started = time.monotonic()
        assert wait_for(lambda: graphql(port, "{ version }")["version"], 180, "the webserver", proc, log) == "1.13.27"
        entries = wait_for(lambda: loaded_location(port), 120, "the code location", proc, log)
        print(f"dg dev answered after {time.monotonic() - started:.1f}s")
        # the location is the one [tool.dg.project] names, loaded from slm4ie_assets.definitions
        assert [e["name"] for e in entries] == ["slm4ie"]
        location = entries[0]["locationOrLoadError"]
        assert location["__typename"] == "RepositoryLocation", location
        keys = {"/".join(n["assetKey"]["path"]) for r in location["repositories"] for n in r["assetNodes"]}
        assert {"extracted/ann", "shards/ann", "extracted/kas", "shards/kas"} <= keys
        wait_for(lambda: "Sensor raw_kas_sensor skipped" in log.read_text(), 120, "the first sensor tick", proc, log)
        started = log.read_text()
        assert "WARNING" not in started and "will not be used" not in started, started[-6000:]
        assert "Telemetry" not in started and not (tmp_path / "user" / ".dagster").exists(), started[-6000:]

        proc.send_signal(signal.SIGINT)  # Ctrl-C
        stopping = time.monotonic()
        proc.wait(timeout=60)
        print(f"dg dev exited {proc.returncode} {time.monotonic() - stopping:.1f}s after SIGINT")
        deadline = time.monotonic() + 30
        while marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marked_pids(marker) == [], "dg dev left processes behind:\n" + log.read_text()[-4000:]
    finally:
        for pid in [proc.pid] * (proc.poll() is None) + marked_pids(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)
