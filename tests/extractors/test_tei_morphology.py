"""TEI morphology: ADDENDUM 6.2 (msd, ana/MTE table) as amended by D21 and S9 (pos)."""

import pytest

from slm4ie_assets.extractors.tei.morphology import UPOS_TAGS, MorphologyCache, parse_ana, parse_msd, upos_from_mte


@pytest.mark.parametrize("code, upos", [
    ("Ncmsn", "NOUN"), ("Npmsn", "PROPN"), ("Nc", "NOUN"), ("N", "NOUN"),
    ("Vmpr3s", "VERB"), ("Va-r3s-n", "AUX"), ("V", "VERB"),
    ("Cc", "CCONJ"), ("Cs", "SCONJ"), ("C", "CCONJ"),
    ("Z", "PUNCT"), ("Agpmsn", "ADJ"), ("Pp1-sn", "PRON"), ("Rgp", "ADV"), ("Sl", "ADP"), ("Mdc", "NUM"),
    ("Q", "PART"), ("I", "INTJ"), ("Y", "X"), ("Xf", "X"),
    ("Lx", None), ("ncmsn", None), ("np", None), ("va", None), ("-", None),
])
def test_addendum_6_2_mte_category_table_with_refinements(code, upos):
    assert upos_from_mte(code) == upos


def test_addendum_6_2_mte_refinement_is_case_sensitive_on_the_second_character():
    assert upos_from_mte("NP") == "NOUN" and upos_from_mte("VA") == "VERB" and upos_from_mte("CS") == "CCONJ"


@pytest.mark.parametrize("msd, expected", [
    ("UPosTag=NOUN|Case=Nom|Number=Sing", ("NOUN", "Case=Nom|Number=Sing")),
    ("UPosTag=PUNCT", ("PUNCT", None)),
    ("UPosTag=X|UPosTag=Y||Z=1", ("Y", "|Z=1")),  # last UPosTag wins, empty parts kept
    ("Case=Nom", (None, "Case=Nom")),
    ("Case=Nom|UPosTag=ADJ", ("ADJ", "Case=Nom")),
    ("|", (None, "|")),
    ("UPosTag=", ("", None)),
])
def test_addendum_6_2_msd_split(msd, expected):
    assert parse_msd(msd) == expected


@pytest.mark.parametrize("ana, expected", [
    ("mte:Ncmsn", ("NOUN", "MTE=Ncmsn")),
    ("#foo mte:Va-r3s-n", ("AUX", "MTE=Va-r3s-n")),
    ("#mte:Ncmsn", (None, None)),  # "#mte:" does not count
    ("mte: mte:Ncmsn", (None, None)),  # the first mte: part is empty: the search stops there
    ("mte:Lx", (None, "MTE=Lx")),  # unknown category: code kept, upos unknown
    ("ud:NOUN", (None, None)),
    ("", (None, None)),
    (None, (None, None)),
    ("  mte:Z\tother", ("PUNCT", "MTE=Z")),
])
def test_addendum_6_2_ana_first_mte_part(ana, expected):
    assert parse_ana(ana) == expected


def test_s9_order_msd_then_ana_then_pos():
    m = MorphologyCache()
    # a non-empty msd wins even without UPosTag, and ana is then ignored
    assert m.resolve("Case=Nom", "mte:Ncmsn", None) == (None, "Case=Nom")
    # ... but pos can still supply the upos (D21); feats stay msd's
    assert m.resolve("Case=Nom|XPOS=Ncmsn", "mte:Ncmsn", "NOUN") == ("NOUN", "Case=Nom|XPOS=Ncmsn")
    # msd UPosTag beats pos
    assert m.resolve("UPosTag=PROPN", None, "NOUN") == ("PROPN", None)
    # empty msd: ana
    assert m.resolve("", "mte:Va-r3s-n", "VERB") == ("AUX", "MTE=Va-r3s-n")
    assert m.resolve(None, "mte:Cs", None) == ("SCONJ", "MTE=Cs")
    # unknown MTE category falls through to pos; feats do not change
    assert m.resolve(None, "mte:Lx", "ADV") == ("ADV", "MTE=Lx")
    # empty mte code: (null, null), then pos
    assert m.resolve(None, "mte:", "NOUN") == ("NOUN", None)
    # nothing at all
    assert m.resolve(None, None, None) == (None, None)


@pytest.mark.parametrize("pos", ["noun", "Noun", " NOUN", "NOUN ", "N", "PROPN|X", "", "NCMSN"])
def test_s9_pos_used_only_when_exactly_one_of_the_17_upos_tags(pos):
    assert MorphologyCache().resolve(None, None, pos) == (None, None)


def test_s9_pos_accepts_each_of_the_17_upos_tags():
    assert len(UPOS_TAGS) == 17
    m = MorphologyCache()
    for tag in sorted(UPOS_TAGS):
        assert m.resolve(None, None, tag) == (tag, None)


def test_cache_returns_the_same_objects_for_repeated_strings():
    m = MorphologyCache()
    a = m.resolve("UPosTag=NOUN|Case=Nom", None, None)
    b = m.resolve("".join(["UPosTag=NOUN|", "Case=Nom"]), None, None)  # an equal but distinct string
    assert a == b and a[1] is b[1]
