"""A copy tool's leftover holds the dataset back only while it changes (issue 39 point 9; planning/settling.py).

An aborted rsync leaves `.rsync-partial/` (or `.~tmp~/`, azcopy's `.azDownload-*`, a `*.part`) behind
for ever. It is never an input, but it counted as "still arriving" at every tick, so every settled file
waited `max_settle_wait` (600 s) each time anything changed. Now it follows the rule of any file, read
from what it shows (size and mtime; for a working folder, those of every entry in it): it holds the
dataset back while that moved since the previous tick and is younger than `settle_seconds`; once it
has settled it is named in one warning and ignored. Real files, the raw sensor's own evaluation
(`evaluate_raw`, as the sensor calls it, and the sensor definition ticked like the daemon ticks it)
against a real instance.
"""

import os
import time

from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.sensors import evaluate_raw
from support.dagster_project import DagsterProject
from support.files import write_files
from support.watcher import Watcher

# (what the copy tool left, as the sensor names it)
LEFTOVERS = [
    (".rsync-partial/b.txt", ".rsync-partial/"),  # rsync --partial-dir
    ("sub/.~tmp~/b.txt", "sub/.~tmp~/"),  # rsync --delay-updates
    (".azDownload-3f2a/b.txt", ".azDownload-3f2a/"),  # azcopy's folder
    (".azDownload-3f2a-b.txt", ".azDownload-3f2a-b.txt"),  # azcopy's file
    ("b.txt.part", "b.txt.part"),  # wget, browsers
    (".b.txt.Q1w2E3", ".b.txt.Q1w2E3"),  # rsync's temporary name
]
HOUR = 3600


def _project(tmp_path, settle_seconds: int, leftovers: list[str]) -> DagsterProject:
    """Dataset `k<i>` holds a settled a.txt and the i-th leftover (one instance for all: its fixture is
    the slow part)."""
    for i, left in enumerate(leftovers):
        write_files(tmp_path / "raw" / f"k{i}", {"a.txt": "prvi\n", left: "pol"})
    datasets = {f"k{i}": {"extractor": "text", "domain": "t", "settle_seconds": settle_seconds}
                for i in range(len(leftovers))}
    project = DagsterProject(tmp_path, datasets)
    for i in range(len(leftovers)):
        _age(project.raw(f"k{i}") / "a.txt", HOUR + 1)  # settled by age
    return project


def _age(path, seconds: int) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def _leftover_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "copy tool leftover" in w]


def test_a_stale_leftover_is_named_once_and_never_holds_the_dataset_back(tmp_path, instance):
    project = _project(tmp_path, 60, [left for left, _ in LEFTOVERS])
    for i, (left, shown) in enumerate(LEFTOVERS):
        key = f"k{i}"
        _age(project.raw(key) / left, HOUR)  # what a copy aborted an hour ago leaves
        spec, warnings = project.spec(key), []
        first = evaluate_raw(spec, project.catalog, instance, None, warn=warnings.append)
        assert [r.asset_selection for r in first.run_requests] == [[extracted_key(key)]], (left, first)
        assert first.dynamic_partitions_requests[0].partition_keys == ["a.txt"]  # never an input itself
        [warning] = _leftover_warnings(warnings)
        assert f"{key}: 1 copy tool leftover(s) have stopped changing ({shown})" in warning
        assert "never inputs, and ignored from now on" in warning
        second = evaluate_raw(spec, project.catalog, instance, first.cursor, warn=warnings.append)
        assert second.skip_reason is None or "still arriving" not in second.skip_reason.skip_message
        assert len(_leftover_warnings(warnings)) == 1, left  # once


def test_a_leftover_holds_the_dataset_back_only_while_it_changes(tmp_path, instance):
    chosen = [LEFTOVERS[0], LEFTOVERS[3], LEFTOVERS[4]]  # a working folder, azcopy's file, a `.part`
    project = _project(tmp_path, HOUR, [left for left, _ in chosen])  # young for an hour: only two looks settle it
    for i, (left, shown) in enumerate(chosen):
        key, path = f"k{i}", project.raw(f"k{i}") / left
        spec, warnings, cursor = project.spec(key), [], None
        for _ in range(3):  # written just now, then it grows between ticks: the copy goes on
            result = evaluate_raw(spec, project.catalog, instance, cursor, warn=warnings.append)
            assert f"{key}: 1 file(s) still arriving ({shown})" in result.skip_reason.skip_message, left
            cursor = result.cursor
            with open(path, "a") as writer:
                writer.write("še\n")
        assert _leftover_warnings(warnings) == []
        result = evaluate_raw(spec, project.catalog, instance, cursor, warn=warnings.append)
        assert "still arriving" in result.skip_reason.skip_message  # grew once more since the last tick
        stopped = evaluate_raw(spec, project.catalog, instance, result.cursor, warn=warnings.append)  # held still
        assert [r.asset_selection for r in stopped.run_requests] == [[extracted_key(key)]], left
        [warning] = _leftover_warnings(warnings)
        assert f"({shown})" in warning
        evaluate_raw(spec, project.catalog, instance, stopped.cursor, warn=warnings.append)
        assert len(_leftover_warnings(warnings)) == 1


def test_the_sensor_plans_past_an_aborted_rsync_at_its_first_tick(tmp_path, instance):
    """The sensor definition the daemon ticks: an hour-old `.rsync-partial/` beside a settled file."""
    project = _project(tmp_path, 60, [".rsync-partial/b.txt"])
    _age(project.raw("k0") / ".rsync-partial" / "b.txt", HOUR)
    watcher = Watcher(project, instance, key="k0")
    assert [r.asset_selection for r in watcher.tick().run_requests] == [[extracted_key("k0")]]
    assert watcher.partitions() == ["a.txt"]
