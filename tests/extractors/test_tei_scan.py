"""TEI structure detection: ADDENDUM 6.1 as amended by S7, S8, D19 (tei/scan.py)."""

import pytest

from slm4ie_assets.extractors.tei import scan as tei_scan
from slm4ie_assets.extractors.tei.scan import (
    ANNOTATED,
    PLAIN,
    PLAIN_UTTERANCES,
    ascii_compatible,
    byte_scan,
    detect_structure,
)

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'


def write(tmp_path, text, name="f.xml", encoding="utf-8"):
    p = tmp_path / name
    p.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return p


@pytest.mark.parametrize("body, structure", [
    ("<p>plain</p>", PLAIN),
    ("<p><s><w>a</w></s></p>", ANNOTATED),
    ("<p><s><pc>.</pc></s></p>", PLAIN),  # 6.1: a file with only <pc> is not annotated
    ("<u><seg>a</seg></u>", PLAIN_UTTERANCES),  # D19
    ("<u><s>bare</s></u>", PLAIN),  # S8: <u> and <s> but no <w> stays plain
    ("<u><s><w>a</w></s></u>", ANNOTATED),
    ("<u/><p>x</p>", PLAIN_UTTERANCES),
])
def test_structure_by_presence_of_w_u_s(tmp_path, body, structure):
    p = write(tmp_path, f"<TEI {NS}><text><body>{body}</body></text></TEI>")
    assert detect_structure(p) == structure


def test_6_1_a_w_in_the_tei_header_makes_the_file_annotated(tmp_path):
    p = write(tmp_path, f"<TEI {NS}><teiHeader><w>x</w></teiHeader><text><body><p>a</p></body></text></TEI>")
    assert detect_structure(p) == ANNOTATED


def test_un_namespaced_and_commented_names_do_not_count(tmp_path):
    p = write(tmp_path, f"<TEI {NS}><text><body><!-- <w>x</w> <u> --><x xmlns=''><w>a</w><u>b</u></x>"
                        "<p>a</p></body></text></TEI>")
    assert byte_scan(p).w  # the bytes look like a <w> ...
    assert detect_structure(p) == PLAIN  # ... the parser knows better


def test_a_prefixed_tei_element_counts(tmp_path):
    p = write(tmp_path, '<t:TEI xmlns:t="http://www.tei-c.org/ns/1.0"><t:text><t:body><t:u><t:seg>a</t:seg>'
                        "</t:u></t:body></t:text></t:TEI>")
    assert byte_scan(p).u
    assert detect_structure(p) == PLAIN_UTTERANCES


def test_byte_scan_proves_absence_and_sees_names_split_across_chunks(tmp_path):
    plain = write(tmp_path, f"<TEI {NS}><text><body><p>uw: s &lt;w x</p><seg/><sic/></body></text></TEI>", "a.xml")
    found = byte_scan(plain)
    assert (found.w, found.u, found.s) == (False, False, False)
    # a <w> whose bytes straddle the 4 MB read boundary is still seen
    head = f"<TEI {NS}><text><body><p>"
    pad = tei_scan._CHUNK - 1 - len(head) - len("</p><s>")
    text = head + "x" * pad + "</p><s><w>a</w></s></body></text></TEI>"
    assert text.index("<w>") == tei_scan._CHUNK - 1  # "<" ends the first read, "w>" starts the next
    split = write(tmp_path, text, "b.xml")
    assert byte_scan(split).w
    assert detect_structure(split) == ANNOTATED


def test_byte_scan_is_skipped_for_encodings_that_are_not_ascii_compatible(tmp_path):
    text = f'<?xml version="1.0" encoding="UTF-16"?><TEI {NS}><text><body><u><seg>a</seg></u></body></text></TEI>'
    p = write(tmp_path, text, encoding="utf-16")
    assert byte_scan(p) is None
    assert detect_structure(p) == PLAIN_UTTERANCES


@pytest.mark.parametrize("head, ok", [
    (b'<?xml version="1.0" encoding="UTF-8"?><TEI>', True),
    (b'<?xml version="1.0" encoding="ISO-8859-2"?>', True),
    (b"<?xml version='1.0' encoding='windows-1250'?>", True),
    (b"\xef\xbb\xbf<TEI>", True),
    (b"<TEI>", True),
    (b'<?xml version="1.0" encoding="UTF-16"?>', False),
    (b"\xff\xfe<\x00", False),
    (b'<?xml version="1.0" encoding="UTF-7"?>', False),
    (b'<?xml version="1.0" encoding="no-such-codec"?>', False),
])
def test_ascii_compatibility_of_the_declared_encoding(head, ok):
    assert ascii_compatible(head) is ok


def test_scan_stops_at_the_first_w_without_reading_the_rest(tmp_path):
    # everything after the first <w> is garbage: a full parse would fail, the scan never gets there
    p = write(tmp_path, f"<TEI {NS}><text><body><s><w>a</w></s>" + "<" * 200_000 + "oops")
    assert detect_structure(p) == ANNOTATED
