"""Shared fixtures. The helpers the test modules import live in tests/support/ (importable as `support`
through pytest's `pythonpath = ["tests"]`)."""

import pytest

from support.extraction import Corpus

# s3_server (a local S3 API server for the session) and s3_bucket (a fresh bucket per test)
pytest_plugins = ["support.s3"]


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


# Order of files under pytest-xdist (`make test`: `-n 3 --dist loadfile`, each file whole in one worker).
# xdist's own order is most tests first, so the few-test, minute-long files (the browser, Postgres,
# daemon, lost-host and Slurm tests, all marked `slow`) went out last and one worker ran them alone
# while the others sat idle. Here every file holding a `slow` test goes first (then xdist's own order
# in each group), so the quick files fill the gaps at the end. Replaying xdist's scheduler over three
# CI runs' per-test times: the last worker ends at 780-796 s in xdist's order, 716-729 s in this one.
# The `slow` markers are the only input (no table of timings to drift). No result depends on the order.


def pytest_configure(config):
    """In xdist's controller: hand files out in the collected order that the hook below sets."""
    if hasattr(config.option, "loadscopereorder") and not hasattr(config, "workerinput"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)  # after `-m 'not long'` deselects: count only the tests that run
def pytest_collection_modifyitems(config, items):
    """In xdist's workers only (a plain run keeps pytest's order): files with a `slow` test first,
    each group most tests first; a stable sort, so every worker collects the same order and the tests
    of a file keep theirs."""
    if not hasattr(config, "workerinput"):
        return
    counts: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        counts[path] = counts.get(path, 0) + 1
        if item.get_closest_marker("slow") is not None:
            slow.add(path)
    items.sort(key=lambda item: (item.nodeid.split("::", 1)[0] not in slow, -counts[item.nodeid.split("::", 1)[0]]))
