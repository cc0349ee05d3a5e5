"""The plain CLI on a cluster reports (README "Run on a cluster without Dagster"; cli/status.py, cli/record.py).

Real subprocesses of the venv's `slm4ie`: `status` names each shard's state and slice before and
after a slice; with a Dagster instance configured (DAGSTER_HOME with a dagster.yaml) slices and
`publish` show up in that instance's event log as materializations of the `shards/<key>`
partitions and of `extracted/<key>`; with none (or SLM4IE_RECORD=0) nothing imports Dagster.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from support.files import write_config, write_files
from support.paths import REPO, VENV_BIN

pytestmark = pytest.mark.slow

SLM4IE = VENV_BIN / "slm4ie"


def project(root: Path) -> Path:
    """Five text files of different sizes: slices by size, largest first, dealt round-robin."""
    write_files(root / "raw" / "kas", {f"f{i}.txt": "\n\n".join(f"dokument {i} {j}" for j in range(1 + 3 * i))
                                       for i in range(5)})
    return write_config(root, {"kas": {"extractor": "text", "domain": "academic"}}, max_workers=1)


def run(args: list, config: Path, **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), **env_extra)
    res = subprocess.run([str(SLM4IE), *args], env=env, capture_output=True, text=True, timeout=300,
                         cwd=config.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def status(config: Path, **env_extra: str) -> dict:
    res = run(["status", "kas", "--slices", "2", "--json"], config, **env_extra)
    return json.loads(res.stdout.splitlines()[-1])


def test_status_names_each_shards_state_and_slice_before_and_after_a_slice(tmp_path):
    config = project(tmp_path)
    before = status(config)
    assert before["counts"] == {"current": 0, "stale": 0, "missing": 5}
    assert before["published"] == "never published"
    owner = {s["key"]: s["slice"] for s in before["shards"]}
    assert sorted(owner.values()) == ["1/2"] * 3 + ["2/2"] * 2  # sizes f4 > f3 > ...: f4, f2, f0 in slice 1

    wrote = run(["extract", "kas", "--slice", "1/2", "--no-publish"], config).stdout
    assert "wrote 3 part(s)" in wrote and "Dagster" not in wrote  # no instance: nothing recorded
    after = status(config)
    assert {s["key"]: s["state"] for s in after["shards"]} == {
        k: "current" if slice_ == "1/2" else "missing" for k, slice_ in owner.items()}

    f4 = tmp_path / "raw" / "kas" / "f4.txt"  # slice 1's largest file changes (same size: same slices)
    f4.write_text(f4.read_text().replace("dokument", "Dokument"))
    os.utime(f4, ns=(f4.stat().st_atime_ns, f4.stat().st_mtime_ns + 2_000_000_000))
    table = run(["status", "kas", "--slices", "2"], config).stdout
    assert "kas: 5 shard(s): 2 current, 1 stale, 2 missing; published version: never published" in table
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if line.startswith("f")}
    assert rows["f4.txt"] == ["stale", "1/2"] and rows["f1.txt"] == ["missing", "2/2"]
    assert "slice 1/2: 1 of 3 shard(s) not current: `slm4ie extract kas --slice 1/2 --no-publish`" in table
    assert "slice 2/2: 2 of 2 shard(s) not current" in table


def test_slices_and_publish_are_recorded_in_the_configured_instance(tmp_path):
    config = project(tmp_path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.instance.yaml", home / "dagster.yaml")
    for i in (1, 2):
        out = run(["extract", "kas", "--slice", f"{i}/2", "--no-publish"], config, DAGSTER_HOME=str(home)).stdout
        assert f"recorded {3 if i == 1 else 2} shards/kas partition materialization(s)" in out
    out = run(["publish", "kas"], config, DAGSTER_HOME=str(home)).stdout
    assert "recorded extracted/kas in the Dagster instance" in out

    with DagsterInstance.from_config(str(home)) as instance:
        assert sorted(instance.get_dynamic_partitions("slm4ie_shards__kas")) == [f"f{i}.txt" for i in range(5)]
        shard_events = instance.fetch_materializations(AssetKey(["shards", "kas"]), limit=100).records
        by_partition = {r.asset_materialization.partition: r.asset_materialization for r in shard_events}
        assert sorted(by_partition) == [f"f{i}.txt" for i in range(5)]
        assert by_partition["f4.txt"].metadata["documents"].value == 13
        assert by_partition["f4.txt"].metadata["recorded_by"].value == "slm4ie extract kas --slice 1/2 --no-publish"
        assert all(r.run_id == "" for r in shard_events)  # reported without a run
        [published] = instance.fetch_materializations(AssetKey(["extracted", "kas"]), limit=100).records
        metadata = published.asset_materialization.metadata
        assert metadata["documents"].value == sum(1 + 3 * i for i in range(5))
        assert metadata["recorded_by"].value == "slm4ie publish kas"
        assert published.asset_materialization.tags["dagster/data_version"]



IMPORTS = """
import sys
from slm4ie_assets.cli.main import main
code = main(sys.argv[1:])
print("DAGSTER MODULES:", sorted(m for m in sys.modules if m.split(".")[0].startswith("dagster")))
sys.exit(code)
"""


@pytest.mark.parametrize("instance", ["unset", "home without dagster.yaml", "SLM4IE_RECORD=0"])
def test_without_a_configured_instance_nothing_imports_dagster(tmp_path, instance):
    config = project(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    extra = {"unset": {}, "home without dagster.yaml": {"DAGSTER_HOME": str(home)},
             "SLM4IE_RECORD=0": {"DAGSTER_HOME": str(home), "SLM4IE_RECORD": "0"}}[instance]
    if instance == "SLM4IE_RECORD=0":
        shutil.copy(REPO / "deploy" / "dagster.instance.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), **extra)
    for args in (["extract", "kas", "--slice", "1/2", "--no-publish"], ["extract", "kas", "--slice", "2/2",
                 "--no-publish"], ["publish", "kas"], ["status", "kas", "--slices", "2"]):
        res = subprocess.run([sys.executable, "-c", IMPORTS, *args], env=env, capture_output=True, text=True,
                             timeout=300, cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "DAGSTER MODULES: []" in res.stdout, (args, res.stdout[-500:])
    assert not list(home.iterdir()) or [p.name for p in home.iterdir()] == ["dagster.yaml"]
