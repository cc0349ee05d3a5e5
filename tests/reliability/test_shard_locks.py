"""Shard-level locks (issue 14 item 2, docs/guarantees.md 2): a part writer holds the dataset lock
SHARED and its shard's lock EXCLUSIVE; unpacking, publishing and clean-up hold the dataset lock
EXCLUSIVE. So runs on disjoint shards of one dataset write at the same time, runs on one shard take
turns (the second skips the part it finds current, or, forced, rewrites it), and a SIGKILLed run
costs only its own unfinished shards.

Every race is ordered by events, never by timing: the test holds locks itself through store/locks.py,
reads which process holds which lock from /proc/locks, and freezes a run's process group with
SIGSTOP while it holds a shard lock. Runs are real `dagster asset materialize` processes on a real
instance (`shards/<key>` partition ranges), each in its own process group.
"""

import json
import signal
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import (
    MAX_ROUNDS,
    ShardBatch,
    extract_and_publish,
    extract_dataset,
    extract_shard_batch,
    plan_dataset,
)
from slm4ie_assets.store.dataset_store import PARTIAL, DatasetStore
from slm4ie_assets.store.locks import LockFileError, dataset_lock, shard_lock
from support.crash import assert_no_leftovers, instance_home
from support.lock_races import WAIT_LIMIT, MaterializeRun, flock_holders, freeze_while_holding, holds, wait_for
from support.paths import REPO

KEY = "k"
FILES = [f"f{i}.jsonl" for i in range(6)]
DOCS = 12000  # per file: a part takes long enough to watch, short enough for CI


# ----------------------------------------------------------------------------- project


def write_raw(raw: Path, version: str) -> None:
    raw.mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(FILES):
        lines = (json.dumps({"doc_id": f"{version}-{n}-{d}", "text": f"{version} datoteka {n} beseda {d} " * 4})
                 for d in range(DOCS + 97 * n))
        (raw / name).write_text("\n".join(lines) + "\n")


def write_config(root: Path, out: str) -> Path:
    path = root / f"{out}.yaml"
    path.write_text(f"input_dir: {root / 'raw'}\noutput_dir: {root / out}\nsettle_seconds: 0\n"
                    f"datasets:\n  {KEY}:\n    extractor: jsonl\n    domain: test\n")
    return path


class Project:
    """raw/k with six jsonl files, published once in an `old` version, then rewritten as `new`;
    `reference` holds what a serial one-worker run publishes for `new` (and each part's text)."""

    def __init__(self, root: Path):
        self.root = root
        self.config = write_config(root, "out")
        self.catalog = load_catalog(self.config)
        self.spec = self.catalog.dataset(KEY)
        self.store = DatasetStore(self.spec)
        write_raw(root / "raw" / KEY, "old")
        extract_dataset(self.spec, self.catalog, workers=1)
        self.old_text = self.spec.text_path.read_bytes()
        write_raw(root / "raw" / KEY, "new")
        ref_catalog = load_catalog(write_config(root, "reference"))
        ref = ref_catalog.dataset(KEY)
        extract_dataset(ref, ref_catalog, workers=1)
        self.new_text = ref.text_path.read_bytes()
        self.new_parts = {name: DatasetStore(ref).part_paths(name).text.read_bytes() for name in FILES}
        self.home = registered_home(root / "home")

    def run(self, first: str | None = None, last: str | None = None, force: bool = False) -> MaterializeRun:
        """A CLI run of `shards/k` from `first` to `last`, or of `extracted/k` without a range."""
        return MaterializeRun(self.config, self.home, KEY, first, last, force)

    def lock_file(self, shard: str) -> Path:
        return self.store.shard_lock(shard)

    def meta_stamp(self, shard: str) -> tuple[int, int] | None:
        """(inode, mtime) of the shard's committed meta: a rewrite replaces the file."""
        try:
            st = self.store.part_paths(shard).meta.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    def assert_part_whole(self, shard: str) -> None:
        assert self.store.part_is_current(next(s for s in plan_shards(self) if s.key == shard)), shard
        assert self.store.part_paths(shard).text.read_bytes() == self.new_parts[shard], shard

    def assert_old_pair_published(self) -> None:
        assert self.spec.text_path.read_bytes() == self.old_text
        manifest = self.store.published_manifest()
        assert manifest is not None and manifest.text_bytes == len(self.old_text)


def plan_shards(project: Project):
    return plan_dataset(project.spec).shards


def registered_home(path: Path) -> Path:
    """A DAGSTER_HOME with the project's dagster.yaml and the shard partitions in file order (so
    partition ranges are contiguous)."""
    from dagster import DagsterInstance

    from slm4ie_assets.dagster_layer.assets import partitions_name

    instance = DagsterInstance.from_config(str(instance_home(path)))
    instance.add_dynamic_partitions(partitions_name(KEY), FILES)
    instance.dispose()
    return path


# ----------------------------------------------------------------------------- runs and locks


def shard_lock_held_by_test(project: Project, shard: str, stack: ExitStack) -> None:
    """Hold one shard's lock from the test, exactly as a part writer does (dataset shared first)."""
    stack.enter_context(dataset_lock(project.store.lock, KEY, shared=True))
    stack.enter_context(shard_lock(project.lock_file(shard), KEY, shard))


def extracted_count(run: MaterializeRun) -> int:
    """From the IO manager's line `k: <n> of <m> shard(s) extracted`."""
    line = next(x for x in run.lines if " shard(s) extracted" in x)
    return int(line.split(f"{KEY}: ", 1)[1].split(" of ", 1)[0])


# ----------------------------------------------------------------------------- in one process


def test_a_symlink_at_a_shard_lock_path_is_refused_and_its_target_untouched(tmp_path):
    """The shard locks are opened like the dataset lock (O_NOFOLLOW, regular file, one name)."""
    write_raw(tmp_path / "raw" / KEY, "new")
    catalog = load_catalog(write_config(tmp_path, "out"))
    spec = catalog.dataset(KEY)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    target = DatasetStore(spec).shard_lock("f2.jsonl")
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    with pytest.raises(LockFileError, match=r"k: the lock of shard 'f2.jsonl' .* is a symbolic link"):
        extract_dataset(spec, catalog, workers=1)
    assert victim.read_bytes() == b"precious" and target.is_symlink()
    assert not spec.text_path.exists()  # nothing published


def test_clean_up_keeps_held_shard_locks_and_drops_those_of_vanished_shards(tmp_path):
    """While a part writer (the test) holds the dataset lock shared and a shard lock, a shard run
    writes its part beside it and skips the dataset-wide clean-up: the held lock file keeps its
    inode. Once nobody holds them, a publishing run removes the lock files of vanished shards."""
    raw = tmp_path / "raw" / KEY
    write_raw(raw, "old")
    catalog = load_catalog(write_config(tmp_path, "out"))
    spec = catalog.dataset(KEY)
    store = DatasetStore(spec)
    extract_dataset(spec, catalog, workers=1)
    write_raw(raw, "new")
    (store.parts / "leftover.jsonl.partial").write_text("of an interrupted run\n")
    with ExitStack() as held:
        held.enter_context(dataset_lock(store.lock, KEY, shared=True))
        held.enter_context(shard_lock(store.shard_lock("f0.jsonl"), KEY, "f0.jsonl"))
        inode = store.shard_lock("f0.jsonl").stat().st_ino
        f1 = next(s for s in plan_dataset(spec).shards if s.key == "f1.jsonl")
        report = extract_shard_batch(ShardBatch(spec, [f1]))
        assert report.extracted == ["f1.jsonl"] and store.part_is_current(f1)
        assert store.shard_lock("f0.jsonl").stat().st_ino == inode
        assert (store.parts / "leftover.jsonl.partial").exists()  # the clean-up waits for an idle dataset
    (raw / "f5.jsonl").unlink()
    report = extract_dataset(spec, catalog, workers=1)
    assert "f1.jsonl" not in report.extracted
    assert sorted(p.name for p in store.shard_locks.iterdir()) == sorted(
        store.shard_lock(name).name for name in FILES[:5])
    assert not (store.parts / "leftover.jsonl.partial").exists()


def test_a_publish_waits_for_a_part_writer_and_writes_nothing_meanwhile(tmp_path):
    """A forced run (a child process) finds the dataset lock held shared by a part writer: it logs
    that it waits and writes nothing under the output folder until the writer is done."""
    raw = tmp_path / "raw" / KEY
    write_raw(raw, "new")
    config = write_config(tmp_path, "out")
    catalog = load_catalog(config)
    spec = catalog.dataset(KEY)
    extract_dataset(spec, catalog, workers=1)
    store = DatasetStore(spec)

    def state() -> dict:
        return {str(p): (p.lstat().st_ino, p.lstat().st_mtime_ns) for p in spec.output_dir.rglob("*")
                if p != store.lock}

    with dataset_lock(store.lock, KEY, shared=True):
        before = state()
        child = subprocess.Popen([sys.executable, "-c", (
            "import sys\n"
            "from slm4ie_assets.catalog import load_catalog\n"
            "from slm4ie_assets.pipeline import extract_dataset\n"
            "catalog = load_catalog(sys.argv[1])\n"
            "extract_dataset(catalog.dataset('k'), catalog, force=True, workers=1,\n"
            "                log=lambda m: print(m, flush=True))\n"),
            str(config)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert "another run holds the dataset lock" in child.stdout.readline()
        assert state() == before
    out, _ = child.communicate(timeout=WAIT_LIMIT)
    assert child.returncode == 0, out
    assert state() != before and store.published_manifest() is not None


def replaced_parts_project(tmp_path: Path):
    """A published `old` version, raw files rewritten as `new`, and a serial run's `new` text."""
    raw = tmp_path / "raw" / KEY
    write_raw(raw, "new")
    ref_catalog = load_catalog(write_config(tmp_path, "reference"))
    extract_dataset(ref_catalog.dataset(KEY), ref_catalog, workers=1)
    expected = ref_catalog.dataset(KEY).text_path.read_bytes()
    write_raw(raw, "old")
    catalog = load_catalog(write_config(tmp_path, "out"))
    spec = catalog.dataset(KEY)
    extract_dataset(spec, catalog, workers=1)
    write_raw(raw, "new")
    return spec, expected


def test_a_part_replaced_between_part_writing_and_publishing_is_written_again(tmp_path):
    """Between the shared lock (parts) and the exclusive one (publish) another run may replace or
    remove a part (it planned from other raw files): the publish finds it stale, writes it again
    and only then publishes. Here the part's meta is removed as soon as it is committed, once."""
    spec, expected = replaced_parts_project(tmp_path)
    store = DatasetStore(spec)
    removed: list[str] = []

    def on_part(shard, meta) -> None:
        if shard.key == "f2.jsonl" and not removed:
            store.part_paths(shard.key).meta.unlink()
            removed.append(shard.key)

    report = extract_and_publish(plan_dataset(spec, workers=1), on_part=on_part)
    assert removed == ["f2.jsonl"] and not report.skipped
    assert report.extracted == FILES  # each shard once, f2 with the meta of its second writing
    assert spec.text_path.read_bytes() == expected


def test_a_run_whose_parts_keep_being_replaced_gives_up_naming_the_dataset(tmp_path):
    spec, _ = replaced_parts_project(tmp_path)
    store = DatasetStore(spec)
    old_text = spec.text_path.read_bytes()
    rounds: list[str] = []

    def on_part(shard, meta) -> None:
        if shard.key == "f2.jsonl":
            store.part_paths(shard.key).meta.unlink()
            rounds.append(shard.key)

    with pytest.raises(RuntimeError, match=rf"dataset 'k': other runs changed 1 of its parts again each time this run "
                                           rf"had written them \({MAX_ROUNDS} rounds\), first 'f2.jsonl'"):
        extract_and_publish(plan_dataset(spec, workers=1), on_part=on_part)
    assert len(rounds) == MAX_ROUNDS
    assert spec.text_path.read_bytes() == old_text  # never published from a part that is not current


def test_a_sensor_tick_skips_while_a_part_writer_holds_the_dataset_lock(tmp_path, instance):
    """The sensor unpacks archives, so it needs the dataset lock exclusive; it never waits for it."""
    from slm4ie_assets.dagster_layer.sensors import evaluate_raw

    write_raw(tmp_path / "raw" / KEY, "new")
    catalog = load_catalog(write_config(tmp_path, "out"))
    spec = catalog.dataset(KEY)
    with dataset_lock(DatasetStore(spec).lock, KEY, shared=True):
        result = evaluate_raw(spec, catalog, instance, None)
    assert "a run holds the dataset lock" in str(getattr(result, "skip_message", result))
    assert evaluate_raw(spec, catalog, instance, None).run_requests  # free again: the tick does its work


# ----------------------------------------------------------------------------- runs


@pytest.mark.slow
def test_runs_on_disjoint_shards_of_one_dataset_write_at_the_same_time(tmp_path):
    """A holds a shard lock (frozen there by SIGSTOP) while B, on the other shards of the same
    dataset, takes its own shard locks and writes all its parts; both hold the dataset lock shared
    at once. Then A finishes; every part equals a serial run's and publishing extracts nothing."""
    project = Project(tmp_path)
    with dataset_lock(project.store.lock, KEY):  # the starting gate: both runs reach part writing
        a, b = project.run("f0.jsonl", "f2.jsonl"), project.run("f3.jsonl", "f5.jsonl")
        wait_for(lambda: all("another run holds the dataset lock" in r.log for r in (a, b)),
                 "both runs to wait for the dataset lock", [a, b])
    a_locks = [project.lock_file(s) for s in FILES[:3]]
    b_locks = [project.lock_file(s) for s in FILES[3:]]
    held_by_a = freeze_while_holding(a, a_locks)
    try:
        wait_for(lambda: any(holds(b, p) for p in b_locks), "B to hold a shard lock while A holds one", [b])
        assert holds(a, held_by_a), "A let go of its shard lock while frozen"
        dataset_holders = flock_holders(project.store.lock)
        assert any(a.owns(pid) and kind == "READ" for pid, kind in dataset_holders), dataset_holders
        assert b.wait() == 0, b.log[-4000:]  # B wrote all its parts while A held a shard lock
        for shard in FILES[3:]:
            project.assert_part_whole(shard)
        assert holds(a, held_by_a)
    finally:
        a.signal(signal.SIGCONT)
    assert a.wait() == 0, a.log[-4000:]
    assert "another run is writing shard" not in a.log + b.log  # disjoint: no shard lock was ever waited for
    assert extracted_count(a) == extracted_count(b) == 3
    for shard in FILES:
        project.assert_part_whole(shard)
    project.assert_old_pair_published()  # shard runs write parts, never publish
    report = extract_dataset(project.spec, project.catalog, workers=1)
    assert report.extracted == [] and not report.skipped
    assert project.spec.text_path.read_bytes() == project.new_text
    assert_no_leftovers(project.spec)


@pytest.mark.slow
@pytest.mark.parametrize("force", [False, True], ids=["skip", "force"])
def test_runs_on_the_same_shard_take_turns_and_the_second_skips_or_rewrites(tmp_path, force):
    """A (f0..f1) and B (f1..f2) meet on f1, which the test holds; B is frozen while the lock passes
    to A, so A writes f1 and B, let go once A committed it, finds the part current: it skips it
    (or, forced, rewrites it, taking the lock in turn). Never do both write f1 at once."""
    project = Project(tmp_path)
    f1_lock = project.lock_file("f1.jsonl")
    with ExitStack() as gate:
        shard_lock_held_by_test(project, "f1.jsonl", gate)
        a, b = project.run("f0.jsonl", "f1.jsonl", force), project.run("f1.jsonl", "f2.jsonl", force)
        waiting = "another run is writing shard 'f1.jsonl'"
        wait_for(lambda: waiting in a.log and waiting in b.log, "both runs to wait for f1's lock", [a, b])
        b.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: project.meta_stamp("f1.jsonl") is not None and not holds(a, f1_lock)
                 and project.store.part_is_current(next(s for s in plan_shards(project) if s.key == "f1.jsonl")),
                 "A to commit f1", [a])
        assert not holds(b, f1_lock)
        written_by_a = project.meta_stamp("f1.jsonl")
    finally:
        b.signal(signal.SIGCONT)
    assert a.wait() == 0, a.log[-4000:]
    assert b.wait() == 0, b.log[-4000:]
    outcome = "rewrote it (force)" if force else "it is current now, so this run skipped it"
    assert "shard 'f1.jsonl' was being written by another run" in b.log and outcome in b.log, b.log[-3000:]
    assert extracted_count(a) == 2 and extracted_count(b) == (2 if force else 1)
    rewritten = project.meta_stamp("f1.jsonl") != written_by_a
    assert rewritten is force
    for shard in FILES[:3]:
        project.assert_part_whole(shard)


@pytest.mark.slow
def test_sigkill_of_one_of_two_runs_costs_only_its_own_unfinished_shards(tmp_path):
    """A (f0..f2) and B (f3..f5) write at once; the test holds each run's last shard, so both are
    mid-run; A is SIGKILLed (its whole process group), frozen first while it writes f1 when it is
    caught there (or else after f1, waiting for f2). B then finishes; its parts and the published
    pair are whole; the next run (a CLI run of extracted/k) rewrites exactly A's unfinished shards
    and publishes a serial run's bytes."""
    project = Project(tmp_path)
    with ExitStack() as held:
        shard_lock_held_by_test(project, "f2.jsonl", held)
        held.enter_context(shard_lock(project.lock_file("f5.jsonl"), KEY, "f5.jsonl"))
        a, b = project.run("f0.jsonl", "f2.jsonl"), project.run("f3.jsonl", "f5.jsonl")
        f1_lock = project.lock_file("f1.jsonl")
        wait_for(lambda: holds(a, f1_lock) or "another run is writing shard 'f2.jsonl'" in a.log,
                 "A to write f1 or to wait for f2", [a])
        a.signal(signal.SIGSTOP)
        killed_holding_f1 = holds(a, f1_lock)
        wait_for(lambda: "another run is writing shard 'f5.jsonl'" in b.log, "B to reach f5", [b])
        a.kill()
    f1_part = project.store.part_paths("f1.jsonl")
    print("A was killed", "holding f1's lock" if killed_holding_f1 else "after f1",
          "with a .partial part" if f1_part.text.with_name(f1_part.text.name + PARTIAL).exists() else "")
    assert b.wait() == 0, b.log[-4000:]
    for shard in FILES[3:]:
        project.assert_part_whole(shard)
    project.assert_old_pair_published()
    current = {s.key for s in plan_shards(project) if project.store.part_is_current(s)}
    unfinished = set(FILES) - current
    assert "f2.jsonl" in unfinished and unfinished <= {"f1.jsonl", "f2.jsonl"}, unfinished
    if not killed_holding_f1:
        assert "f1.jsonl" not in unfinished  # its meta is committed before its lock is let go
    before = {s: project.meta_stamp(s) for s in FILES}
    nxt = project.run()
    assert nxt.wait() == 0, nxt.log[-4000:]
    rewritten = {s for s in FILES if project.meta_stamp(s) != before[s]}
    assert rewritten == unfinished, (rewritten, unfinished)
    assert project.spec.text_path.read_bytes() == project.new_text
    for shard in FILES:
        project.assert_part_whole(shard)
    assert_no_leftovers(project.spec)
