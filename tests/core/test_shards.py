"""Shard planning: valid, stable partition keys; file groups above shard_group_threshold chosen by
content-defined chunking; output bytes independent of the grouping (D2, D18, ADDENDUM 3.1)."""

import gzip
import json
import os
import re

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.text import TextExtractor
from slm4ie_assets.pipeline import extract_dataset, plan_dataset
from slm4ie_assets.planning.shards import (
    HEAD_GROUP_KEY,
    MAX_KEY_LEN,
    _path_hash,
    check_shard_key,
    group_size,
    plan_shards,
    shard_key,
)
from support.files import write_config, write_files

NASTY = [
    "a,b.txt", "br[ack]et.txt", "a...b.txt", "....txt", "tab\there.txt", "nl\nhere.txt", "del\x7f.txt",
    "pct%2C.txt", "pct%.txt", "čšž/ßü.txt", "sub/dir/ok-name_1.txt", "x" * 600 + ".txt", "y" * 600 + ".txt",
    "a..b.txt", "a%2E%2E.txt",
]


# ----------------------------------------------------------------------------- keys


@pytest.mark.parametrize("rel", NASTY)
def test_shard_key_is_always_a_valid_partition_key(rel):
    key = shard_key(rel)
    assert check_shard_key(key) == key
    assert len(key) <= MAX_KEY_LEN
    assert "..." not in key and not re.search(r"[,\[\]\x00-\x1f\x7f]", key)


def test_shard_key_is_stable_and_injective_over_nasty_paths():
    keys = [shard_key(r) for r in NASTY]
    assert keys == [shard_key(r) for r in NASTY]  # a pure function of the path
    assert len(set(keys)) == len(NASTY)


def test_safe_paths_keep_their_readable_form():
    for rel in ("a.txt", "sub/dir/x.y.txt", "čšž/ßü.txt", "a..b.txt", ".hidden/.h.txt"):
        assert shard_key(rel) == rel


def test_percent_is_escaped_so_an_escape_sequence_in_a_name_cannot_collide():
    assert shard_key("a,b.txt") == "a%2Cb.txt"
    assert shard_key("a%2Cb.txt") == "a%252Cb.txt"
    assert shard_key("a...b.txt") != shard_key("a..%2Eb.txt")


def test_over_long_paths_are_truncated_with_a_digest_that_tells_them_apart():
    a, b = shard_key("d/" + "x" * 700 + "a.txt"), shard_key("d/" + "x" * 700 + "b.txt")
    assert len(a) == len(b) == MAX_KEY_LEN and a != b


@pytest.mark.parametrize("bad", ["a,b", "a[b", "a]b", "a...b", "a\nb", "a\tb", "a\x00b", "a\x7fb", "",
                                 "x" * (MAX_KEY_LEN + 1)])
def test_check_shard_key_refuses_what_breaks_dagster_partition_syntax(bad):
    with pytest.raises(ValueError, match="invalid shard key"):
        check_shard_key(bad)


def test_check_shard_key_accepts_slashes_unicode_and_the_head_group_key():
    for key in ("sub/a.txt", "čšž/ßü.txt", HEAD_GROUP_KEY, "x" * MAX_KEY_LEN):
        assert check_shard_key(key) == key


# ----------------------------------------------------------------------------- grouping


def _tree(root, names):
    for i, rel in enumerate(names):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"doc {i}\n")
    return [InputFile(root / rel, rel) for rel in names]


def _plan(root, threshold):
    from slm4ie_assets.extractors.discovery import discover

    return plan_shards(TextExtractor(), discover(root, (".txt",)), threshold)


def test_group_size_is_a_power_of_two_that_changes_only_when_the_count_doubles():
    assert [group_size(n, 1000) for n in (1, 1000, 1001, 2000, 2001, 4000, 4001)] == [1, 1, 2, 2, 4, 4, 8]
    assert group_size(10, 1) == 16


def test_one_file_per_shard_up_to_the_threshold(tmp_path):
    _tree(tmp_path, [f"d{i:03d}.txt" for i in range(50)] + ["sub/a.txt"])
    shards = _plan(tmp_path, 51)
    assert [s.key for s in shards] == [f"d{i:03d}.txt" for i in range(50)] + ["sub/a.txt"]
    assert all(len(s.files) == 1 for s in shards)


def test_above_the_threshold_groups_are_contiguous_cover_every_file_in_order_and_start_at_boundaries(tmp_path):
    names = [f"s{i % 7}/doc{i:05d}.txt" for i in range(3000)]
    _tree(tmp_path, names)
    shards = _plan(tmp_path, 1000)  # 3000 files -> average group of 4
    files = [f.rel for s in shards for f in s.files]
    assert files == sorted(names, key=lambda r: tuple(r.split("/")))  # ADDENDUM 3.1 order, nothing lost
    assert 500 < len(shards) < 1000
    for i, s in enumerate(shards):
        first = s.files[0].rel
        boundary = _path_hash(first) % 4 == 0
        if i == 0 and not boundary:
            assert s.key == HEAD_GROUP_KEY
        else:
            assert boundary and s.key == shard_key(first)
        assert all(_path_hash(f.rel) % 4 for f in s.files[1:])  # no boundary inside a group
        assert s.size == sum(f.path.stat().st_size for f in s.files)


def test_adding_or_removing_one_file_changes_only_its_own_group(tmp_path):
    names = [f"doc{i:05d}.txt" for i in range(0, 6000, 2)]  # 3000 files, room to insert between them
    _tree(tmp_path, names)
    before = {s.key: s.fingerprint for s in _plan(tmp_path, 1000)}
    plain = next(f"doc{i:05d}.txt" for i in range(1001, 6000, 2) if _path_hash(f"doc{i:05d}.txt") % 4)
    _tree(tmp_path, [plain])
    after = {s.key: s.fingerprint for s in _plan(tmp_path, 1000)}
    assert after.keys() == before.keys()
    assert [k for k in after if after[k] != before[k]] == [max(k for k in after if k <= plain)]
    (tmp_path / plain).unlink()
    assert {s.key: s.fingerprint for s in _plan(tmp_path, 1000)} == before

    boundary = next(f"doc{i:05d}.txt" for i in range(1001, 6000, 2) if _path_hash(f"doc{i:05d}.txt") % 4 == 0)
    _tree(tmp_path, [boundary])
    split = {s.key: s.fingerprint for s in _plan(tmp_path, 1000)}
    assert set(split) - set(before) == {boundary}  # the new boundary starts its own group ...
    assert len([k for k in before if split[k] != before[k]]) == 1  # ... which it split off one other


def test_touching_a_file_changes_only_its_group_fingerprint(tmp_path):
    files = _tree(tmp_path, [f"doc{i:05d}.txt" for i in range(2500)])
    before = {s.key: s.fingerprint for s in _plan(tmp_path, 1000)}
    st = files[1234].path.stat()
    os.utime(files[1234].path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    after = {s.key: s.fingerprint for s in _plan(tmp_path, 1000)}
    assert after.keys() == before.keys()
    assert len([k for k in after if after[k] != before[k]]) == 1


def test_persisted_fingerprints_keep_their_string_form_so_existing_parts_stay_current(tmp_path):
    """Part metas and manifests hold `Shard.fingerprint` as text: `<size>:<mtime_ns>` for one file,
    `g<n>:` + sha1 over `rel NUL fingerprint LF` for a group. A typed Fingerprint must not change it."""
    import hashlib

    files = _tree(tmp_path, [f"doc{i:05d}.txt" for i in range(2500)])
    fp = TextExtractor().fingerprint_of(files[0])
    st = files[0].path.stat()
    assert (fp.size, str(fp)) == (st.st_size, f"{st.st_size}:{st.st_mtime_ns}")
    [single] = plan_shards(TextExtractor(), files[:1])
    assert (single.fingerprint, single.size) == (f"{st.st_size}:{st.st_mtime_ns}", st.st_size)
    for shard in _plan(tmp_path, 1000):
        h = hashlib.sha1()
        for f in shard.files:
            fst = f.path.stat()
            h.update(f"{f.rel}\0{fst.st_size}:{fst.st_mtime_ns}\n".encode())
        assert shard.fingerprint == f"g{len(shard.files)}:{h.hexdigest()[:20]}"
        assert shard.size == sum(f.path.stat().st_size for f in shard.files)


# ----------------------------------------------------------------------------- output independence


def _annotated_tree(raw):
    tok = {"paragraphs": [{"sentences": [{"tokens": [{"form": "Dober", "lemma": "dober"}, {"form": "dan"}]}]}]}
    files = {}
    for i in range(40):
        recs = [{"doc_id": f"r{i}-{j}", "text": f"besedilo {i} {j}", **(tok if (i * 3 + j) % 5 == 0 else {})}
                for j in range(3)]
        if i % 7 == 0:
            recs.append({"text": f"brez id {i}"})  # fallback ids (D3) must not depend on grouping
        files[f"{'ab'[i % 2]}/f{i:02d}.jsonl"] = "".join(json.dumps(r) + "\n" for r in recs)
    files["a.jsonl"] = json.dumps({"doc_id": "top", "text": "vrh"}) + "\n"
    write_files(raw, files)


def test_d2_output_bytes_do_not_depend_on_the_grouping(tmp_path):
    """Same raw tree with shard_group_threshold 1 (groups) and 1000 (one file per shard)."""
    outs = {}
    for threshold in (1, 1000):
        root = tmp_path / f"t{threshold}"
        _annotated_tree(root / "raw" / "web")
        cat = load_catalog(write_config(root, {"web": {"extractor": "jsonl", "domain": "web"}},
                                        shard_group_threshold=threshold))
        report = extract_dataset(cat.dataset("web"), cat, force=True, workers=2)
        outs[threshold] = ((root / "out" / "web.jsonl").read_bytes(),
                           gzip.decompress((root / "out" / "web.annotations.jsonl.gz").read_bytes()), report)
    grouped, single = outs[1], outs[1000]
    assert len(grouped[2].manifest.shards) < 41 == len(single[2].manifest.shards)
    assert grouped[0] == single[0] and grouped[0].count(b"\n") == 40 * 3 + 6 + 1
    assert grouped[1] == single[1]


def test_plan_dataset_uses_the_catalog_threshold(tmp_path):
    write_files(tmp_path / "raw" / "t", {f"f{i}.txt": f"x{i}\n" for i in range(30)})
    cat = load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "d"}}, shard_group_threshold=4))
    spec = cat.dataset("t")
    assert len(plan_dataset(spec).shards) == 30  # the default threshold (1000)
    grouped = plan_dataset(spec, group_threshold=cat.shard_group_threshold).shards
    assert len(grouped) < 30 and sum(len(s.files) for s in grouped) == 30
    extract_dataset(spec, cat, force=True, workers=1)
    assert json.loads((tmp_path / "out" / ".slm4ie" / "t" / "current" / "manifest.json").read_text())["shards"] == \
        [[s.key, s.fingerprint] for s in grouped]
