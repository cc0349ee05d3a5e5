"""Crash safety on a full disk (docs/guarantees.md 1; D17, docs/architecture.md "Parts and publish"): a
small tmpfs mounted over the output (or raw) folder (root only; skipped where mounting is not
permitted), and portably a child run with RLIMIT_FSIZE and SIGXFSZ ignored, so a write past the limit
fails with EFBIG exactly as a full disk fails with ENOSPC.

After every failure: the run names the dataset, the published pair is the complete previous one, and
the next run publishes the new version and leaves no `.partial`, no uncommitted part, no unpublished
version and no temporary file in raw/.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slm4ie_assets.archives import is_temp_name
from slm4ie_assets.pipeline import ShardBatch, extract_shard_batch, plan_dataset, unpack
from slm4ie_assets.store.dataset_store import PARTIAL, DatasetStore, OutputWriteError
from support.crash import Cli, TwoVersionProject, assert_no_leftovers, instance_home, snapshot


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mount tmpfs filesystems of a given size (root with CAP_SYS_ADMIN only); unmounted after."""
    mounted = []

    def mount(path: Path, size: int) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                             text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode}); "
                        "the RLIMIT_FSIZE test covers full disks portably")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, leave: int) -> Path:
    """Fill the filesystem holding `path` until `leave` bytes are free."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler.bin"
    with open(filler, "wb") as fh:
        remaining = max(0, free - leave)
        chunk = b"\0" * (1 << 16)
        try:
            while remaining > 0:
                remaining -= fh.write(chunk[: min(len(chunk), remaining)])
        except OSError:
            pass
    return filler


def full_disk_project(tmp_path: Path, small_tmpfs, size: int) -> TwoVersionProject:
    small_tmpfs(tmp_path / "out", size)
    return TwoVersionProject(tmp_path, docs=300, datasets={"c_jsonl": "jsonl"})


def full_disk_after_a_good_run(tmp_path: Path, small_tmpfs):
    """`c_jsonl` published ("old") on a 16 MB out/, then the disk filled to 64 kB and new input
    written: (project, spec, snapshot of the old output, the filler file)."""
    project = full_disk_project(tmp_path, small_tmpfs, 16 << 20)
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    filler = fill(spec.output_dir, leave=64 << 10)
    project.write("new")
    return project, spec, old, filler


def test_full_disk_while_writing_parts_fails_naming_the_dataset_and_keeps_the_output(tmp_path, small_tmpfs):
    project, spec, old, filler = full_disk_after_a_good_run(tmp_path, small_tmpfs)
    with pytest.raises(OutputWriteError) as err:
        project.run_plain()
    message = str(err.value)
    assert "dataset 'c_jsonl'" in message and "No space left on device" in message, message
    assert "published output is unchanged" in message
    assert snapshot(spec) == old == project.expected["old"]["c_jsonl"]
    assert not [p for p in spec.output_dir.rglob("*") if p.name.endswith(PARTIAL)]  # cleaned on the spot
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the disk was freed")


def test_full_disk_while_publishing_removes_the_new_version_and_keeps_the_output(tmp_path, small_tmpfs):
    """Parts fit, the version does not: the half-written version is removed at once and the previous
    pair stays published."""
    project = full_disk_project(tmp_path, small_tmpfs, 16 << 20)
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    unpack(spec, project.catalog)
    plan = plan_dataset(spec)
    extract_shard_batch(ShardBatch(spec, plan.stale))  # the shards/<key> step: parts only
    filler = fill(spec.output_dir, leave=16 << 10)
    with pytest.raises(OutputWriteError, match="dataset 'c_jsonl'.*No space left on device"):
        project.run_plain()
    assert snapshot(spec) == old
    assert [v.name for v in DatasetStore(spec).versions.iterdir()] == [DatasetStore(spec).current.resolve().name]
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the disk was freed")


def test_full_disk_while_unpacking_fails_and_leaves_raw_and_output_whole(tmp_path, small_tmpfs):
    """The raw folder's disk fills while an archive unpacks: the run fails naming the archive, no
    half-written member stays, the published pair is untouched."""
    project = TwoVersionProject(tmp_path, docs=300, datasets={"c_conllu": "conllu"})
    spec = project.spec("c_conllu")
    raw = spec.raw_dir
    shutil.rmtree(raw, ignore_errors=True)
    small_tmpfs(raw, 8 << 20)
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    filler = fill(raw, leave=8 << 10)
    with pytest.raises(OSError) as err:
        project.run_plain()
    assert "c_conllu/pack.zip" in str(err.value) and "No space left on device" in str(err.value), str(err.value)
    assert not [p for p in raw.rglob("*") if is_temp_name(p.name)]
    assert snapshot(spec) == old
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_conllu"]
    assert_no_leftovers(spec, "after the disk was freed")


FSIZE_RUNNER = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
extract_dataset(cat.dataset(sys.argv[3]), cat, workers=1)
"""


@pytest.mark.parametrize("limit", [1 << 15, 1 << 18])
def test_file_size_limit_fails_naming_the_dataset_portably(tmp_path, limit):
    """RLIMIT_FSIZE (works without root): a part or version file that cannot grow fails the run with
    a message naming the dataset; the published pair is intact; the next run cleans up."""
    project = TwoVersionProject(tmp_path, docs=300, datasets={"c_jsonl": "jsonl"})
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    unpack(spec, project.catalog)  # the raw side is not under test here (test_archives covers it)
    res = subprocess.run([sys.executable, "-c", FSIZE_RUNNER, str(project.config), str(limit), "c_jsonl"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    assert "OutputWriteError" in res.stderr and "dataset 'c_jsonl'" in res.stderr, res.stderr[-2000:]
    assert "File too large" in res.stderr
    assert snapshot(spec) == old
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the limit was lifted")


@pytest.mark.long
def test_full_disk_through_the_dagster_cli_names_the_dataset(tmp_path, small_tmpfs):
    """The same failure as a user sees it: the CLI run fails and its log names the dataset."""
    project, spec, old, filler = full_disk_after_a_good_run(tmp_path, small_tmpfs)
    run = Cli(project.config, instance_home(tmp_path / "home"), ["c_jsonl"])
    assert run.wait() != 0
    assert "dataset 'c_jsonl': cannot write under" in run.log and "No space left on device" in run.log
    assert snapshot(spec) == old
    filler.unlink()
    project.run_plain()
    assert_no_leftovers(spec)
