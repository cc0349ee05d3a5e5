"""The literal CLI, run as a user types it, in real subprocesses (README, "A five-minute tour")."""

import json
import shutil

import pytest

from support.corpora import corpora_config, load_compare_outputs
from support.dagster_cli import dagster_env, run_dagster
from support.files import read_jsonl, write_config, write_files
from support.paths import REPO

pytestmark = pytest.mark.slow


def test_literal_command_writes_the_expected_outputs_for_clarinsi_plain_txt(tmp_path):
    compare = load_compare_outputs()
    cfg = corpora_config(tmp_path)
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = dagster_env(cfg, home)
    res = run_dagster(["asset", "materialize", "--select", "extracted/clarinsi_plain_txt"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "RUN_SUCCESS" in res.stdout + res.stderr
    out = tmp_path / "out"
    assert compare.main([str(out), str(compare_expected()), "--keys", "clarinsi_plain_txt"]) == 0
    # the second run skips without re-extracting; force re-extracts
    res = run_dagster(["asset", "materialize", "--select", "extracted/clarinsi_plain_txt"], env)
    assert res.returncode == 0 and "skipped" in res.stdout + res.stderr
    res = run_dagster(["asset", "materialize", "--select", "extracted/clarinsi_plain_txt", "--config-json",
                       json.dumps({"resources": {"extract": {"config": {"force": True}}}})], env)
    assert res.returncode == 0, res.stdout + res.stderr
    log = res.stdout + res.stderr
    assert "1 to extract" in log and "force" in log


def compare_expected():
    from support.paths import CORPORA
    return CORPORA / "expected"


def test_literal_command_with_dagster_home_unset_uses_the_root_instance(tmp_path):
    write_files(tmp_path / "raw" / "kas", {"a.txt": "Prvi.\n\nDrugi.\n"})
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    env = dagster_env(cfg)  # no DAGSTER_HOME: the root dagster.yaml keeps storage under .dagster/
    res = run_dagster(["asset", "materialize", "--select", "extracted/kas"], env, cwd=REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [r["doc_id"] for r in read_jsonl(tmp_path / "out" / "kas.jsonl")] == ["a:000000", "a:000001"]
    assert (REPO / ".dagster" / "storage").is_dir()


def test_module_flag_form_works_too(tmp_path):
    write_files(tmp_path / "raw" / "kas", {"a.txt": "x\n"})
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    home = tmp_path / "home"
    home.mkdir()
    res = run_dagster(["asset", "materialize", "-m", "slm4ie_assets.definitions", "--select", "extracted/kas"],
                      dagster_env(cfg, home))
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "out" / "kas.jsonl").exists()


def test_missing_raw_folder_fails_with_one_clear_message(tmp_path):
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    home = tmp_path / "home"
    home.mkdir()
    res = run_dagster(["asset", "materialize", "--select", "extracted/kas"], dagster_env(cfg, home))
    log = res.stdout + res.stderr
    assert res.returncode != 0
    assert f"raw folder {tmp_path / 'raw' / 'kas'} does not exist" in log
    assert not (tmp_path / "out" / "kas.jsonl").exists()


def test_bad_config_fails_at_load_naming_dataset_and_field(tmp_path):
    cfg = write_config(tmp_path, {"kas": {"extractor": "text"}})
    res = run_dagster(["asset", "materialize", "--select", "extracted/kas"], dagster_env(cfg))
    assert res.returncode != 0
    assert "datasets.kas.domain: missing" in res.stdout + res.stderr


def test_workers_one_and_two_give_identical_bytes_through_the_cli(tmp_path):
    files = {f"f{i:02d}.txt": "\n\n".join(f"dokument {i} {j}" for j in range(50)) for i in range(9)}
    write_files(tmp_path / "raw" / "kas", files)
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "academic"}})
    home = tmp_path / "home"
    home.mkdir()
    outputs = []
    for workers in (1, 2):
        conf = json.dumps({"resources": {"extract": {"config": {"force": True, "max_workers": workers}}}})
        res = run_dagster(["asset", "materialize", "--select", "extracted/kas", "--config-json", conf],
                          dagster_env(cfg, home))
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"{workers} worker(s)" in res.stdout + res.stderr
        outputs.append((tmp_path / "out" / "kas.jsonl").read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].count(b"\n") == 450
    shutil.rmtree(home)
