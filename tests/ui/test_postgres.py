"""Scale-out path, for real (README, "Run on PostgreSQL with fan-out"): a PostgreSQL 15 server from Debian's
packages, the instance
config shipped in deploy/dagster.postgres.yaml, the literal CLI and `dagster-daemon run`.

Proves (1) the Postgres instance publishes the same bytes as the sqlite instance, (2) with a
separate webserver and daemon, the QueuedRunCoordinator's `max_concurrent_runs` and the
`slm4ie_extract` pool above 1, a backfill of shard partitions runs as concurrent runs, and the
republish that follows gives the same bytes again, and (3) fan-out (D24): a backfill of one
dataset's shards with `max_shards_per_run` becomes several runs in progress at once, followed by
exactly one publish, with the bytes of the literal CLI's serial run.
"""

import importlib
import importlib.util
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterRunStatus, RunsFilter

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.assets import partitions_name
from slm4ie_assets.pipeline import lock_path, unpack
from slm4ie_assets.planning.shards import list_shards
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.locks import dataset_lock, shard_lock
from support.ui import (
    BACKFILL_DONE,
    REPO,
    VENV_BIN,
    Background,
    DagsterWebserver,
    PostgresServer,
    copy_examples,
    dagster_env,
    install_test_deps,
    instance_config,
    postgres_bin,
    wait_until,
)

pytestmark = pytest.mark.slow

DEPLOY_CONFIG = REPO / "deploy" / "dagster.postgres.yaml"
# One dataset per kind of output: plain text unpacked from an archive, JSONL records with a
# sidecar, TEI with a sidecar. Every dataset costs two step processes per run, so not all eight.
DATASETS = ("news_txt", "web_jsonl", "parliament_tei")
SELECTION = ",".join(f"extracted/{k}" for k in DATASETS)
RUN_TIMEOUT = 420
START_TIMEOUT = 300


@pytest.fixture(scope="module")
def postgres():
    ok, report = install_test_deps("postgres")
    bindir = postgres_bin()
    importlib.invalidate_caches()
    if bindir is None or importlib.util.find_spec("dagster_postgres") is None:
        pytest.skip(f"PostgreSQL or dagster-postgres cannot be installed here "
                    f"(tools/install_test_deps.sh postgres said: {report})")
    assert ok, report
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


class CliRun:
    """`dagster asset materialize` started in the background, so two instances run side by side."""

    def __init__(self, root: Path, home: Path, extra_env: dict | None = None):
        self.config = copy_examples(root, only=DATASETS)
        self.out = root / "data" / "extracted"
        self.home = home
        env = dagster_env(self.config, home, **(extra_env or {}))
        self.proc = subprocess.Popen([str(VENV_BIN / "dagster"), "asset", "materialize", "--select", SELECTION],
                                     cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True)
        self.log = None

    def wait(self) -> "CliRun":
        if self.log is None:
            try:
                self.log, _ = self.proc.communicate(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.log = self.proc.communicate()[0]
                raise AssertionError(f"dagster asset materialize timed out\n{self.log[-6000:]}") from None
            assert self.proc.returncode == 0, self.log[-8000:]
            assert "RUN_SUCCESS" in self.log
        return self


@pytest.fixture(scope="module")
def sqlite_reference(tmp_path_factory):
    """The same selection materialized on a sqlite instance (the root dagster.yaml's)."""
    base = tmp_path_factory.mktemp("sqlite")
    home = base / "home"
    instance_config(home)
    run = CliRun(base / "examples", home)
    yield run
    if run.log is None:
        run.proc.kill()
        run.proc.communicate()


def published(out: Path) -> dict:
    """name -> bytes of every published file (the symlinks in the output folder)."""
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if not p.name.startswith(".")}
    assert files, f"nothing published in {out}"
    return files


def assert_same_outputs(got: Path, want: Path) -> None:
    a, b = published(got), published(want)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], f"{name} differs between {got} and {want}"
    for key in DATASETS:
        assert f"{key}.jsonl" in a
    assert any(n.endswith(".annotations.jsonl.gz") for n in a)


def postgres_home(postgres, base: Path, db: str, monkeypatch) -> tuple[Path, dict]:
    postgres.create_database(db)
    home = base / "home"
    instance_config(home, template=DEPLOY_CONFIG)
    creds = postgres.dagster_env(db)
    for k, v in creds.items():  # for the DagsterInstance this test process opens
        monkeypatch.setenv(k, v)
    return home, creds


def open_instance(home: Path):
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(home))


def test_deploy_config_is_postgres_with_queued_runs_and_env_credentials():
    """deploy/dagster.postgres.yaml: what docs and README ("Run on PostgreSQL with fan-out") promise."""
    doc = yaml.safe_load(DEPLOY_CONFIG.read_text())
    db = doc["storage"]["postgres"]["postgres_db"]
    assert db["scheme"] == "postgresql+psycopg2"
    assert all(isinstance(db[k], dict) and set(db[k]) == {"env"} for k in ("username", "password", "hostname",
                                                                               "port", "db_name"))
    assert doc["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert doc["run_coordinator"]["config"]["dequeue_use_threads"] is True
    runs = doc["concurrency"]["runs"]
    # the backfill test below needs one run per dataset in progress at once
    limits = [runs["max_concurrent_runs"], doc["concurrency"]["pools"]["default_limit"]]
    limits += [t["limit"] for t in runs["tag_concurrency_limits"] if t["key"] == "dagster/backfill"]
    assert min(limits) >= len(DATASETS) >= 2, limits
    assert doc["telemetry"] == {"enabled": False}
    assert "DAGSTER_EVENT_BATCH_SIZE" in DEPLOY_CONFIG.read_text()
    assert "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS" in DEPLOY_CONFIG.read_text()


def test_cli_materialize_on_postgres_publishes_the_same_bytes_as_on_sqlite(postgres, sqlite_reference, tmp_path,
                                                                           monkeypatch):
    """`dagster asset materialize` against the Postgres instance, side by side with the sqlite run."""
    home, creds = postgres_home(postgres, tmp_path, "slm4ie_cli", monkeypatch)
    run = CliRun(tmp_path / "examples", home, creds).wait()
    sqlite_reference.wait()
    assert_same_outputs(run.out, sqlite_reference.out)

    # the run history really is in Postgres, not in a sqlite file beside the config
    assert not (home / "storage").exists()
    instance = open_instance(home)
    try:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        records = instance.get_run_records()
        assert [r.dagster_run.status.value for r in records] == ["SUCCESS"]
        event = instance.get_latest_materialization_event(AssetKey(["extracted", "news_txt"]))
        assert event is not None and event.run_id == records[0].dagster_run.run_id
        docs = event.asset_materialization.metadata["documents"].value
        assert docs == published(run.out)["news_txt.jsonl"].count(b"\n") > 0
        assert instance.get_dynamic_partitions("slm4ie_shards__news_txt")  # partitions live in Postgres too
    finally:
        instance.dispose()


class Daemon:
    """`dagster-daemon run`, started once the backfill is launched: the backfill daemon looks for
    new backfills every 30 s (a constant in dagster's `_daemon/backfill.py`) and once as it starts,
    so a daemon started after the launch requests the runs at once instead of up to 30 s later."""

    def __init__(self, env: dict, log: Path):
        self.env, self.log, self.proc = env, log, None

    def start(self) -> None:
        self.proc = Background([str(VENV_BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], REPO, self.env,
                               self.log)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def tail(self) -> str:
        return self.proc.tail() if self.proc else "(the daemon was not started)"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def finished_runs(daemon, web, instance, backfill: str) -> list | None:
    """Every run of the instance once the backfill is done and no run is in progress, else None;
    fails at once when the daemon or the webserver has exited."""
    for proc in (daemon.proc, web.proc):
        if not proc.alive():
            raise AssertionError(f"{proc.args[0]} exited early\n{proc.tail()}")
    if web.backfill_status(backfill) not in BACKFILL_DONE:
        return None
    runs = instance.get_runs()
    return None if any(not r.is_finished for r in runs) else runs


def register_shard_partitions(instance, catalog) -> dict:
    """The shards/<key> partitions, registered as the raw sensor and extracted/<key> register them
    (archives unpacked first, so an unpacked member is a shard too); {key: partition keys}."""
    keys = {}
    for key in DATASETS:
        spec = catalog.dataset(key)
        unpack(spec, catalog)
        keys[key] = [s.key for s in list_shards(spec, catalog.shard_group_threshold)]
        instance.add_dynamic_partitions(partitions_name(key), keys[key])
    return keys


@pytest.mark.long  # CI time (~90 s); in CI: test_cli_materialize_on_postgres, the daemon via tests/slurm
def test_shard_backfill_runs_concurrently_under_the_daemon_on_postgres(postgres, sqlite_reference, tmp_path,
                                                                      monkeypatch):
    """The deployment topology on the Postgres instance: `dagster-webserver` and `dagster-daemon run`
    as separate processes. A backfill of every shards/<key> partition (one run per dataset, the
    backfill policy being single_run) is dequeued as concurrent runs (max_concurrent_runs and the
    `slm4ie_extract` pool limit > 1); the republish sensor then publishes the same bytes as the
    CLI on sqlite."""
    home, creds = postgres_home(postgres, tmp_path, "slm4ie_daemon", monkeypatch)
    cfg = copy_examples(tmp_path / "examples", watch=False, max_workers=1, only=DATASETS)
    out = tmp_path / "examples" / "data" / "extracted"
    env = dagster_env(cfg, home, **creds, DAGSTER_EVENT_BATCH_SIZE="1000",
                      DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS="true")
    instance = open_instance(home)
    catalog = load_catalog(cfg)
    partitions = register_shard_partitions(instance, catalog)
    assert len(partitions["news_txt"]) == 3  # two files and an archive member
    web = DagsterWebserver(env, tmp_path / "webserver.log")
    daemon = Daemon(env, tmp_path / "daemon.log")
    try:
        web.wait_ready(timeout=180)
        with ExitStack() as held:
            # The test holds every dataset lock, as another run would: each backfill run then waits
            # inside its step, so all of them being in progress at once is observed, whatever the
            # machine's speed. With max_concurrent_runs 1 or the pool limit 1, only one could be.
            for key in DATASETS:
                held.enter_context(dataset_lock(lock_path(catalog.dataset(key)), key, timeout=5))
            backfill = web.launch_backfill([["shards", k] for k in DATASETS])
            daemon.start()

            def all_started():
                runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill}))
                assert not any(r.is_finished for r in runs), (
                    f"a backfill run ended while the test held its dataset lock\n{daemon.tail()}")
                return len(runs) == len(DATASETS) and all(r.status == DagsterRunStatus.STARTED for r in runs)

            wait_until(all_started, START_TIMEOUT, f"all {len(DATASETS)} backfill runs to be in progress at once",
                       interval=1.0, on_timeout=daemon.tail)

        def settled():
            runs = finished_runs(daemon, web, instance, backfill)
            if runs is None:
                return False
            if any(r.status.value != "SUCCESS" for r in runs):
                return True  # nothing more will come of it; the assertions below say what failed
            return all((out / f"{k}.jsonl").exists() for k in DATASETS)

        wait_until(settled, RUN_TIMEOUT, "the backfill runs and the republish runs to finish", interval=1.0,
                   on_timeout=lambda: daemon.tail())
        status = web.backfill_status(backfill)
    finally:
        web.stop()
        daemon.stop()
    try:
        assert status == "COMPLETED_SUCCESS", daemon.tail()
        records = instance.get_run_records()
        failed = [(r.dagster_run.run_id, r.dagster_run.status.value) for r in records
                  if r.dagster_run.status.value != "SUCCESS"]
        assert not failed, f"{failed}\n{daemon.tail()}"
        shard_runs = [r for r in records if r.dagster_run.tags.get("dagster/backfill") == backfill]
        datasets = sorted(k.path[1] for r in shard_runs for k in r.dagster_run.asset_selection)
        assert datasets == sorted(DATASETS), "one single_run run per shards/<key> asset"
        spans = sorted((r.start_time, r.end_time, r.dagster_run.asset_selection) for r in shard_runs)
        overlapping = [(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1]]
        assert overlapping, f"no two backfill runs overlapped in time (start, end, assets): {spans}"
        publish = [r for r in records if any(k.path[0] == "extracted" for k in r.dagster_run.asset_selection or ())]
        assert {k.path[1] for r in publish for k in r.dagster_run.asset_selection} == set(DATASETS), \
            "the republish sensor published every dataset after its shard run"
        for key, keys in partitions.items():
            done = instance.get_materialized_partitions(AssetKey(["shards", key]))
            assert done == set(keys), f"shards/{key}: materialized {done}, registered {keys}"
    finally:
        instance.dispose()
    sqlite_reference.wait()
    assert_same_outputs(out, sqlite_reference.out)


# ----------------------------------------------------------------------------- fan-out (D24)

FAN_KEY = "fan"
FAN_FILES = 8
FAN_PER_RUN = 2


def _conllu_doc(i: int, j: int) -> str:
    words = [f"beseda{i}_{j}_{k}" for k in range(3)]
    rows = "".join(f"{k + 1}\t{w}\t{w}\tNOUN\tNcmsn\t_\t0\troot\t_\t_\n" for k, w in enumerate(words))
    return f"# newdoc id = d{i}_{j}\n# sent_id = s{i}_{j}\n# text = {' '.join(words)}\n{rows}\n"


def fan_out_project(root: Path, **dataset) -> Path:
    """A conllu dataset of FAN_FILES files (text and sidecar), one shard each, cut into runs of
    FAN_PER_RUN shards; sensors off, so the only runs are the ones the test starts."""
    raw = root / "raw" / FAN_KEY
    raw.mkdir(parents=True)
    for i in range(FAN_FILES):
        (raw / f"part{i:02d}.conllu").write_text("".join(_conllu_doc(i, j) for j in range(3)), encoding="utf-8")
    entry = {"extractor": "conllu", "domain": "test", "watch": False, "watch_interval": 5,
             "max_shards_per_run": FAN_PER_RUN, **dataset}
    doc = {"input_dir": str(root / "raw"), "output_dir": str(root / "out"), "max_workers": 1,
           "datasets": {FAN_KEY: entry}}
    cfg = root / "extract.yaml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return cfg


def cli_materialize(config: Path, home: Path, selection: str) -> str:
    """The literal CLI, in its own process: its output."""
    proc = subprocess.run([str(VENV_BIN / "dagster"), "asset", "materialize", "--select", selection], cwd=REPO,
                          env=dagster_env(config, home), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0 and "RUN_SUCCESS" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-8000:]
    return proc.stdout


def _extracted_runs(instance) -> list:
    return [r for r in instance.get_run_records()
            if any(k.path == ["extracted", FAN_KEY] for k in r.dagster_run.asset_selection or ())]


@pytest.mark.long  # ~190 s under CI's load; fan-out itself: dagster_layer/test_fan_out.py in CI
def test_a_shard_backfill_fans_out_into_concurrent_runs_and_publishes_once(postgres, tmp_path, monkeypatch):
    """UI "Materialize all" on shards/fan: 8 shards, at most 2 per run -> 4 runs, at least 2 of them in
    progress at once (the test holds the first shard lock of every run, so each one waits inside its
    step, whatever the machine's speed), then exactly one extracted/fan run publishes, from the
    complete set of parts, the bytes of `dagster asset materialize --select extracted/fan` on sqlite."""
    reference = fan_out_project(tmp_path / "serial", max_shards_per_run=0)
    ref_home = tmp_path / "serial_home"
    instance_config(ref_home)
    # the serial reference runs in its own process (own folders, own sqlite home) while the webserver
    # starts and the fan-out runs; its result is awaited before the bytes are compared
    with ThreadPoolExecutor(max_workers=1) as side:
        serial_run = side.submit(cli_materialize, reference, ref_home, f"extracted/{FAN_KEY}")
        _fan_out_and_publish_once(postgres, tmp_path, monkeypatch)
        serial_run.result()
    got = {p.name: p.read_bytes() for p in (tmp_path / "fan" / "out").iterdir() if not p.name.startswith(".")}
    want = {p.name: p.read_bytes() for p in (tmp_path / "serial" / "out").iterdir() if not p.name.startswith(".")}
    assert sorted(got) == sorted(want) == [f"{FAN_KEY}.annotations.jsonl.gz", f"{FAN_KEY}.jsonl"]
    assert got == want


def _fan_out_and_publish_once(postgres, tmp_path: Path, monkeypatch) -> None:
    """The fan-out half of the test above, on Postgres: backfill, concurrency, exactly one publish."""
    home, creds = postgres_home(postgres, tmp_path, "slm4ie_fanout", monkeypatch)
    cfg = fan_out_project(tmp_path / "fan")
    env = dagster_env(cfg, home, **creds, DAGSTER_EVENT_BATCH_SIZE="1000")
    instance = open_instance(home)
    spec = load_catalog(cfg).dataset(FAN_KEY)
    keys = [s.key for s in list_shards(spec)]
    assert len(keys) == FAN_FILES
    instance.add_dynamic_partitions(partitions_name(FAN_KEY), keys)
    store = DatasetStore(spec)
    web = DagsterWebserver(env, tmp_path / "webserver.log")
    daemon = Daemon(env, tmp_path / "daemon.log")
    most_at_once = 0
    try:
        web.wait_ready(timeout=180)
        with ExitStack() as held:
            for first in keys[::FAN_PER_RUN]:
                held.enter_context(shard_lock(store.shard_lock(first), FAN_KEY, first, timeout=5))
            backfill = web.launch_backfill([["shards", FAN_KEY]])
            daemon.start()

            def two_in_progress():
                nonlocal most_at_once
                runs = instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill}))
                assert not any(r.is_finished for r in runs), (
                    f"a backfill run ended while the test held its shard lock\n{daemon.tail()}")
                most_at_once = max(most_at_once, sum(r.status == DagsterRunStatus.STARTED for r in runs))
                return most_at_once >= 2

            wait_until(two_in_progress, START_TIMEOUT, "two fan-out runs in progress at once", interval=1.0,
                       on_timeout=daemon.tail)
            assert not (spec.output_dir / f"{FAN_KEY}.jsonl").exists(), "published while shard runs were waiting"

        def published_once():  # the publish run finished, checks included, not merely started
            publishes = _extracted_runs(instance)
            return (finished_runs(daemon, web, instance, backfill) is not None and bool(publishes)
                    and all(r.dagster_run.is_finished for r in publishes))

        wait_until(published_once, RUN_TIMEOUT, "the fan-out runs and then the publish to finish", interval=1.0,
                   on_timeout=daemon.tail)
        time.sleep(12)  # two more ticks of the 5 s automation sensor: no second publish may follow
        status = web.backfill_status(backfill)
    finally:
        web.stop()
        daemon.stop()
    try:
        assert status == "COMPLETED_SUCCESS", daemon.tail()
        records = instance.get_run_records()
        assert all(r.dagster_run.status == DagsterRunStatus.SUCCESS for r in records), daemon.tail()
        shard_runs = [r for r in records if r.dagster_run.tags.get("dagster/backfill") == backfill]
        assert len(shard_runs) == FAN_FILES // FAN_PER_RUN
        spans = sorted((r.start_time, r.end_time) for r in shard_runs)
        assert any(b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:]), spans
        publishes = _extracted_runs(instance)
        assert len(publishes) == 1, [r.dagster_run.run_id for r in publishes]
        assert publishes[0].start_time >= max(end for _, end in spans), "published before the last shard run ended"
        assert instance.get_materialized_partitions(AssetKey(["shards", FAN_KEY])) == set(keys)
    finally:
        instance.dispose()
