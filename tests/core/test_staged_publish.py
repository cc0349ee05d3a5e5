"""The version staged while parts are extracted (assembly.VersionStager, issue 14 item 4): the same
bytes as a publish that concatenates everything at once, whatever happens to the parts or the
staging folder between staging and the publish (docs/guarantees.md 1; D17)."""

import json
import os

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset, plan_dataset
from slm4ie_assets.store.assembly import VersionStager
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.publish import current_metas, publish
from support.files import write_config, write_files

ANN = {"paragraphs": [{"sentences": [{"tokens": [{"form": "a"}, {"form": "b", "space_after": False}]}]}]}


def _dataset(tmp_path, annotated_from: int = 2, split_bytes: int = 0):
    """Six jsonl files; files from `annotated_from` on carry annotations (stubs before them)."""
    files = {}
    for i in range(6):
        recs = [{"doc_id": f"d{i}.{j}", "text": f"besedilo {i} {j} " * (j + 1), **(ANN if i >= annotated_from else {})}
                for j in range(40)]
        files[f"f{i}.jsonl"] = "".join(json.dumps(r) + "\n" for r in recs)
    write_files(tmp_path / "raw" / "k", files)
    cfg = write_config(tmp_path, {"k": {"extractor": "jsonl", "domain": "web", "split_bytes": split_bytes}})
    cat = load_catalog(cfg)
    return cat, cat.dataset("k")


def _published(spec) -> tuple[bytes, bytes | None]:
    side = spec.sidecar_path.read_bytes() if spec.sidecar_path.exists() else None
    return spec.text_path.read_bytes(), side


def _reference(cat, spec) -> tuple[bytes, bytes | None]:
    """A publish without a stager (everything concatenated at once)."""
    extract_dataset(spec, cat, force=True, workers=1)
    plan = plan_dataset(spec)
    publish(spec, plan.shards, DatasetStore(spec))
    return _published(spec)


def _stage(spec, upto: int | None = None) -> tuple[VersionStager, list]:
    plan = plan_dataset(spec)
    store = DatasetStore(spec)
    stager = VersionStager(store, plan.shards, spec.text_path.name, spec.sidecar_path.name)
    metas = current_metas(spec, plan.shards, store)
    for i, meta in enumerate(metas[:upto]):
        stager.committed(i, meta)
    return stager, plan.shards


def test_pipeline_runs_with_staging_publish_the_bytes_of_a_plain_publish(tmp_path):
    for annotated_from in (0, 3, 6):
        cat, spec = _dataset(tmp_path / str(annotated_from), annotated_from)
        expected = _reference(cat, spec)
        for workers in (1, 2):
            extract_dataset(spec, cat, force=True, workers=workers)
            assert _published(spec) == expected, (annotated_from, workers)
            assert not any(DatasetStore(spec).staging.iterdir())


def test_split_ranges_are_staged_part_by_part_with_one_sidecar_member(tmp_path):
    cat, spec = _dataset(tmp_path, 1, split_bytes=700)
    expected = _reference(cat, spec)
    assert len(plan_dataset(spec).shards) > 12
    for workers in (1, 2):
        extract_dataset(spec, cat, force=True, workers=workers)
        assert _published(spec) == expected


def test_a_part_replaced_after_staging_is_staged_again_at_publish(tmp_path):
    cat, spec = _dataset(tmp_path)
    expected = _reference(cat, spec)
    stager, shards = _stage(spec)
    stager._stop()  # everything staged
    store = DatasetStore(spec)
    for i in (1, 4):  # another run rewrote these parts: same bytes, new files (a part is never written in place)
        paths = store.part_paths(shards[i].key)
        for path in (paths.text, paths.annotations):
            if path.exists():
                copy = path.with_name(path.name + ".copy")
                copy.write_bytes(path.read_bytes())
                os.replace(copy, path)
    assert stager._kept(current_metas(spec, shards, store)) == 1
    publish(spec, shards, store, stager=stager)
    assert _published(spec) == expected


def test_a_staging_folder_removed_by_another_runs_clean_up_makes_the_publish_start_over(tmp_path):
    cat, spec = _dataset(tmp_path)
    expected = _reference(cat, spec)
    stager, shards = _stage(spec, upto=3)
    store = DatasetStore(spec)
    stager._stop()
    assert store.cleanup() >= 1 and not stager.folder.exists()
    publish(spec, shards, store, stager=stager)
    assert _published(spec) == expected
    assert [v.name for v in store.versions.iterdir()] == [os.readlink(store.current).split("/")[-1]]


def test_a_partly_staged_version_is_completed_and_a_dropped_one_leaves_nothing(tmp_path):
    cat, spec = _dataset(tmp_path)
    expected = _reference(cat, spec)
    stager, shards = _stage(spec, upto=2)
    publish(spec, shards, DatasetStore(spec), stager=stager)
    assert _published(spec) == expected
    stager, _ = _stage(spec, upto=4)
    stager.discard()
    assert not stager.folder.exists()
    leftover, _ = _stage(spec, upto=1)  # as a kill leaves it: D17, the next clean-up removes it
    leftover._stop()
    DatasetStore(spec).cleanup()
    assert not leftover.folder.exists()


def test_a_split_files_member_is_fed_range_by_range_and_completed_or_cut_back_at_publish(tmp_path):
    """A split file's one sidecar member is built as its ranges are committed, apart from the other
    files' (store/member_builds.py): a publish that finds it fed in part, at every point, completes
    it; a range replaced after it was fed makes it fed again. The same bytes always."""
    cat, spec = _dataset(tmp_path, 1, split_bytes=700)
    expected = _reference(cat, spec)
    shards = plan_dataset(spec).shards
    store = DatasetStore(spec)
    assert len(shards) > 12 and expected[1] is not None
    for upto in range(len(shards) + 1):
        stager, _ = _stage(spec, upto)
        publish(spec, shards, store, stager=stager)
        assert _published(spec) == expected, upto
    middle = [i for i, s in enumerate(shards) if s.files[0].range is not None and 0 < s.files[0].range.index
              and not s.files[0].range.is_last]
    stager, _ = _stage(spec)
    stager._stop()
    paths = store.part_paths(shards[middle[len(middle) // 2]].key)
    for path in (paths.text, paths.annotations):
        copy = path.with_name(path.name + ".copy")
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)
    assert stager._kept(current_metas(spec, shards, store)) == middle[len(middle) // 2]
    publish(spec, shards, store, stager=stager)
    assert _published(spec) == expected
    # the same inside a member still open: ranges up to `m` fed, range `m` replaced
    m = next(i for i in middle if shards[i].files[0].rel != "f0.jsonl")  # f0 has no annotations
    stager, _ = _stage(spec, upto=m + 1)
    stager._stop()
    build = next(b for b in stager._members.builds.values() if m in b.unit)  # its member, built apart
    build.feed_ready(store, shards, stager._metas)  # what its task had not fed yet when the stager stopped
    assert build.next == m + 1 and not build.done
    paths = store.part_paths(shards[m].key)
    for path in (paths.text, paths.annotations):
        copy = path.with_name(path.name + ".copy")
        copy.write_bytes(path.read_bytes())
        os.replace(copy, path)
    publish(spec, shards, store, stager=stager)
    assert _published(spec) == expected


def test_a_version_without_annotations_builds_no_split_file_member(tmp_path):
    """store/member_builds.py: no part with annotations, no sidecar, so no member of stub lines is
    built for a split file (a text corpus's ranges would be read back and compressed for nothing)."""
    cat, spec = _dataset(tmp_path, 6, split_bytes=700)  # no file has annotations
    extract_dataset(spec, cat, force=True, workers=1)
    stager, shards = _stage(spec)
    stager._stop()
    assert any(s.files[0].range is not None for s in shards)
    assert not list(stager.folder.glob("member-*"))
    version = stager.finish(current_metas(spec, shards, DatasetStore(spec)))
    assert version is not None and not (version / spec.sidecar_path.name).exists()
