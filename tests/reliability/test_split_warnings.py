"""Warnings, drop counts and capped documents are the same split and unsplit (issue 34, point 4;
docs/splitting.md "Warnings").

The one cap: each input file keeps the warnings of its first 100 drops and of its first 100
repaired documents, in input order, whether it is read whole or in ranges. The differential fuzz
runs generated files (many drops and repairs, documents of random sizes) through the real pipeline
unsplit with one worker and split at a random `split_bytes` with two workers, under a random
`max_document_bytes`: published bytes, manifest (drops and repairs), and every warning in order
must be equal. The normal suite runs a few derandomized examples per format; `make test-long` many
more with a recorded seed (`SLM4IE_FUZZ_SEED` replays one).
"""

import os

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from support.split_outputs import assert_same, extract

LONG_SEED = int(os.environ.get("SLM4IE_FUZZ_SEED", 20261206))


def _jsonl_case() -> bytes:
    """10 malformed lines among 100 records repaired (a lone surrogate becomes U+FFFD, D1)."""
    rows = [b"{bad %d" % i if i % 11 == 5 else b'{"doc_id": "r%d", "text": "a\\ud800b %d"}' % (i, i)
            for i in range(110)]
    return b"\n".join(rows) + b"\n"


def test_ten_malformed_and_a_hundred_repaired_jsonl_lines_keep_the_same_warnings_split_and_unsplit(tmp_path):
    files = {"a.jsonl": _jsonl_case()}
    whole = extract(tmp_path / "whole", "jsonl", files, 0)
    assert whole.manifest["drops"] == {"malformed_json": 10} and whole.manifest["repairs"] == {"lone_surrogate": 100}
    # the file's first 100 of each kind, in input order: every drop and every repair here
    assert len(whole.warnings) == 110
    assert [w.endswith("[malformed_json]") for w in whole.warnings] == [i % 11 == 5 for i in range(110)]
    assert whole.warnings[5].startswith("d/a.jsonl:6: ") and "'r0'" in whole.warnings[0]
    for split, workers in ((300, 1), (700, 2), (40, 2)):
        got = extract(tmp_path / "split", "jsonl", files, split, workers)
        assert len(got.shards) > 2, split
        assert_same(got, whole, f"split_bytes={split}, {workers} worker(s)")


def test_over_a_hundred_of_each_kind_keeps_the_files_first_hundred_of_each_split_or_not(tmp_path):
    rows = []
    for i in range(260):
        rows.append(b"{bad %d" % i if i % 2 else b'{"text": "x\\ud800 %d"}' % i)
    files = {"a.jsonl": b"\n".join(rows) + b"\n", "b.jsonl": b"{bad\n" + b'{"text": "\\ud800"}\n'}
    whole = extract(tmp_path / "whole", "jsonl", files, 0)
    a = [w for w in whole.warnings if w.startswith("d/a.jsonl")]
    assert sum(w.endswith("[malformed_json]") for w in a) == 100 and len(a) == 200
    assert len(whole.warnings) == 202  # b.jsonl keeps its own first of each kind
    assert whole.manifest["drops"] == {"malformed_json": 131}
    for split, workers in ((500, 1), (1200, 2)):
        assert_same(extract(tmp_path / "split", "jsonl", files, split, workers), whole, f"split_bytes={split}")


# ----------------------------------------------------------------------------- the differential fuzz

_REPEAT = st.integers(1, 30)  # runs of the same kind of record, so a file can pass 100 of a kind


@st.composite
def _jsonl(draw) -> bytes:
    rows = []
    for kind, n, times in draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 99), _REPEAT), max_size=12)):
        row = [f'{{"doc_id": "i{n}", "text": "t{n}"}}', f'{{"text": "{"dolgo " * n}"}}', "", "{bad",
               '{"text": "s\\ud800"}', f'{{"doc_id": "n{n}", "text": "z\\u0000{"x" * n}"}}', '{"text": "\xff"}'][kind]
        rows += [row] * times
    data = draw(st.sampled_from(["\n", "\r\n"])).join(rows).encode("utf-8", "surrogateescape")
    return data.replace("\xff".encode(), b"\xff")


@st.composite
def _text(draw) -> bytes:
    blocks = []
    for kind, n, times in draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 60), _REPEAT), max_size=12)):
        block = [f"blok {n}", "beseda " * n, "slab BAD", f"nul \x00 {n}", "vrstica\n" * (n % 5) + "konec"][kind]
        blocks += [block] * times
    sep = draw(st.sampled_from(["\n\n", "\r\n\r\n", "\n\n\n"]))
    return sep.join(blocks).encode().replace(b"BAD", b"\xff")


def _tok(i: int, form: str) -> str:
    return f"{i}\t{form}\t{form}\tNOUN\t_\t_\t0\troot\t_\t_"


@st.composite
def _conllu(draw) -> bytes:
    blocks = []
    for kind, n, times in draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30), _REPEAT), max_size=10)):
        body = "\n".join(_tok(i + 1, f"w{i}") for i in range(n % 7 + 1))
        block = [f"# newdoc id = d{n}\n{body}", f"{body}\n1\tshort", f"# newdoc\n{_tok(1, 'BAD')}",
                 f"# newdoc id = z{n}\n{_tok(1, 'nul' + chr(0))}", f"# newdoc id = b{n}\n" + "\n".join(
                     _tok(i + 1, "dolga") for i in range(n))][kind]
        blocks += [block] * times
    return "\n\n".join(blocks).encode().replace(b"BAD", b"\xfe")


FORMATS = {"jsonl": ("x.jsonl", _jsonl()), "text": ("x.txt", _text()), "conllu": ("x.conllu", _conllu())}
FUZZ_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.data_too_large])


def differential(tmp_path_factory, extractor: str, examples: int, long_seed: int | None) -> None:
    name, files = FORMATS[extractor]

    @settings(max_examples=examples, derandomize=long_seed is None, **FUZZ_SETTINGS)
    @given(data=files, split=st.integers(1, 3000), cap=st.one_of(st.just(0), st.integers(20, 400)))
    def check(data, split, cap):
        root = tmp_path_factory.mktemp(extractor)
        inputs = {name: data, "z" + name: data[: len(data) // 3]}
        block = f"    max_document_bytes: {cap}\n" if cap else ""
        whole = extract(root / "whole", extractor, inputs, 0, metadata=block)
        got = extract(root / "split", extractor, inputs, split, 2, metadata=block)
        assert_same(got, whole, f"split_bytes={split}, max_document_bytes={cap}")

    if long_seed is not None:
        print(f"\ndifferential {extractor}: seed={long_seed} (replay: SLM4IE_FUZZ_SEED={long_seed})")
        check = seed(long_seed)(check)
    check()


@pytest.mark.parametrize("extractor", sorted(FORMATS))
def test_split_equals_unsplit_in_warnings_drops_and_capped_documents(tmp_path_factory, extractor):
    differential(tmp_path_factory, extractor, 5, None)


@pytest.mark.long
@pytest.mark.parametrize("extractor", sorted(FORMATS))
def test_long_split_equals_unsplit_in_warnings_drops_and_capped_documents(tmp_path_factory, extractor):
    differential(tmp_path_factory, extractor, 60, LONG_SEED)
