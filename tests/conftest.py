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
