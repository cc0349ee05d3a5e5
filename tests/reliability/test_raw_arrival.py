"""Raw inputs as they really arrive (issue 20): files changed while a run reads them, names that
are not UTF-8, broken archives, inputs still being written. Every test runs the real pipeline on
real files; the writers are real file-system operations made while the run is in progress."""

import gzip
import io
import json
import os
import re
import shutil
import signal
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key, partitions_name
from slm4ie_assets.dagster_layer.sensor_cursor import RawCursor
from slm4ie_assets.dagster_layer.sensors import evaluate_raw
from slm4ie_assets.engine.stalls import WorkerStalled
from slm4ie_assets.pipeline import StrictModeViolation, extract_and_publish, extract_dataset, plan_dataset
from slm4ie_assets.planning.input_stamps import InputChanged
from slm4ie_assets.planning.settling import arrivals
from slm4ie_assets.store.dataset_store import DatasetStore, UnsafeOutputTree
from support.dagster_project import DagsterProject, output_metadata
from support.files import read_jsonl, write_config, write_files
from support.processes import pool_workers
from support.watcher import Watcher


def jsonl(version: str, docs: int) -> bytes:
    return b"".join(json.dumps({"id": f"{version}{i:05d}", "text": f"{version} document {i:05d}"}).encode() + b"\n"
                    for i in range(docs))


def catalog_for(root: Path, entry: dict, **top):
    return load_catalog(write_config(root, {"d": {"extractor": "jsonl", "domain": "t", **entry}}, **top))


def published_text(root: Path) -> bytes:
    return (root / "out" / "d.jsonl").read_bytes()


# ----------------------------------------------------------------------------- change during a run


def _replace_by_rename(path: Path, data: bytes) -> None:
    tmp = path.with_name(".incoming")
    tmp.write_bytes(data)
    st = path.stat()
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only inode and ctime tell
    os.replace(tmp, path)


def _rewrite_in_place(path: Path, data: bytes) -> None:
    st = path.stat()
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only ctime tells


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("change", [_replace_by_rename, _rewrite_in_place])
def test_a_file_changed_after_its_first_range_fails_the_run_and_publishes_nothing_mixed(tmp_path, change, workers):
    raw = tmp_path / "raw" / "d"
    write_files(raw, {"a.jsonl": jsonl("OLD", 400)})
    catalog = catalog_for(tmp_path, {}, split_bytes=2048)
    spec = catalog.dataset("d")
    extract_dataset(spec, catalog)
    before = published_text(tmp_path)
    assert before.count(b"OLD") == 800
    (raw / "a.jsonl").write_bytes(jsonl("MID", 400))  # a new state the next run plans
    plan = plan_dataset(spec, workers=workers)
    assert len(plan.stale) > 3
    changed = []

    def on_part(shard, meta):  # a real writer, the moment the run has committed its first part
        if not changed:
            changed.append(shard.key)
            change(raw / "a.jsonl", jsonl("NEW", 400))

    with pytest.raises(InputChanged, match=r"d/a\.jsonl: the input changed while this run read it"):
        extract_and_publish(plan, on_part=on_part)
    assert changed
    assert published_text(tmp_path) == before  # the old version stays, never a mix
    again = extract_dataset(spec, catalog)  # the next run plans the file as it is now
    lines = read_jsonl(tmp_path / "out" / "d.jsonl")
    assert {r["text"].split()[0] for r in lines} == {"NEW"} and len(lines) == 400
    assert again.manifest is not None and again.manifest.drops == {}


def test_a_file_removed_during_a_group_shard_names_it(tmp_path):
    raw = tmp_path / "raw" / "d"
    write_files(raw, {f"f{i:02d}.jsonl": jsonl(f"F{i:02d}", 3) for i in range(6)})
    catalog = catalog_for(tmp_path, {}, shard_group_threshold=1)
    spec = catalog.dataset("d")
    plan = plan_dataset(spec, force=True, group_threshold=1)
    assert any(len(s.files) > 1 for s in plan.shards)
    last = max((f for s in plan.shards for f in s.files), key=lambda f: f.rel)
    os.unlink(last.path)
    with pytest.raises(InputChanged, match=rf"d/{last.rel}: the input changed"):
        extract_and_publish(plan)
    assert not (tmp_path / "out" / "d.jsonl").exists()


# ----------------------------------------------------------------------------- names not UTF-8


def cp1250_tar(path: Path) -> None:
    """A tar made on a cp1250 system: `račun.txt` is stored with the byte 0xE8."""
    data = b"racun iz arhiva\n"
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT, encoding="cp1250") as tar:
        info = tarfile.TarInfo("ra\u010dun.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def odd_names_raw(raw: Path) -> None:
    raw.mkdir(parents=True)
    write_files(raw, {"ok.txt": "dober dan\n"})
    cp1250_tar(raw / "old.tar.gz")
    Path(os.fsdecode(os.path.join(os.fsencode(raw), b"bad\xffname.txt"))).write_bytes(b"x\n")
    folder = os.path.join(os.fsencode(raw), b"mapa\xe8")
    os.mkdir(folder)
    Path(os.fsdecode(os.path.join(folder, b"in.txt"))).write_bytes(b"y\n")


ESCAPED = {"ra\\xe8un.txt", "bad\\xffname.txt", "mapa\\xe8/in.txt"}


def test_names_that_are_not_utf8_are_counted_skips_with_escapes_and_the_rest_is_published(tmp_path):
    odd_names_raw(tmp_path / "raw" / "d")
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "text", "domain": "t"}}))
    report = extract_dataset(catalog.dataset("d"), catalog)
    assert [r["text"] for r in read_jsonl(tmp_path / "out" / "d.jsonl")] == ["dober dan"]
    assert report.manifest is not None and report.manifest.drops == {"unreadable_path": 3}
    named = {w.split(": ", 1)[0].removeprefix("d/") for w in report.manifest.discovery_warnings}
    assert named == ESCAPED
    assert all("not valid UTF-8" in w for w in report.manifest.discovery_warnings)
    strict = load_catalog(write_config(tmp_path, {"d": {"extractor": "text", "domain": "t", "strict": True}}))
    with pytest.raises(StrictModeViolation, match="unreadable_path: 3"):
        extract_dataset(strict.dataset("d"), strict, force=True)


def test_names_that_are_not_utf8_through_dagster_sensor_and_partitions(tmp_path, instance):
    odd_names_raw(tmp_path / "raw" / "kas")
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "t"}})
    watcher = Watcher(project, instance)
    data = watcher.tick()  # unpacks the tar, plans, registers partitions: no error
    assert watcher.partitions() == ["ok.txt"]
    for request in data.run_requests:
        project.execute(instance, request)
    result = project.publish(instance, "kas")
    assert result.success
    meta = output_metadata(result, extracted_key("kas"))
    assert meta["skipped_items"] == 3
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["no_drops"].passed is False
    assert checks["no_drops"].metadata["drop_ledger"].value == {"unreadable_path": 3}


# ----------------------------------------------------------------------------- archives in the ledger


def broken_archives_raw(raw: Path) -> None:
    raw.mkdir(parents=True)
    for i in range(3):
        (raw / f"part{i}.jsonl.gz").write_bytes(gzip.compress(jsonl(f"G{i}", 5), mtime=0))
    good = (raw / "part1.jsonl.gz").read_bytes()
    (raw / "part1.jsonl.gz").write_bytes(good[: len(good) // 2])  # a download cut short
    (raw / "bad.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 40)  # corrupt
    (raw / "junk.jsonl.zst").write_bytes(b"this is not zstandard data at all")  # garbage
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, pytest.warns(UserWarning, match="Duplicate name"):
        zf.writestr("dup.jsonl", jsonl("FIRST", 2))
        zf.writestr("dup.jsonl", jsonl("LAST", 2))
    (raw / "dup.zip").write_bytes(buf.getvalue())


def test_skipped_archives_and_overwritten_members_are_counted_drops_and_strict_fails(tmp_path):
    broken_archives_raw(tmp_path / "raw" / "d")
    catalog = catalog_for(tmp_path, {})
    report = extract_dataset(catalog.dataset("d"), catalog)
    texts = {r["text"].split()[0] for r in read_jsonl(tmp_path / "out" / "d.jsonl")}
    assert texts == {"G0", "G2", "LAST"}
    assert report.manifest is not None
    assert report.manifest.drops == {"bad_archive": 3, "duplicate_member": 1}
    named = " ".join(report.manifest.discovery_warnings)
    for name in ("d/part1.jsonl.gz", "d/bad.zip", "d/junk.jsonl.zst", "d/dup.zip: member 'dup.jsonl'"):
        assert name in named
    again = extract_dataset(catalog.dataset("d"), catalog)  # unchanged archives: the same ledger, skipped
    assert again.skipped and again.manifest is not None and again.manifest.drops == report.manifest.drops
    strict = catalog_for(tmp_path, {"strict": True})
    with pytest.raises(StrictModeViolation, match="bad_archive: 3, duplicate_member: 1"):
        extract_dataset(strict.dataset("d"), strict, force=True)


def test_an_archive_newly_truncated_republishes_with_its_drop(tmp_path):
    raw = tmp_path / "raw" / "d"
    raw.mkdir(parents=True)
    (raw / "a.jsonl").write_bytes(jsonl("A", 3))
    catalog = catalog_for(tmp_path, {})
    assert extract_dataset(catalog.dataset("d"), catalog).manifest.drops == {}
    (raw / "b.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6)  # a gzip header and nothing else
    report = extract_dataset(catalog.dataset("d"), catalog)
    assert not report.skipped and report.manifest.drops == {"bad_archive": 1}


def test_the_archive_ledger_through_dagster_metadata_and_checks(tmp_path, instance):
    broken_archives_raw(tmp_path / "raw" / "kas")
    project = DagsterProject(tmp_path, {"kas": {"extractor": "jsonl", "domain": "t"}})
    result = project.publish(instance, "kas")
    meta = output_metadata(result, extracted_key("kas"))
    assert meta["skipped_items"] == 4
    rows = dict(tuple(r.data.values()) for r in meta["drop_ledger"].records)  # (reason, count), whatever the labels
    assert rows == {"bad_archive": 3, "duplicate_member": 1}
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["no_drops"].passed is False
    assert checks["no_drops"].metadata["drop_ledger"].value == {"bad_archive": 3, "duplicate_member": 1}


def test_an_archive_of_more_members_than_max_members_is_skipped(tmp_path):
    raw = tmp_path / "raw" / "d"
    raw.mkdir(parents=True)
    with tarfile.open(raw / "many.tar.gz", "w:gz") as tar:
        for i in range(2000):
            tar.addfile(tarfile.TarInfo(f"f{i:05d}.jsonl"), io.BytesIO(b""))
    assert (raw / "many.tar.gz").stat().st_size < 40_000
    write_files(raw, {"ok.jsonl": jsonl("OK", 2)})
    catalog = catalog_for(tmp_path, {}, archives={"max_members": 1000})
    skipped = extract_dataset(catalog.dataset("d"), catalog).manifest
    assert skipped is not None and skipped.files == 1 and skipped.drops == {"bad_archive": 1}
    assert not list(raw.glob("f*.jsonl"))  # nothing of it was left
    roomy = catalog_for(tmp_path, {}, archives={"max_members": 2001})
    assert extract_dataset(roomy.dataset("d"), roomy).manifest.files == 2001


# ----------------------------------------------------------------------------- refuse what cannot work


@pytest.mark.parametrize(("dirs", "message"), [
    ("input_dir: raw\noutput_dir: raw/d/out\n",
     r"output_dir: the output folder .*/raw/d/out is inside dataset 'd''s raw folder .*/raw/d: each run"),
    ("input_dir: out/raw\noutput_dir: out\n",
     r"output_dir: the output folder .*/out holds dataset 'd''s raw folder .*/out/raw/d: each run"),
])
def test_an_output_dir_inside_a_raw_folder_or_the_reverse_is_a_catalog_error_at_its_line(tmp_path, dirs, message):
    path = tmp_path / "extract.yaml"
    path.write_text(dirs + "datasets:\n  d: {extractor: text, domain: t}\n")
    with pytest.raises(CatalogError, match=rf"{path}:2: {message}"):
        load_catalog(path)


def test_a_fifo_where_a_huggingface_arrow_file_should_be_is_load_failed_never_a_hang(tmp_path):
    from datasets import Dataset

    raw = tmp_path / "raw" / "d"
    Dataset.from_dict({"text": ["ena", "dve"]}).save_to_disk(str(raw / "good"))
    Dataset.from_dict({"text": ["tri"]}).save_to_disk(str(raw / "fifo"))
    arrow = next((raw / "fifo").glob("data-*.arrow"))
    arrow.unlink()
    os.mkfifo(arrow)
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "huggingface", "domain": "t"}},
                                        split_bytes=1))  # planning the ranges must not open it either
    report = extract_dataset(catalog.dataset("d"), catalog)  # a hang here fails the suite's timeout
    assert [r["text"] for r in read_jsonl(tmp_path / "out" / "d.jsonl")] == ["ena", "dve"]
    assert report.manifest is not None and report.manifest.drops == {"load_failed": 1}
    assert any(f"{arrow.name} is a fifo, not a regular file" in w for w in report.warnings)


@pytest.mark.parametrize("folder", ["parts", "versions", "staging", "locks"])
def test_clean_up_refuses_a_linked_folder_and_deletes_nothing_in_its_target(tmp_path, folder):
    raw = tmp_path / "raw" / "d"
    write_files(raw, {"a.jsonl": jsonl("A", 3), "b.jsonl": jsonl("B", 3)})
    catalog = catalog_for(tmp_path, {})
    spec = catalog.dataset("d")
    extract_dataset(spec, catalog)
    state = tmp_path / "out" / ".slm4ie" / "d"
    elsewhere = tmp_path / "bigger_disk"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep me")
    (elsewhere / "v1-old").mkdir()
    if (state / folder).exists():
        for entry in (state / folder).iterdir():
            os.rename(entry, elsewhere / entry.name)
        (state / folder).rmdir()
    (state / folder).symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.iterdir())
    with pytest.raises(UnsafeOutputTree, match=rf"{state / folder} is a symbolic link; clean-up never deletes"):
        extract_dataset(spec, catalog, force=True)
    assert sorted(p.name for p in elsewhere.iterdir()) == before


@pytest.mark.parametrize(("folder", "entry"), [("parts", "dir"), ("versions", "file"), ("versions", "link")])
def test_clean_up_refuses_an_unexpected_entry_naming_it_instead_of_crashing(tmp_path, folder, entry):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl("A", 3)})
    catalog = catalog_for(tmp_path, {})
    extract_dataset(catalog.dataset("d"), catalog)
    stranger = tmp_path / "out" / ".slm4ie" / "d" / folder / "stranger"
    if entry == "dir":
        stranger.mkdir()
    elif entry == "file":
        stranger.write_text("x")
    else:
        stranger.symlink_to(tmp_path / "raw", target_is_directory=True)
    with pytest.raises(UnsafeOutputTree, match=rf"{stranger} is a .* never makes in {folder}/.*Move it out"):
        extract_dataset(catalog.dataset("d"), catalog, force=True)
    assert (tmp_path / "raw" / "d" / "a.jsonl").exists() and (tmp_path / "out" / "d.jsonl").exists()
    if entry == "dir":
        stranger.rmdir()
    else:
        stranger.unlink()
    extract_dataset(catalog.dataset("d"), catalog, force=True)  # the fix the message names works


# ----------------------------------------------------------------------------- settling

TEMPORARY = [".a.jsonl.Xy3k9Q", "b.jsonl.part", "c.jsonl.partial", "d.jsonl.tmp", "e.jsonl.crdownload", "f.jsonl~"]


def test_temporary_names_are_never_inputs_and_a_hidden_input_still_is(tmp_path):
    raw = tmp_path / "raw" / "d"
    write_files(raw, {name: jsonl("T", 1) for name in TEMPORARY} | {".notes.jsonl": jsonl("H", 1)})
    catalog = catalog_for(tmp_path, {})
    report = extract_dataset(catalog.dataset("d"), catalog)
    assert report.manifest is not None and report.manifest.drops == {} and report.manifest.files == 1


# rsync --delay-updates, rsync --partial-dir, azcopy (a folder, and the file it downloads into)
COPY_TOOL_TEMPS = [".~tmp~/a.jsonl", "sub/.rsync-partial/b.jsonl", ".azDownload-3f2a/c.jsonl",
                   ".azDownload-3f2a-d.jsonl"]


@pytest.mark.parametrize("temp", COPY_TOOL_TEMPS)
def test_copy_tools_working_folders_are_never_inputs_nor_unpacked(tmp_path, temp):
    raw = tmp_path / "raw" / "d"
    write_files(raw, {"whole.jsonl": jsonl("W", 2), temp: jsonl("CUT", 3)[:-7]})
    archive = (raw / temp).parent / "e.jsonl.gz"
    if (raw / temp).parent != raw:  # a partial archive in the same folder is not unpacked either
        archive.write_bytes(gzip.compress(jsonl("GZ", 2))[:-5])
    catalog = catalog_for(tmp_path, {})
    report = extract_dataset(catalog.dataset("d"), catalog)
    assert report.manifest is not None and report.manifest.files == 1 and report.manifest.drops == {}
    assert b"CUT" not in published_text(tmp_path) and not (archive.parent / "e.jsonl").exists()


def _raw_project(tmp_path, entry: dict, files: dict):
    write_files(tmp_path / "raw" / "kas", files)
    return DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "t", **entry}})


def test_a_copied_file_is_planned_once_its_size_and_mtime_held_still_for_one_tick(tmp_path, instance):
    project = _raw_project(tmp_path, {"settle_seconds": 3600}, {"a.txt": "prvi\n"})  # no file is an hour old
    watcher = Watcher(project, instance)
    data = watcher.tick()  # a.txt was written just now: this is the first look at it
    assert data.run_requests == [] and watcher.partitions() == []
    assert "kas: 1 file(s) still arriving (a.txt)" in data.skip_message
    assert "write elsewhere, then move into raw/" in data.skip_message
    with open(project.raw("kas") / "a.txt", "a") as writer:  # the copy goes on between two ticks
        writer.write("drugi\n")
    write_files(project.raw("kas"), {".b.txt.Q1w2E3": "pol", "c.txt.part": "pol"})
    assert "3 file(s) still arriving (a.txt, .b.txt.Q1w2E3, c.txt.part)" in watcher.tick().skip_message
    for name in (".b.txt.Q1w2E3", "c.txt.part"):
        (project.raw("kas") / name).unlink()  # the tools renamed them away; a.txt held still since
    planned = watcher.tick()  # never published: one extracted/kas run plans everything
    assert [r.asset_selection for r in planned.run_requests] == [[extracted_key("kas")]]
    assert watcher.partitions() == ["a.txt"]


def test_a_file_moved_in_whole_is_planned_on_the_next_tick(tmp_path, instance):
    project = _raw_project(tmp_path, {"settle_seconds": 60}, {"a.txt": "prvi\n"})
    watcher = Watcher(project, instance)
    os.utime(project.raw("kas") / "a.txt", (time.time() - 61, time.time() - 61))  # written a while ago
    project.publish(instance, "kas")
    assert watcher.tick().run_requests == []
    staged = tmp_path / "staging" / "b.txt"
    write_files(staged.parent, {"b.txt": "nov\n"})
    os.utime(staged, (time.time() - 61, time.time() - 61))  # written elsewhere, a minute ago
    os.rename(staged, project.raw("kas") / "b.txt")  # its ctime is now: it does not count
    planned = watcher.tick()
    assert [r.tags["slm4ie/trigger"] for r in planned.run_requests] == ["new"] and watcher.partitions()[-1] == "b.txt"


def test_a_future_mtime_is_named_once_and_holds_the_dataset_back_one_tick(tmp_path, instance):
    project = _raw_project(tmp_path, {"settle_seconds": 60}, {"a.txt": "prvi\n", "b.txt": "drugi\n"})
    for name in ("a.txt", "b.txt"):
        os.utime(project.raw("kas") / name, (time.time() - 61, time.time() - 61))
    os.utime(project.raw("kas") / "b.txt", (1893456000, 1893456000))  # touch -d 2030-01-01
    spec, warnings = project.spec("kas"), []
    first = evaluate_raw(spec, project.catalog, instance, None, warn=warnings.append)
    assert "1 file(s) still arriving (b.txt)" in first.skip_reason.skip_message
    assert len(warnings) == 1 and "kas: 1 file(s) have a modification time in the future (b.txt)" in warnings[0]
    second = evaluate_raw(spec, project.catalog, instance, first.cursor, warn=warnings.append)
    assert [r.asset_selection for r in second.run_requests] == [[extracted_key("kas")]]  # both files
    assert second.dynamic_partitions_requests[0].partition_keys == ["a.txt", "b.txt"]
    instance.add_dynamic_partitions(partitions_name("kas"), ["a.txt", "b.txt"])  # as the daemon applies them
    third = evaluate_raw(spec, project.catalog, instance, second.cursor, warn=warnings.append)
    assert len(warnings) == 1 and third.run_requests == []  # named once; the work was requested once


@pytest.mark.parametrize("temp", COPY_TOOL_TEMPS)
def test_a_copy_tools_working_folder_holds_the_dataset_until_empty_and_is_never_planned(tmp_path, instance, temp):
    """Written just now, so changing by the settle rule (a stale one: reliability/test_copy_tool_leftovers.py)."""
    project = _raw_project(tmp_path, {"settle_seconds": 3600}, {"a.txt": "prvi\n", temp.replace("jsonl", "txt"): "po"})
    os.utime(project.raw("kas") / "a.txt", (time.time() - 3601, time.time() - 3601))
    shown = temp.replace("jsonl", "txt") if temp.endswith("-d.jsonl") else temp.rsplit("/", 1)[0] + "/"
    watcher = Watcher(project, instance)
    assert f"1 file(s) still arriving ({shown})" in watcher.tick().skip_message
    (project.raw("kas") / temp.replace("jsonl", "txt")).unlink()  # the tool renamed it into place...
    planned = watcher.tick()  # ...and its empty folder is no sign of a copy any more
    assert planned.run_requests and watcher.partitions() == ["a.txt"]


def test_a_folder_that_keeps_receiving_files_publishes_what_settled_every_max_settle_wait(tmp_path, instance):
    """A new file at every tick (30 s apart on the sensor's clock): with max_settle_wait 100 s the
    tick at +120 s plans the three files that held still, holds back the one still arriving, and
    waits again as long before it plans the next."""
    project = _raw_project(tmp_path, {"settle_seconds": 3600, "max_settle_wait": 100}, {})
    spec, cursor, clock = project.spec("kas"), None, time.time_ns()
    results = []
    for step, name in enumerate(["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt"]):
        write_files(project.raw("kas"), {name: f"{name}\n"})
        result = evaluate_raw(spec, project.catalog, instance, cursor, now_ns=clock + step * 30 * 1_000_000_000)
        for req in getattr(result, "dynamic_partitions_requests", None) or []:
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        cursor, _ = result.cursor, results.append(result)
    skips = [r.skip_reason.skip_message if r.skip_reason else "" for r in results]
    assert [bool(r.run_requests) for r in results] == [False, False, False, False, True, False]
    assert "1 file(s) still arriving (d.txt)" in skips[3] and "10s more at most (max_settle_wait)" in skips[3]
    assert instance.get_dynamic_partitions(partitions_name("kas")) == ["a.txt", "b.txt", "c.txt", "d.txt"]
    assert "1 file(s) still arriving (f.txt)" in skips[5] and "70s more at most" in skips[5]


def test_a_rewrite_still_arriving_after_max_settle_wait_keeps_its_partition(tmp_path, instance):
    project = _raw_project(tmp_path, {"settle_seconds": 3600, "max_settle_wait": 0}, {"a.txt": "a\n", "b.txt": "b\n"})
    project.publish(instance, "kas")
    spec = project.spec("kas")
    first = evaluate_raw(spec, project.catalog, instance, None)
    assert "2 shard(s) held back" in first.skip_reason.skip_message  # both young: max_settle_wait 0 plans none
    with open(project.raw("kas") / "b.txt", "a") as writer:
        writer.write("b se piše\n")
    write_files(project.raw("kas"), {"c.txt": "c\n"})
    second = evaluate_raw(spec, project.catalog, instance, first.cursor)  # a settled; b and c arriving
    assert second.run_requests == [] and not second.dynamic_partitions_requests
    assert "1 shard(s), nothing to extract; 2 shard(s) held back" in second.skip_reason.skip_message
    third = evaluate_raw(spec, project.catalog, instance, second.cursor)
    assert [r.tags["slm4ie/trigger"] for r in third.run_requests] == ["new+changed"]  # one run for both
    assert "1 new (c.txt); 1 changed (b.txt)" in RawCursor.decode(third.cursor).last_tick


def test_settling_defaults_give_about_a_minute(tmp_path):
    spec = catalog_for(tmp_path, {}).dataset("d")
    assert (spec.watch_interval, spec.settle_seconds, spec.max_settle_wait) == (30, 15, 600)
    state = tmp_path / "state.json"
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl("A", 1)})
    later = time.time_ns() + 16 * 1_000_000_000
    assert not arrivals(tmp_path / "raw" / "d", 15, state, now_ns=later)  # 16 s old: settled without a look


# ----------------------------------------------------------------------------- self-healing


def _published_dataset(tmp_path):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl("A", 5), "b.jsonl": jsonl("B", 5)})
    catalog = catalog_for(tmp_path, {})
    extract_dataset(catalog.dataset("d"), catalog)
    return catalog, DatasetStore(catalog.dataset("d")), published_text(tmp_path)


@pytest.mark.parametrize("damage", ["remove", "truncate", "empty_uids", "remove_meta_files"])
def test_a_part_missing_or_altered_is_stale_and_extracted_again(tmp_path, damage):
    catalog, store, before = _published_dataset(tmp_path)
    paths = store.part_paths("a.jsonl")
    if damage == "remove":
        paths.text.unlink()
    elif damage == "truncate":
        os.truncate(paths.text, 10)
    elif damage == "empty_uids":
        os.truncate(paths.uids, 0)
    else:
        for p in (paths.text, paths.uids):
            p.unlink()
    (tmp_path / "out" / "d.jsonl").unlink()  # a republish is needed, not just a skip
    report = extract_dataset(catalog.dataset("d"), catalog)  # not forced
    assert report.extracted == ["a.jsonl"]
    assert published_text(tmp_path) == before


def test_a_published_text_emptied_in_place_is_not_up_to_date(tmp_path):
    catalog, store, before = _published_dataset(tmp_path)
    with open(tmp_path / "out" / "d.jsonl", "r+b") as fh:
        fh.truncate(0)
    report = extract_dataset(catalog.dataset("d"), catalog)
    assert not report.skipped
    assert published_text(tmp_path) == before


def test_a_copy_of_the_output_folder_made_with_links_followed_still_publishes(tmp_path):
    catalog, store, before = _published_dataset(tmp_path)
    out = tmp_path / "out"
    shutil.copytree(out, tmp_path / "copy", symlinks=False)  # what `cp -rL` makes
    shutil.rmtree(out)
    os.rename(tmp_path / "copy", out)
    assert not store.current.is_symlink() and store.current.is_dir()
    assert extract_dataset(catalog.dataset("d"), catalog).skipped  # the copy is what was published
    (tmp_path / "raw" / "d" / "c.jsonl").write_bytes(jsonl("C", 2))
    report = extract_dataset(catalog.dataset("d"), catalog)  # a real change publishes over it
    assert report.extracted == ["c.jsonl"] and store.current.is_symlink()
    after = published_text(tmp_path)
    assert after.startswith(before) and after.count(b'"text":"C document') == 2
    assert [p.name for p in store.versions.iterdir()] == [os.readlink(store.current).split("/")[-1]]


# ----------------------------------------------------------------------------- a stuck worker


def _resume(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # killed by the stall watch, or ended


@pytest.mark.parametrize("timeout", [0, 3])
def test_a_stopped_pool_worker_is_reported_and_with_a_timeout_fails_the_run_naming_it(tmp_path, timeout):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl("A", 100_000), "b.jsonl": jsonl("B", 100_000)})
    catalog = catalog_for(tmp_path, {"stall_seconds": 1, "stall_timeout_seconds": timeout})
    spec = catalog.dataset("d")
    plan = plan_dataset(spec, workers=2, progress_seconds=0.1)  # the log below is called often
    lines: list[str] = []
    stopped: list[int] = []
    resumed: list[bool] = []

    def log(message: str) -> None:
        lines.append(message)
        if not stopped and len(list(DatasetStore(spec).parts.glob("*.jsonl.partial"))) == 2:
            stopped.extend(pool_workers())  # both pool workers, each in the middle of its shard
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
        if timeout == 0 and stopped and not resumed and any("has made no progress" in m for m in lines):
            resumed.append(True)
            _resume(stopped)  # reported: let it go on

    try:
        if timeout:
            with pytest.raises(WorkerStalled, match=r"d: shard '[ab]\.jsonl' \(worker pid \d+\) has made no "
                                                    r"progress .*beyond stall_timeout_seconds \(3\)"):
                extract_and_publish(plan, log=log)
            assert not (tmp_path / "out" / "d.jsonl").exists()
        else:
            extract_and_publish(plan, log=log)
            assert published_text(tmp_path).count(b"\n") == 200_000
    finally:
        _resume(stopped)
    assert stopped
    warned = [m for m in lines if "has made no progress" in m and "stall_seconds 1" in m]
    assert warned and all(re.search(r"shard '[ab]\.jsonl' \(worker pid \d+\)", m) for m in warned)
    extract_dataset(spec, catalog)  # the next run completes from what is left
    assert published_text(tmp_path).count(b"\n") == 200_000


# ----------------------------------------------------------------------------- one freak document


def test_a_document_over_max_document_bytes_is_a_counted_drop_split_or_not(tmp_path):
    big = "velik " * 2000  # ~12 KB of text in one document
    blocks = [f"dokument {i}" for i in range(300)]
    blocks[150] = big
    files = {"a.txt": "\n\n".join(blocks) + "\n",
             "b.jsonl": jsonl("J", 50) + json.dumps({"id": "huge", "text": big}).encode() + b"\n" + jsonl("K", 50)}
    outputs = []
    for split in (0, 1024):
        root = tmp_path / f"split{split}"
        write_files(root / "raw" / "d", files)
        catalog = load_catalog(write_config(root, {"d": {"extractor": "text", "domain": "t"},
                                                   "j": {"extractor": "jsonl", "domain": "t"}},
                                            split_bytes=split, max_document_bytes=10_000))
        (root / "raw" / "j").mkdir()
        os.rename(root / "raw" / "d" / "b.jsonl", root / "raw" / "j" / "b.jsonl")
        text = extract_dataset(catalog.dataset("d"), catalog, workers=2)
        lines = extract_dataset(catalog.dataset("j"), catalog, workers=2)
        assert text.manifest.drops == {"document_too_large": 1} == lines.manifest.drops
        assert text.manifest.docs == 299 and lines.manifest.docs == 100
        assert any("over max_document_bytes (10,000)" in w for w in text.warnings + lines.warnings)
        outputs.append(((root / "out" / "d.jsonl").read_bytes(), (root / "out" / "j.jsonl").read_bytes()))
    assert outputs[0] == outputs[1]  # ids after the dropped document agree however the file is split
    plain = load_catalog(write_config(tmp_path / "split0", {"d": {"extractor": "text", "domain": "t"}}))
    assert plain.dataset("d").recipe != catalog.dataset("d").recipe  # the cap is part of the recipe


def test_a_run_that_finds_the_dataset_up_to_date_retires_a_killed_publishs_old_version(tmp_path, instance):
    """A publish killed after its swap, before its clean-up, leaves the previous version beside
    `current`; the next Dagster run finds the output up to date and skips, and must still remove it."""
    write_files(tmp_path / "raw" / "kas", {"a.txt": "prvi\n"})
    project = DagsterProject(tmp_path, {"kas": {"extractor": "text", "domain": "t"}})
    project.publish(instance, "kas")
    store = DatasetStore(project.spec("kas"))
    live = store.current.resolve()
    shutil.copytree(live, store.versions / "v1-killed-after-swap")
    result = project.publish(instance, "kas")
    assert output_metadata(result, extracted_key("kas")).get("shards_up_to_date") == 1
    assert [p.resolve() for p in store.versions.iterdir()] == [live]
