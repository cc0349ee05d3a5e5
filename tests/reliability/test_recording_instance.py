"""`slm4ie extract` records where its message says (issue 39 point 8; cli/record.py, dagster_layer/instance_record.py).

With DAGSTER_HOME set to a project root whose dagster.yaml keeps its storage at the relative
`.dagster/storage` (the checkout's own), `slm4ie extract` started in another folder recorded into a
new instance there while its message said $DAGSTER_HOME. Here the venv's real console script runs in
a subprocess from a working folder; the instance the UI reads when started in the project root (as
the Makefile starts it: the same dagster.yaml, its paths taken from the root) holds the
materialization, and nothing is in the working folder.
"""

import os
import shutil
import subprocess
from pathlib import Path

from dagster import AssetKey, DagsterEventType, DagsterInstance, EventRecordsFilter

from slm4ie_assets.dagster_layer.instance_record import open_instance, stored_in
from support.files import write_config, write_files
from support.paths import REPO, VENV_BIN

SLM4IE = VENV_BIN / "slm4ie"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    return {**env, **extra}


def test_extract_records_into_dagster_home_from_any_working_folder(tmp_path):
    project, work = tmp_path / "project", tmp_path / "work"
    for folder in (project, work):
        folder.mkdir()
    shutil.copy(REPO / "dagster.yaml", project / "dagster.yaml")  # the checkout's: base_dir: .dagster/...
    write_files(project / "raw" / "kas", {"a.txt": "ena\n\ndva\n"})
    config = write_config(project, {"kas": {"extractor": "text", "domain": "t"}}, max_workers=1)

    res = subprocess.run([str(SLM4IE), "--config", str(config), "extract", "kas"], cwd=work, capture_output=True,
                         text=True, timeout=300, env=_env(DAGSTER_HOME=str(project)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (work / ".dagster").exists(), res.stdout  # no instance of its own in the working folder

    ui_home = tmp_path / "ui_home"  # the project's settings as a `dagster` command run in the root reads them
    ui_home.mkdir()
    text = (project / "dagster.yaml").read_text().replace("base_dir: .dagster", f"base_dir: {project / '.dagster'}")
    (ui_home / "dagster.yaml").write_text(text)
    with DagsterInstance.from_config(str(ui_home)) as instance:
        events = instance.get_event_records(EventRecordsFilter(DagsterEventType.ASSET_MATERIALIZATION,
                                                               asset_key=AssetKey(["extracted", "kas"])))
    assert len(events) == 1
    storage = project / ".dagster" / "storage"
    said = (f"kas: recorded extracted/kas and 1 shard partition(s) in the Dagster instance at {project} "
            f"(DAGSTER_HOME; stored in {storage})")
    assert said in res.stdout, res.stdout + res.stderr


def test_the_message_names_the_storage_of_an_instance_without_relative_paths(tmp_path):
    """The shipped `deploy/dagster.instance.yaml` has no storage section: Dagster's default, under
    $DAGSTER_HOME, is what the message names."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.instance.yaml", home / "dagster.yaml")
    with open_instance(home) as instance:
        assert Path(stored_in(instance)).is_relative_to(home)
