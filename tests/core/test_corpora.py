"""Every real public sample in shared/corpora, extracted through the literal Dagster CLI, equals the
required output line by line after JSON parsing (sidecars decompressed). Issues 2, 3 and 4 Done-when."""

import pytest
import yaml

from support.corpora import corpora_config, load_compare_outputs
from support.dagster_cli import dagster_env, run_dagster
from support.paths import CORPORA

pytestmark = pytest.mark.slow


def test_all_shared_corpora_through_dagster_asset_materialize(tmp_path):
    compare = load_compare_outputs()
    cfg = corpora_config(tmp_path)
    keys = list(yaml.safe_load(cfg.read_text())["datasets"])
    home = tmp_path / "dagster_home"
    home.mkdir()
    selection = ",".join(f"extracted/{k}" for k in keys)
    res = run_dagster(["asset", "materialize", "--select", selection], dagster_env(cfg, home), timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-5000:]
    assert compare.main([str(tmp_path / "out"), str(CORPORA / "expected"), "--keys", ",".join(keys)]) == 0
