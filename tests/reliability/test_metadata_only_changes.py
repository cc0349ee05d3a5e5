"""No false alarms from metadata (issue 34, case 6).

Before: a `touch`, a `chmod` or a hard link made to a raw file while a run read it failed the run
with InputChanged, although the bytes were the same (ctime moves on each). Now, when a whole file's
stamp changed but its size did not, the part is extracted once more and compared (issue 41: no
digest read before every part any more): the same output commits the part; other bytes still fail
the run. Real files, the
real part writer and pipeline; each change is a real file-system call made while the part is being
written (from the part writer's progress hook, which runs during and after each file's read)."""

import json
import os
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.extractors.registry import make_extractor
from slm4ie_assets.parts.writer import write_part_counted
from slm4ie_assets.pipeline import extract_and_publish, plan_dataset
from slm4ie_assets.planning.input_stamps import InputChanged
from slm4ie_assets.store.dataset_store import DatasetStore
from support.files import read_jsonl, write_config, write_files

DOCS = 2500  # over the part writer's 1,000 documents between progress calls: one call mid-read


def jsonl(tag: str, docs: int = DOCS) -> str:
    return "".join(json.dumps({"id": f"{tag}{i:05d}", "text": f"{tag} dokument {i:05d}"}) + "\n" for i in range(docs))


def touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 7_000_000_000))  # a new mtime (and ctime)


def chmod(path: Path) -> None:
    os.chmod(path, 0o600)


def hard_link(path: Path) -> None:
    os.link(path, path.with_name(path.name + ".backup"))  # a name the extractor does not read


def rewrite_same_size(path: Path) -> None:
    st = path.stat()
    data = path.read_bytes()
    with open(path, "r+b") as fh:  # in place, same size, mtime put back: only ctime and the bytes tell
        fh.write(data.replace(b"A dokument", b"Z dokument", 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def dataset(tmp_path: Path, **entry):
    write_files(tmp_path / "raw" / "d", {"a.jsonl": jsonl("A"), "b.jsonl": jsonl("B")})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "jsonl", "domain": "t", **entry}}))
    return catalog.dataset("d")


def write_with_change(tmp_path: Path, change, when: str):
    """Write a.jsonl's part while `change` is made to it: mid-read, or after the read and before the
    check. Returns the part's meta."""
    spec = dataset(tmp_path)
    plan = plan_dataset(spec)
    shard = next(s for s in plan.shards if s.files[0].rel == "a.jsonl")
    path = spec.raw_dir / "a.jsonl"
    made: list[int] = []

    def progress(docs: int, text_bytes: int, files_done: int) -> None:
        due = files_done == 1 if when == "after the read" else (0 < docs < DOCS and files_done == 0)
        if due and not made:
            made.append(docs)
            change(path)

    meta, _counts = write_part_counted(spec, make_extractor(spec.extractor, spec.options), shard, DatasetStore(spec),
                                      progress)
    assert made, "the change was made while the part was written"
    return spec, shard, meta


@pytest.mark.parametrize("when", ["mid-read", "after the read"])
@pytest.mark.parametrize("change", [touch, chmod, hard_link])
def test_a_metadata_only_change_while_a_part_is_written_commits_it(tmp_path, change, when):
    spec, shard, meta = write_with_change(tmp_path, change, when)
    assert meta.docs == DOCS
    assert DatasetStore(spec).part_is_current(shard)  # committed, under the fingerprint it was planned with


@pytest.mark.parametrize("when", ["mid-read", "after the read"])
def test_a_same_size_rewrite_in_place_still_fails_naming_the_file(tmp_path, when):
    with pytest.raises(InputChanged, match=r"d/a\.jsonl: the input changed while this run read it"):
        write_with_change(tmp_path, rewrite_same_size, when)


def test_a_run_whose_files_are_touched_chmodded_and_linked_meanwhile_publishes(tmp_path):
    spec = dataset(tmp_path)
    plan = plan_dataset(spec)
    raw = spec.raw_dir
    done: list[str] = []

    def on_part(shard, meta) -> None:  # after a.jsonl's part: b.jsonl changes before it is read
        if not done:
            done.append(shard.key)
            for change in (touch, chmod, hard_link):
                change(raw / "b.jsonl")

    report = extract_and_publish(plan, on_part=on_part)
    assert done and report.manifest is not None and report.manifest.docs == 2 * DOCS
    texts = {r["text"] for r in read_jsonl(tmp_path / "out" / "d.jsonl")}
    assert "A dokument 00000" in texts and "B dokument 02499" in texts


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts the bytes read through /proc/self/io")
def test_a_whole_file_part_reads_its_input_once(tmp_path):
    """Issue 41: the digest taken before every whole file's read was a second read of every byte in
    every run (one worker on 300 MB of text: ~0.1 s); only a file whose stamp moved is read again."""
    spec = dataset(tmp_path)
    shard = next(s for s in plan_dataset(spec).shards if s.files[0].rel == "a.jsonl")
    size = (spec.raw_dir / "a.jsonl").stat().st_size
    extractor = make_extractor(spec.extractor, spec.options)
    extractor.prepare(spec.raw_dir)

    def bytes_read() -> int:
        with open("/proc/self/io") as fh:
            return int(next(line for line in fh if line.startswith("rchar:")).split()[1])

    before = bytes_read()
    meta, _counts = write_part_counted(spec, extractor, shard, DatasetStore(spec))
    read = bytes_read() - before
    assert meta.docs == DOCS and size <= read < 1.5 * size, (read, size)
