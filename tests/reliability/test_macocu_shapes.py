"""macocu holds the cap, whatever the `<doc>`'s shape (issue 39, point 5; docs/memory.md).

Under `max_document_bytes` each outermost `<p>` of a `<doc>` was read and freed as it ended, but
nothing else was: 1,000,000 `<div>`s in one 34 MB `<doc>` peaked at 440 MB with a 1 MB cap, against
39 MB for the same `<doc>` made of `<p>`s. Then every element that ends outside a `<p>` was freed
too, but one `<p>` was still held whole until it ended (a 50 MB `<p>` of a million inline `<hi>`s:
740 MB). Now the open `<p>` is read a batch at a time, and text no paragraph reads is let go as it
is parsed. Each case extracts one big `<doc>` of a shape (between two small ones) through the real
pipeline in a child process and reads the child's own peak RSS (its VmHWM: support.peak_rss); the
bound is test_memory_caps.py's (the one-document peak, the cap and 40 MB for the reader's chunks).
The documents and warnings are the ones the reading without the cap gives, and the differentials
below hold the capped reading to the uncapped one byte for byte.
"""

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slm4ie_assets.extractors.macocu.doc_pass import MacocuPass
from slm4ie_assets.extractors.macocu.paragraph import Paragraph
from slm4ie_assets.schema import TextOverCap
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
                              lambda fh: fh.write('<corpus><doc id="a"><p>ena</p></doc></corpus>'), own=True)[0]


def _write(shape, wrap: tuple[str, str] = ("", ""), size: int = SIZE, prolog: str = ""):
    def write(fh):
        fh.write(f'{prolog}<corpus>\n{_FIRST}<doc id="velik">\n{wrap[0]}')
        write_lines(fh, size, shape)
        fh.write(f"{wrap[1]}</doc>\n{_LAST}</corpus>\n")

    return write


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_big_doc_of_any_shape_is_bounded_by_the_cap(tmp_path, tiny, shape):
    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml", _write(SHAPES[shape]), own=True)
    assert len(warnings) == 1, warnings
    if shape == "paragraphs_in_divs":
        assert warnings[0].startswith("d/a.xml: document 'velik': its text is ")
    else:
        assert warnings[0] == "d/a.xml:3: <doc id='velik'> has no paragraph text; skipped [empty_text]"
    assert peak < tiny + CAP + ALLOWANCE, (peak // MB, tiny // MB)


# one element holds the whole `<doc>`: a `<p>` of a million inline elements, or one text node
# (libxml2 builds it as it parses; the pass reads and removes what it holds after each batch)
ONE_ELEMENT = {
    "inline_elements": lambda i: f"<hi>beseda {i}</hi> hiša <b>pot</b> {i}\n",
    "inline_elements_in_an_inline_element": lambda i: f"<i>beseda {i}</i> hiša\n",
    "one_text_node": lambda i: "beseda hiša pot in še nekaj besed\n",
    "whitespace_between_elements": lambda i: "<hi> </hi>\u3000 \n",
    # not in a paragraph: the `<doc>`'s own text, which nothing reads
    "one_text_node_outside_paragraphs": lambda i: "beseda hiša pot in še nekaj besed\n",
    # under a DOCTYPE (entity references possible), within 65,535 lines: wide lines of elements
    "inline_elements_under_a_doctype": lambda i: "".join(f"<hi>beseda {i}.{k}</hi> hiša " for k in range(40)) + "pot\n",
}
_PROLOG = {"inline_elements_under_a_doctype": '<!DOCTYPE corpus [<!ENTITY m "x">]>\n'}
_WRAP = {"inline_elements_in_an_inline_element": ("<p><span>", "</span></p>"),
         "one_text_node_outside_paragraphs": ("", "")}
# smaller text nodes stayed within the bound before too: 8 MB in a `<p>` peaked at 71 MB, 40 MB outside at 83 MB
_SIZE = {"one_text_node": 3 * SIZE, "one_text_node_outside_paragraphs": 8 * SIZE}


def _paragraph_size(shape, size: int) -> int:
    """The UTF-8 size of the stripped text of the `<p>` `_write` writes for `shape` (its lines,
    without their tags, begin with a word and end with one newline each)."""
    texts = []
    write_lines(type("Lines", (), {"write": lambda _, line: texts.append(re.sub("<[^>]*>", "", line))})(), size, shape)
    assert all(text[0] != " " and text[-1] == "\n" and text[-2] != " " for text in texts)
    return sum(len(text.encode()) for text in texts) - 1


@pytest.mark.parametrize("shape", sorted(ONE_ELEMENT))
def test_one_big_paragraph_or_text_node_is_read_a_batch_at_a_time(tmp_path, tiny, shape):
    """The one element the cap did not bound: a `<p>` was held whole until it ended (a 50 MB one of
    a million `<hi>`s peaked at 740 MB with a 1 MB cap, a 42 MB text node at 245 MB). Its size,
    counted piece by piece over thousands of batches, is the size of the whole text."""
    size = _SIZE.get(shape, SIZE)
    if shape in _PROLOG:
        assert size // len(ONE_ELEMENT[shape](10**5).encode()) < 65_535  # past that line nothing is taken
    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml",
                                        _write(ONE_ELEMENT[shape], _WRAP.get(shape, ("<p>", "</p>")), size,
                                               _PROLOG.get(shape, "")), own=True)
    if shape in ("whitespace_between_elements", "one_text_node_outside_paragraphs"):
        assert warnings == ["d/a.xml:3: <doc id='velik'> has no paragraph text; skipped [empty_text]"]
    else:
        text_size = _paragraph_size(ONE_ELEMENT[shape], size)
        assert warnings == [f"d/a.xml: document 'velik': its text is {text_size:,} bytes, over max_document_bytes "
                            f"({CAP:,}); skipped [document_too_large]"]
    assert peak < tiny + CAP + ALLOWANCE, (peak // MB, tiny // MB)


@pytest.mark.parametrize("wrap", [("<div>", "</div>"), ('<doc id="innen">', "</doc>")], ids=["div", "nested_doc"])
def test_one_wide_element_or_a_nested_doc_lets_its_finished_children_go(tmp_path, tiny, wrap):
    """Every finished element inside the `<doc>` goes, not only the `<doc>`'s children: here a
    million `<span>`s in one `<div>`, or in a `<doc>` nested in the big one (D13: the outer one)."""
    spans = _write(lambda i: f"<span>beseda {i}</span>\n", wrap)
    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml", spans, own=True)
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


# ----------------------------------------------------------------------------- the same bytes, piece by piece

_TEI = "http://www.tei-c.org/ns/1.0"
# whitespace as str.strip() sees it (NEL, NBSP, ideographic space, line separator, a CR kept by a
# character reference), text, references (declared: left out; undeclared: kept verbatim), markup
# the parse removes
_BITS = st.sampled_from([
    " ", "  ", "\t", "\n", "\r\n", "\x85", "\u00a0", "\u3000", "\u2028", "&#160;", "&#x3000;", "&#13;", "&#32;",
    "a", "bc", "š", "\U0001d538", "\u200b", "&amp;", "&lt;", "<![CDATA[ c ]]>", "&m;", "&nbsp;", "<!-- k -->",
    "<?pi x?>",
])
_TEXT = st.lists(_BITS, max_size=5).map("".join)


def _inline(inner):
    """The markup a paragraph may hold, around `inner` content (D13: a nested `<p>` or `<doc>` is
    part of the outer paragraph; S6: one reading of a TEI `<choice>`)."""
    return st.one_of(
        inner.map(lambda c: f"<hi>{c}</hi>"),
        inner.map(lambda c: f'<p n="x">{c}</p>'),
        inner.map(lambda c: f'<doc id="nested">{c}</doc>'),
        st.tuples(inner, inner).map(lambda c: f'<t:choice xmlns:t="{_TEI}"><t:orig>{c[0]}</t:orig>'
                                              f"<t:reg>{c[1]}</t:reg></t:choice>"),
        inner.map(lambda c: f'<choice xmlns="{_TEI}"><x>{c}</x><sic>y</sic></choice>'),
        st.just(f'<choice xmlns="{_TEI}"/>'),
        st.just("<br/>"),
    )


_CONTENT = st.recursive(_TEXT, lambda inner: st.lists(st.one_of(_TEXT, _inline(inner)), max_size=4).map("".join),
                        max_leaves=14)
_ITEM = st.one_of(_CONTENT.map(lambda c: f"<p>{c}</p>"), _TEXT, _CONTENT.map(lambda c: f"<div><p>{c}</p>x</div>"))


def _file(docs: list, doctype: bool = True, lines_before: int = 0) -> bytes:
    """A file of `docs`, after `lines_before` empty lines; without a DOCTYPE, which entity
    references need, it holds none (an undeclared name would stop the parse) and the pass reads
    its paragraphs to the last byte. Past line 65,535 each `<doc>` begins with a newline, as
    MaCoCu's do: libxml2 then gives it the line of that text (of its first element, or of a
    neighbour of a childless one, otherwise; docs/memory.md)."""
    lead = "\n" if lines_before else ""
    body = "".join(f'<doc id="d{i}">{lead}{"".join(items)}</doc>{tail}' for i, (items, tail) in enumerate(docs))
    head = "<corpus>" + "\n" * lines_before
    if not doctype:
        return (head + body.replace("&m;", "").replace("&nbsp;", "") + "</corpus>").encode()
    return ('<!DOCTYPE corpus SYSTEM "macocu.dtd" [<!ENTITY m "x">]>\n' + head + body + "</corpus>").encode()


class _ShortReads:
    """`data` handed over `first` bytes, then `step` bytes a read, as a pipe may: the pass feeds
    each read whole, so a batch of events ends after each."""

    def __init__(self, data: bytes, step: int, first: int = 0):
        self.data, self.step, self.pos = data, step, 0
        self.next = first or step

    def read(self, size: int = -1) -> bytes:
        piece = self.data[self.pos:self.pos + min(size, self.next)]
        self.pos += len(piece)
        self.next = self.step
        return piece


def _read(data: bytes, cap: int = 0, step: int = 0, first: int = 0) -> tuple[list, list]:
    """The documents and drops of one pass over `data` (the real pass), read whole or `step`
    bytes at a time after the first `first`."""
    drops: list = []
    pass_ = MacocuPass(lambda reason, message, line=None: drops.append((reason, message, line)), cap=cap)
    source = _ShortReads(data, step, first) if step else io.BytesIO(data)
    docs = [(d.text, d.doc_id, d.metadata) for d in pass_.run(source, False)]
    return docs, drops


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(docs=st.lists(st.tuples(st.lists(_ITEM, max_size=4), _TEXT), min_size=1, max_size=3),
       cap=st.one_of(st.integers(1, 60), st.just(10**9)), step=st.integers(1, 48), doctype=st.booleans(),
       far=st.booleans())
def test_a_paragraph_read_piece_by_piece_gives_the_bytes_of_the_whole(docs, cap, step, doctype, far):
    """Fed a few bytes at a time, a batch ends anywhere: inside a text node, between an element and
    its tail, inside a `<choice>` or an entity's paragraph, in leading or trailing whitespace of any
    kind. Whatever was taken piece by piece, each document within the cap has the text the uncapped
    pass gives (one 64 KiB feed, every paragraph whole), one over it the exact UTF-8 size of that
    text, and the drops (entities with their lines, empty documents) are the same, in the same order;
    `far`: past line 65,535, where libxml2 reads an element's line from its neighbours."""
    data = _file(docs, doctype, 70_000 if far else 0)
    whole, whole_drops = _read(data)
    capped, capped_drops = _read(data, cap, step, data.index(b"<doc ") if far else 0)
    expected = []
    for text, doc_id, meta in whole:
        size = len(text.encode("utf-8", "surrogatepass"))
        expected.append((TextOverCap(size, False) if size > cap else text, doc_id, meta))
    assert capped == expected
    assert capped_drops == whole_drops


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(pieces=st.lists(_BITS.map(lambda b: b.replace("&#160;", "\u00a0").replace("&#13;", "\r")), max_size=12),
       room=st.integers(-2, 30))
def test_a_paragraph_counts_what_strip_leaves_and_keeps_it_only_within_its_room(pieces, room):
    """`Paragraph` on its own: its size is the UTF-8 size of the pieces joined and stripped, and it
    keeps that text exactly when it fits the room."""
    paragraph = Paragraph(room)
    for piece in pieces:
        paragraph.add(piece)
    stripped = "".join(pieces).strip()
    assert paragraph.size == len(stripped.encode("utf-8", "surrogatepass"))
    if 0 < paragraph.size <= room:
        assert paragraph.text() == stripped
    elif paragraph.size:
        assert paragraph.text() is None


@pytest.mark.parametrize("pieces", [
    [" " * 9_000 + "a" + "\u3000" * 9_000, "\n" * 5_000, "b\u2028" + " " * 4_096],
    ["\u00a0" * 4_096, "\u00a0" * 4_097 + "š" * (1 << 20) + "\U0001d538" * 3 + "\t" * 8_193],
    ["\x85" * 20_000],
    ["a" * ((1 << 20) + 3) + " " * 4_095, "š" * 2, " "],
], ids=["whitespace_runs", "over_a_slice", "whitespace_only", "ascii"])
def test_a_long_piece_is_measured_by_index_as_strip_would(pieces):
    """`Paragraph` looks at whitespace 4,096 characters at a time and encodes 1 Mi characters at a
    time (a paragraph read whole may be tens of MB): the same sizes as strip() and encode()."""
    stripped = "".join(pieces).strip()
    for room in (-1, 3, len(stripped.encode()), 1 << 30):
        paragraph = Paragraph(room)
        for piece in pieces:
            paragraph.add(piece)
        assert paragraph.size == len(stripped.encode("utf-8", "surrogatepass"))
        if 0 < paragraph.size <= room:
            assert paragraph.text() == stripped
        elif paragraph.size:
            assert paragraph.text() is None


_CRAFTED = [
    # tails at every level of the chain of open elements, which a batch may end in together
    '<p> <hi>a<b>b<i>c</i>\u3000d </b>e </hi>\u00a0f<b> </b> </p>',
    # a choice whose reading is known only at its end, an entity as the last child, CR and NEL kept by references
    f'<p>\u2028 <c:choice xmlns:c="{_TEI}"><c:orig> o <hi>p</hi> </c:orig><c:reg>r<hi> s </hi></c:reg></c:choice> '
    '&m;&#13; x &nbsp;&#x85;</p>',
    # D13 inside a paragraph, whitespace-only pieces, an empty paragraph after it
    '<p>\n<p> <doc id="n"><p> g </p></doc> </p>\t<hi> </hi>\u3000</p><p> <hi/> </p><p>z</p>',
    # references whose line is that of the text, element or reference before them
    '<p>a\n<hi>b</hi>\n\nc\n&m;\nd&m;&m;<hi>\ne</hi>&m;\n<b>&m;</b>\n</p>',
    '<p>\n\n&m; y\n&m;</p>',
    '<p>\n\n&m;<hi>h</hi>\n&m;<b/></p>',
    # a reference after a reference has its parent's line: past line 65,535, the first child's
    '<p>a\n\n<hi>\nb</hi>&m;&m;<hi/>c</p>',
    # no paragraph text: the drop names the <doc>'s line
    '\n\n <div> </div> \n<p> </p>\n',
]


@pytest.mark.parametrize("doctype", [True, False], ids=["doctype", "no_doctype"])
@pytest.mark.parametrize("cap", [1, 9, 17, 10**9])
def test_every_batch_boundary_in_deep_paragraphs_gives_the_bytes_of_the_whole(cap, doctype):
    """The differential above with every read size over paragraphs made to hold what a batch can
    end in: tails of several open elements at once, a `<choice>`, an entity last or after a
    newline (its line is its neighbour's), CR, NEL, an empty `<doc>` (its drop names its line)."""
    data = _file([([item], " ") for item in _CRAFTED], doctype)
    whole, whole_drops = _read(data)
    texts = ["abc\u3000d e \u00a0f", "r s  \r x &nbsp;" if doctype else "r s  \r x", "g\nz", "a\nb\n\nc\n\nd\ne",
             "y", "h", "a\n\n\nbc"]
    assert [doc[0] for doc in whole] == texts
    # the fourth paragraph's references: after text (7, 8), after a reference (the <p>'s line, 3),
    # after an element (8), first in an element (its line, 10)
    lines = [2, 7, 8, 3, 8, 10, 13, 14, 16, 17, 19, 17, 20, 2] if doctype else [19]
    assert [line for _, _, line in whole_drops] == lines
    for step in range(1, len(data) + 1):
        assert _read(data, cap, step) == _capped(whole, whole_drops, cap), step


def _capped(whole: list, drops: list, cap: int) -> tuple[list, list]:
    """What a capped pass should give: the uncapped documents, those over `cap` as their size."""
    return [(TextOverCap(len(t.encode()), False) if len(t.encode()) > cap else t, i, m) for t, i, m in whole], drops


@pytest.mark.parametrize("doctype", [True, False], ids=["doctype", "no_doctype"])
def test_past_line_65535_the_lines_of_references_and_empty_docs_stay(doctype):
    """From line 65,535 on libxml2 gives an element the line of its first child or a neighbour and
    a reference that of its parent or the node before it, so reading a paragraph piecewise must not
    change them there: the same paragraphs after 70,000 empty lines, each read size once."""
    lines = 70_000
    data = _file([([item], " ") for item in _CRAFTED], doctype, lines)
    first = data.index(b"<doc ")
    whole, whole_drops = _read(data)
    assert [line for _, _, line in whole_drops][-2 if doctype else -1] > lines  # the empty <doc>
    for step in range(1, len(data) - first + 1):
        for cap in (9, 10**9):
            assert _read(data, cap, step, first) == _capped(whole, whole_drops, cap), (step, cap)
