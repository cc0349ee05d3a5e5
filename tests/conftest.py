"""Shared fixtures. The helpers the test modules import live in tests/support/ (importable as `support`
through pytest's `pythonpath = ["tests"]`)."""

import pytest

from support.extraction import Corpus


@pytest.fixture
def instance(tmp_path):
    """A throwaway Dagster instance under tmp_path (imported here so plain-pipeline tests stay fast)."""
    from dagster import instance_for_test

    home = tmp_path / "dagster_home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as inst:
        yield inst


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    return Corpus(tmp_path)


# Seconds each of the longest test files took on 2 cores (`pytest -n 2 --durations=0`, summed per
# file, 2026-12-06). `make test` runs pytest-xdist with `--dist loadfile --no-loadscope-reorder`:
# each file goes whole to one worker in the order collected, so the long ones are collected first
# (longest processing time first) and the short ones fill the gaps at the end. Left in xdist's own
# order (most tests first), the few-test, minute-long UI files came last and one worker ran them
# alone for a minute or more. A file missing here only runs later; no result depends on the order.
LONG_FILES = {
    "tests/ui/test_postgres.py": 169,
    "tests/ui/test_ui_browser.py": 117,
    "tests/dagster_layer/test_dg_cli.py": 92,
    "tests/dagster_layer/test_daemon.py": 76,
    "tests/dagster_layer/test_operator_messages.py": 71,
    "tests/reliability/test_crash_kills.py": 70,
    "tests/dagster_layer/test_dagster_cli.py": 61,
    "tests/reliability/test_shard_locks.py": 49,
    "tests/dagster_layer/test_user_errors.py": 47,
    "tests/reliability/test_concurrency.py": 45,
    "tests/dagster_layer/test_checks.py": 36,
    "tests/reliability/test_fuzz_extractors.py": 35,
    "tests/reliability/test_raw_arrival.py": 25,
    "tests/core/test_corpora.py": 23,
    "tests/dagster_layer/test_sensors.py": 20,
    "tests/reliability/test_crash_mutation_points.py": 20,
}


def pytest_collection_modifyitems(config, items):
    """The longest files first (a stable sort: tests keep their order within a file)."""
    gone = [name for name in LONG_FILES if not (config.rootpath / name).is_file()]
    if gone:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py LONG_FILES names files that do not exist: {gone}")
    items.sort(key=lambda item: -LONG_FILES.get(item.nodeid.split("::", 1)[0], 0))
