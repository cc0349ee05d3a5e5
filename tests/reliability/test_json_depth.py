"""One nesting limit for every JSON route (issue 39, point 2; D25).

Before, a record nested a few hundred levels deep that also held a NaN, a run of 19 or more digits
or a lone surrogate went to the stdlib's decoder, whose limit is the recursion limit less the frames
already on the stack; orjson read up to 1,024 levels and the `.json` stream any depth. So the call
stack decided what a record became: `dagster asset materialize` published fewer documents than
`slm4ie extract` from the same file, a split file's fallback ids shifted against the unsplit run's
(its count pass ran on another stack), and the stream kept a record the whole-file reading dropped.
Now a record deeper than MAX_JSON_DEPTH is `malformed_json` on every route, checked on the bytes
before any decoder runs, and what is within it decodes, gets its id and encodes alike on any stack.

The CLI against Dagster, and generated records split and unsplit, are the differential fuzz in
test_fuzz_extractors.py (`test_deep_json_*`).
"""

import json
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.extractors.records import MAX_JSON_DEPTH, loads, nests_deeper
from slm4ie_assets.pipeline import extract_dataset
from support.files import read_jsonl, write_config, write_files
from support.split_outputs import assert_same, extract

# what sent a record to the stdlib's decoder (or, in metadata, to the encoder's repair path)
HAZARDS = ("1", "NaN", "12345678901234567890123", '"a\\ud800b"', "-Infinity")
DEPTHS = (100, 250, 260, 400, 480, 500, 511, 512, 513, 600, 900, 990, 1000, 1030)
WHITELIST = "    metadata: {metadata_fields: [doc_id, m]}\n"  # `x` is read, never written


def nested(depth: int, leaf: str) -> str:
    """A JSON value `depth` arrays deep around `leaf`."""
    return "[" * depth + leaf + "]" * depth


def deep_lines() -> list[str]:
    """Records whose value under `x` (decoded only), `m` (decoded and written), `doc_id` (the id
    probe) or `text` nests deep enough to make the record DEPTHS[i] levels deep, each hazard; the
    deepest first, so the file's first 100 drops (those with warnings) are theirs."""
    lines = []
    for depth in sorted(DEPTHS, reverse=True):
        for h, leaf in enumerate(HAZARDS):
            inner = nested(depth - 1, leaf)  # the record's own object is one level
            lines.append(f'{{"doc_id": "x{depth}.{h}", "text": "t", "x": {inner}}}')
            lines.append(f'{{"doc_id": "m{depth}.{h}", "text": "t", "m": {inner}}}')
            lines.append(f'{{"text": "id {depth}.{h}", "doc_id": {inner}}}')
            lines.append(f'{{"text": {inner}}}')
            lines.append(f'{{"text": "fallback {depth}.{h}", "x": {inner}}}')  # a fallback id after it
    return lines


def at_stack_depth(frames: int, call):
    """`call()` with `frames` more Python frames on the stack."""
    return call() if frames <= 0 else at_stack_depth(frames - 1, call)


def _run(root: Path, files: dict, extractor: str = "jsonl", metadata: str = WHITELIST, frames: int = 0):
    write_files(root / "raw" / "d", files)
    config = write_config(root, {"d": {"extractor": extractor, "domain": "t"}})
    if metadata:
        text = config.read_text()
        config.write_text(text.rstrip("\n") + "\n" + metadata)
    catalog = load_catalog(config)
    report = at_stack_depth(frames, lambda: extract_dataset(catalog.dataset("d"), catalog, force=True, workers=1))
    return (root / "out" / "d.jsonl").read_bytes(), report.manifest.drops, report.warnings


def test_the_call_stack_decides_nothing(tmp_path):
    """The same file, extracted at the test's stack and with 600 more frames: the same bytes, drops
    and warnings (before: with 600 more frames the stdlib decoded ~400 levels, not ~990, and a deep
    list as an id crashed `str()`)."""
    files = {"a.jsonl": "\n".join(deep_lines()) + "\n"}
    shallow = _run(tmp_path / "shallow", files)
    deep = _run(tmp_path / "deep", files, frames=600)
    assert deep == shallow
    text, drops, warnings = shallow
    ids = [r["doc_id"] for r in map(json.loads, text.splitlines())]
    over = sum(d > MAX_JSON_DEPTH for d in DEPTHS) * len(HAZARDS) * 5
    assert drops["malformed_json"] == over, drops  # every record past the limit, none within it
    assert all(f"x{d}.{h}" in ids for d in DEPTHS if d <= MAX_JSON_DEPTH for h in range(len(HAZARDS)))
    assert not any(i.startswith(("x", "m")) and int(i[1:].split(".")[0]) > MAX_JSON_DEPTH for i in ids)
    malformed = [w for w in warnings if w.endswith("[malformed_json]")]
    assert malformed and all(f"nested deeper than {MAX_JSON_DEPTH} levels" in w for w in malformed)
    assert all(w.startswith("d/a.jsonl:") for w in malformed)  # the file and line, as every drop


def test_a_split_file_has_the_unsplit_runs_ids_whatever_its_count_pass_runs_on(tmp_path):
    """2 workers and small ranges, against one worker unsplit: the count pass of a range gives the
    fallback ids after it, so it must read every deep record as the extraction does (before: the ids
    after the first deep record shifted, while the documents and drops were equal)."""
    lines = []
    for depth in range(MAX_JSON_DEPTH - 40, 1040, 8):  # where the stacks of a worker and of this process part
        lines.append(f'{{"text": "t{depth}", "x": {nested(depth - 1, HAZARDS[depth % len(HAZARDS)])}}}')
        lines.append(f'{{"text": "after {depth}"}}')
    files = {"a.jsonl": ("\n".join(lines) + "\n").encode()}
    whole = extract(tmp_path / "whole", "jsonl", files, 0, 1, WHITELIST)
    for split in (4_000, 30_000):
        got = extract(tmp_path / "split", "jsonl", files, split, 2, WHITELIST)
        assert len(got.shards) > 2, split
        assert_same(got, whole, f"split_bytes={split}")


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_every_route_draws_the_line_at_the_same_depth(tmp_path, depth):
    """A record `depth` levels deep through jsonl, coleslaw, the `.json` stream and the `.json`
    whole-file reading (a NaN keeps the file from the stream): within the limit it is a document
    everywhere, one level more it is `malformed_json` everywhere, naming the file (and line)."""
    inner = nested(depth - 1, "1")
    record = f'{{"doc_id": "r", "text": "t", "x": {inner}}}'
    with_nan = f'{{"doc_id": "r", "text": "t", "x": {nested(depth - 1, "NaN")}}}'
    cases = {"jsonl": {"a.jsonl": record + "\n"}, "coleslaw": {"S/a.jsonl": record + "\n"},
             "json": {"a.json": f"[{record}]", "b.json": f"[{with_nan}]", "c.json": record}}
    for extractor, files in cases.items():
        metadata = WHITELIST if extractor != "coleslaw" else ""
        root = tmp_path / extractor
        text, drops, warnings = _run(root, files, extractor, metadata)
        docs = read_jsonl(root / "out" / "d.jsonl")
        if extractor == "coleslaw":  # coleslaw keeps `x` in metadata, deeper than orjson writes: read, not written
            assert docs == [] and drops == {"unencodable" if depth <= MAX_JSON_DEPTH else "malformed_json": 1}
        elif depth <= MAX_JSON_DEPTH:
            assert len(docs) == len(files) and not drops, (extractor, drops, warnings)
        else:
            assert docs == [] and drops == {"malformed_json": len(files)}, (extractor, drops)
            named = sorted(w.split(": ")[0] for w in warnings)
            expected = ["d/a.jsonl:1"] if extractor == "jsonl" else ["d/a.json", "d/b.json", "d/c.json"]
            assert named == expected, warnings


def test_the_check_reads_only_brackets_outside_strings_and_never_recurses():
    """`nests_deeper` on the bytes: brackets inside strings, escaped quotes and backslashes do not
    count; a record far deeper than any stack (200,000 levels) and one wide and deep at once are
    answered without a RecursionError."""
    limit = MAX_JSON_DEPTH
    assert not nests_deeper(('{"t": "' + "[{" * 5000 + '\\\\", "u": "\\"]]]"}').encode(), limit)
    assert nests_deeper(nested(limit + 1, "1").encode(), limit)
    assert not nests_deeper(nested(limit, '"]]]"').encode(), limit)
    assert nests_deeper(nested(200_000, "").encode(), limit)
    wide = "[" + ",".join([nested(limit - 10, "0")] * 50 + [nested(limit, "0")]) + "]"
    assert nests_deeper(wide.encode(), limit) and not nests_deeper(wide.encode(), limit + 1)
    with pytest.raises(ValueError, match="nested deeper"):
        loads(nested(200_000, "NaN"))
