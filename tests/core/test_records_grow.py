"""PartMeta and Manifest grow safely (json_record): a field added with a default is one line, and
files written before it still read; docs/architecture.md lists their fields as they are."""

import re
from dataclasses import dataclass, fields

import orjson
import pytest

from slm4ie_assets.store.length_stats import NO_LENGTHS
from slm4ie_assets.store.manifest import Manifest
from slm4ie_assets.store.part_meta import PartMeta
from slm4ie_assets.utils.json_record import record_from_json
from support.paths import REPO

META = PartMeta(format=1, shard="a.txt", files=("a.txt",), fingerprint="3:1", recipe="r", docs=2, annotated_docs=1,
                tokens=5, sentences=1, text_bytes=10, input_bytes=12, has_annotations=True, drops={"empty_text": 1},
                warnings=("w",), repairs={}, seconds=0.5, lengths=NO_LENGTHS)
MANIFEST = Manifest(format=1, dataset="k", recipe="r", shards=(("a.txt", "3:1"),), files=1, docs=2, annotated_docs=1,
                    tokens=5, sentences=1, text_bytes=10, sidecar_bytes=7, has_sidecar=True, sidecar_lines=2,
                    drops={}, discovery_warnings=(), repairs={}, duplicate_uids=0, duplicate_examples=(),
                    published_at="2026-12-04T00:00:00Z", lengths=NO_LENGTHS)


@pytest.mark.parametrize("record", [META, MANIFEST], ids=["PartMeta", "Manifest"])
def test_a_record_reads_back_equal(record):
    assert type(record).from_json(record.to_json()) == record


@pytest.mark.parametrize("record", [META, MANIFEST], ids=["PartMeta", "Manifest"])
def test_a_file_written_before_lengths_existed_reads_with_none(record):
    old = orjson.loads(record.to_json())
    del old["lengths"]
    assert type(record).from_json(orjson.dumps(old)).lengths is None


@pytest.mark.parametrize("record", [META, MANIFEST], ids=["PartMeta", "Manifest"])
def test_a_file_missing_a_field_without_default_or_not_an_object_is_unreadable(record):
    old = orjson.loads(record.to_json())
    del old["docs"]
    with pytest.raises(KeyError):
        type(record).from_json(orjson.dumps(old))
    with pytest.raises(TypeError):
        type(record).from_json(b"[1, 2]")


def test_a_field_added_with_a_default_leaves_older_files_readable():
    @dataclass(frozen=True)
    class Grown:
        docs: int
        seconds: float
        retries: int = 0  # the one line a new field costs

    assert record_from_json(Grown, {"docs": 3, "seconds": 0.1}, {}) == Grown(3, 0.1, 0)
    assert record_from_json(Grown, {"docs": 3, "seconds": 0.1, "retries": 2, "unknown": 1}, {}) == Grown(3, 0.1, 2)


@pytest.mark.parametrize("cls", [PartMeta, Manifest], ids=["PartMeta", "Manifest"])
def test_docs_architecture_lists_the_fields_in_order(cls):
    text = (REPO / "docs" / "architecture.md").read_text()
    match = re.search(rf"^- {cls.__name__} \((\d+) fields[^)]*\): (.*?)(?=^- |\Z)", text, re.M | re.S)
    assert match, f"docs/architecture.md has no '- {cls.__name__} (N fields): ...' line"
    # the field names are the backticked words outside parentheses (those explain a field), up to
    # the sentence's end
    listed, depth = [], 0
    for piece in re.split(r"([()])", match.group(2)):
        if piece in "()" and piece:
            depth += 1 if piece == "(" else -1
        elif depth == 0:
            listed += re.findall(r"`([a-z_]+)`", piece.split(". ")[0])
            if ". " in piece:
                break
    names = [f.name for f in fields(cls)]
    assert listed == names and int(match.group(1)) == len(names), (listed, names)
