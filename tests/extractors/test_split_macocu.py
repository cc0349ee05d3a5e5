"""Split MaCoCu files give the bytes of one unsplit pass (docs/splitting.md, ADDENDUM 4.6, D3, D6,
D8, D13, S3), through the real pipeline.

Each file is extracted unsplit with one worker, then with `split_bytes` at the offset of every
`<doc` (so each top-level document starts exactly at a nominal cut once), at offsets inside
documents and at tiny values (so the file splits many times), with one and with two workers. The
published text, the manifest (but `published_at` and the shard list), the drop ledger and every
warning with its line number must be equal.
"""

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slm4ie_assets.extractors.extract_context import RangeCounts
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.macocu.doc_cuts import plan_doc_cuts
from slm4ie_assets.extractors.macocu.extractor import MacocuExtractor
from slm4ie_assets.extractors.macocu.ranges import RangeState
from support.split_outputs import Output, assert_same, check_counted_equals_extracted, extract, ids_of

HEAD = ('\ufeff<?xml version="1.0" encoding="UTF-8"?>\r\n<!DOCTYPE corpus SYSTEM "macocu.dtd" [\r\n'
        '  <!ENTITY dec "declared">\r\n  <!ENTITY ext SYSTEM "file:///etc/hostname">\r\n]>\r\n'
        '<!-- <doc id="in-a-comment"> -->\r\n<corpus id="MaCoCu-sl" xmlns:m="urn:m">\r\n'
        '  <header><title>glava</title></header>\r\n')

DOCS = [
    '<doc id="a" title="Prva" url="https://a.si"><p>Prvi odstavek.</p>\r\n<p>Drugi &amp; tretji.</p></doc>',
    '<doc><p>brez id</p></doc>',
    '<doc id="  "><p>prazen id</p></doc>',
    '<doc id="empty"><p>  \r\n </p></doc>',
    '<doc id="ent"><p>a &dec; b &nbsp; c</p><p>&ext;</p></doc>',
    '<!-- </doc>\n<doc id="comment"><p>x</p></doc> -->',
    '<doc id="cdata"><p><![CDATA[</doc>\n<doc id="cd">]]> ostane</p></doc>',
    '<?pi </doc>\n<doc id="pi"?><doc id="after-pi"><p>po pi</p></doc>',
    '<doc id="outer"><p>zunaj</p><doc id="inner"><p>notri</p></doc>\n<doc id="inner2"><p>še</p></doc></doc>',
    '<doc id="lone-cr"><p>ena\rdve</p>\r<p>tri</p></doc>',
    '<doc id="long" lm_score="0.9"><p>' + "dolg odstavek " * 20 + '</p>\n<p>&dec; in &undef2;</p></doc>',
    '<m:doc id="namespaced"><p>ne</p></m:doc>',
    '<doc id="last" crawl_date="2022"><p>konec &nbsp;</p></doc>',
]


def macocu_file(docs: list[str], head: str = HEAD, tail: str = "\r\n</corpus>\r\n", sep: str = "\r\n") -> bytes:
    return (head + sep.join(docs) + tail).encode()


def doc_starts(data: bytes, around: bool = True) -> list[int]:
    """Every `<doc` offset, and (`around`) one byte either side: a cut exactly at a start, and
    nominal cuts that have to move on to the next top-level document."""
    starts = [m.start() for m in re.finditer(rb"<doc[\s/>]", data)]
    near = {s + 1 for s in starts} | {s - 1 for s in starts if s > 0} if around else set()
    return sorted(set(starts) | near)


def check_every_cut(tmp_path: Path, files: dict[str, bytes], big: str, min_shards: int = 3,
                    extra: tuple[int, ...] = (1, 7, 40), around: bool = False) -> Output:
    """`big` split at every document start (`around`: and one byte either side), serially; then
    tiny values with one and two workers."""
    whole = extract(tmp_path / "whole", "macocu", files, 0)
    assert len(whole.shards) == len(files)
    most = 1
    for split_bytes in [*doc_starts(files[big], around), *extra]:
        got = extract(tmp_path / "split", "macocu", files, split_bytes)
        most = max(most, len(got.shards))
        assert_same(got, whole, f"split_bytes={split_bytes}")
    assert most >= min_shards, "the file was split"
    assert_same(extract(tmp_path / "pool", "macocu", files, 1, workers=2), whole, "2 workers")
    return whole


# ----------------------------------------------------------------------------- every kind of boundary


def test_every_document_start_at_a_range_edge(tmp_path):
    """BOM (D8), DOCTYPE with an internal subset whose entities are used in later ranges, CRLF,
    a lone CR, `</doc> <doc` inside a comment, CDATA and a PI, a nested doc (D13), D3 ids."""
    data = macocu_file(DOCS)
    whole = check_every_cut(tmp_path, {"a.xml": data, "b.xml": macocu_file(DOCS[:2])}, "a.xml", 8, around=True)
    assert ids_of(whole)[:9] == ["a", "a:000001", "a:000002", "ent", "cdata", "after-pi", "outer", "lone-cr", "long"]
    assert whole.manifest["drops"] == {"empty_text": 1, "unexpanded_entity": 3, "undefined_entity": 1}
    assert whole.warnings[0].startswith("d/a.xml:13: <doc id='empty'>")
    assert whole.warnings[3].startswith("d/a.xml:26: entity reference &dec; in <doc id='long'>")
    assert whole.warnings[-1].startswith("d/a.xml:15: 3 undefined entity reference(s), first: Entity 'nbsp'")


def test_parse_error_in_a_middle_range_keeps_the_documents_before_it(tmp_path):
    """S3: the documents closed before the error stay, the rest of the file (later ranges) is
    skipped with one drop naming the line, the number kept counted over the whole file."""
    docs = [f'<doc id="k{i}"><p>odstavek {i}</p></doc>' for i in range(12)]
    docs[7] = '<doc id="broken"><p>ni zaprt</doc>'
    data = macocu_file(docs, head='<corpus>\n', tail="\n</corpus>\n", sep="\n")
    clean = data.replace(b"ni zaprt</doc>", b"zaprt</p></doc>")
    whole = check_every_cut(tmp_path, {"a.xml": data, "b.xml": clean}, "a.xml", 6)
    assert whole.manifest["drops"] == {"xml_syntax_error": 1}
    [warning] = whole.warnings
    assert warning.startswith("d/a.xml:9:") and "line 9" in warning and "kept the 7 document(s)" in warning


def test_invalid_bytes_in_a_middle_range_stop_the_file(tmp_path):
    docs = [f'<doc id="k{i}"><p>odstavek {i}</p></doc>' for i in range(10)]
    docs[6] = '<doc id="bad"><p>slab BAD bajt</p></doc>'
    data = macocu_file(docs, head='<corpus>\n', tail="\n</corpus>", sep="\n").replace(b"BAD", b"\xff\xfe")
    whole = check_every_cut(tmp_path, {"a.xml": data}, "a.xml", 5)
    assert whole.manifest["drops"] == {"invalid_bytes": 1} and ids_of(whole)[-1] == "k5"


def test_root_that_never_closes(tmp_path):
    docs = [f'<doc id="k{i}"><p>odstavek {i}</p></doc>' for i in range(8)]
    data = macocu_file(docs, head='<corpus>\n', tail="\n", sep="\n")
    whole = check_every_cut(tmp_path, {"a.xml": data}, "a.xml", 5)
    assert len(ids_of(whole)) == 8 and whole.manifest["drops"] == {"xml_syntax_error": 1}


def test_iso_8859_2_declared_encoding(tmp_path):
    head = '<?xml version="1.0" encoding="ISO-8859-2"?>\n<corpus>\n'
    docs = [f'<doc id="č{i}"><p>šumniki {i} čžš</p></doc>' for i in range(8)]
    data = (head + "\n".join(docs) + "\n</corpus>\n").encode("iso-8859-2")
    whole = check_every_cut(tmp_path, {"a.xml": data}, "a.xml", 5)
    assert ids_of(whole)[0] == "č0"


def test_files_that_stay_whole(tmp_path):
    """A prolog that cannot be reused, or no cut near any nominal one: one shard, unsplit."""
    docs = [f'<doc id="k{i}"><p>t {i}</p></doc>' for i in range(6)]
    cases = {
        "utf16.xml": ('<?xml version="1.0" encoding="UTF-16"?>\n<corpus>' + "".join(docs)
                      + "</corpus>").encode("utf-16"),
        "nodoc.xml": b"<corpus>" + b"<x/>" * 200 + b"</corpus>",
        "wrapped.xml": ("<corpus><text>" + "\n".join(docs) + "</text></corpus>").encode(),
        "rootdoc.xml": ("<doc id='r'>" + "\n".join(docs) + "</doc>").encode(),
        "warned.xml": ('<!DOCTYPE corpus SYSTEM "x.dtd">\n<corpus a="&u;">' + "\n".join(docs) + "</corpus>").encode(),
    }
    extractor = MacocuExtractor()
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert plan_doc_cuts(path, len(data), 16) == (0, len(data)), name
        assert extractor.splitter.plan(InputFile(path, name), len(data), 16) == (0, len(data))
    whole = extract(tmp_path / "w", "macocu", cases, 0)
    ranged = extract(tmp_path / "s", "macocu", cases, 16)
    assert_same(ranged, whole, "stays whole") and len(ranged.shards) == len(cases)


def test_cuts_are_at_top_level_doc_starts_after_a_doc_end(tmp_path):
    data = macocu_file(DOCS)
    path = tmp_path / "a.xml"
    path.write_bytes(data)
    cuts = plan_doc_cuts(path, len(data), 50)
    assert len(cuts) > 6 and cuts[0] == 0 and cuts[-1] == len(data)
    for cut in cuts[1:-1]:
        assert re.match(rb"<doc[\s/>]", data[cut:]) and re.search(rb"</doc\s*>\s*$", data[:cut])


def _bytes_read() -> int:
    return int(re.search(r"rchar: (\d+)", Path("/proc/self/io").read_text()).group(1))  # type: ignore[union-attr]


def test_planning_reads_the_head_and_small_windows_near_each_cut(tmp_path):
    docs = [f'<doc id="k{i}"><p>{"besedilo " * 20}</p></doc>' for i in range(60_000)]
    path = tmp_path / "big.xml"
    path.write_bytes(macocu_file(docs, head="<corpus>\n", sep="\n"))
    size = path.stat().st_size
    before = _bytes_read()
    cuts = plan_doc_cuts(path, size, 1 << 20)
    read = _bytes_read() - before
    assert len(cuts) == size // (1 << 20) + 2
    assert read < 3 * len(cuts) * (1 << 16) < size / 3


# ----------------------------------------------------------------------------- the log-dependent counts


def test_more_than_100_undefined_entities_across_ranges(tmp_path):
    """libxml2 keeps a parse's first 100 warnings: the count is the file's, not a sum of ranges'."""
    docs = [f'<doc id="k{i}"><p>&u{i}; x</p></doc>' for i in range(140)]
    data = macocu_file(docs, head='<!DOCTYPE corpus SYSTEM "x.dtd">\n<corpus>\n', tail="\n</corpus>\n", sep="\n")
    whole = extract(tmp_path / "w", "macocu", {"a.xml": data}, 0)
    assert whole.manifest["drops"] == {"undefined_entity": 1} and "100 undefined" in whole.warnings[0]
    for split_bytes, workers in ((300, 1), (1000, 2), (2500, 1), (4000, 2)):
        assert_same(extract(tmp_path / "s", "macocu", {"a.xml": data}, split_bytes, workers), whole, f"{split_bytes}")


def test_an_earlier_ranges_namespace_error_names_a_later_parse_error(tmp_path):
    """One pass reports a parse error with the first error of its log, which may be a non-fatal
    one (an undeclared prefix) in an earlier range."""
    docs = [f'<doc id="k{i}"><p>t {i}</p></doc>' for i in range(12)]
    docs[1] = '<doc id="ns"><q:p>predpona</q:p><p>x</p></doc>'
    docs[9] = '<doc id="bad"><p>x</doc>'
    data = macocu_file(docs, head="<corpus>\n", tail="\n</corpus>\n", sep="\n")
    whole = extract(tmp_path / "w", "macocu", {"a.xml": data}, 0)
    assert "Namespace prefix q" in whole.warnings[0] and whole.warnings[0].startswith("d/a.xml:3:")
    for split_bytes, workers in ((40, 1), (40, 2), (150, 1), (150, 2)):
        assert_same(extract(tmp_path / "s", "macocu", {"a.xml": data}, split_bytes, workers), whole, f"{split_bytes}")


def test_huge_tree_retry_in_a_middle_range(tmp_path):
    """xml.retry: a text node over 10 MB or nesting over 256 in one range is read with huge_tree
    there; the documents and drops equal the unsplit retry's."""
    big = "beseda " * 1_600_000
    mid = "<hi>" * 300 + "y" + "</hi>" * 300
    docs = [f'<doc id="k{i}"><p>t {i}</p></doc>' for i in range(8)]
    docs[2] = '<doc id="e"><p> </p></doc>'
    docs[4] = f'<doc id="big"><p>{big}</p></doc>'
    docs[6] = f'<doc id="mid"><p>{mid}</p></doc>'
    data = macocu_file(docs, head="<corpus>\n", tail="\n</corpus>\n", sep="\n")
    whole = extract(tmp_path / "w", "macocu", {"a.xml": data}, 0)
    assert len(ids_of(whole)) == 7 and whole.manifest["drops"] == {"empty_text": 1}
    for split_bytes, workers in ((60, 1), (60, 2), (len(data) // 2, 1)):
        assert_same(extract(tmp_path / "s", "macocu", {"a.xml": data}, split_bytes, workers), whole, f"{split_bytes}")


def test_a_namespace_error_before_a_limit_hit_stops_the_file_as_one_pass(tmp_path):
    """The first error of the log decides: after an earlier range's non-fatal error, a limit hit
    is no retry but a stop, in a count-only pass (two workers) as in an extraction."""
    mid = "<hi>" * 300 + "y" + "</hi>" * 300
    docs = [f'<doc id="k{i}"><p>t {i}</p></doc>' for i in range(10)]
    docs[1] = '<doc id="ns"><q:p>predpona</q:p></doc>'
    docs[5] = f'<doc id="deep"><p>{mid}</p></doc>'
    data = macocu_file(docs, head="<corpus>\n", tail="\n</corpus>\n", sep="\n")
    whole = extract(tmp_path / "w", "macocu", {"a.xml": data}, 0)
    assert whole.manifest["drops"] == {"empty_text": 1, "xml_syntax_error": 1} and len(ids_of(whole)) == 4
    assert "Namespace prefix q" in whole.warnings[-1] and "kept the 4 document(s)" in whole.warnings[-1]
    for split_bytes, workers in ((40, 1), (40, 2), (200, 2)):
        assert_same(extract(tmp_path / "s", "macocu", {"a.xml": data}, split_bytes, workers), whole, f"{split_bytes}")


def test_a_limit_hit_switches_the_rest_of_the_file_to_huge_tree(tmp_path):
    """One pass keeps huge_tree after its first limit hit: a later limit hit is no error; a
    count-only pass of a later range, which cannot know, reads the file before it to find out.
    (A non-fatal error, such as an undeclared prefix, fails the parse at its end: lxml raises then.)"""
    deep = '<doc id="deep"><p>' + "<hi>" * 300 + "y" + "</hi>" * 300 + "</p></doc>"
    docs = [deep, '<doc id="w"><p>&nbsp;</p></doc>', deep, '<doc id="k"><p>k</p></doc>', deep]
    data = macocu_file(docs, head='<!DOCTYPE corpus SYSTEM "x.dtd">\n<corpus>\n', tail="\n</corpus>\n", sep="\n")
    whole = extract(tmp_path / "w", "macocu", {"a.xml": data}, 0)
    assert ids_of(whole) == ["deep", "w", "deep", "k", "deep"] and whole.manifest["drops"] == {"undefined_entity": 1}
    for split_bytes, workers in ((1, 1), (1, 2), (3000, 2)):
        assert_same(extract(tmp_path / "s", "macocu", {"a.xml": data}, split_bytes, workers), whole, f"{split_bytes}")
    check_counted_equals_extracted(tmp_path, data, (1, 3000))


def test_range_state_adds_field_by_field_and_travels_in_the_range_counts():
    a, b = RangeState(3, 2, 0, 0), RangeState(5, 0, 1, 1)
    assert a + b == RangeState(8, 2, 1, 1) and a + RangeState() == a
    counts = RangeCounts(carry=a) + RangeCounts(docs=1) + RangeCounts(carry=b)
    assert counts.carry_of(RangeState) == RangeState(8, 2, 1, 1) and RangeCounts().carry_of(RangeState) == RangeState()


# ----------------------------------------------------------------------------- count-only passes


def test_count_only_passes_continue_the_file_as_its_extraction(tmp_path):
    """A count-only pass knows nothing of the ranges before it: what it counts for a range after a
    stop, or where a limit hit meets an earlier range's error, must lead later ranges to the same
    bytes as the ranges' own extraction."""
    mid = "<hi>" * 300 + "y" + "</hi>" * 300
    stop = [f'<doc id="k{i}"><p>t {i} &u;</p></doc>' for i in range(10)]
    stop[1], stop[5] = '<doc id="ns"><q:p>x</q:p></doc>', f'<doc id="deep"><p>{mid}</p></doc>'
    stop[7] = "<doc><p>x</doc>"
    files = [macocu_file(DOCS), macocu_file(stop, head='<!DOCTYPE corpus SYSTEM "x.dtd">\n<corpus>\n', sep="\n"),
             macocu_file(stop[2:], head="<corpus>\n", sep="\n")]
    for data in files:
        check_counted_equals_extracted(tmp_path, data, (1, 40, 90, 200))


# ----------------------------------------------------------------------------- property

_DOC = st.one_of(
    st.builds(lambda n: f'<doc id="i{n}"><p>t{n}</p></doc>', st.integers(0, 99)),
    st.just("<doc><p>brez</p></doc>"),
    st.just('<doc id="e"><p> </p></doc>'),
    st.just('<doc id="d"><p>a &dec; &nope; b</p></doc>'),
    st.just('<doc id="o"><p>x</p><doc id="in"><p>y</p></doc>\n<doc id="in2"/></doc>'),
    st.just("<!-- </doc>\n<doc id='c'> -->"),
    st.just('<doc id="bad"><p>x</doc>'),
    st.just('<doc id="bytes"><p>\xff</p></doc>'),
    st.just("<doc id='r'><p>a\rb</p>\r\n<p>c</p></doc>"),
    st.just('<doc id="ns"><q:p>x</q:p><p>y</p></doc>'),  # a non-fatal error in the log
    st.just('<doc id="deep"><p>' + "<hi>" * 300 + "y" + "</hi>" * 300 + "</p></doc>"),  # a huge_tree retry
    st.builds(lambda n: f'<doc id="u{n}"><p>&u{n}; x</p>' + "<p>&w;</p>" * n + "</doc>", st.integers(0, 60)),
)
_HEADS = st.sampled_from(["<corpus>\n", HEAD, '<!DOCTYPE corpus SYSTEM "x.dtd" [<!ENTITY dec "d">]>\n<corpus>\n',
                          '\ufeff<?xml version="1.0"?>\r\n<corpus a="1">\r\n',
                          '<!DOCTYPE corpus SYSTEM "x.dtd">\n<m:corpus xmlns:m="urn:m">\n<head/>'])


@st.composite
def macocu_files(draw) -> bytes:
    docs = draw(st.lists(_DOC, min_size=1, max_size=14))
    sep = draw(st.sampled_from(["\n", "\r\n", "\n\n  ", "", "\r"]))
    tail = draw(st.sampled_from(["\n</corpus>\n", "</corpus>", "\n", "</m:corpus>"]))
    text = draw(_HEADS) + sep.join(docs) + tail
    return text.encode("utf-8", "surrogateescape").replace("\xff".encode(), b"\xff")


def test_property_split_equals_unsplit(tmp_path_factory):
    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=macocu_files(), split_bytes=st.integers(1, 300), workers=st.sampled_from([1, 2]))
    def check(data, split_bytes, workers):
        root = tmp_path_factory.mktemp("macocu")
        files = {"x.xml": data, "y.xml": data}
        whole = extract(root / "whole", "macocu", files, 0)
        assert_same(extract(root / "split", "macocu", files, split_bytes, workers), whole, f"split_bytes={split_bytes}")
        check_counted_equals_extracted(root, data, (split_bytes,))

    check()


@pytest.mark.long
def test_property_split_equals_unsplit_long(tmp_path_factory):
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=macocu_files(), split_bytes=st.integers(1, 300))
    def check(data, split_bytes):
        root = tmp_path_factory.mktemp("macocu")
        whole = extract(root / "whole", "macocu", {"x.xml": data}, 0)
        got = extract(root / "split", "macocu", {"x.xml": data}, split_bytes)
        assert_same(got, whole, f"split_bytes={split_bytes}")

    check()
