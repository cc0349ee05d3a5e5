"""An archive chain deeper than the nesting limit has the same outcome on every run (issue 39,
case 6; D16, S14).

Before (55def41): a 40-deep `.gz` chain failed the whole dataset ("archives still produce new
archives after 32 rounds"), left 32 intermediate archives in raw/, and the second run unpacked the
rest and published: one raw tree, two outcomes. Now the root of a chain deeper than the limit is a
counted `bad_archive` skip, its tree rolled back, on the first run and on every later one (its
failure remembered, or, with the state lost, found again); the dataset publishes its other files."""

import gzip
from pathlib import Path

from slm4ie_assets.archives.names import TEMP_MARK
from slm4ie_assets.archives.run import MAX_ROUNDS
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from support.archive_files import files_under
from support.files import read_jsonl, write_config, write_files

DEPTH = 40


def chain(depth: int, text: bytes) -> bytes:
    """`depth` gzip layers around `text`: deep.txt.gz...gz holds deep.txt.gz...gz, ..., deep.txt."""
    data = text
    for _ in range(depth):
        data = gzip.compress(data, mtime=0)
    return data


def outcome(tmp_path: Path, catalog) -> tuple:
    lines: list[str] = []
    report = extract_dataset(catalog.dataset("t"), catalog, log=lines.append)
    raw = tmp_path / "raw" / "t"
    published = (tmp_path / "out" / "t.jsonl").read_bytes()
    skips = [line.split(" (unchanged")[0] for line in lines if line.startswith("WARNING t/deep") and "skipped" in line]
    assert report.manifest is not None
    return report.manifest.drops, report.manifest.files, files_under(raw), published, skips


def test_a_chain_deeper_than_the_limit_is_one_counted_skip_on_every_run(tmp_path):
    assert DEPTH > MAX_ROUNDS
    raw = tmp_path / "raw" / "t"
    root = "deep.txt" + ".gz" * DEPTH
    write_files(raw, {root: chain(DEPTH, b"globoko besedilo\n"), "plain.txt": "navadna datoteka\n",
                      "short.txt.gz.gz": chain(2, b"plitvo besedilo\n")})
    catalog = load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}}))

    first = outcome(tmp_path, catalog)
    drops, files, tree, _published, skips = first
    assert drops == {"bad_archive": 1}
    assert files == 2
    assert tree == {root, "plain.txt", "short.txt.gz.gz", "short.txt.gz", "short.txt"}, "no intermediate archive"
    assert not [p for p in raw.rglob("*") if TEMP_MARK in p.name]
    assert len(skips) == 1 and f"t/{root}: skipped" in skips[0] and f"more than {MAX_ROUNDS} deep" in skips[0]
    texts = sorted(r["text"] for r in read_jsonl(tmp_path / "out" / "t.jsonl"))
    assert texts == ["navadna datoteka", "plitvo besedilo"]

    # the same on every later run, and with the archive state lost (the chain is read again)
    assert outcome(tmp_path, catalog) == first
    (tmp_path / "out" / ".slm4ie" / "t" / "archives.json").unlink()
    assert outcome(tmp_path, catalog) == first


def test_a_chain_as_deep_as_the_limit_unpacks_whole(tmp_path):
    raw = tmp_path / "raw" / "t"
    root = "deep.txt" + ".gz" * MAX_ROUNDS
    write_files(raw, {root: chain(MAX_ROUNDS, b"globoko besedilo\n")})
    catalog = load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}}))
    drops, files, tree, _published, skips = outcome(tmp_path, catalog)
    assert drops == {} and files == 1 and not skips
    assert len(tree) == MAX_ROUNDS + 1 and "deep.txt" in tree
