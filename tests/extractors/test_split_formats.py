"""Split files give the bytes of one unsplit pass (docs/splitting.md), through the real pipeline.

Each format gets a file that holds every kind of record boundary (blank-line runs, NBSP-only lines,
invalid UTF-8, a `# newdoc` without id, CRLF, a BOM, a last line without a newline, ...); the file
is extracted unsplit with one worker, then with `split_bytes` at every boundary's offset (so each
boundary is exactly at a range edge once) and at tiny values (so the file splits many times), with
one and with two workers. Published text and sidecar bytes, the manifest (but `published_at` and
the shard list), the drop ledger and every warning with its line number must be equal.
"""

import gzip
import json
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.split_outputs import Output, assert_same, extract
from support.splitters import splitters


def line_starts(data: bytes) -> list[int]:
    """Every offset just after a line end: where each record boundary can be a range edge."""
    return sorted({m.end() for m in re.finditer(rb"\r\n|\n|\r", data)} - {len(data)})


def check_every_edge(tmp_path: Path, extractor: str, files: dict[str, bytes], big: str, min_shards: int,
                     metadata: str = "") -> Output:
    """`big` split at each line start, then tiny values, serially; two values with two workers."""
    whole = extract(tmp_path / "whole", extractor, files, 0, metadata=metadata)
    assert whole.shards and len(whole.shards) == len(files)
    most = 1
    for split_bytes in [*line_starts(files[big]), 1, 3, 17]:
        got = extract(tmp_path / "split", extractor, files, split_bytes, metadata=metadata)
        most = max(most, len(got.shards))
        assert_same(got, whole, f"split_bytes={split_bytes}")
    assert most >= min_shards, "the file was split many times"
    for split_bytes in (1, 40):
        assert_same(extract(tmp_path / "pool", extractor, files, split_bytes, workers=2, metadata=metadata), whole,
                    f"two workers, split_bytes={split_bytes}")
    return whole


# ----------------------------------------------------------------------------- text (ADDENDUM 4.1)

TEXT = ("\ufeff\n  \nprvi blok\nše vrstica\n\n\n\ndrugi\r\n\r\n\u00a0\r\ntretji\r\u00a0\u2003\rčetrti\n"
        "\x0c\nBAD\n\n\ufeffsredina z BOM\n   \n\n\t\npeti\n\u2028\nšesti brez konca").encode()
TEXT = TEXT.replace(b"BAD", b"slab \xff bajt\nin \xc3 se")


def test_text_every_boundary_at_a_range_edge(tmp_path):
    whole = check_every_edge(tmp_path, "text", {"a.txt": TEXT, "b/c.txt": b"ena\n\ndva\n"}, "a.txt", 8)
    ids = [json.loads(line)["doc_id"] for line in whole.text.splitlines()]
    assert ids[:3] == ["a:000000", "a:000001", "a:000002"] and ids[-2:] == ["b/c:000000", "b/c:000001"]
    assert whole.manifest["drops"] == {"invalid_utf8": 1}
    assert whole.warnings == ["d/a.txt:15: invalid UTF-8 bytes; block skipped [invalid_utf8]"]
    texts = [json.loads(line)["text"] for line in whole.text.splitlines()]
    assert "\ufeffsredina z BOM" in texts and texts[0] == "prvi blok\nše vrstica"  # D8: only at the start


def test_text_more_than_100_warnings_keeps_the_files_first_100(tmp_path):
    data = b"".join(b"blok %d\n\nslab \xff %d\n\n" % (i, i) for i in range(130))
    whole = extract(tmp_path / "whole", "text", {"x.txt": data}, 0)
    assert len(whole.warnings) == 100 and whole.manifest["drops"] == {"invalid_utf8": 130}
    for split_bytes, workers in ((64, 1), (500, 2), (3000, 1)):
        assert_same(extract(tmp_path / "s", "text", {"x.txt": data}, split_bytes, workers), whole, f"{split_bytes}")


# ----------------------------------------------------------------------------- jsonl (ADDENDUM 4.2)

def _jsonl() -> bytes:
    rows = [
        b'\xef\xbb\xbf{"doc_id": "a", "text": "prvi"}',
        b'{"text": "brez id"}',
        b"",
        "\u00a0".encode(),
        b'{"text": "slab \xff"}',
        b"{malformed",
        b"[1, 2]",
        b'{"doc_id": "  ", "text": "prazen id"}\r',
        b'{"doc_id": "p", "text": "z oznakami", "paragraphs": [{"sentences": [{"tokens": '
        b'[{"form": "z", "space_after": true}, {"form": "oznakami"}]}]}]}',
        b'{"text": "   "}',
        b'{"text": "surrogat \\ud800 tu"}',
        b'{"doc_id": "q", "text": "stub", "paragraphs": []}',
        b'{"text": "ni konca"}',
    ]
    return b"\n".join(rows)


def test_jsonl_every_boundary_at_a_range_edge(tmp_path):
    whole = check_every_edge(tmp_path, "jsonl", {"a.jsonl": _jsonl(), "b.jsonl": b'{"text": "x"}\n'}, "a.jsonl", 8)
    ids = [json.loads(line)["doc_id"] for line in whole.text.splitlines()]
    assert ids == ["a", "a:000001", "a:000002", "p", "a:000004", "q", "a:000006", "b:000000"]
    assert whole.sidecar is not None and whole.manifest["repairs"] == {"lone_surrogate": 1}
    assert whole.manifest["drops"] == {"invalid_utf8": 1, "malformed_json": 1, "non_object_record": 1,
                                       "empty_text": 1}


# ----------------------------------------------------------------------------- coleslaw (ADDENDUM 4.4)

def _coleslaw() -> bytes:
    rows = []
    for i in range(30):
        if i % 7 == 3:
            rows.append(b'{"id": 5}')  # no text source
        elif i % 5 == 1:
            rows.append(b'{"text": "besedilo %d", "fullText": "drugo"}' % i)  # two sources
        elif i % 4 == 2:
            rows.append(b'{"jedro": " a ", "izrek": "b %d"}' % i)
        else:
            rows.append(b'{"doc_id": "c%d", "text": "t %d"}' % (i, i))
    return b"\r\n".join(rows) + b"\r\n"


def test_coleslaw_every_boundary_at_a_range_edge(tmp_path, caplog, monkeypatch):
    import slm4ie_assets.extractors.coleslaw as coleslaw

    monkeypatch.setattr(coleslaw, "SHADOW_WARNINGS_PER_FILE", 3)  # the summary line is the file's, at its end
    files = {"PISRS/a.jsonl": _coleslaw()}
    with caplog.at_level(logging.WARNING, logger=coleslaw.__name__):
        whole = extract(tmp_path / "whole", "coleslaw", files, 0)
        logged = [r.getMessage() for r in caplog.records]
        assert len(logged) == 4 and "6 record(s)" in logged[-1] and ":12:" in logged[2]
        for split_bytes in [*line_starts(files["PISRS/a.jsonl"]), 1]:
            caplog.clear()
            got = extract(tmp_path / "split", "coleslaw", files, split_bytes)
            assert_same(got, whole, f"split_bytes={split_bytes}")
            assert [r.getMessage() for r in caplog.records] == logged, f"split_bytes={split_bytes}"
    assert_same(extract(tmp_path / "pool", "coleslaw", files, 50, workers=2), whole, "two workers")
    assert whole.manifest["drops"] == {"missing_text": 4}


# ----------------------------------------------------------------------------- conllu (ADDENDUM 5)

def _tok(i: int, form: str, misc: str = "_") -> str:
    return f"{i}\t{form}\t{form}\tNOUN\t_\t_\t0\troot\t_\t{misc}"


def _conllu() -> bytes:
    blocks = [
        f"# sent_id = s1.1\n{_tok(1, 'pred')}",
        f"# sent_id = s1.2\n{_tok(1, 'prvim')}",
        f"# newdoc id = n1\n# text = Prvi.\n{_tok(1, 'Prvi', 'SpaceAfter=No')}\n{_tok(2, '.')}",
        f"{_tok(1, 'slab')}\n{_tok(2, 'BAD')}",
        f"# newdoc\n{_tok(1, 'brez')}\n1\tkratka",
        "# newdoc id = komentar",  # Q10c: a comment-only newdoc block, lost
        f"# newdoc id =\n{_tok(1, 'prazen')}",
        f"#newdoc id = stisnjen\n{_tok(1, 'x')}\n\u00a0",
        f"# newdoc id = n2\r\n{_tok(1, 'crlf')}",
        f"# newdoc id = zadnji\n{_tok(1, 'konec')}",
    ]
    text = "\ufeff" + "\n\n".join(blocks[:8]) + "\n \t\n\n" + "\r\n\r\n".join(blocks[8:])
    return text.encode().replace(b"BAD", b"\xff\xfe")


def test_conllu_every_boundary_at_a_range_edge(tmp_path):
    whole = check_every_edge(tmp_path, "conllu", {"a.conllu": _conllu(), "b.conll": _conllu()}, "a.conllu", 5)
    ids = [json.loads(line)["doc_id"] for line in whole.text.splitlines()]
    assert ids[:6] == ["s1", "n1", "a:000002", "a:000003", "stisnjen", "n2"]
    assert whole.manifest["drops"] == {"invalid_utf8": 2, "malformed_row": 4}
    assert any(w.startswith("d/a.conllu:13: invalid UTF-8") for w in whole.warnings)


def test_conllu_without_newdoc_stays_whole(tmp_path):
    data = "\n\n".join(f"# sent_id = s{i}.1\n{_tok(1, 'w')}" for i in range(50)).encode()
    got = extract(tmp_path / "s", "conllu", {"a.conllu": data}, 10)
    assert got.shards == [["a.conllu", got.shards[0][1]]] and "@" not in got.shards[0][1]


# ----------------------------------------------------------------------------- property

_TEXT_LINE = st.one_of(
    st.sampled_from(["", " ", "\u00a0", "\t\u2003", "\x0c", "BAD", "\ufeffbom"]),
    st.text(alphabet="abčž \u00a0", min_size=1, max_size=12),
)
_ENDING = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def text_files(draw) -> bytes:
    lines = draw(st.lists(st.tuples(_TEXT_LINE, _ENDING), min_size=1, max_size=40))
    body = "".join(line + end for line, end in lines)
    if draw(st.booleans()):
        body = body.rstrip("\r\n")  # a last line without a line end
    return ("\ufeff" if draw(st.booleans()) else "").encode() + body.encode().replace(b"BAD", b"x\xffy")


@st.composite
def jsonl_files(draw) -> bytes:
    rows = []
    for kind, n in draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 99)), min_size=1, max_size=30)):
        rows.append([f'{{"doc_id": "i{n}", "text": "t{n}"}}', f'{{"text": "t{n}"}}', "", "{bad",
                     f'{{"text": "p", "paragraphs": [{{"sentences": [{{"tokens": [{{"form": "f{n}"}}]}}]}}]}}',
                     '{"text": "\xff"}'][kind])
    data = draw(_ENDING).join(rows).encode("utf-8", "surrogateescape")
    return data.replace("\xff".encode(), b"\xff")


@st.composite
def conllu_files(draw) -> bytes:
    blocks = []
    for kind, n in draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), min_size=1, max_size=25)):
        head = ["", f"# newdoc id = d{n}\n", "# newdoc\n", f"# sent_id = p{n}.1\n", "# newdoc id = \n"][kind]
        blocks.append(head + _tok(1, f"w{n}") + ("\n1\tshort" if n == 7 else ""))
    sep = draw(st.sampled_from(["\n\n", "\n \n", "\r\n\r\n", "\n\n\n"]))
    return sep.join(blocks).encode()


@st.composite
def coleslaw_files(draw) -> bytes:
    rows = []
    for kind, n in draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 99)), min_size=1, max_size=30)):
        rows.append([f'{{"doc_id": "c{n}", "text": "t{n}"}}', f'{{"text": "a{n}", "fullText": "b"}}', '{"id": 5}',
                     f'{{"jedro": " a ", "izrek": "b{n}"}}', "{bad", ""][kind])
    return draw(_ENDING).join(rows).encode()


_MACOCU_DOC = st.one_of(
    st.builds(lambda n: f'<doc id="i{n}"><p>t{n}</p></doc>', st.integers(0, 99)),
    st.just("<doc><p>brez</p></doc>"),
    st.just('<doc id="e"><p> </p></doc>'),
    st.just('<doc id="o"><p>x</p><doc id="in"><p>y</p></doc></doc>'),
    st.just("<doc id='r'><p>a\rb</p>\r\n<p>c</p></doc>"),
    st.just('<doc id="bad"><p>x</doc>'),
)


@st.composite
def macocu_files(draw) -> bytes:
    docs = draw(st.lists(_MACOCU_DOC, min_size=1, max_size=12))
    sep = draw(st.sampled_from(["\n", "\r\n", "\n\n  "]))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<corpus>\n' + sep.join(docs) + "\n</corpus>\n").encode()


@st.composite
def huggingface_configs(draw) -> dict[str, bytes]:
    """Two config folders written by `datasets` in record batches of a drawn size: natural, blank and
    missing ids, blank and null texts (D4, D7)."""
    import datasets
    from datasets import Dataset, Features, Value

    rows = draw(st.lists(st.tuples(st.sampled_from(["i", "", None]), st.sampled_from(["t", "", None, " \u00a0"]),
                                   st.integers(0, 99)), min_size=1, max_size=30))
    ids = [f"i{n}" if kind == "i" else kind for kind, _, n in rows]
    texts = [f"t{n}" if text == "t" else text for _, text, n in rows]
    batch_rows = draw(st.integers(1, 8))
    files = {}
    for config, count in (("x", len(rows)), ("zx", max(1, len(rows) // 2))):
        table = Dataset.from_dict({"id": ids[:count], "text": texts[:count]},
                                  features=Features({"id": Value("string"), "text": Value("string")}))
        with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
            patch.setattr(datasets.config, "DEFAULT_MAX_BATCH_SIZE", batch_rows)
            datasets.disable_progress_bars()
            table.save_to_disk(folder)
            files |= {f"{config}/{path.relative_to(folder).as_posix()}": path.read_bytes()
                      for path in Path(folder).rglob("*") if path.is_file()}
    return files


@dataclass(frozen=True)
class Sample:
    """Inputs of one splittable format for the property test: a strategy of the files under raw/<key>/,
    and the modules it needs (a case is skipped without them)."""

    files: st.SearchStrategy[dict[str, bytes]]
    needs: tuple[str, ...] = ()


def one_file(name: str, data: st.SearchStrategy[bytes]) -> Sample:
    """The drawn file, and its first half as a second file."""
    return Sample(data.map(lambda d: {name: d, "z" + name: d[: len(d) // 2]}))


# Every registered format with a splitter needs its samples here: the property test below takes its
# list from the registry and fails for a splittable format that has none.
SAMPLES = {
    "text": one_file("x.txt", text_files()),
    "jsonl": one_file("x.jsonl", jsonl_files()),
    "conllu": one_file("x.conllu", conllu_files()),
    "coleslaw": one_file("PISRS/x.jsonl", coleslaw_files()),
    "macocu": one_file("x.xml", macocu_files()),
    "huggingface": Sample(huggingface_configs(), needs=("datasets",)),
}


def test_samples_are_of_splittable_formats_only():
    assert set(SAMPLES) <= set(splitters()), f"not splittable: {sorted(set(SAMPLES) - set(splitters()))}"


@pytest.mark.parametrize("extractor", list(splitters()))
def test_property_split_with_two_workers_equals_unsplit(tmp_path_factory, extractor):
    if extractor not in SAMPLES:
        pytest.fail(f"{extractor} has a splitter but no sample files in test_split_formats.SAMPLES: add a "
                    "strategy of its files there, so its ranges are held to the unsplit bytes")
    sample = SAMPLES[extractor]
    for module in sample.needs:
        pytest.importorskip(module)

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                     HealthCheck.too_slow])
    @given(files=sample.files, split_bytes=st.integers(1, 200))
    def check(files, split_bytes):
        root = tmp_path_factory.mktemp(extractor)
        whole = extract(root / "whole", extractor, files, 0)
        got = extract(root / "split", extractor, files, split_bytes, 2)
        assert_same(got, whole, f"split_bytes={split_bytes}")
        if got.sidecar is not None:
            assert gzip.decompress(got.sidecar).count(b"\n") == whole.manifest["docs"]

    check()
