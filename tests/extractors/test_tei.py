"""tei extractor: extraction-formats (tei, External-TSV metadata), ADDENDUM 6 (and 3.1, 3.2, 7) as
amended by D3, D4, D6, D12, D13, D19, D21 and S3, S6-S9."""

import resource
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.extractors.discovery import discover
from slm4ie_assets.extractors.drop_ledger import DropLedger
from slm4ie_assets.extractors.extract_context import ExtractContext
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.tei import streaming
from slm4ie_assets.extractors.tei.annotated import AnnotatedPass
from slm4ie_assets.extractors.tei.extractor import TeiExtractor
from slm4ie_assets.extractors.tei.plain import PlainPass
from slm4ie_assets.extractors.tei.tokens import DocTokens, SentenceReader
from slm4ie_assets.pipeline import extract_and_publish, plan_dataset
from support.corpora import load_compare_outputs
from support.extraction import over_cap_expectation
from support.paths import SHARED

TEI_KEYS = ("parlamint_si", "parlamint_si_plain", "ssj500k_tei", "classla_plain_tei", "eltec_slv", "eltec_slv_l2")
NS = 'xmlns="http://www.tei-c.org/ns/1.0"'


def tei(body: str, header: str = "", decl: str = '<?xml version="1.0" encoding="UTF-8"?>\n') -> str:
    return f"{decl}<TEI {NS}><teiHeader>{header}</teiHeader><text><body>{body}</body></text></TEI>\n"


def w(form, lemma=None, msd=None, join=None, **attrs) -> str:
    a = "".join(f' {k}="{v}"' for k, v in (("lemma", lemma), ("msd", msd), ("join", join), *attrs.items())
                if v is not None)
    return f"<w{a}>{form}</w>"


def pc(form, join=None) -> str:
    attr = " join=" + repr(join).replace(chr(39), chr(34)) if join else ""
    return f"<pc{attr}>{form}</pc>"


class Extracted:
    """The documents and the drop ledger of one file, through the extractor itself."""

    def __init__(self, path: Path, options=None, root: Path | None = None):
        root = root or path.parent
        ex = TeiExtractor(TeiExtractor.parse_options(options, "datasets.t.metadata"))
        ex.prepare(root)
        self.ledger = DropLedger()
        self.ctx = ExtractContext("t", root, self.ledger)
        self.docs = list(ex.extract(InputFile(path, path.relative_to(root).as_posix()), self.ctx))

    @property
    def texts(self):
        return [d.text for d in self.docs]

    @property
    def ids(self):
        return [d.doc_id for d in self.docs]

    @property
    def drops(self):
        return dict(self.ledger.counts)

    def ann(self, i=0):
        a = self.docs[i].annotations
        return None if a is None else {"forms": a.forms, "lemmas": a.lemmas, "upos": a.upos, "feats": a.feats,
                                       "space_after": a.space_after, "sentences": a.sentences}


def extract(tmp_path, content, name="f.xml", options=None) -> Extracted:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return Extracted(p, options, tmp_path)


# ----------------------------------------------------------------------------- the real samples


def test_real_tei_samples_equal_the_expected_outputs(tmp_path):
    """The six real TEI samples through the plain pipeline equal shared/corpora/expected
    (SOURCES.md: D19 for parlamint_si_plain, D13 for ssj500k_tei, D3 for eltec_slv, D21+D13 for
    eltec_slv_l2)."""
    compare = load_compare_outputs()
    corpora = SHARED / "corpora"
    doc = yaml.safe_load((corpora / "extract.yaml").read_text())
    doc["input_dir"] = str(corpora / "raw")  # tei never writes into the raw tree (no archives here)
    doc["output_dir"] = str(tmp_path / "out")
    doc["datasets"] = {k: doc["datasets"][k] for k in TEI_KEYS}
    cfg = tmp_path / "extract.yaml"
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
    catalog = load_catalog(cfg)
    failures = []
    for key in TEI_KEYS:
        extract_and_publish(plan_dataset(catalog.dataset(key), force=True, workers=1))
        try:
            compare.compare_key(key, tmp_path / "out", corpora / "expected")
        except compare.Mismatch as exc:
            failures.append(f"{key}: {exc}")
    assert not failures, "\n".join(failures)


# ----------------------------------------------------------------------------- routes


def test_plain_path_tei_header_p_is_never_a_document(tmp_path):
    r = extract(tmp_path, tei('<div><head>Naslov</head><p xml:id="p1">Prvi odstavek.</p></div>',
                              header="<fileDesc><publicationStmt><p>Copyright notice</p></publicationStmt>"
                                     "<sourceDesc><p>catalog code</p></sourceDesc></fileDesc>"))
    assert r.texts == ["Prvi odstavek."]
    assert r.ids == ["p1"]
    assert r.docs[0].annotations is None


def test_plain_path_pipeline_ids_fall_back_to_rel_stem_and_position_d3(corpus):
    body = '<p n="1">ena</p><p xml:id="own">dva</p><p>   </p><p>tri</p>'
    r = corpus.run("t", "tei", {"sub/a.b.xml": tei(body)})
    assert r.texts == ["ena", "dva", "tri"]
    assert r.ids == ["sub/a.b:000000", "own", "sub/a.b:000002"]  # S1: n counts emitted documents
    assert r.sidecar is None


def test_d4_blank_or_non_name_xml_id_is_read_not_rejected(corpus):
    """The parser does not enforce xml:id syntax (xml.parser.parser_options), so nothing is cut off:
    a blank xml:id is a missing id (D4, S2) and gets the D3 fallback; another one is kept as it is."""
    r = corpus.run("t", "tei", {"f.xml": tei('<p xml:id="">a</p><p xml:id="  ">b</p><p xml:id="1.2">c</p>')})
    assert r.ids == ["f:000000", "f:000001", "1.2"] and r.drops == {}


def test_s7_plain_reads_every_body_of_a_tei_corpus_and_every_text_of_a_group(tmp_path):
    doc = (f'<teiCorpus {NS}><teiHeader><p>h</p></teiHeader>'
           '<TEI><teiHeader><p>h1</p></teiHeader><text><body><p>a</p></body></text></TEI>'
           '<TEI><teiHeader><p>h2</p></teiHeader><text><front><p>front</p></front><group>'
           '<text><body><p>b</p></body></text><text><body><p>c</p></body></text></group>'
           '<back><p>back</p></back></text></TEI></teiCorpus>')
    assert extract(tmp_path, doc).texts == ["a", "b", "c"]


def test_d13_plain_nested_p_belongs_to_the_outermost_and_text_is_all_descendant_text(tmp_path):
    body = ('<p>no id<p xml:id="in">inner</p>tail</p>'
            '<p>  lead <hi rend="b">bold</hi><!-- c --><?pi x?> after <![CDATA[<cdata>]]>\n end  </p>')
    r = extract(tmp_path, tei(body))
    assert r.texts == ["no idinnertail", "lead bold after <cdata>\n end"]
    assert r.ids == [None, None]


@pytest.mark.parametrize("choice, text", [
    ("<choice><orig>stari</orig><reg>novi</reg></choice>", "xnoviy"),
    ("<choice><sic>napak</sic><corr>popravek</corr></choice>", "xpopraveky"),
    ("<choice><abbr>dr.</abbr><expan>doktor</expan></choice>", "xdoktory"),
    ("<choice><sic>s</sic><orig>o</orig></choice>", "xoy"),  # orig before sic
    ("<choice><abbr>a</abbr><sic>s</sic></choice>", "xsy"),  # sic before abbr
    ("<choice><corr>c</corr><reg>r</reg><expan>e</expan></choice>", "xry"),  # reg first
    ("<choice><seg>prvi</seg><seg>drugi</seg></choice>", "xprviy"),  # else the first child
    ("<choice> <!-- c --> <seg>prvi</seg> ws <seg>drugi</seg></choice>", "xprviy"),
])
def test_s6_choice_takes_one_reading_in_plain_text(tmp_path, choice, text):
    assert extract(tmp_path, tei(f"<p>x{choice}y</p>")).texts == [text]


def test_pc_only_file_is_plain_not_annotated(tmp_path):
    r = extract(tmp_path, tei("<p><s><pc>.</pc></s> tekst</p>"))
    assert r.texts == [". tekst"] and r.docs[0].annotations is None


def test_un_namespaced_elements_are_invisible(tmp_path):
    r = extract(tmp_path, '<TEI><text><body><p>a</p><s><w>b</w></s></body></text></TEI>')
    assert r.docs == [] and r.drops == {}


def test_per_file_path_one_document_named_by_the_file_stem(tmp_path):
    body = ('<p><s>' + w("Dober", "dober", "UPosTag=ADJ|Case=Nom") + w("dan", "dan", "UPosTag=NOUN", join="right")
            + pc(".") + "</s></p><p><s>" + w("Zdravo") + "</s></p>")
    r = extract(tmp_path, tei(body), name="dir/x.y.xml")
    assert r.ids == ["x.y"]
    assert r.texts == ["Dober dan.\nZdravo"]
    assert r.ann() == {"forms": ["Dober", "dan", ".", "Zdravo"], "lemmas": ["dober", "dan", None, None],
                       "upos": ["ADJ", "NOUN", None, None], "feats": ["Case=Nom", None, None, None],
                       "space_after": [True, False, True, True], "sentences": [[0, 2], [3, 3]]}


def test_6_4_per_file_includes_sentences_in_the_tei_header(tmp_path):
    r = extract(tmp_path, tei("<p><s>" + w("b") + "</s></p>", header="<s>" + w("a") + "</s>"))
    assert r.texts == ["a\nb"]


def test_per_file_pipeline_sidecar(corpus):
    r = corpus.run("t", "tei", {"a.xml": tei("<p><s>" + w("A", "a", "UPosTag=X") + "</s></p>"),
                                "b.xml": tei("<p>plain</p>")})
    assert r.ids == ["a", "b:000000"]
    assert r.sidecar == [{"doc_id": "a", "uid": "t:a", "forms": ["A"], "lemmas": ["a"], "upos": ["X"],
                          "feats": [None], "space_after": [True], "sentences": [[0, 0]]},
                         {"doc_id": "b:000000", "uid": "t:b:000000"}]


# ----------------------------------------------------------------------------- tokens (6.2, D13, S6)


@pytest.mark.parametrize("wrapper", ["name", "seg", "rs", "hi"])
def test_d13_tokens_at_any_depth_under_s(tmp_path, wrapper):
    s = f'<s>{w("a")}<{wrapper}>{w("b")}<{wrapper}><name>{w("c")}</name></{wrapper}></{wrapper}>{pc(".")}</s>'
    r = extract(tmp_path, tei(f"<p>{s}</p>"))
    assert r.ann()["forms"] == ["a", "b", "c", "."]


def test_d13_token_form_is_its_whole_text_content_unstripped(tmp_path):
    s = '<s><w>H<c>x</c>tail</w><w> sp </w><w/><w>a<!-- c -->b</w><pc>.</pc></s>'
    r = extract(tmp_path, tei(f"<p>{s}</p>"))
    assert r.ann()["forms"] == ["Hxtail", " sp ", "", "ab", "."]


def test_d13_nested_token_and_nested_sentence_belong_to_the_outermost(tmp_path):
    s = f'<s>{w("a")}<w>b<w lemma="in">c</w></w><s>{w("d")}</s></s>'
    r = extract(tmp_path, tei(f"<p>{s}</p>"))
    a = r.ann()
    assert a["forms"] == ["a", "bc", "d"] and a["sentences"] == [[0, 2]]
    assert a["lemmas"] == [None, None, None]


def test_d13_choice_inside_a_sentence_yields_one_reading(tmp_path):
    s = (f'<s>{w("a")}<choice><orig>{w("stari")}{w("zapis")}</orig><reg>{w("novi", "nov")}</reg></choice>'
         f'<choice><abbr>{w("dr.")}</abbr></choice>{w("b")}</s>')
    r = extract(tmp_path, tei(f"<p>{s}</p>"))
    a = r.ann()
    assert a["forms"] == ["a", "novi", "dr.", "b"] and a["lemmas"] == [None, "nov", None, None]


def test_d13_choice_around_whole_sentences_yields_one_reading(tmp_path):
    body = (f'<p><s>{w("pred")}</s><choice><orig><s>{w("stari")}</s><s>{w("zapis")}</s></orig>'
            f'<reg><s>{w("novi")}</s><s>{w("zapis")}</s></reg></choice><s>{w("po")}</s></p>')
    r = extract(tmp_path, tei(body))
    assert r.texts == ["pred\nnovi\nzapis\npo"] and r.ann()["sentences"] == [[0, 0], [1, 1], [2, 2], [3, 3]]
    u = (f'<u xml:id="u1"><choice><sic><s>{w("a")}</s></sic><corr><seg><s>{w("b")}</s></seg></corr></choice>'
         f'<s>{w("c")}</s></u>')
    r = extract(tmp_path, utterances(u), name="u.xml")
    assert r.ids == ["u1"] and r.texts == ["b\nc"] and r.drops == {}


def test_s6_choice_inside_a_token_form(tmp_path):
    s = '<s><w>x<choice><abbr>dr</abbr><expan>doktor</expan></choice>y</w></s>'
    assert extract(tmp_path, tei(f"<p>{s}</p>")).ann()["forms"] == ["xdoktory"]


def test_6_2_lemma_verbatim_empty_kept_absent_null(tmp_path):
    s = f'<s><w lemma="">a</w><w lemma=" L ">b</w>{w("c")}</s>'
    assert extract(tmp_path, tei(f"<p>{s}</p>")).ann()["lemmas"] == ["", " L ", None]


@pytest.mark.parametrize("joins, text, space", [
    # ADDENDUM 6.2 example: joins both,-,left,-,right on a b c d e
    (["both", None, "left", None, "right"], "abc d e", [False, False, True, True, False]),
    ([None, None], "a b", [True, True]),
    (["right", None], "ab", [False, True]),
    ([None, "left"], "ab", [False, True]),
    (["left", None], "a b", [True, True]),  # left on the first token has nothing to join
    ([None, "right"], "a b", [True, False]),  # the last token can be false through its own join
    (["both", "both"], "ab", [False, False]),
    (["none", "other"], "a b", [True, True]),  # unknown values mean nothing
])
def test_6_2_join_space_after_and_rebuilt_text(tmp_path, joins, text, space):
    forms = "abcde"
    s = "<s>" + "".join(w(forms[i], join=j) for i, j in enumerate(joins)) + "</s>"
    r = extract(tmp_path, tei(f"<p>{s}</p>"))
    assert r.texts == [text]
    assert r.ann()["space_after"] == space


def test_6_2_join_ignores_name_boundaries_and_never_crosses_sentences(tmp_path):
    body = (f'<p><s>{w("javna")}<name>{w("uprava", join="right")}</name>{pc(".")}</s>'
            f'<s>{w("Nova", join="right")}</s><s><pc join="left">!</pc>{w("x")}</s></p>')
    r = extract(tmp_path, tei(body))
    assert r.texts == ["javna uprava.\nNova\n! x"]
    assert r.ann()["space_after"] == [True, False, True, False, True, True]


def test_6_2_sentence_without_tokens_gets_no_span_and_a_document_needs_a_token(tmp_path):
    r = extract(tmp_path, tei(f"<p><s/><s>{w('a')}</s><s> </s><s>{w('b')}</s></p>"))
    assert r.ann()["sentences"] == [[0, 0], [1, 1]]
    assert extract(tmp_path, tei("<p><s/></p><p>" + w("stray") + "</p>"), name="g.xml").docs == []


def test_d21_msd_ana_pos_in_the_pipeline(tmp_path):
    s = ("<s>"
         + w("a", msd="UPosTag=NOUN|Case=Nom", ana="mte:Vmpr3s", pos="ADJ")  # msd UPosTag wins
         + w("b", msd="Case=Nom|XPOS=Agpnsn", ana="mte:Ncmsn", pos="ADJ")  # eltec: upos from pos, feats msd
         + w("c", ana="mte:Npmsn")  # MTE table
         + w("d", ana="mte:Lx", pos="INTJ")  # unknown MTE category -> pos; feats stay MTE=
         + w("e", pos="noun")  # not a UPOS tag
         + w("f", msd="", ana="#x mte:Va-r3s-n")  # empty msd -> ana
         + "</s>")
    a = extract(tmp_path, tei(f"<p>{s}</p>")).ann()
    assert a["upos"] == ["NOUN", "ADJ", "PROPN", "INTJ", None, "AUX"]
    assert a["feats"] == ["Case=Nom", "Case=Nom|XPOS=Agpnsn", "MTE=Npmsn", "MTE=Lx", None, "MTE=Va-r3s-n"]


_attr = st.one_of(st.none(), st.sampled_from(["", "UPosTag=NOUN|Case=Nom", "Case=Gen", "UPosTag=X|UPosTag=Y||Z=1"]))
_token = st.fixed_dictionaries({
    "tag": st.sampled_from(["w", "pc"]),
    "form": st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=4),
    "lemma": st.one_of(st.none(), st.sampled_from(["", "dober", "čas"])),
    "msd": _attr,
    "ana": st.one_of(st.none(), st.sampled_from(["mte:Ncmsn", "#x mte:Va-r3s-n", "mte:", "mte:Lx", "x"])),
    "pos": st.one_of(st.none(), st.sampled_from(["NOUN", "noun", "INTJ"])),
    "join": st.one_of(st.none(), st.sampled_from(["right", "left", "both", "x"])),
    "wrap": st.sampled_from([None, "name", "seg"]),
})


@settings(max_examples=150, deadline=None)
@given(st.lists(_token, max_size=12))
def test_fast_and_careful_token_paths_agree(tokens):
    """The C-assisted fast path and the Python walk (taken for <choice> and child markup) give the
    same arrays for any sentence both can read (ADDENDUM 6.2, D13, D21)."""
    parts = []
    for t in tokens:
        attrs = "".join(f' {k}="{etree_escape(t[k])}"' for k in ("lemma", "msd", "ana", "pos", "join")
                        if t[k] is not None)
        el = f"<{t['tag']}{attrs}>{etree_escape(t['form'])}</{t['tag']}>"
        parts.append(f"<{t['wrap']}>{el}</{t['wrap']}>" if t["wrap"] else el)
    s = etree.fromstring(f"<s {NS}>{''.join(parts)}</s>")
    fast, careful = DocTokens(), DocTokens()
    SentenceReader().read(s, fast, has_choice=False)
    SentenceReader().read(s, careful, has_choice=True)
    assert [fast.forms, fast.lemmas, fast.upos, fast.feats, fast.space_after, fast.sentences] == \
           [careful.forms, careful.lemmas, careful.upos, careful.feats, careful.space_after, careful.sentences]
    assert fast.forms == [t["form"] for t in tokens]


def etree_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# ----------------------------------------------------------------------------- utterances (6.3, D19)


def utterances(*us: str) -> str:
    return tei('<div><note type="speaker">GOVORNIK:</note>' + "".join(us) + "</div>")


def test_6_3_one_document_per_utterance_with_who_and_ana(tmp_path):
    u1 = f'<u xml:id="u1" who="#a" ana="#chair"><seg><s>{w("Dober")}{w("dan", join="right")}{pc("!")}</s>' \
         f'<s>{w("Začnimo")}</s></seg><seg><s>{w("Hvala")}</s></seg></u>'
    u2 = f'<u xml:id="u2" who="">{w("stray")}<seg><s>{w("Da")}</s></seg></u>'
    r = extract(tmp_path, utterances(u1, u2))
    assert r.ids == ["u1", "u2"]
    assert r.texts == ["Dober dan!\nZačnimo\nHvala", "Da"]
    assert [d.metadata for d in r.docs] == [{"who": "#a", "ana": "#chair"}, {"who": ""}]
    assert r.ann(0)["sentences"] == [[0, 2], [3, 3], [4, 4]]
    assert r.drops == {"token_outside_sentence": 1}


def test_d13_nested_utterance_belongs_to_the_outer_one(tmp_path):
    u = f'<u xml:id="u2" who="#o"><s>{w("m")}</s><u xml:id="u3" who="#i"><s>{w("n")}</s></u></u>'
    r = extract(tmp_path, utterances(u))
    assert r.ids == ["u2"] and r.texts == ["m\nn"] and r.docs[0].metadata == {"who": "#o"}


def test_d13_sentences_outside_every_utterance_are_counted(tmp_path):
    body = (f'<div><s>{w("before")}</s><u xml:id="u1"><s>{w("in")}</s></u><s>{w("between")}</s>'
            f'<u xml:id="u2"><seg>text but no sentence</seg></u><u xml:id="u3"/><s/></div>')
    r = extract(tmp_path, tei(body))
    assert r.ids == ["u1"]
    assert r.drops == {"sentence_outside_utterance": 2, "utterance_without_tokens": 1}


def test_d3_d4_utterance_without_id_gets_the_writer_fallback(corpus):
    r = corpus.run("t", "tei", {"s/a.xml": utterances(f'<u><s>{w("a")}</s></u>', f'<u xml:id="x"><s>{w("b")}</s></u>',
                                                     f'<u><s>{w("c")}</s></u>')})
    assert r.ids == ["s/a:000000", "x", "s/a:000002"]
    assert [x["doc_id"] for x in r.sidecar] == r.ids


def test_tei_corpus_yields_the_documents_of_every_tei(tmp_path):
    def part(uid):
        return f'<TEI><teiHeader/><text><body><u xml:id="{uid}"><s>{w(uid)}</s></u></body></text></TEI>'

    r = extract(tmp_path, f"<teiCorpus {NS}><teiHeader/>{part('a')}{part('b')}</teiCorpus>")
    assert r.ids == ["a", "b"]
    def pf(t):
        return f'<TEI><teiHeader/><text><body><p><s>{w(t)}</s></p></body></text></TEI>'

    r = extract(tmp_path, f"<teiCorpus {NS}><teiHeader/>{pf('a')}{pf('b')}</teiCorpus>", name="c.xml")
    assert r.ids == ["c"] and r.texts == ["a\nb"]


def test_d19_plain_utterances_text_from_segs_notes_are_not_text(tmp_path):
    body = ('<div><head>Seja</head><note type="speaker">GOVORNIK:</note>'
            '<u xml:id="u1" who="#a" ana="#regular"><seg> Prvi <hi>del</hi>. </seg><note>(aplavz)</note>'
            '<seg>Drugi <note>vmes</note>del.</seg><seg>  </seg><seg>x<choice><abbr>dr</abbr><expan>doktor</expan>'
            '</choice></seg></u>'
            '<u xml:id="u2" who="#b">Brez segmentov <note>opomba</note>govor.</u>'
            '<u who="#c"><seg>brez id</seg></u><gap><desc>SAMPLING</desc></gap></div>')
    r = extract(tmp_path, tei(body))
    assert r.texts == ["Prvi del.\nDrugi del.\nxdoktor", "Brez segmentov govor.", "brez id"]
    assert r.ids == ["u1", "u2", None]
    assert [d.metadata for d in r.docs] == [{"who": "#a", "ana": "#regular"}, {"who": "#b"}, {"who": "#c"}]
    assert all(d.annotations is None for d in r.docs)
    assert r.drops == {"text_outside_utterance": 3}  # head, the speaker note, the gap


def test_s8_utterances_with_s_but_no_w_take_the_plain_route(tmp_path):
    r = extract(tmp_path, tei('<u xml:id="u1"><s>bare</s></u><p>odstavek</p>'))
    assert r.texts == ["odstavek"] and r.ids == [None]


def test_d19_pipeline_no_sidecar(corpus):
    r = corpus.run("t", "tei", {"a.xml": tei('<u xml:id="u1" who="#a"><seg>Besedilo.</seg></u>')})
    assert r.lines == [{"text": "Besedilo.", "source": "t", "domain": "test", "doc_id": "u1", "uid": "t:u1",
                        "metadata": {"who": "#a"}}]
    assert r.sidecar is None


# ----------------------------------------------------------------------------- TSV metadata (section 7)


def test_tsv_row_for_per_file_plain_and_utterance_files(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "meta.tsv").write_text("id\twho\tz\tana\nkas-1\tROW\tZ\tROWANA\nkas-2\t-\tZ2\t\nkas-3\t\tZ3\t\n")
    (raw / "kas-1.xml").write_text(utterances(f'<u xml:id="u1" who="#spk" ana="#t"><s>{w("a")}</s></u>',
                                              f'<u xml:id="u2"><s>{w("b")}</s></u>'))
    (raw / "kas-2.xml").write_text(tei(f"<p><s>{w('c')}</s></p>"))
    (raw / "kas-3.xml").write_text(tei("<p>plain</p>"))
    options = {"path": "meta.tsv", "key_column": "id", "key_pattern": r"^(kas-\d+)$",
               "fields": {"ana": "ana", "who": "who", "z": "z"}}
    docs = []
    for name in ("kas-1.xml", "kas-2.xml", "kas-3.xml"):
        docs += Extracted(raw / name, options, raw).docs
    assert [d.metadata for d in docs] == [
        {"ana": "#t", "who": "#spk", "z": "Z"},  # 6.3: who/ana win and keep the row's positions
        {"ana": "ROWANA", "who": "ROW", "z": "Z"},
        {"z": "Z2"},  # per-file: the row alone ("-" and "" are NA)
        {"z": "Z3"},  # plain: the row alone
    ]


def test_tsv_options_validated_at_load(tmp_path):
    with pytest.raises(ValueError, match=r"^datasets\.t\.metadata\.path"):
        TeiExtractor.parse_options({"text_field": "x"}, "datasets.t.metadata")
    assert TeiExtractor.parse_options(None, "datasets.t.metadata") is None


# ----------------------------------------------------------------------------- errors (D6, S3)


def test_s3_malformed_xml_keeps_closed_documents_and_drops_the_one_in_progress(tmp_path):
    body = '<p xml:id="a">ena</p><p xml:id="b">dva</p><p xml:id="c">tri <hi>x</p><p>never</p>'
    r = extract(tmp_path, tei(body))
    assert r.texts == ["ena", "dva"]
    assert r.drops == {"xml_syntax_error": 1}
    warning = r.ledger.warnings[0]
    assert warning.startswith("t/f.xml:2:") and "'c'" in warning and "kept the 2 document(s)" in warning


def test_s3_malformed_utterance_file_keeps_closed_utterances(tmp_path):
    text = utterances(f'<u xml:id="u1"><s>{w("a")}</s></u>', f'<u xml:id="u2"><s>{w("b")}</s></u>',
                      f'<u xml:id="u3"><s>{w("c")}</s>').replace("</div>", "</x></div>")
    r = extract(tmp_path, text)
    assert r.ids == ["u1", "u2"]
    assert r.drops == {"xml_syntax_error": 1} and "'u3'" in r.ledger.warnings[0]


def test_s3_per_file_document_is_dropped_whole_on_a_parse_error(tmp_path):
    body = "".join(f"<p><s>{w(str(i))}</s></p>" for i in range(50)) + "<p><s>&undefined;</s></p>"
    r = extract(tmp_path, tei(body))
    assert r.docs == []
    assert r.drops == {"xml_syntax_error": 1}
    assert "dropped whole" in r.ledger.warnings[0] and "undefined" in r.ledger.warnings[0]


def test_d6_invalid_bytes_for_the_declared_encoding_skip_the_rest_of_the_file(tmp_path):
    good = tei('<p xml:id="a">čšž</p>\n<p xml:id="b">BAD</p><p xml:id="c">after</p>').encode("utf-8")
    bad = good.replace(b"BAD", b"\xff\xfe")
    r = extract(tmp_path, bad)
    assert r.ids == ["a"]
    assert r.drops == {"invalid_bytes": 1} and ":3:" in r.ledger.warnings[0]


def test_3_2_iso_8859_2_declaration_is_honoured(tmp_path):
    decl = '<?xml version="1.0" encoding="ISO-8859-2"?>\n'
    r = extract(tmp_path, tei("<p>Šola in žaba</p>", decl=decl).encode("iso-8859-2"))
    assert r.texts == ["Šola in žaba"]
    r = extract(tmp_path, tei(f"<p><s>{w('Šola', 'šola')}{w('žaba')}</s></p>", decl=decl).encode("iso-8859-2"),
                name="g.xml")
    assert r.texts == ["Šola žaba"] and r.ann()["lemmas"] == ["šola", None]


@pytest.mark.parametrize("content", [b"", b"   \n", b"<TEI", b"not xml at all"])
def test_d6_empty_or_broken_files_are_counted(tmp_path, content):
    r = extract(tmp_path, content)
    assert r.docs == [] and r.drops == {"xml_syntax_error": 1}


def test_d6_each_files_error_comes_from_its_own_parse(tmp_path):
    """An empty file's warning is about that file, not the errors lxml's thread-global log still
    holds from the file read before it (here an entity bomb)."""
    lol = '<!ENTITY l0 "lol">' + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    r = extract(tmp_path, f'<?xml version="1.0"?>\n<!DOCTYPE TEI [{lol}]>\n' + tei("<p>&l9;</p>").split("\n", 1)[1],
                name="bomb.xml")
    assert "amplification" in r.ledger.warnings[0]
    r = extract(tmp_path, b"", name="empty.xml")
    [warning] = r.ledger.warnings
    assert warning.startswith("t/empty.xml: no element found") and "amplification" not in warning


def test_d6_a_bad_file_does_not_stop_the_dataset(corpus):
    r = corpus.run("t", "tei", {"a.xml": tei("<p>ena</p>"), "b.xml": "<TEI", "c.xml": tei("<p>tri</p>")})
    assert r.texts == ["ena", "tri"] and r.drops == {"xml_syntax_error": 1}


def test_d6_directory_named_like_an_input_is_ignored(tmp_path):
    (tmp_path / "dir.xml").mkdir()
    (tmp_path / "a.xml").write_text(tei("<p>x</p>"))
    assert [f.rel for f in discover(tmp_path, TeiExtractor.patterns)] == ["a.xml"]


def test_d6_a_file_that_cannot_be_read_is_counted(tmp_path):
    (tmp_path / "d.xml").mkdir()  # e.g. replaced by a directory after discovery
    r = Extracted(tmp_path / "d.xml")
    assert r.docs == [] and r.drops == {"unreadable_file": 1}
    assert r.ledger.warnings[0].startswith("t/d.xml: ")


def test_unexpanded_entity_references_are_counted(tmp_path):
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE TEI [<!ENTITY ime "Janez">]>\n'
           f'<TEI {NS}><text><body><p>Pozdrav, &ime;!</p></body></text></TEI>')
    r = extract(tmp_path, doc)
    assert r.texts == ["Pozdrav, !"]
    assert r.drops == {"unexpanded_entity": 1} and "&ime;" in r.ledger.warnings[0]


# ----------------------------------------------------------------------------- security


def test_xxe_external_entity_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    for i, body in enumerate(["<p>leak: &xxe;</p>", "<p><s><w>&xxe;</w></s></p>", "<u><seg>&xxe;</seg></u>"]):
        doc = (f'<?xml version="1.0"?>\n<!DOCTYPE TEI [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
               f"<TEI {NS}><text><body>{body}</body></text></TEI>")
        r = extract(tmp_path, doc, name=f"x{i}.xml")
        assert all("TOP-SECRET" not in (d.text + str(d.annotations)) for d in r.docs)
        assert "TOP-SECRET" not in " ".join(r.ledger.warnings)


def test_external_dtd_is_not_loaded(tmp_path):
    (tmp_path / "evil.dtd").write_text('<!ENTITY injected "FROM-DTD">')
    doc = (f'<?xml version="1.0"?>\n<!DOCTYPE TEI SYSTEM "evil.dtd">\n'
           f"<TEI {NS}><text><body><p>a &injected; b</p></body></text></TEI>")
    r = extract(tmp_path, doc)
    assert all("FROM-DTD" not in t for t in r.texts)


def test_billion_laughs_is_refused_quickly_and_counted(tmp_path):
    ents = '<!ENTITY lol "lol">' + "".join(f'<!ENTITY lol{i} "{("&lol%s;" % (i - 1 if i > 1 else "")) * 10}">'
                                           for i in range(1, 10))
    for name, body in (("text.xml", "<p>&lol9;</p>"), ("attr.xml", '<p n="&lol9;">x</p>'),
                       ("ann.xml", "<p><s><w>&lol9;</w></s></p>"), ("u.xml", "<u><seg>&lol9;</seg></u>")):
        doc = f'<?xml version="1.0"?>\n<!DOCTYPE TEI [{ents}]>\n<TEI {NS}><text><body>{body}</body></text></TEI>'
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.process_time()
        r = extract(tmp_path, doc, name=name)
        assert time.process_time() - started < 5
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: nothing blew up
        assert r.docs == [] and r.drops == {"xml_syntax_error": 1}
        assert "amplification" in r.ledger.warnings[0]


def test_billion_laughs_never_gets_the_huge_tree_retry(tmp_path):
    """huge_tree is for big text nodes and deep nesting only; amplification is never retried."""
    from slm4ie_assets.extractors.xml.errors import is_resource_limit
    assert is_resource_limit(etree.ErrorTypes.ERR_RESOURCE_LIMIT, "Text node too long, try XML_PARSE_HUGE")
    assert is_resource_limit(etree.ErrorTypes.ERR_RESOURCE_LIMIT,
                             "Excessive depth in document: 256, use XML_PARSE_HUGE")
    assert not is_resource_limit(etree.ErrorTypes.ERR_RESOURCE_LIMIT,
                                 "Maximum entity amplification factor exceeded, see xmlCtxtSetMaxAmplification.")
    assert not is_resource_limit(etree.ErrorTypes.ERR_TAG_NAME_MISMATCH, "Opening and ending tag mismatch")


def test_deep_nesting_is_bounded_and_counted_not_a_crash(tmp_path):
    deep = "<hi>" * 3000 + "x" + "</hi>" * 3000
    r = extract(tmp_path, tei(f'<p xml:id="ok">ok</p><p>{deep}</p>'))
    assert r.ids == ["ok"] and r.drops == {"xml_syntax_error": 1}
    # nesting deeper than libxml2's default 256 but within 2048 is read (huge_tree retry)
    mid = "<hi>" * 600 + "y" + "</hi>" * 600
    r = extract(tmp_path, tei(f'<p xml:id="ok">ok</p><p xml:id="mid">{mid}</p>'), name="g.xml")
    assert r.ids == ["ok", "mid"] and r.texts == ["ok", "y"] and r.drops == {}


def test_huge_text_node_retry_delivers_each_document_and_drop_once(tmp_path):
    """A text node over libxml2's default 10 MB limit is read on the huge_tree retry; the documents
    and drops delivered before the limit was hit are not repeated."""
    big = "beseda " * 1_600_000  # 11.2 MB in one text node
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE TEI [<!ENTITY e "x">]>\n'
           f'<TEI {NS}><text><body><p xml:id="a">ena &e;</p><p xml:id="b">{big}</p><p xml:id="c">tri</p>'
           "</body></text></TEI>")
    r = extract(tmp_path, doc)
    assert r.ids == ["a", "b", "c"]
    assert len(r.texts[1]) == len(big.strip())
    assert r.drops == {"unexpanded_entity": 1}


# ----------------------------------------------------------------------------- streaming (D12)


def test_d12_same_documents_same_output_whatever_the_file_size(tmp_path):
    """No size threshold: a small and a large file built from the same documents give identical
    per-document output, on every route."""
    def u(i):
        return (f'<u xml:id="u{i}" who="#s{i % 3}"><seg><s>{w("Dober", "dober", "UPosTag=ADJ", ana="mte:Agpmsn")}'
                f'<name>{w(f"Janez{i}", join="right")}</name>{pc("!")}</s></seg></u>')

    def p(i):
        return f'<p xml:id="p{i}">Odstavek <hi>{i}</hi> <choice><sic>x</sic><corr>y</corr></choice>.</p>'

    def seg(i):
        return f'<u xml:id="v{i}" who="#s"><seg>Segment {i}.</seg><note>n</note></u>'

    for make in (u, p, seg):
        small = extract(tmp_path, tei("".join(make(i) for i in range(3))), name="small.xml")
        large = extract(tmp_path, tei("".join(make(i) for i in range(30_000))), name="large.xml")
        assert len(large.docs) == 30_000
        for i in range(3):
            assert (small.docs[i].text, small.docs[i].doc_id, small.docs[i].metadata, small.ann(i)) == \
                   (large.docs[i].text, large.docs[i].doc_id, large.docs[i].metadata, large.ann(i))
    # per-file: a file repeating the same sentences N times gives the same arrays repeated
    sent = f'<p><s>{w("Dober", "dober", "UPosTag=ADJ|Case=Nom")}{w("dan", join="right")}{pc(".")}</s></p>'
    small = extract(tmp_path, tei(sent), name="pf.xml").ann()
    large = extract(tmp_path, tei(sent * 20_000), name="pf.xml").ann()
    assert large["forms"] == small["forms"] * 20_000 and large["upos"] == small["upos"] * 20_000
    assert large["space_after"] == small["space_after"] * 20_000
    assert large["sentences"][-1] == [3 * 20_000 - 3, 3 * 20_000 - 1]


@pytest.mark.long
def test_d12_q8_files_over_64_mib_are_read_like_small_ones(tmp_path):
    """Q8: the reference streamed files over 64 MiB differently (a pc-only file became annotated,
    `<p><s>bare</s></p>` gave nothing). D12: the same code at every size."""
    para = '<p>Odstavek <s>brez oznak</s> in <s><pc>.</pc></s></p>'
    small = extract(tmp_path, tei(para * 3), name="small.xml")
    big = tmp_path / "big.xml"
    with open(big, "w", encoding="utf-8") as fh:
        head, tail = tei("@@").split("@@")
        fh.write(head)
        block = para * 1000
        for _ in range(67_108_864 // len(block) + 1):
            fh.write(block)
        fh.write(tail)
    assert big.stat().st_size > 67_108_864
    large = Extracted(big)
    assert small.texts == ["Odstavek brez oznak in ."] * 3 and small.docs[0].annotations is None
    assert large.texts[:3] == small.texts and all(d.annotations is None for d in large.docs[:3])
    assert len(large.docs) == (67_108_864 // len(block) + 1) * 1000 and large.drops == {}


def test_per_file_document_keeps_one_string_per_distinct_form_and_lemma(tmp_path):
    """A per-file document can hold millions of tokens: repeated forms and lemmas share one object."""
    sent = f'<p><s>{w("Dober", "dober")}{w("dan", "dan")}</s><s>{w("Dober", "dober")}<w lemma="dan">dan</w></s></p>'
    a = extract(tmp_path, tei(sent * 2)).docs[0].annotations
    assert a.forms[0] is a.forms[2] is a.forms[4] and a.lemmas[1] is a.lemmas[3] is a.lemmas[7]


def test_d12_the_tree_is_freed_as_documents_are_read(tmp_path):
    """Memory bounded by the document in progress: when a paragraph is delivered, the tree holds
    only the path down to it, however many paragraphs came before."""
    body = "".join(f'<div><head>{i}</head><p>odstavek {i}</p><p>drugi {i}</p></div>' for i in range(20_000))
    path = tmp_path / "big.xml"
    path.write_text(tei(body, header="<p>h</p>" * 100))
    extraction = PlainPass({}, lambda *a, **k: None, "big")
    sizes = []
    with open(path, "rb") as fh:
        for n, _ in enumerate(extraction.run(fh, False)):
            if n % 2000 == 1999:
                sizes.append(sum(1 for _ in extraction.root.iter()))
    # 80,000 elements in the file; what stays is the path down plus the parser's read-ahead (one
    # chunk of CHUNK bytes, at most CHUNK / 8 elements of this file)
    assert len(sizes) == 20 and max(sizes) < streaming.CHUNK // 8


def test_utterance_memory_does_not_grow_with_the_file(tmp_path):
    def u(i):
        return f'<note>GOVORNIK {i}:</note><u xml:id="u{i}"><seg><s>{w("a" * 50)}{w("b" * 50)}</s></seg></u>'

    path = tmp_path / "u.xml"
    path.write_text(utterances(*(u(i) for i in range(10_000))))
    ex = TeiExtractor(None)
    sizes = []
    ctx = ExtractContext("t", tmp_path)
    extraction = AnnotatedPass({}, lambda *a, **k: None, "u")
    with open(path, "rb") as fh:
        for n, _ in enumerate(extraction.run(fh, False)):
            if n % 1000 == 999:
                sizes.append(sum(1 for _ in extraction.root.iter()))
    # 60,000 elements in the file; what stays is the path down plus the parser's read-ahead
    assert len(sizes) == 10 and max(sizes) < streaming.CHUNK // 8
    assert len(list(ex.extract(InputFile(path, "u.xml"), ctx))) == 10_000


# ----------------------------------------------------------------------------- max_document_bytes (docs/memory.md)


@pytest.mark.parametrize("cap", [1, 15, 60, 10_000])
def test_annotated_documents_over_the_cap_let_their_tokens_go_with_the_same_drops(corpus, cap):
    """Per-file and utterance documents count their text sentence by sentence under a cap and let
    their tokens go once over it: the drop, its fallback id (an utterance without xml:id), a blank
    document's empty_text and every other warning stay as when the document was built whole."""
    sentences = "".join(f"<s>{w(f'beseda{i}')}{w('in', join='right')}{pc('.')}</s>" for i in range(20))
    utterances = tei(f'<u who="#a">{sentences}</u><u xml:id="prazen"><s>{w(" ")}{w(" ")}</s></u>'
                     f'<u xml:id="k"><s>{w("kratko")}</s>{w("zunaj")}</u><u xml:id="dolg">{sentences}</u>')
    per_file = tei(f"<p><s>{w('  ')}</s>{sentences}</p>")
    for name, content in (("u.xml", utterances), ("p.xml", per_file)):
        whole = corpus.run("d", "tei", {name: content})
        capped = corpus.run("d", "tei", {name: content}, max_document_bytes=cap)
        lines, too_large = over_cap_expectation(whole, cap, f"d/{name}")
        assert capped.lines == lines
        assert [w for w in capped.warnings if "document_too_large" in w] == too_large
        assert [w for w in capped.warnings if "document_too_large" not in w] == whole.warnings
        if cap == 1 and name == "u.xml":
            assert "'u:000000'" in too_large[0]  # the writer's fallback id (D3)
