"""macocu holds the cap plus one element, whatever the `<doc>`'s shape (issue 39, point 5;
docs/memory.md).

Under `max_document_bytes` each outermost `<p>` of a `<doc>` was read and freed as it ended, but
nothing else was: 1,000,000 `<div>`s in one 34 MB `<doc>` peaked at 440 MB with a 1 MB cap, against
39 MB for the same `<doc>` made of `<p>`s. Now every element that ends outside a `<p>` is freed
too. Each case extracts one big `<doc>` of a shape (between two small ones) through the real
pipeline in a child process and reads the child's own peak RSS (`os.wait4`), as
test_memory_caps.py does; the bound is the same (the one-document peak, the cap and 40 MB for the
reader's chunks). The documents and warnings are the ones the reading without the cap gives.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.peak_rss import ALLOWANCE, CAP, MB, peak_of_extraction, write_lines

SIZE = 8 * MB
SHAPES = {
    # the bulk in <div>s (the case), in empty elements, in the text between them
    "divs": lambda i: f"<div>beseda hiša pot {i}</div>\n",
    "empty_elements": lambda i: "<br/>" * 8 + "\n",
    "text_between_elements": lambda i: f"beseda hiša pot {i}<br/>\n",
    # paragraphs inside <div>s: each <p> read, then its <div> freed
    "paragraphs_in_divs": lambda i: f"<div><p>beseda hiša pot {i}</p></div>\n",
    # deep and wide at once (libxml2 refuses nesting beyond 256 without huge_tree)
    "deep_divs": lambda i: "<div>" * 100 + f"beseda {i}" + "</div>" * 100 + "\n",
}
_FIRST, _LAST = '<doc id="prvi"><p>prvi</p></doc>\n', '<doc id="zadnji"><p>konec</p></doc>\n'


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> int:
    """The peak of the child on a one-document input: what the bound adds to."""
    return peak_of_extraction(tmp_path_factory.mktemp("tiny"), "macocu", "a.xml",
                              lambda fh: fh.write('<corpus><doc id="a"><p>ena</p></doc></corpus>'))[0]


def _write(shape, wrap: tuple[str, str] = ("", "")):
    def write(fh):
        fh.write(f'<corpus>\n{_FIRST}<doc id="velik">\n{wrap[0]}')
        write_lines(fh, SIZE, shape)
        fh.write(f"{wrap[1]}</doc>\n{_LAST}</corpus>\n")

    return write


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_big_doc_of_any_shape_is_bounded_by_the_cap(tmp_path, tiny, shape):
    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml", _write(SHAPES[shape]))
    assert len(warnings) == 1, warnings
    if shape == "paragraphs_in_divs":
        assert warnings[0].startswith("d/a.xml: document 'velik': its text is ")
    else:
        assert warnings[0] == "d/a.xml:3: <doc id='velik'> has no paragraph text; skipped [empty_text]"
    assert peak < tiny + CAP + ALLOWANCE, (peak // MB, tiny // MB)


@pytest.mark.parametrize("wrap", [("<div>", "</div>"), ('<doc id="innen">', "</doc>")], ids=["div", "nested_doc"])
def test_one_wide_element_or_a_nested_doc_lets_its_finished_children_go(tmp_path, tiny, wrap):
    """Every finished element inside the `<doc>` goes, not only the `<doc>`'s children: here a
    million `<span>`s in one `<div>`, or in a `<doc>` nested in the big one (D13: the outer one)."""
    spans = _write(lambda i: f"<span>beseda {i}</span>\n", wrap)
    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml", spans)
    assert warnings == ["d/a.xml:3: <doc id='velik'> has no paragraph text; skipped [empty_text]"]
    assert peak < tiny + CAP + ALLOWANCE, (peak // MB, tiny // MB)


# ----------------------------------------------------------------------------- the same documents and drops

_PIECES = st.sampled_from([
    "<p>{w}</p>", "<p> {w} &amp; {w} </p>", "<p>{w} <hi>{w}</hi> {w}</p>", "<div><p>{w}</p>{w}</div>",
    "<br/>", "{w}<br/>", "<div>{w}<div><p>{w}</p></div></div>", '<doc id="n{w}"><p>{w}</p></doc>',
    "<p>{w}<p>{w}</p></p>", "<p> </p>", "<!-- {w} --><p>{w}</p>", "<p>a &nbsp; b</p>", "<span>{w}</span>",
])
_DOC = st.tuples(st.lists(_PIECES, min_size=0, max_size=6), st.one_of(st.integers(1, 20), st.integers(500, 1500)),
                st.booleans())
# a paragraph longer than a batch, of many inline elements: a batch ends inside it, where nothing may go
_LONG_P = "<p>&m;" + "".join(f"<hi>del {k}</hi> <b>x<i>{k}</i></b> " for k in range(2500)) + "&m;</p>"


def _macocu_file(docs: list) -> bytes:
    """Each `<doc>` repeats its pieces `times` over, so one may span several 64 KiB batches of the
    parse (with an id: a dropped document takes no fallback id, so the uncapped ids would not tell)."""
    out = ['<!DOCTYPE corpus [<!ENTITY m "x">]>\n<corpus>\n']
    for i, (pieces, times, long_p) in enumerate(docs):
        body = [p.format(w=f"beseda{i}.{k}") for k in range(times) for p in pieces]
        if long_p:
            body.insert(len(body) // 2, _LONG_P)
        body = "".join(body)
        out.append(f'<doc id="d{i}">{body}</doc>\n<x>{i}</x>\n')
    return ("".join(out) + "</corpus>\n").encode()


@settings(max_examples=10, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(docs=st.lists(_DOC, min_size=1, max_size=4), cap=st.sampled_from([1, 200, 5_000, 10**9]))
def test_a_cap_changes_only_the_documents_over_it_whatever_the_shapes(corpus, docs, cap):
    """Freeing the finished elements changes nothing read: under any cap the documents within it and
    every other drop are the uncapped run's, in the same order, and those over it are dropped."""
    files = {"a.xml": _macocu_file(docs)}
    whole = corpus.run("mac", "macocu", files)
    capped = corpus.run("mac", "macocu", files, max_document_bytes=cap)
    kept = [line for line in whole.lines if len(line["text"].encode()) <= cap]
    assert capped.lines == kept
    over = len(whole.lines) - len(kept)
    assert capped.drops == {**whole.drops, **({"document_too_large": over} if over else {})}
    if sum(capped.drops.values()) < 100:  # a file keeps the warnings of its first 100 drops
        assert [w for w in capped.warnings if "document_too_large" not in w] == whole.warnings
