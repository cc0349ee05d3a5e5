"""Instance settings that travel: deploy/dagster.instance.yaml carries the queue, the pool limit, the
managed logger and telemetry-off into any DAGSTER_HOME (`make home`), the root dagster.yaml is the
same settings plus storage, and a run on an instance without them says so in its log, once."""

import subprocess

import yaml
from dagster import AssetSelection, DagsterInstance, instance_for_test

from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.instance_settings import missing_settings
from support.dagster_project import DagsterProject
from support.files import write_files
from support.paths import REPO

SETTINGS = REPO / "deploy" / "dagster.instance.yaml"
STORAGE_KEYS = {"storage", "local_artifact_storage", "compute_logs", "run_storage", "event_log_storage",
                "schedule_storage"}
LACKS = "this Dagster instance lacks"


def load(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_shipped_settings_have_no_storage_and_match_the_root_instance():
    shipped = load(SETTINGS)
    assert not STORAGE_KEYS & shipped.keys()
    root = {k: v for k, v in load(REPO / "dagster.yaml").items() if k not in STORAGE_KEYS}
    assert root == shipped


def test_make_home_gives_any_dagster_home_the_settings_and_keeps_a_different_file(tmp_path):
    home = tmp_path / "a" / "home"
    res = subprocess.run(["make", "--no-print-directory", "home", f"DAGSTER_HOME={home}"], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with DagsterInstance.from_config(str(home)) as instance:
        assert missing_settings(instance) == []
        assert str(home) in instance.root_directory  # storage stays Dagster's default, under the home
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    res = subprocess.run(["make", "--no-print-directory", "home", f"DAGSTER_HOME={home}"], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode != 0 and "exists and differs; kept (FORCE=1 replaces it)" in res.stderr
    res = subprocess.run(["make", "--no-print-directory", "home", "DAGSTER_HOME=relative"], cwd=REPO,
                         capture_output=True, text=True)
    assert res.returncode != 0 and "absolute path" in res.stderr


def warnings_of(instance, run) -> list[str]:
    return [r.user_message for r in instance.all_logs(run.run_id) if r.level >= 30 and LACKS in r.user_message]


def test_a_run_warns_once_when_the_instance_lacks_the_settings(tmp_path):
    write_files(tmp_path / "raw" / "kas", {"a.txt": "Prvi.\n", "b.txt": "Drugi.\n"})
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    selection = AssetSelection.assets(extracted_key("kas"))
    home = tmp_path / "bare_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # what the README used to advise
    with DagsterInstance.from_config(str(home)) as bare:
        run = project.materialize(bare, selection)
        found = warnings_of(bare, run)
        assert len(found) == 1, found
        for part in ("slm4ie_extract", "managed_python_loggers", "make home"):
            assert part in found[0]
        assert "QueuedRunCoordinator" not in found[0]  # Dagster 1.13 queues by default
    with instance_for_test(overrides=load(SETTINGS)) as configured:
        assert missing_settings(configured) == []
        assert warnings_of(configured, project.materialize(configured, selection, force=True)) == []


def test_an_instance_that_does_not_queue_is_named_too(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = {**load(SETTINGS), "run_coordinator": {"module": "dagster.core.run_coordinator",
                                                      "class": "DefaultRunCoordinator"}}
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    with DagsterInstance.from_config(str(home)) as instance:
        assert [m.name for m in missing_settings(instance)] == ["run_coordinator: QueuedRunCoordinator"]


def test_the_postgres_instance_file_carries_the_same_settings():
    """deploy/dagster.postgres.yaml: the shipped settings, with the pool sized for several runs."""
    postgres = load(REPO / "deploy" / "dagster.postgres.yaml")
    shipped = load(SETTINGS)
    assert postgres["python_logs"] == shipped["python_logs"] and postgres["telemetry"] == shipped["telemetry"]
    assert postgres["run_coordinator"]["class"] == "QueuedRunCoordinator"
    pools = postgres["concurrency"]["pools"]
    assert pools["granularity"] == "run" and pools["default_limit"] >= 1
