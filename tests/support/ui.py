"""Helpers for the tests that run real servers: `dagster dev`, `dagster-daemon`, PostgreSQL.

Every server is started in its own process group and stopped by its own id, always and within
a bounded time (SIGINT first, as a person presses Ctrl-C, then SIGKILL of the group).
"""

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from support.paths import REPO, VENV_BIN

INSTALL_DEPS = REPO / "tools" / "install_test_deps.sh"
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install_test_deps(what: str) -> tuple[bool, str]:
    """Run tools/install_test_deps.sh for `what` (browser|postgres); (ok, its output)."""
    env = dict(os.environ, PYTHON=sys.executable)
    try:
        res = subprocess.run(["bash", str(INSTALL_DEPS), what], env=env, capture_output=True, text=True,
                             timeout=900, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        return False, f"{INSTALL_DEPS} {what} timed out after {exc.timeout}s"
    return res.returncode == 0, (res.stdout + res.stderr).strip()


# ---------------------------------------------------------------- instance config and sample corpus


def copy_examples(dest: Path, watch: bool = False, max_workers: int | None = None, only=None) -> Path:
    """A copy of examples/ (raw files only) whose extract.yaml writes into the copy.

    `watch: false` keeps the raw-folder sensors off, so the only runs are the ones a test starts."""
    src = REPO / "examples"
    shutil.copytree(src / "data" / "raw", dest / "data" / "raw")
    doc = yaml.safe_load((src / "extract.yaml").read_text(encoding="utf-8"))
    if only is not None:
        doc["datasets"] = {k: v for k, v in doc["datasets"].items() if k in only}
    for entry in doc["datasets"].values():
        entry["watch"] = watch
        if watch:
            entry["watch_interval"] = 5
    if max_workers is not None:
        doc["max_workers"] = max_workers
    cfg = dest / "extract.yaml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return cfg


def instance_config(home: Path, template: Path = REPO / "dagster.yaml", runs: dict | None = None,
                    pool_limit: int | None = None) -> Path:
    """`home/dagster.yaml`: `template` (the project's root dagster.yaml unless told) with its local
    paths moved under `home` (sqlite storage too, if it uses sqlite); optionally other run limits."""
    doc = yaml.safe_load(template.read_text(encoding="utf-8"))
    if "sqlite" in doc["storage"]:
        doc["storage"] = {"sqlite": {"base_dir": str(home / "storage")}}
    doc["local_artifact_storage"]["config"]["base_dir"] = str(home)
    doc["compute_logs"]["config"]["base_dir"] = str(home / "compute_logs")
    if runs is not None:
        doc.setdefault("concurrency", {})["runs"] = runs
    if pool_limit is not None:
        doc["concurrency"]["pools"]["default_limit"] = pool_limit
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def dagster_env(config: Path, home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), DAGSTER_HOME=str(home),
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


# ---------------------------------------------------------------- background processes


class Background:
    """A command in its own process group, its output in a log file."""

    def __init__(self, args: list, cwd: Path, env: dict, log: Path, user: str | None = None):
        self.args, self.log = args, log
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, user=user)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 6000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, grace: float = 15.0) -> None:
        """SIGINT to the process (Ctrl-C), then SIGKILL of its whole group, always."""
        try:
            if self.alive():
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._out.close()


def wait_until(predicate, timeout: float, what: str, interval: float = 0.5, on_timeout=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{on_timeout()}")
        time.sleep(interval)


# ---------------------------------------------------------------- dagster dev and its GraphQL API


class GraphQLServer:
    """A Dagster webserver started from the repo root on 127.0.0.1:<free port>, and its GraphQL API."""

    def __init__(self, args: list, env: dict, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Background([*args, "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(self.port)], REPO, env, log)

    def graphql(self, query: str, variables: dict | None = None, timeout: float = 30.0) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            doc = json.loads(resp.read())
        if doc.get("errors"):
            raise AssertionError(f"GraphQL errors: {doc['errors']}")
        return doc["data"]

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the webserver answers and the code location has loaded."""

        def loaded():
            if not self.proc.alive():
                raise AssertionError(f"{self.proc.args[0]} exited with {self.proc.proc.returncode}\n{self.proc.tail()}")
            try:
                data = self.graphql(LOCATIONS_QUERY, timeout=5)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                return False
            entries = data["workspaceOrError"].get("locationEntries", [])
            for e in entries:
                if e["loadStatus"] == "LOADED" and e["locationOrLoadError"]["__typename"] == "PythonError":
                    raise AssertionError(f"code location failed to load: {e['locationOrLoadError']['message']}")
            return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

        wait_until(loaded, timeout, "the webserver to serve GraphQL with the code location loaded",
                   on_timeout=self.proc.tail)

    def asset_exists(self, path: list[str]) -> bool:
        data = self.graphql(ASSET_NODE_QUERY, {"key": {"path": path}})
        return data["assetNodeOrError"]["__typename"] == "AssetNode"

    def runs(self, limit: int = 50) -> list[dict]:
        data = self.graphql(RUNS_QUERY, {"limit": limit})
        return data["runsOrError"]["results"]

    def wait_run_finished(self, run_id: str, timeout: float) -> dict:
        def finished():
            data = self.graphql(RUN_QUERY, {"runId": run_id})["runOrError"]
            return data if data.get("status") in FINISHED else None

        return wait_until(finished, timeout, f"run {run_id} to finish", interval=1.0, on_timeout=self.proc.tail)

    def latest_materialization(self, path: list[str]) -> dict | None:
        data = self.graphql(MATERIALIZATION_QUERY, {"key": {"path": path}})["assetNodeOrError"]
        events = data.get("assetMaterializations") or []
        return events[0] if events else None

    def launch_backfill(self, asset_paths: list[list[str]], run_config: dict | None = None) -> str:
        """A backfill of every partition of the assets, as the UI's "Launch backfill" makes it."""
        params = {"assetSelection": [{"path": p} for p in asset_paths], "allPartitions": True}
        if run_config is not None:
            params["runConfigData"] = run_config
        res = self.graphql(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        assert res["__typename"] == "LaunchBackfillSuccess", res
        return res["backfillId"]

    def backfill_status(self, backfill_id: str) -> str:
        return self.graphql(BACKFILL_QUERY, {"id": backfill_id})["partitionBackfillOrError"]["status"]

    def stop(self) -> None:
        self.proc.stop()


class DagsterDev(GraphQLServer):
    """`dagster dev` (webserver, daemon and code server in one), as `make ui` runs it."""

    def __init__(self, env: dict, log: Path):
        super().__init__([str(VENV_BIN / "dagster"), "dev"], env, log)


class DagsterWebserver(GraphQLServer):
    """`dagster-webserver` alone, as a deployment runs it beside `dagster-daemon run`."""

    def __init__(self, env: dict, log: Path):
        super().__init__([str(VENV_BIN / "dagster-webserver")], env, log)


LOCATIONS_QUERY = """
query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
ASSET_NODE_QUERY = """
query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename } }
"""
RUNS_QUERY = """
query($limit: Int) { runsOrError(limit: $limit) { ... on Runs { results {
  runId status startTime endTime tags { key value } assetSelection { path } } } } }
"""
RUN_QUERY = """
query($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run {
  runId status startTime endTime tags { key value } assetSelection { path } } } }
"""
MATERIALIZATION_QUERY = """
query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetMaterializations(limit: 1) { runId partition metadataEntries { label
    ... on IntMetadataEntry { intValue } ... on BoolMetadataEntry { boolValue } } } } } }
"""
PARTITION_KEYS_QUERY = """
query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionKeys } } }
"""
BACKFILLS_QUERY = """
query { partitionBackfillsOrError(limit: 10) { ... on PartitionBackfills { results {
  id status numPartitions assetSelection { path } } } } }
"""
BACKFILL_QUERY = """
query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { id status } } }
"""
BACKFILL_DONE = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message }
  ... on PartitionSetNotFoundError { message } ... on InvalidStepError { invalidStepKey }
  ... on InvalidOutputError { invalidOutputName } ... on UnauthorizedError { message } } }
"""


def metadata_values(event: dict) -> dict:
    out = {}
    for entry in event.get("metadataEntries", []):
        for field in ("intValue", "boolValue"):
            if field in entry:
                out[entry["label"]] = entry[field]
    return out


# ---------------------------------------------------------------- PostgreSQL from Debian's packages


def postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<major>/bin holding initdb, pg_ctl and postgres."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                      if p.parent.parent.name.isdigit() else 0)
    return versions[-1].parent if versions else None


class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1:<free port>, data in a temp folder.

    initdb refuses root, so as root the cluster belongs to the `postgres` user Debian creates."""

    user = "slm4ie"

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.port = free_port()
        self.password = "slm4ie-" + os.urandom(8).hex()
        # /tmp, not pytest's tmp_path: that lives under a root-only 0700 folder the server user cannot enter
        self.dir = Path(tempfile.mkdtemp(prefix="slm4ie-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.os_user = "postgres" if os.geteuid() == 0 else None
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.started = False

    def _run(self, args: list, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, user=self.os_user,
                             cwd=self.dir, env=env, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, args))} failed ({res.returncode}):\n{res.stdout}{res.stderr}\n"
                                 + (self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""))
        return res

    def start(self) -> None:
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password + "\n")
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        self._run([self.bindir / "initdb", "-D", self.data, "-U", self.user, f"--pwfile={pwfile}",
                   "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"])
        pwfile.unlink()
        # fsync off: a throwaway test cluster; durability is not what these tests measure
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._run([self.bindir / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o", opts, "start"])
        self.started = True

    def client_env(self) -> dict:
        return dict(os.environ, PGPASSWORD=self.password, PGHOST="127.0.0.1", PGPORT=str(self.port), PGUSER=self.user)

    def create_database(self, name: str) -> None:
        subprocess.run([self.bindir / "createdb", name], env=self.client_env(), check=True, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)

    def dagster_env(self, db: str) -> dict:
        """The credentials, as env vars the instance config reads (deploy/dagster.postgres.yaml)."""
        return {"DAGSTER_PG_USERNAME": self.user, "DAGSTER_PG_PASSWORD": self.password,
                "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_DB": db}

    def stop(self) -> None:
        try:
            if self.started:
                try:
                    self._run([self.bindir / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "30", "stop"],
                              timeout=60)
                except (AssertionError, subprocess.TimeoutExpired):
                    self._kill_postmaster()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _kill_postmaster(self) -> None:
        pidfile = self.data / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)  # the server this object started, by the id it wrote
        except (OSError, ValueError, IndexError):
            pass

