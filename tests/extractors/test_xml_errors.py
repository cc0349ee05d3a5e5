"""What the XML readers keep when a file breaks (D6, S3, docs/decisions.md S3): every document
closed before a syntax error or invalid bytes is published, a document the error cuts off never
is, whatever lxml delivers with or after the error (xml.events). CI runs this file a second time
under the newest lxml (tools/newest_env.sh); lxml 6.2.0 changed both what iterparse yields before
an error and what a feed parser reports after a failed close.

Every case goes through real files and the real pipeline: macocu (unsplit and split into ranges)
and every TEI route (plain paragraphs, plain utterances, annotated utterances, annotated per-file),
with errors in the first chunk the parser is fed, past it, and on the boundary between two chunks.
"""

import io
from pathlib import Path

import pytest
from lxml import etree

from slm4ie_assets.extractors.xml.events import CHUNK, FeedEvents, next_careful
from slm4ie_assets.extractors.xml.parser import parser_options
from support.extraction import Result, extract_raw
from support.split_outputs import assert_same, check_counted_equals_extracted, ids_of
from support.split_outputs import extract as extract_split

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
TEI_HEAD = f'<?xml version="1.0" encoding="UTF-8"?>\n<TEI {NS}><teiHeader/><text><body>\n'
TEI_TAIL = "</body></text></TEI>\n"


def run(tmp_path: Path, extractor: str, files: dict, key: str = "d") -> Result:
    return extract_raw(tmp_path / key, key, extractor, "test", files)


def warnings_of(r: Result) -> list[str]:
    return r.report.warnings


# ----------------------------------------------------------------------------- the three repro files


def test_macocu_tag_mismatch_and_invalid_bytes_keep_k1_k2_b1(tmp_path):
    """Issue 19: lxml 6.2.0's iterparse raised before yielding the documents closed earlier in the
    chunk, so nothing was published; they must be: k1, k2 and b1, exactly."""
    mismatch = ('<corpus>\n<doc id="k1"><p>ena</p></doc>\n<doc id="k2"><p>dva</p></doc>\n'
                '<doc id="k3"><p>tri</x></doc>\n<doc id="k4"><p>štiri</p></doc>\n</corpus>\n')
    invalid = (b'<?xml version="1.0" encoding="UTF-8"?>\n<corpus>\n<doc id="b1"><p>ena</p></doc>\n'
               b'<doc id="b2"><p>slab \xff\xfe bajt</p></doc>\n<doc id="b3"><p>tri</p></doc>\n</corpus>\n')
    r = run(tmp_path, "macocu", {"1-mismatch.xml": mismatch, "2-invalid.xml": invalid})
    assert r.ids == ["k1", "k2", "b1"]
    assert r.drops == {"xml_syntax_error": 1, "invalid_bytes": 1}
    first, second = warnings_of(r)
    assert first.startswith("d/1-mismatch.xml:4: Opening and ending tag mismatch: p line 4 and x")
    assert "kept the 2 document(s)" in first
    assert second.startswith("d/2-invalid.xml:4: Invalid bytes in character encoding")
    assert "kept the 1 document(s)" in second


def test_tei_plain_paragraph_cut_off_at_the_end_of_the_file_keeps_t1_t2(tmp_path):
    """Issue 19: lxml 6.2.0 reports an `end` for every element still open after a close() that
    failed; the cut-off paragraph must not be published."""
    data = TEI_HEAD + '<p xml:id="t1">pred</p><p xml:id="t2">med</p><p xml:id="cut">od'
    r = run(tmp_path, "tei", {"cut.xml": data})
    assert r.ids == ["t1", "t2"]
    assert r.drops == {"xml_syntax_error": 1}
    [warning] = warnings_of(r)
    assert warning.startswith("d/cut.xml:") and "kept the 2 document(s)" in warning and "'cut'" in warning


# ----------------------------------------------------------------------------- every TEI route


def _p(i) -> str:
    return f'<p xml:id="x{i}">odstavek {i}</p>\n'


def _plain_u(i) -> str:
    return f'<u xml:id="x{i}" who="#a"><seg>izjava {i}</seg></u>\n'


def _ann_u(i) -> str:
    return f'<u xml:id="x{i}" who="#a"><seg><s><w lemma="beseda">beseda</w><w>{i}</w></s></seg></u>\n'


def _per_file(i) -> str:
    return f'<p><s><w lemma="beseda">beseda</w><w>{i}</w></s></p>\n'


# (a closed document, an opening that the error cuts off, the route's reason to be there)
ROUTES = {
    "plain": (_p, '<p xml:id="cut">od'),
    "plain_utterance": (_plain_u, '<u xml:id="cut"><seg>od'),
    "annotated_utterance": (_ann_u, '<u xml:id="cut"><seg><s><w>od</w>'),
    "annotated_per_file": (_per_file, "<p><s><w>od</w>"),
}
# what follows the cut-off opening: nothing (cut off at the end of the file), a tag mismatch, bytes
# that are not UTF-8
BREAKS = {
    "cut_off": (b"", "xml_syntax_error"),
    "mismatch": (b"</x></seg></u></p></body></text></TEI>\n", "xml_syntax_error"),
    "invalid_bytes": (b" \xff\xfe naprej</w></s></seg></u></p></body></text></TEI>\n", "invalid_bytes"),
}


def tei_broken(route: str, n: int, brk: str) -> bytes:
    make, opening = ROUTES[route]
    good = TEI_HEAD + "".join(make(i) for i in range(n))
    if route.endswith("utterance"):
        good = good.replace("<body>\n", "<body><div>\n")
    return (good + opening).encode() + BREAKS[brk][0]


def expected_ids(route: str, n: int) -> list:
    return [] if route == "annotated_per_file" else [f"x{i}" for i in range(n)]


@pytest.mark.parametrize("brk", sorted(BREAKS))
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_tei_every_route_keeps_what_closed_before_the_error(tmp_path, route, brk):
    """Two documents closed, the third cut off by the error: the two are published (the per-file
    document, closed only at the end of the file, is dropped whole)."""
    r = run(tmp_path, "tei", {"f.xml": tei_broken(route, 2, brk)})
    assert r.ids == expected_ids(route, 2)
    assert r.drops == {BREAKS[brk][1]: 1}
    [warning] = warnings_of(r)
    assert "skipped the rest of the file" in warning
    if route != "annotated_per_file":
        assert "kept the 2 document(s)" in warning and "'cut'" in warning


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_tei_streaming_error_past_the_first_chunk(tmp_path, route):
    """A file of many chunks: everything closed before the error is kept, also the documents that
    closed in the chunk the error is in."""
    n = 2 * CHUNK // len(ROUTES[route][0](99)) + 7
    for brk in sorted(BREAKS):
        data = tei_broken(route, n, brk)
        assert len(data) > 2 * CHUNK
        r = run(tmp_path, "tei", {"f.xml": data}, key=f"{route}_{brk}")
        assert r.ids == expected_ids(route, n), brk
        assert r.drops == {BREAKS[brk][1]: 1}, brk


def padded_to(shift: int, head: bytes, doc, opening: bytes, brk: bytes) -> tuple[bytes, list]:
    """`head`, documents x0, x1, ..., a comment that pads the end of the last closed document (xlast)
    to `CHUNK + shift` (the end of the first chunk the parser is fed), then `opening` + `brk`; and
    the ids of the closed documents."""
    count, docs = 0, b""
    while len(head) + len(docs) + len(doc(count)) < CHUNK - 300:
        docs, count = docs + doc(count), count + 1
    filler = CHUNK + shift - len(head) - len(docs) - len(doc("last")) - len(b"<!---->")
    assert filler >= 0
    data = head + docs + b"<!--" + b"z" * filler + b"-->" + doc("last") + opening + brk
    assert data.index(doc("last")) + len(doc("last")) == CHUNK + shift
    return data, [f"x{i}" for i in range(count)] + ["xlast"]


@pytest.mark.parametrize("shift", [-1, 0, 1, 2, 5])
@pytest.mark.parametrize("brk", sorted(BREAKS))
def test_error_next_to_a_chunk_boundary(tmp_path, brk, shift):
    """The last closed document ends a few bytes before, at or after the end of a chunk, and the
    error follows at once: it is kept, the cut-off one is not (macocu and TEI plain)."""
    tail = BREAKS[brk][0]
    mac = padded_to(shift, b"<corpus>\n", lambda i: f'<doc id="x{i}"><p>t {i}</p></doc>'.encode(),
                    b'<doc id="cut"><p>od', tail)
    tei = padded_to(shift, TEI_HEAD.encode(), lambda i: _p(i).encode().rstrip(b"\n"), b'<p xml:id="cut">od', tail)
    for extractor, (data, ids) in (("macocu", mac), ("tei", tei)):
        r = run(tmp_path, extractor, {"f.xml": data}, key=extractor)
        assert r.ids == ids, extractor
        assert r.drops == {BREAKS[brk][1]: 1}, extractor


# ----------------------------------------------------------------------------- macocu, unsplit and split


def macocu_broken(n: int, bad: int, brk: str) -> bytes:
    docs = [f'<doc id="k{i}"><p>odstavek {i}</p></doc>' for i in range(n)]
    if brk == "mismatch":
        docs[bad] = f'<doc id="k{bad}"><p>ni zaprt</doc>'
    elif brk == "invalid_bytes":
        docs[bad] = f'<doc id="k{bad}"><p>slab BAD bajt</p></doc>'
    else:
        docs = docs[:bad] + [f'<doc id="k{bad}"><p>odrezan']
    data = ("<corpus>\n" + "\n".join(docs) + ("" if brk == "cut_off" else "\n</corpus>\n")).encode()
    return data.replace(b"BAD", b"\xff\xfe")


@pytest.mark.parametrize("brk", sorted(BREAKS))
def test_macocu_streaming_error_past_the_first_chunk(tmp_path, brk):
    n = 3 * CHUNK // len('<doc id="k9999"><p>odstavek 9999</p></doc>\n')
    r = run(tmp_path, "macocu", {"f.xml": macocu_broken(n, n - 5, brk)})
    assert r.ids == [f"k{i}" for i in range(n - 5)]
    assert r.drops == {BREAKS[brk][1]: 1}


@pytest.mark.parametrize("brk", sorted(BREAKS))
def test_split_macocu_error_in_a_middle_range(tmp_path, brk):
    """Split into many ranges, the error in a middle one: the same bytes as unsplit, which keep
    every document before the error; with one and two workers, and counted ranges agree."""
    data = macocu_broken(12, 7, brk)
    whole = extract_split(tmp_path / "whole", "macocu", {"a.xml": data}, 0)
    assert ids_of(whole) == [f"k{i}" for i in range(7)]
    for split, workers in ((60, 1), (100, 1), (60, 2)):
        got = extract_split(tmp_path / "split", "macocu", {"a.xml": data}, split, workers)
        assert len(got.shards) >= 3
        assert_same(got, whole, f"split_bytes={split} workers={workers}")
    check_counted_equals_extracted(tmp_path, data, (40, 60, 100))


def test_split_macocu_error_past_a_chunk_of_a_range(tmp_path):
    """Ranges larger than one chunk, the error in the middle range's second chunk."""
    n = 9 * CHUNK // len('<doc id="k9999"><p>odstavek 9999</p></doc>\n')
    data = macocu_broken(n, n // 2 + 2000, "mismatch")
    whole = extract_split(tmp_path / "whole", "macocu", {"a.xml": data}, 0)
    assert ids_of(whole) == [f"k{i}" for i in range(n // 2 + 2000)]
    got = extract_split(tmp_path / "split", "macocu", {"a.xml": data}, 3 * CHUNK)
    assert len(got.shards) >= 3
    assert_same(got, whole, "ranges of three chunks")


def test_utf16_file_keeps_the_documents_before_the_error(tmp_path):
    """Careful re-reading cuts the bytes after each `>`; in UTF-16 the character's other byte
    follows, so a cut never separates the `>` of an end tag from its second byte."""
    text = '<?xml version="1.0" encoding="UTF-16"?>\n<corpus>\n' + "".join(
        f'<doc id="k{i}"><p>odstavek {i}</p></doc>\n' for i in range(3)) + '<doc id="cut"><p>x</q></doc></corpus>\n'
    r = run(tmp_path, "macocu", {"le.xml": text.encode("utf-16-le").join([b"\xff\xfe", b""]),
                                 "zbe.xml": text.encode("utf-16-be").join([b"\xfe\xff", b""])})
    assert r.ids == ["k0", "k1", "k2"] * 2
    assert r.drops == {"xml_syntax_error": 2}


@pytest.mark.parametrize("extractor", ["macocu", "tei"])
def test_undeclared_entity_without_a_dtd_ends_the_parse_at_it(tmp_path, extractor):
    """libxml2 stops at a reference to an undeclared entity in a file without a DTD, while lxml's
    feed does not raise and starts a new document with the next feed: the fatal error in the log
    ends the parse there (xml.events), so nothing after it is read, in whichever chunk it lies,
    and the drop names it and its line."""
    if extractor == "macocu":
        data = "<corpus>\n" + "".join(f'<doc id="k{i}"><p>odstavek {i}</p></doc>\n' for i in range(4000)) + \
            "</corpus>\n"
    else:
        data = TEI_HEAD + "".join(f'<p xml:id="k{i}">odstavek {i}</p>\n' for i in range(4000)) + TEI_TAIL
    assert len(data) > 2 * CHUNK
    for at in (5, 3000):  # in the first chunk, and past it
        moved = data.replace(f">odstavek {at}<", f">a &nedefiniran; {at}<")
        r = run(tmp_path, extractor, {"f.xml": moved}, key=f"{extractor}_{at}")
        assert r.ids == [f"k{i}" for i in range(at)]
        [warning] = warnings_of(r)
        line = moved[: moved.index("&nedefiniran;")].count("\n") + 1
        where = f"{extractor}_{at}/f.xml:{line}"
        assert warning.startswith(f"{where}: Entity 'nedefiniran' not defined; kept the {at} document(s)")


# ----------------------------------------------------------------------------- the event source itself


def ids_until_error(data: bytes, chunk: int, tag: str, careful=None) -> tuple[list, object]:
    """The ids of the `end` events of `tag` one parse reads, fed `chunk` bytes at a time, and the
    span it leaves unread (None: nothing)."""
    events = FeedEvents(careful, chunk, events=("end",), tag=tag, **parser_options(False, collect_ids=True))
    ids: list = []
    try:
        for batch in events.batches(io.BytesIO(data)):
            ids += [el.get("id") or el.get("{http://www.w3.org/XML/1998/namespace}id") for _, el in batch]
    except etree.ParseError:
        return ids, events.unread
    return ids, None


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("brk", sorted(BREAKS))
def test_every_chunk_size_reads_exactly_what_closed_before_the_error(brk, encoding):
    """Fed in chunks of every size from 1 byte to the whole file, then (as xml.retry does) again
    with the chunk that raised careful: the documents read are always those closed before the
    error, none cut off by it."""
    data = macocu_broken(6, 3, brk)
    if encoding != "utf-8":
        if brk == "invalid_bytes":
            return  # invalid UTF-8 bytes are not what makes UTF-16 invalid
        bom = "\ufeff".encode(encoding)
        data = bom + data.decode("utf-8").encode(encoding)
    for chunk in range(1, len(data) + 1):
        careful = None
        while True:
            ids, unread = ids_until_error(data, chunk, "doc", careful)
            again = next_careful(unread, careful)
            if again is None:
                break
            careful = again
        assert ids == ["k0", "k1", "k2"], (chunk, careful)
