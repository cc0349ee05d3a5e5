"""Crash safety at every file-system mutation (docs/guarantees.md 1; D17, docs/architecture.md "Parts and
publish"): SIGKILL at EVERY file-system mutation of a run (each rename, link, unlink, mkdir, open for
writing, fsync ...): the run executes in a child forked from a clean fork server, with the `os`
functions wrapped so that call number k kills the process before it happens. Timing luck cannot
miss a window, however short (the rename of `current` is one call).

After every kill: the published pair is the complete previous one or the complete new one, the
manifest agrees with the files on disk, and the next run publishes the new version and leaves no
`.partial`, no uncommitted part, no unpublished version and no temporary file in raw/.
"""

import json
import multiprocessing
import random
import shutil
import signal
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import ShardBatch, extract_dataset, extract_shard_batch, plan_dataset
from support import kill_points
from support.crash import (
    DATASETS,
    TwoVersionProject,
    assert_consistent,
    assert_no_leftovers,
    jsonl_corpus,
    seed_for,
    snapshot,
)
from support.files import write_config


def _child(config: str, keys: list, kill_at: int, counter) -> None:
    """Run the plain pipeline; the `kill_at`-th file-system mutation SIGKILLs the process first
    (-1: never, only count them into `counter`)."""
    points = kill_points.arm(kill_at)
    from slm4ie_assets.catalog import load_catalog as load
    from slm4ie_assets.pipeline import extract_dataset as run

    cat = load(config)
    for key in keys:
        run(cat.dataset(key), cat, workers=1)
    counter.value = points.count


def _fork_context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["slm4ie_assets.pipeline", "slm4ie_assets.archives", "slm4ie_assets.extractors.jsonl",
                                "slm4ie_assets.extractors.text", "slm4ie_assets.extractors.conllu",
                                "slm4ie_assets.extractors.tei.extractor", "numpy", __name__])
    return ctx


def _run_child(ctx, config: Path, keys: list, kill_at: int) -> tuple[int, int]:
    counter = ctx.Value("i", -1)
    proc = ctx.Process(target=_child, args=(str(config), keys, kill_at, counter))
    proc.start()
    proc.join(120)
    assert proc.exitcode is not None, "child hung"
    return proc.exitcode, counter.value


class Frozen:
    """A copy of a project's raw/ and out/ (links, modes and mtimes kept), restored before each kill:
    much faster than re-extracting, and exactly the same starting state every time."""

    def __init__(self, root: Path):
        self.root = root
        self.saved = root.parent / f"{root.name}.frozen"
        shutil.rmtree(self.saved, ignore_errors=True)
        for name in ("raw", "out"):
            shutil.copytree(root / name, self.saved / name, symlinks=True)

    def restore(self) -> None:
        for name in ("raw", "out"):
            shutil.rmtree(self.root / name)
            shutil.copytree(self.saved / name, self.root / name, symlinks=True)


def run_every_mutation_point(tmp_path: Path, key: str, docs: int, stride: int, seed: int, record) -> int:
    """Old published, new raw written; then a kill before mutation k, for every k (stride 1) or a
    seeded sample of them."""
    print(f"\nmutation-point kills: {key} stride={stride} seed={seed}")
    record("seed", seed)
    project = TwoVersionProject(tmp_path / "p", docs, {key: DATASETS[key]})
    spec = project.spec(key)
    ctx = _fork_context()
    project.write("old")
    project.run_plain()
    project.write("new")
    frozen = Frozen(project.root)
    code, total = _run_child(ctx, project.config, [key], -1)
    assert code == 0 and total > 20, (code, total)
    assert snapshot(spec) == project.expected["new"][key]
    offset = random.Random(seed).randrange(stride)
    points = list(range(offset, total, stride))
    hits = {}
    for k in points:
        frozen.restore()
        code, _ = _run_child(ctx, project.config, [key], k)
        note = f"{key}: kill before mutation {k} of {total} (seed={seed})"
        assert code == -signal.SIGKILL, f"{note}: exit code {code}"
        state = assert_consistent(spec, {"old": project.expected["old"][key], "new": project.expected["new"][key]},
                                  note)
        hits[state] = hits.get(state, 0) + 1
        project.run_plain()
        assert snapshot(spec) == project.expected["new"][key], note
        assert_no_leftovers(spec, note)
    print(f"{len(points)} of {total} points; published right after the kill: {hits}")
    if stride == 1:
        assert hits.get("old") and hits.get("new"), hits
    return total


@pytest.mark.slow  # 19-28 s in CI: with the mark, make test starts its file among the long ones (tests/conftest.py)
def test_sigkill_before_sampled_file_system_mutations(tmp_path, record_property):
    """A seeded sample (every 6th) of the mutation points of an old -> new jsonl run: archive
    unpacking, parts with a sidecar, a vanished and a new shard, publish."""
    run_every_mutation_point(tmp_path, "c_jsonl", docs=30, stride=6, seed=seed_for(4711), record=record_property)


@pytest.mark.long
@pytest.mark.parametrize("key", list(DATASETS))
def test_sigkill_before_every_file_system_mutation(tmp_path, key, record_property):
    run_every_mutation_point(tmp_path, key, docs=30, stride=1, seed=0, record=record_property)


def publish_dropping_the_sidecar(tmp_path: Path, stride: int, seed: int) -> None:
    """D17 at every point of a publish: the new version has no annotations, so the swap must also
    retire the old sidecar; no kill may show the new text beside the old sidecar (or the reverse)."""
    root = tmp_path / "p"
    raw = root / "raw" / "k"
    with_ann = jsonl_corpus("old", "f0", 20)
    without = b"".join(json.dumps({"doc_id": f"x{i}", "text": f"brez {i}"}).encode() + b"\n" for i in range(20))
    root.mkdir(parents=True)
    cfg = write_config(root, {"k": {"extractor": "jsonl", "domain": "test"}})
    cat = load_catalog(cfg)
    spec = cat.dataset("k")

    def publish(data: bytes):
        raw.mkdir(parents=True, exist_ok=True)
        (raw / "a.jsonl").write_bytes(data)
        extract_dataset(spec, cat, workers=1)
        return snapshot(spec)

    expected_without = publish(without)
    expected_with = publish(with_ann)
    assert expected_with[1] is not None and expected_without[1] is None
    (raw / "a.jsonl").write_bytes(without)  # the new version's parts, as a shards/<key> run leaves them
    extract_shard_batch(ShardBatch(spec, plan_dataset(spec).stale))
    frozen = Frozen(root)
    ctx = _fork_context()
    code, total = _run_child(ctx, cfg, ["k"], -1)  # only the publish is left to do
    assert code == 0 and total >= 10, total
    offset = random.Random(seed).randrange(stride)
    print(f"\n{total} mutation points in the publish, stride {stride}, seed {seed}")
    for k in range(offset, total, stride):
        frozen.restore()
        code, _ = _run_child(ctx, cfg, ["k"], k)
        assert code == -signal.SIGKILL
        assert_consistent(spec, {"with": expected_with, "without": expected_without}, f"kill before mutation {k}")
        extract_dataset(spec, cat, workers=1)
        assert snapshot(spec) == expected_without
        assert not spec.sidecar_path.exists() and not spec.sidecar_path.is_symlink(), f"kill {k}: stale sidecar link"
        assert_no_leftovers(spec, f"kill {k}")


def test_sigkill_in_a_publish_that_drops_the_sidecar(tmp_path):
    publish_dropping_the_sidecar(tmp_path, stride=2, seed=seed_for(99))


@pytest.mark.long
def test_sigkill_at_every_point_of_a_publish_that_drops_the_sidecar(tmp_path):
    publish_dropping_the_sidecar(tmp_path, stride=1, seed=0)
