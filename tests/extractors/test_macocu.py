"""macocu extractor: extraction-formats (macocu), ADDENDUM 3.1, 3.2, 4.6, D3, D4, D6, D7, D13, D18, S1, S3."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from lxml import etree

from slm4ie_assets.extractors.extract_context import ExtractContext
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.macocu.doc_pass import DOC_METADATA_KEYS, _release
from slm4ie_assets.extractors.macocu.extractor import MacocuExtractor
from support.extraction import Result, extract_raw
from support.files import ordered

SEED_EXAMPLE = """<corpus id="MaCoCu-sl-2.0">
  <doc id="macocu.sl.1" title="Page One" url="https://example.com/1"
       crawl_date="2022-07-01" lm_score="0.95">
    <p id="macocu.sl.1.1" lang="sl">Dober dan.</p>
    <p id="macocu.sl.1.2" lang="sl">Kako ste?</p>
  </doc>
</corpus>
"""


def extract(tmp_path: Path, files: dict, key: str = "mac", workers: int = 1) -> Result:
    """Write `files` under raw/<key>/ and run the plain pipeline (plan, extract, publish)."""
    return extract_raw(tmp_path, key, "macocu", "web", files, workers)


def corpus(*docs: str, head: str = "") -> str:
    return head + "<corpus>\n" + "\n".join(docs) + "\n</corpus>\n"


# ----------------------------------------------------------------------------- the format


def test_seed_example_exact_output_line(tmp_path):
    """extraction-formats macocu: the documented example, through the whole pipeline."""
    r = extract(tmp_path, {"sl.xml": SEED_EXAMPLE})
    assert ordered(r.lines) == ordered([{
        "text": "Dober dan.\nKako ste?", "source": "mac", "domain": "web", "doc_id": "macocu.sl.1",
        "uid": "mac:macocu.sl.1",
        "metadata": {"title": "Page One", "crawl_date": "2022-07-01", "url": "https://example.com/1",
                     "lm_score": "0.95"},
    }])
    assert r.drops == {}


def test_metadata_whitelist_in_whitelist_order_present_nonempty_strings_only(tmp_path):
    """ADDENDUM 4.6 Metadata: _DOC_METADATA_KEYS in order, present and non-empty, values stay strings,
    every other attribute dropped."""
    doc = ('<doc lm_score="0.95" file_type="html" domain="si" url="https://x.si" lang_distr="[(\'sl\', 0.9)]" '
           'crawl_date="2022-07-01" title="T" id="d1" lang_var="sl" biroamer_entities="3" extra=""><p>t</p></doc>')
    r = extract(tmp_path, {"a.xml": corpus(doc, '<doc id="d2" title="" url="u" lm_score=" "><p>u</p></doc>')})
    assert DOC_METADATA_KEYS == ("title", "crawl_date", "lang_distr", "url", "domain", "file_type", "lm_score")
    assert ordered(r.lines[0]["metadata"]) == ordered({
        "title": "T", "crawl_date": "2022-07-01", "lang_distr": "[('sl', 0.9)]", "url": "https://x.si",
        "domain": "si", "file_type": "html", "lm_score": "0.95"})
    assert r.lines[0]["domain"] == "web"  # metadata.domain has nothing to do with the top-level domain
    assert r.lines[1]["metadata"] == {"url": "u", "lm_score": " "}  # empty dropped, whitespace is not empty


def test_text_is_stripped_outermost_paragraphs_joined_by_newline(tmp_path):
    """ADDENDUM 4.6 Text: text nodes of each <p> concatenated (tails of inline children included,
    comments and PIs excluded), stripped, empty ones dropped, joined with a newline; whitespace
    inside a <p> is preserved; text outside any <p> is ignored."""
    doc = ('<doc id="a">outside<p>  Prvi <b>krepki</b> rep<!-- opomba -->, <?pi x?>konec.  </p>tail'
           '<p>   </p><p/><div><p>V\n  divu</p></div><p>\tzadnji\t</p></doc>')
    r = extract(tmp_path, {"a.xml": corpus(doc)})
    assert r.texts == ["Prvi krepki rep, konec.\nV\n  divu\nzadnji"]


def test_nested_paragraphs_belong_to_the_outermost_and_are_emitted_once(tmp_path):
    """D13 (replaces Q11): a nested <p> is part of the outer one, never emitted a second time."""
    r = extract(tmp_path, {"a.xml": corpus('<doc id="a"><p>zunaj <p>notri</p> rep</p><p>drugi</p></doc>')})
    assert r.texts == ["zunaj notri rep\ndrugi"]


def test_nested_doc_belongs_to_the_outermost_doc(tmp_path):
    """D13: containers of the same kind nested in each other yield one document, the outer one."""
    r = extract(tmp_path, {"a.xml": corpus('<doc id="outer"><p>ena</p><doc id="inner"><p>dva</p></doc><p>tri</p></doc>',
                                           '<doc id="next"><p>štiri</p></doc>')})
    assert r.ids == ["outer", "next"]
    assert r.texts == ["ena\ndva\ntri", "štiri"]


def test_only_unnamespaced_doc_and_p_count(tmp_path):
    """ADDENDUM 4.6 Streaming: namespaced <doc> elements yield nothing; a namespaced <p> is not a paragraph."""
    r = extract(tmp_path, {"a.xml": corpus('<doc xmlns="urn:x" id="ns"><p>ne</p></doc>',
                                           '<m:doc xmlns:m="urn:m" id="ns2"><p>ne</p></m:doc>',
                                           '<doc id="plain"><p xmlns="urn:y">ne</p><p>da</p></doc>')})
    assert r.ids == ["plain"]
    assert r.texts == ["da"]


# ----------------------------------------------------------------------------- ids


def test_doc_without_usable_id_gets_the_file_position_fallback(tmp_path):
    """D3/S1 (replaces Q1's idx- ids) and D4: a missing or blank id becomes <rel_stem>:<n>, n counting
    every document emitted from the file (those with ids too); a non-blank id is kept unstripped."""
    r = extract(tmp_path, {"sub/part.v2.xml": corpus('<doc id="a"><p>1</p></doc>', '<doc><p>2</p></doc>',
                                                     '<doc id="  "><p>3</p></doc>', '<doc id=" b "><p>4</p></doc>')})
    assert r.ids == ["a", "sub/part.v2:000001", "sub/part.v2:000002", " b "]
    assert [x["uid"] for x in r.lines][1] == "mac:sub/part.v2:000001"


def test_fallback_position_does_not_count_skipped_docs(tmp_path):
    """S1: skipped documents (here an empty one, D7) do not use up a position."""
    r = extract(tmp_path, {"x.xml": corpus('<doc><p> </p></doc>', '<doc><p>a</p></doc>', '<doc><p>b</p></doc>')})
    assert r.ids == ["x:000000", "x:000001"]


# ----------------------------------------------------------------------------- bad input (D6, D7, S3)


def test_doc_without_text_is_skipped_and_counted_naming_file_and_line(tmp_path):
    """D7 (replaces 'skipped silently'): a <doc> whose text ends up empty is counted, with a warning
    naming the file, line and element."""
    r = extract(tmp_path, {"a.xml": '<corpus>\n<doc id="e1"><p> \n </p></doc>\n<doc id="e2">text outside</doc>\n'
                                    '<doc id="ok"><p>x</p></doc></corpus>'})
    assert r.ids == ["ok"]
    assert r.drops == {"empty_text": 2}
    assert any("mac/a.xml:2" in w and "e1" in w for w in r.warnings)
    assert any("mac/a.xml:4" in w and "e2" in w for w in r.warnings)  # e1 spans lines 2-3


def test_parse_error_keeps_closed_docs_drops_the_open_one_and_the_rest(tmp_path):
    """S3/D6: on an XML syntax error the documents closed before it are kept, the one in progress and
    the rest of the file are skipped with a warning naming file and line; other files are still read."""
    bad = ('<corpus>\n<doc id="k1"><p>ena</p></doc>\n<doc id="k2"><p>dva</p></doc>\n'
           '<doc id="open"><p>tri</doc>\n<doc id="after"><p>štiri</p></doc>\n</corpus>\n')
    r = extract(tmp_path, {"a.xml": bad, "b.xml": corpus('<doc id="b1"><p>b</p></doc>')})
    assert r.ids == ["k1", "k2", "b1"]
    assert r.drops == {"xml_syntax_error": 1}
    [warning] = r.warnings
    assert warning.startswith("mac/a.xml:4:") and "mismatch" in warning and "2 document(s)" in warning


def test_invalid_bytes_stop_the_file_and_keep_what_was_read(tmp_path):
    """D6/S3 (replaces Q13): undecodable bytes skip the rest of the file, counted, the line named."""
    data = (b'<corpus>\n<doc id="k1"><p>ena</p></doc>\n<doc id="k2"><p>dv\xffa</p></doc>\n'
            b'<doc id="k3"><p>x</p></doc>\n</corpus>')
    r = extract(tmp_path, {"a.xml": data, "b.xml": corpus('<doc id="b1"><p>b</p></doc>')})
    assert r.ids == ["k1", "b1"]
    assert r.drops == {"invalid_bytes": 1}
    assert r.warnings[0].startswith("mac/a.xml:3:")


def test_undefined_entity_without_doctype_is_a_parse_error_naming_the_entity(tmp_path):
    """ADDENDUM 4.6 Errors / S3: without a DOCTYPE an undefined entity is fatal at that point; the
    warning carries libxml2's real message, not lxml's generic one."""
    data = '<corpus>\n<doc id="k1"><p>a</p></doc>\n<doc id="k2"><p>&nope; b</p></doc>\n</corpus>'
    r = extract(tmp_path, {"a.xml": data})
    assert r.ids == ["k1"]
    assert r.drops == {"xml_syntax_error": 1}
    assert "mac/a.xml:3" in r.warnings[0] and "nope" in r.warnings[0]


def test_undefined_entity_under_external_doctype_keeps_every_doc_and_is_counted(tmp_path):
    """ADDENDUM 4.6 Errors: under a DOCTYPE whose DTD is not loaded an undefined entity is recoverable;
    every document is emitted. D6: not silent, the reference's after-the-fact warning is a ledger entry.
    The reference kept no trace of the entity; here it stays verbatim in the text."""
    data = ('<!DOCTYPE corpus SYSTEM "macocu.dtd">\n<corpus>\n<doc id="k1"><p>a &nbsp; b</p></doc>\n'
            '<doc id="k2"><p>c</p></doc>\n</corpus>')
    r = extract(tmp_path, {"a.xml": data})
    assert r.ids == ["k1", "k2"]
    assert r.texts == ["a &nbsp; b", "c"]
    assert r.drops == {"undefined_entity": 1}
    assert "mac/a.xml:3" in r.warnings[0] and "nbsp" in r.warnings[0]


def test_declared_entities_are_left_out_of_the_text_and_counted_as_in_tei(tmp_path):
    """D6, as tei: a reference to an entity the file declares (internal or SYSTEM) is never expanded;
    its text is missing, so it is counted as `unexpanded_entity`, naming the entity, the doc and the
    line; an undeclared one beside it stays verbatim and is counted as `undefined_entity`."""
    data = ('<!DOCTYPE corpus SYSTEM "macocu.dtd" [<!ENTITY m "<b>injected</b>">'
            '<!ENTITY ext SYSTEM "file:///etc/hostname">]>\n<corpus>\n'
            '<doc id="k1"><p>a &m; b &nbsp; c</p></doc>\n<doc id="k2"><p>&ext;</p><p>d</p></doc>\n</corpus>')
    r = extract(tmp_path, {"a.xml": data})
    assert r.ids == ["k1", "k2"]
    assert r.texts == ["a  b &nbsp; c", "d"]
    assert r.drops == {"unexpanded_entity": 2, "undefined_entity": 1}
    assert r.warnings[0].startswith("mac/a.xml:3: entity reference &m; in <doc id='k1'> is never expanded")
    assert r.warnings[1].startswith("mac/a.xml:4: entity reference &ext; in <doc id='k2'>")
    assert "nbsp" in r.warnings[2] and r.warnings[2].endswith("[undefined_entity]")


def test_huge_text_node_and_deep_nesting_get_the_huge_tree_retry_once(tmp_path):
    """As tei (xml.retry): a text node over libxml2's default 10 MB or nesting over 256 is read on a
    huge_tree retry, with each document and drop delivered once; nesting over 2048 stays refused."""
    big = "beseda " * 1_600_000  # 11.2 MB in one text node
    mid = "<hi>" * 600 + "y" + "</hi>" * 600
    wrapped = "<x>" * 1500 + "<p>z</p>" + "</x>" * 1500  # a paragraph deeper than Python recurses
    deep = "<hi>" * 3000 + "z" + "</hi>" * 3000
    r = extract(tmp_path, {
        "a.xml": corpus('<doc id="e"><p> </p></doc>', '<doc id="a"><p>ena</p></doc>', f'<doc id="b"><p>{big}</p></doc>',
                        f'<doc id="m"><p>{mid}</p>{wrapped}</doc>', '<doc id="c"><p>tri</p></doc>'),
        "b.xml": corpus('<doc id="ok"><p>ok</p></doc>', f'<doc id="deep"><p>{deep}</p></doc>')})
    assert r.ids == ["a", "b", "m", "c", "ok"]
    assert len(r.texts[1]) == len(big.strip()) and r.texts[2] == "y\nz"
    assert r.drops == {"empty_text": 1, "xml_syntax_error": 1}
    assert r.warnings[1].startswith("mac/b.xml") and "kept the 1 document(s)" in r.warnings[1]


def test_entity_amplification_is_refused_and_never_retried(tmp_path, monkeypatch):
    from slm4ie_assets.extractors.xml import retry as xml_retry

    calls = []
    real = xml_retry.is_resource_limit
    monkeypatch.setattr(xml_retry, "is_resource_limit", lambda *a: calls.append(a) or real(*a))
    lol = '<!ENTITY l0 "lol">' + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    r = extract(tmp_path, {"a.xml": corpus('<doc id="k1"><p>a</p></doc>', '<doc id="k2"><p>&l9;</p></doc>',
                                           head=f"<!DOCTYPE corpus [{lol}]>\n")})
    assert r.ids == ["k1"] and r.drops == {"xml_syntax_error": 1} and "amplification" in r.warnings[0]
    # asked once per parse (the chunk with the error is read once more, carefully), never a limit
    assert calls and not any(real(*c) for c in calls)


def test_empty_file_gives_a_warning_and_no_documents(tmp_path):
    """ADDENDUM 4.6 Errors: an empty file warns (counted, D6) and yields nothing."""
    r = extract(tmp_path, {"a.xml": "", "b.xml": corpus('<doc id="b"><p>b</p></doc>')})
    assert r.ids == ["b"]
    assert r.drops == {"xml_syntax_error": 1}
    assert r.warnings[0].startswith("mac/a.xml")


def test_encoding_declaration_is_honoured(tmp_path):
    """ADDENDUM 3.2: XML input honours its encoding declaration (ISO-8859-2 works)."""
    data = ('<?xml version="1.0" encoding="ISO-8859-2"?>\n'
            '<corpus><doc id="č" title="Šola"><p>Žaba čaka.</p></doc></corpus>')
    r = extract(tmp_path, {"a.xml": data.encode("iso-8859-2")})
    assert r.lines[0]["doc_id"] == "č"
    assert r.texts == ["Žaba čaka."]
    assert r.lines[0]["metadata"] == {"title": "Šola"}


def test_directories_named_xml_are_ignored_and_files_found_recursively_in_order(tmp_path):
    """ADDENDUM 3.1 / D6 (replaces Q20): recursive discovery in component order; a directory named
    *.xml is not an input."""
    files = {"a.xml": corpus('<doc id="a"><p>a</p></doc>'), "a/b.xml": corpus('<doc id="ab"><p>ab</p></doc>'),
             "a.b.xml": corpus('<doc id="a.b"><p>a.b</p></doc>'), "dir.xml/inner.txt": "not xml",
             ".h.xml": corpus('<doc id="h"><p>h</p></doc>'), "notes.txt": "<corpus/>"}
    r = extract(tmp_path, files)
    assert r.ids == ["h", "ab", "a.b", "a"]
    assert r.drops == {}


# ----------------------------------------------------------------------------- security


def test_no_external_entity_or_dtd_is_ever_read(tmp_path):
    """Security: entities declared with SYSTEM identifiers (general and parameter) and external DTDs
    are never fetched, so a file's content can never leak into the output."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    evil_dtd = tmp_path / "evil.dtd"
    evil_dtd.write_text(f'<!ENTITY leak SYSTEM "file://{secret}">')
    data = (f'<!DOCTYPE corpus SYSTEM "file://{evil_dtd}" [\n'
            f'<!ENTITY xxe SYSTEM "file://{secret}">\n'
            f'<!ENTITY % pe SYSTEM "file://{evil_dtd}"> %pe;\n]>\n'
            '<corpus><doc id="a" title="&xxe;"><p>x &xxe; &leak; y</p></doc></corpus>')
    r = extract(tmp_path, {"a.xml": data})
    assert "TOPSECRET" not in json.dumps(r.lines)


# ----------------------------------------------------------------------------- streaming and sharding


def test_finished_docs_and_their_predecessors_are_released():
    """Streaming: after each <doc> nothing before it stays in the tree (comments included) and the
    element itself is emptied, so memory is bounded by one document however long the file is."""
    import io

    xml = b"<corpus>" + b"".join(b'<doc id="%d"><p>x</p></doc><!--c-->' % i for i in range(500)) + b"</corpus>"
    seen = 0
    for _, elem in etree.iterparse(io.BytesIO(xml), events=("end",), tag="doc"):
        parent = elem.getparent()
        _release(elem)
        assert parent.index(elem) == 0 and len(elem) == 0 and not elem.attrib  # nothing before it, nothing in it
        seen += 1
    assert seen == 500


def test_peak_memory_does_not_grow_with_file_size(tmp_path):
    """Streaming (ADDENDUM 4.6, D12's bound): peak RSS over a ~34 MB file stays within 25 MB of the
    peak over a ~1 MB one (a tree kept whole would need hundreds of MB)."""
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        from slm4ie_assets.extractors.extract_context import ExtractContext
        from slm4ie_assets.extractors.input_file import InputFile
        from slm4ie_assets.extractors.macocu.extractor import MacocuExtractor
        path = Path(sys.argv[1])
        n = sum(1 for _ in MacocuExtractor().extract(InputFile(path, path.name), ExtractContext("m", path.parent)))
        # VmHWM (KiB): ru_maxrss would start at the forking pytest process's peak, kept across exec
        print(n, next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))
    """)
    para = "<p>" + "beseda " * 60 + "</p>"
    doc = "<doc id=\"d\" title=\"t\">" + para * 20 + "</doc>\n"
    peaks = {}
    for name, count in (("small", 100), ("large", 4000)):
        path = tmp_path / f"{name}.xml"
        with open(path, "w") as fh:
            fh.write("<corpus>\n")
            for _ in range(count):
                fh.write(doc)
            fh.write("</corpus>\n")
        out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
        docs, peak_kb = map(int, out.stdout.split())
        assert docs == count
        peaks[name] = peak_kb
    assert (tmp_path / "large.xml").stat().st_size > 30_000_000
    assert peaks["large"] - peaks["small"] < 25 * 1024, peaks


def test_each_file_is_one_shard_and_two_workers_publish_the_same_bytes(tmp_path):
    """D18: the unit is one file; extraction per file is independent, so a two-worker run publishes
    exactly what a one-worker run does (fallback ids included)."""
    files = {f"f{i}.xml": corpus(f'<doc id="d{i}"><p>p{i}</p></doc>', f'<doc><p>anon {i}</p></doc>') for i in range(3)}
    one = extract(tmp_path / "one", files)
    extract(tmp_path / "two", files, workers=2)
    assert one.report.shards == 3
    assert (tmp_path / "one/out/mac.jsonl").read_bytes() == (tmp_path / "two/out/mac.jsonl").read_bytes()
    assert one.ids == ["d0", "f0:000001", "d1", "f1:000001", "d2", "f2:000001"]


def test_extractor_reads_one_file_on_its_own(tmp_path):
    """D18: a file's documents do not depend on any other file or on earlier calls."""
    a = tmp_path / "a.xml"
    a.write_text(corpus('<doc id="a"><p>a</p></doc>'))
    ex = MacocuExtractor()
    ctx = ExtractContext("m", tmp_path)
    first = [(d.text, d.doc_id, d.metadata) for d in ex.extract(InputFile(a, "a.xml"), ctx)]
    again = [(d.text, d.doc_id, d.metadata) for d in MacocuExtractor().extract(InputFile(a, "a.xml"), ctx)]
    assert first == again == [("a", "a", {})]


def test_unreadable_file_is_skipped_with_a_warning(tmp_path):
    """D6: a file that cannot be opened is skipped and counted; the rest of the dataset is extracted."""
    (tmp_path / "gone.xml").symlink_to(tmp_path / "missing-target.xml")
    ok = tmp_path / "sl.xml"
    ok.write_text(corpus('<doc id="a"><p>a</p></doc>'))
    ex = MacocuExtractor()
    ctx = ExtractContext("m", tmp_path)
    assert list(ex.extract(InputFile(tmp_path / "gone.xml", "gone.xml"), ctx)) == []
    assert [d.doc_id for d in ex.extract(InputFile(ok, "sl.xml"), ctx)] == ["a"]
    assert dict(ctx.ledger.counts) == {"unreadable_file": 1}
    assert ctx.ledger.warnings[0].startswith("m/gone.xml:")


# ----------------------------------------------------------------------------- max_document_bytes (docs/memory.md)


def _xml(*docs: str) -> str:
    return "<corpus>\n" + "\n".join(docs) + "\n</corpus>\n"  # as corpus(), which the fixture's name hides here


def _capped_expectation(whole, cap: int, key: str) -> tuple[list, list]:
    """The lines and the warnings a cap should give, from the uncapped run: a `<doc>` whose text is
    over `cap` UTF-8 bytes is dropped, its warning in its place among the others (its fallback id
    from the uncapped line: ids here are never blank)."""
    lines, warnings, at = [], list(whole.warnings), 0
    for line in whole.lines:
        size = len(line["text"].encode())
        if size > cap:
            warnings.insert(at, f"{key}/a.xml: document {line['doc_id']!r}: its text is {size:,} bytes, over "
                                f"max_document_bytes ({cap:,}); skipped [document_too_large]")
        else:
            lines.append(line)
    return lines, warnings


def test_a_doc_over_the_cap_lets_its_paragraphs_go_with_the_same_drops(corpus):
    """Under a cap each outermost `<p>` is read as it ends and freed; past the cap only its size is
    counted. Entities (counted at the `<doc>`'s end, as before), nested `<p>` and `<doc>`, comments,
    a `<p>` outside every `<doc>` and the huge_tree retry give the same documents and drops."""
    entities = ('<!DOCTYPE corpus SYSTEM "macocu.dtd" [<!ENTITY m "<b>injected</b>">]>\n<corpus>\n'
                '<doc id="k1"><p>a &m; b &nbsp; c</p><p>zunanji <p>notranji</p> konec</p></doc>\n'
                '<doc id="k2"><div><p>v divu</p></div><doc id="g"><p>gnezden</p></doc><p><!-- k -->po</p></doc>\n'
                '<p>zunaj</p><doc id="k3"><p> </p></doc>\n</corpus>')
    retried = _xml('<doc id="a"><p>ena</p></doc>', '<doc id="b"><p>' + "beseda " * 1_600_000 + "</p></doc>",
                         '<doc id="c"><p>tri</p><p>' + "<hi>" * 600 + "y" + "</hi>" * 600 + "</p></doc>")
    for data, caps in ((entities, (1, 12, 30, 10**6)), (retried, (5,))):
        whole = corpus.run("mac", "macocu", {"a.xml": data})
        for cap in caps:
            capped = corpus.run("mac", "macocu", {"a.xml": data}, max_document_bytes=cap)
            lines, warnings = _capped_expectation(whole, cap, "mac")
            assert capped.lines == lines, cap
            assert sorted(capped.warnings) == sorted(warnings), cap
            assert [w for w in capped.warnings if "too_large" not in w] == whole.warnings, cap
