"""conllu extractor: extraction-formats (conllu), ADDENDUM 3.1, 3.2, 5 as amended by D3, D4, D6, D8,
D11, S1, S2, S4, S5; the TSV sidecar of ADDENDUM 7 on documents (5.4)."""

import gzip
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slm4ie_assets.catalog import CatalogError, load_catalog
from slm4ie_assets.extractors.base import ExtractorError
from slm4ie_assets.extractors.conllu import ConlluExtractor
from slm4ie_assets.extractors.conllu_blocks import READ_SIZE
from slm4ie_assets.extractors.extract_context import ExtractContext
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.tsv_metadata import parse_tsv_config
from slm4ie_assets.pipeline import extract_and_publish, plan_dataset
from slm4ie_assets.schema import sentence_text
from support.corpora import corpora_config, load_compare_outputs
from support.extraction import over_cap_expectation


def row(i, form, lemma="_", upos="_", feats="_", misc="_", xpos="X"):
    return f"{i}\t{form}\t{lemma}\t{upos}\t{xpos}\t{feats}\t0\troot\t_\t{misc}"


def sent(*forms, comments=(), nospace=()):
    """A sentence block (with its terminating blank line) of plain tokens."""
    lines = list(comments)
    for i, f in enumerate(forms, 1):
        lines.append(row(i, f, misc="SpaceAfter=No" if i in nospace else "_"))
    return "\n".join(lines) + "\n\n"


def docs_of(r):
    """(doc_id, number of sentences) per document, from the sidecar."""
    return [(a["doc_id"], len(a["sentences"])) for a in r.sidecar]


SEED = """# newdoc id = doc1
# sent_id = doc1.s1
# text = Predsednik je odprl sejo.
1\tPredsednik\tpredsednik\tNOUN\tNcmsn\tCase=Nom\t3\tnsubj\t_\tNER=O
2\tje\tbiti\tAUX\tVa-r3s-n\tTense=Pres\t3\taux\t_\tNER=O
3\todprl\todpreti\tVERB\tVmep-sm\tVerbForm=Part\t0\troot\t_\tNER=O
4\tsejo\tseja\tNOUN\tNcfsa\tCase=Acc\t3\tobj\t_\tNER=O|SpaceAfter=No
5\t.\t.\tPUNCT\tZ\t_\t3\tpunct\t_\tNER=O
"""


# ----------------------------------------------------------------------------- columns and text


def test_seed_example_four_columns_become_token_fields(corpus):
    r = corpus.run("ssj", "conllu", {"a.conllu": SEED})
    assert r.lines == [{"text": "Predsednik je odprl sejo.", "source": "ssj", "domain": "test",
                        "doc_id": "doc1", "uid": "ssj:doc1"}]
    assert r.sidecar == [{
        "doc_id": "doc1", "uid": "ssj:doc1",
        "forms": ["Predsednik", "je", "odprl", "sejo", "."],
        "lemmas": ["predsednik", "biti", "odpreti", "seja", "."],
        "upos": ["NOUN", "AUX", "VERB", "NOUN", "PUNCT"],
        "feats": ["Case=Nom", "Tense=Pres", "VerbForm=Part", "Case=Acc", None],
        "space_after": [True, True, True, False, True],
        "sentences": [[0, 4]]}]
    assert list(r.sidecar[0]) == ["doc_id", "uid", "forms", "lemmas", "upos", "feats", "space_after", "sentences"]


def test_underscore_form_stays_but_lemma_upos_feats_become_null(corpus):
    """ADDENDUM 5.1: FORM `_` stays "_"; LEMMA, UPOS and FEATS `_` become null."""
    r = corpus.run("k", "conllu", {"a.conllu": row(1, "_", "_", "_", "_") + "\n" + row(2, "x", "x", "X", "A=B") + "\n"})
    a = r.sidecar[0]
    assert (a["forms"], a["lemmas"], a["upos"], a["feats"]) == (["_", "x"], [None, "x"], [None, "X"], [None, "A=B"])
    assert r.texts == ["_ x"]


@pytest.mark.parametrize("misc, space", [
    ("SpaceAfter=No", False),
    ("NER=O|SpaceAfter=No", False),
    ("SpaceAfter=No|NER=O", False),
    ("SpaceAfter=Nope", True),  # D11: Q10a fixed, a whole MISC item only
    ("XSpaceAfter=No", True),
    ("NER=O|SpaceAfter=No2", True),
    ("SpacesAfter=\\n", True),
    ("_", True),
])
def test_d11_space_after_no_must_be_a_whole_misc_item(corpus, misc, space):
    r = corpus.run("k", "conllu", {"a.conllu": row(1, "a", misc=misc) + "\n" + row(2, "b") + "\n"})
    assert r.sidecar[0]["space_after"] == [space, True]
    assert r.texts == ["a b" if space else "ab"]


def test_text_rebuilt_from_tokens_when_no_text_comment(corpus):
    """ADDENDUM 5.2: each form, then a space unless last or SpaceAfter=No; the last token's
    flag still comes from MISC."""
    block = "\n".join([row(1, "Dober"), row(2, "dan", misc="SpaceAfter=No"), row(3, "!", misc="SpaceAfter=No")])
    r = corpus.run("k", "conllu", {"a.conllu": block + "\n"})
    assert r.texts == ["Dober dan!"]
    assert r.sidecar[0]["space_after"] == [True, False, False]


@pytest.mark.parametrize("comment", ["# text = ", "#text = Drugače", "# text=Drugače", "# text =Drugače"])
def test_empty_or_unrecognised_text_comment_rebuilds(corpus, comment):
    r = corpus.run("k", "conllu", {"a.conllu": sent("a", "b", comments=[comment])})
    assert r.texts == ["a b"]


def test_last_text_comment_wins_even_after_tokens_verbatim(corpus):
    """ADDENDUM 5.2: any `# text = ` line in the block counts, the last wins, kept verbatim."""
    block = "# text = first\n" + row(1, "a") + "\n# text = late  trailing  \n" + row(2, "b") + "\n"
    r = corpus.run("k", "conllu", {"a.conllu": block})
    assert r.texts == ["late  trailing  "]
    assert r.sidecar[0]["forms"] == ["a", "b"]


def test_sentences_joined_with_newline_and_spans_inclusive(corpus):
    r = corpus.run("k", "conllu",
                   {"a.conllu": sent("a", "b", "c", "d", "e") + sent(*"fghijkl", comments=["# text = F G"])})
    assert r.texts == ["a b c d e\nF G"]
    assert r.sidecar[0]["sentences"] == [[0, 4], [5, 11]]


def test_xpos_head_deprel_deps_ignored_and_fields_beyond_ten_ignored(corpus):
    line = "1\tform\tlemma\tNOUN\tXPOS\tF=1\t7\tdep\t1:dep\tSpaceAfter=No\textra\tmore"
    r = corpus.run("k", "conllu", {"a.conllu": line + "\n" + row(2, "b") + "\n"})
    a = r.sidecar[0]
    assert (a["forms"], a["lemmas"], a["upos"], a["feats"], a["space_after"]) == (
        ["form", "b"], ["lemma", None], ["NOUN", None], ["F=1", None], [False, True])


def test_multiword_tokens_and_empty_nodes_skipped_silently(corpus):
    block = "\n".join(["1-2\tdelo\t_\t_\t_\t_\t_\t_\t_\t_", row(1, "de"), row(2, "lo"),
                       "2.1\tempty\t_\t_\t_\t_\t_\t_\t_\t_", row(3, "x")])
    r = corpus.run("k", "conllu", {"a.conllu": "# text = delo x\n" + block + "\n"})
    assert r.sidecar[0]["forms"] == ["de", "lo", "x"]
    assert r.texts == ["delo x"]
    assert r.drops == {}


def test_block_of_only_multiword_rows_adds_no_sentence(corpus):
    r = corpus.run("k", "conllu", {"a.conllu": "1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_\n\n" + sent("c")})
    assert r.sidecar[0]["sentences"] == [[0, 0]] and r.texts == ["c"]


# ----------------------------------------------------------------------------- lines (D6, D8, D11, S4)


def test_d6_malformed_row_skipped_with_warning_naming_file_and_line(corpus):
    content = sent("a", "b") + "1\tbroken\trow\n" + row(1, "c") + "\n" + "only\n" + row(2, "d") + "\n"
    r = corpus.run("k", "conllu", {"sub/f.conllu": content})
    assert r.sidecar[0]["forms"] == ["a", "b", "c", "d"]
    assert r.drops == {"malformed_row": 2}
    assert any(w.startswith("k/sub/f.conllu:4: 3 tab-separated field(s)") for w in r.warnings), r.warnings
    assert any(w.startswith("k/sub/f.conllu:6: 1 tab-separated field(s)") for w in r.warnings), r.warnings


def test_d11_whitespace_only_line_is_a_sentence_boundary(corpus):
    content = row(1, "a") + "\n   \n" + row(1, "b") + "\n\t \t\n" + row(1, "c") + "\n"
    r = corpus.run("k", "conllu", {"a.conllu": content})
    assert r.sidecar[0]["sentences"] == [[0, 0], [1, 1], [2, 2]]
    assert r.texts == ["a\nb\nc"]
    assert r.drops == {}


def test_s4_nbsp_only_line_is_not_blank_in_conllu(corpus):
    """S4: for conllu only spaces and tabs make a blank line; an NBSP line is a short row (D6)."""
    r = corpus.run("k", "conllu", {"a.conllu": row(1, "a") + "\n\u00a0\n" + row(2, "b") + "\n"})
    assert r.sidecar[0]["sentences"] == [[0, 1]]
    assert r.drops == {"malformed_row": 1}
    assert any(w.startswith("k/a.conllu:2:") for w in r.warnings)


def test_d8_bom_removed_so_newdoc_on_line_1_is_seen(corpus):
    """Q9: the reference missed the marker and used the stem; D8 removes the BOM."""
    r = corpus.run("k", "conllu", {"a.conllu": "\ufeff# newdoc id = first\n" + row(1, "x") + "\n"})
    assert r.ids == ["first"]


def test_universal_newlines_crlf_and_lone_cr(corpus):
    crlf = "# newdoc id = d1\r\n# text = a b\r\n" + row(1, "a") + "\r\n" + row(2, "b") + "\r\n\r\n"
    cr = "# newdoc id = d2\r" + row(1, "c", misc="SpaceAfter=No") + "\r" + row(2, "d") + "\r"
    r = corpus.run("k", "conllu", {"a.conllu": (crlf + cr).encode("utf-8")})
    assert r.ids == ["d1", "d2"]
    assert r.texts == ["a b", "cd"]
    assert [a["forms"] for a in r.sidecar] == [["a", "b"], ["c", "d"]]
    assert r.sidecar[1]["space_after"] == [False, True]


def test_form_feed_and_u2028_do_not_end_lines(tmp_path):
    """ADDENDUM 3.2 (checked on the extractor: the shared test reader splits lines at U+2028)."""
    path = tmp_path / "a.conllu"
    path.write_text(row(1, "a\fb\u2028c\x85d\vx") + "\n")
    docs = list(ConlluExtractor(None).extract(InputFile(path, "a.conllu"), ExtractContext("k", tmp_path)))
    assert docs[0].annotations.forms == ["a\fb\u2028c\x85d\vx"]


def test_d6_invalid_utf8_drops_only_the_affected_sentence(corpus):
    content = (sent("ok1", comments=["# newdoc id = d"]).encode() + b"1\tbad\xff\t_\t_\t_\t_\t_\t_\t_\t_\n\n"
               + sent("ok2").encode())
    r = corpus.run("k", "conllu", {"a.conllu": content})
    assert r.ids == ["d"]
    assert r.sidecar[0]["forms"] == ["ok1", "ok2"]
    assert r.drops == {"invalid_utf8": 1}
    assert any(w.startswith("k/a.conllu:4: invalid UTF-8") for w in r.warnings), r.warnings


def test_d6_invalid_utf8_in_a_newdoc_id_drops_that_document(corpus):
    content = (sent("a", comments=["# newdoc id = one"]).encode() + b"# newdoc id = tw\xf3\n"
               + sent("b").encode() + sent("c").encode() + sent("d", comments=["# newdoc id = three"]).encode())
    r = corpus.run("k", "conllu", {"a.conllu": content})
    assert r.ids == ["one", "three"]
    assert r.drops == {"invalid_utf8": 2}  # the marker's sentence, then the document
    assert any(w.startswith("k/a.conllu:4: invalid UTF-8 bytes in the document id") for w in r.warnings)


def test_empty_and_blank_files_yield_nothing(corpus):
    r = corpus.run("k", "conllu", {"a.conllu": "", "b.conllu": "\n\n  \n", "c.conllu": "# only = comments\n"})
    assert r.lines == [] and r.sidecar is None


# ----------------------------------------------------------------------------- document boundaries


def test_no_markers_one_document_per_file_named_by_stem(corpus):
    r = corpus.run("k", "conllu", {"a.b.conllu": sent("x") + sent("y"), "sub/c.conll": sent("z")})
    assert docs_of(r) == [("a.b", 2), ("c", 1)]


def test_addendum_5_3_token_block_then_newdoc(corpus):
    r = corpus.run("k", "conllu", {"f1.conllu": sent("a") + sent("b", comments=["# newdoc id = n1"])})
    assert docs_of(r) == [("f1", 1), ("n1", 1)]


def test_addendum_5_3_q10c_comment_only_newdoc_block_loses_its_id(corpus):
    content = "# newdoc id = n2\n\n" + sent("x", comments=["# newdoc id = n3"])
    r = corpus.run("k", "conllu", {"f1.conllu": content})
    assert docs_of(r) == [("n3", 1)]


def test_addendum_5_3_sent_id_prefix_example(corpus):
    """sent_ids (none), s1.1, s1.2, nodot, s2.1, a newdoc `late` block holding s3.1, then s4.1
    -> s1 (4 sentences, Q10b), s2, late (2 sentences)."""
    content = (sent("p0") + sent("a", comments=["# sent_id = s1.1"]) + sent("b", comments=["# sent_id = s1.2"])
               + sent("c", comments=["# sent_id = nodot"]) + sent("d", comments=["# sent_id = s2.1"])
               + sent("e", comments=["# newdoc id = late", "# sent_id = s3.1"])
               + sent("f", comments=["# sent_id = s4.1"]))
    r = corpus.run("k", "conllu", {"f1.conllu": content})
    assert docs_of(r) == [("s1", 4), ("s2", 1), ("late", 2)]
    assert r.texts == ["p0\na\nb\nc", "d", "e\nf"]


def test_sentences_before_the_first_newdoc_get_the_stem(corpus):
    r = corpus.run("k", "conllu", {"f1.conllu": sent("a", comments=["# sent_id = s1.1"])
                                   + sent("b", comments=["# newdoc id = n"])})
    # the heuristic was on for the first block, so its prefix named the document
    assert docs_of(r) == [("s1", 1), ("n", 1)]
    r = corpus.run("k", "conllu", {"f1.conllu": sent("a") + sent("b", comments=["# newdoc id = n"])})
    assert docs_of(r) == [("f1", 1), ("n", 1)]


def test_q2_d4_empty_sent_id_prefix_falls_back_to_d3_id(corpus):
    """`# sent_id = .x` gives the prefix "" (Q2); D4 makes it missing, so the D3 id applies."""
    r = corpus.run("k", "conllu", {"sub/f.conllu": sent("a", comments=["# sent_id = .x"])})
    assert r.ids == ["sub/f:000000"]


def test_marker_after_token_rows_is_not_a_boundary(corpus):
    block = row(1, "a") + "\n# newdoc id = late\n" + row(2, "b") + "\n\n"
    r = corpus.run("k", "conllu", {"f.conllu": sent("x", comments=["# newdoc id = first"]) + block})
    assert docs_of(r) == [("first", 2)]


def test_marker_after_a_non_comment_leading_line_is_not_read(corpus):
    """ADDENDUM 5.3: the scan of leading comments stops at the first non-`#` line."""
    block = "# sent_id = s1.1\nnot a comment\n# newdoc id = hidden\n" + row(1, "a") + "\n\n"
    r = corpus.run("k", "conllu", {"f.conllu": block})
    assert r.ids == ["s1"]
    assert r.drops == {"malformed_row": 1}


def test_first_newdoc_and_first_sent_id_of_a_block_count(corpus):
    block = "# newdoc id = one\n# newdoc id = two\n" + row(1, "a") + "\n\n"
    r = corpus.run("k", "conllu", {"f.conllu": block})
    assert r.ids == ["one"]
    block = "# sent_id = a.1\n# sent_id = b.1\n" + row(1, "a") + "\n\n"
    r = corpus.run("k", "conllu", {"f.conllu": block})
    assert r.ids == ["a"]


@pytest.mark.parametrize("marker, doc_id", [
    ("# newdoc id = x", "x"),
    ("#newdoc id = x", "x"),
    ("#   newdoc id = x", "x"),
    ("# newdoc\tid = x", "x"),
    ("# newdoc id =x", "x"),
    ("# newdoc id =  x", " x"),  # only one leading space is dropped
    ("# newdoc id = x  ", "x  "),  # S2: a non-blank id is kept unstripped
    ("# newdoc id = a = b", "a = b"),
])
def test_s5_newdoc_grammar_and_id(corpus, marker, doc_id):
    r = corpus.run("k", "conllu", {"f.conllu": sent("a") + sent("b", comments=[marker])})
    assert docs_of(r) == [("f", 1), (doc_id, 1)]


@pytest.mark.parametrize("marker", ["# newdoc", "# newdoc id =", "# newdoc id = ", "# newdoc id =   \t"])
def test_d11_s5_newdoc_without_usable_id_opens_a_document_with_d3_id(corpus, marker):
    """D11/Q10d: `# newdoc` with no (or a blank) id still opens a document; D4/D3 give it
    `<rel>:<n>`, n counting every document emitted from the file (S1)."""
    r = corpus.run("k", "conllu", {"sub/f.conllu": sent("a", comments=["# newdoc id = first"])
                                   + sent("b", comments=[marker])})
    assert docs_of(r) == [("first", 1), ("sub/f:000001", 1)]


@pytest.mark.parametrize("line", ["# newdocument = x", "# new doc id = x", "## newdoc id = x", "# x newdoc id = y"])
def test_s5_lines_that_are_not_newdoc(corpus, line):
    r = corpus.run("k", "conllu", {"f.conllu": sent("a") + sent("b", comments=[line])})
    assert docs_of(r) == [("f", 2)]


def test_s5_any_newdoc_switches_the_sent_id_heuristic_off(corpus):
    content = (sent("a", comments=["# sent_id = p.1"]) + sent("b", comments=["# newdoc"])
               + sent("c", comments=["# sent_id = q.1"]))
    r = corpus.run("k", "conllu", {"f.conllu": content})
    assert docs_of(r) == [("p", 1), ("f:000001", 2)]


def test_state_resets_per_file_and_equal_ids_are_not_merged(corpus):
    files = {"a.conllu": sent("x", comments=["# newdoc id = same"]) + sent("y", comments=["# sent_id = p.1"]),
             "b.conllu": sent("z", comments=["# sent_id = p.1"]) + sent("w", comments=["# newdoc id = same"])}
    r = corpus.run("k", "conllu", files)
    assert docs_of(r) == [("same", 2), ("p", 1), ("same", 1)]


def test_discovery_merges_conllu_and_conll_sorted_and_ignores_directories(corpus):
    """ADDENDUM 3.1: components compared one at a time; directories named like inputs ignored."""
    files = {"b.conll": sent("b"), "a.conllu": sent("a"), "a/z.conllu": sent("az"), "dir.conllu/x.txt": "not input"}
    r = corpus.run("k", "conllu", files)
    assert r.ids == ["z", "a", "b"]


# ----------------------------------------------------------------------------- metadata (ADDENDUM 5.4, 7)


TSV = "id\tcerif\tudc\ttype\n10000\tP000|T270\t502(043)\tDiplomsko delo\n10001\t-\t\t-\n"
TSV_CONFIG = {"path": "OSS-metadata.tsv", "key_column": "id", "key_pattern": r"^oss-(\d+)$",
              "fields": {"cerif": "cerif", "udc": "udc", "type": "doctype"}, "splits": {"cerif": "|"}}


def test_every_document_of_a_file_gets_its_tsv_row(corpus):
    files = {"OSS-metadata.tsv": TSV,
             "oss-10000.conllu": sent("a", comments=["# newdoc id = d1"]) + sent("b", comments=["# newdoc id = d2"]),
             "oss-10001.conllu": sent("c"), "other.conllu": sent("d")}
    r = corpus.run("oss", "conllu", files, metadata=TSV_CONFIG)
    row_meta = {"cerif": ["P000", "T270"], "udc": "502(043)", "doctype": "Diplomsko delo"}
    assert [x.get("metadata") for x in r.lines] == [row_meta, row_meta, None, None]
    assert r.ids == ["d1", "d2", "oss-10001", "other"]


def test_metadata_is_a_fresh_dict_per_document(tmp_path):
    (tmp_path / "OSS-metadata.tsv").write_text(TSV)
    (tmp_path / "oss-10000.conllu").write_text(sent("a", comments=["# newdoc id = d1"])
                                               + sent("b", comments=["# newdoc id = d2"]))
    ex = ConlluExtractor(parse_tsv_config(TSV_CONFIG, "datasets.oss.metadata"))
    ex.prepare(tmp_path)
    docs = list(ex.extract(InputFile(tmp_path / "oss-10000.conllu", "oss-10000.conllu"),
                           ExtractContext("oss", tmp_path)))
    assert docs[0].metadata == docs[1].metadata
    assert docs[0].metadata is not docs[1].metadata
    assert docs[0].metadata["cerif"] is not docs[1].metadata["cerif"]


def test_no_metadata_block_means_empty_metadata(tmp_path):
    (tmp_path / "a.conllu").write_text(sent("a"))
    docs = list(ConlluExtractor(None).extract(InputFile(tmp_path / "a.conllu", "a.conllu"),
                                              ExtractContext("k", tmp_path)))
    assert docs[0].metadata == {} and docs[0].annotations.forms == ["a"]


def test_jsonl_style_metadata_block_fails_at_config_load(tmp_path):
    """ADDENDUM 5.4 + D15: a truthy block is a TSV config, so the missing `path` is reported
    when the catalog loads, naming the dataset and field."""
    (tmp_path / "extract.yaml").write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out", "datasets": {
        "news": {"extractor": "conllu", "domain": "news", "metadata": {"text_field": "body"}}}}))
    with pytest.raises(CatalogError, match=r"datasets\.news\.metadata\.path: missing"):
        load_catalog(tmp_path / "extract.yaml")


def test_missing_tsv_fails_the_dataset_naming_it(corpus):
    with pytest.raises(ExtractorError, match=r"OSS-metadata\.tsv not found"):
        corpus.run("oss", "conllu", {"oss-1.conllu": sent("a")}, metadata=TSV_CONFIG)


# ----------------------------------------------------------------------------- large inputs


def test_chunk_boundaries_never_change_the_result(corpus):
    """Sentences and CRLF pairs straddling the read size are parsed as if read whole."""
    rng = random.Random(7)
    seps = ["\n\n", "\n \n", "\n\t\n\n", "\r\n\r\n", "\r\r", "\n\n\n"]
    parts, expected = [], []
    size = 0
    n = 0
    while size < 2 * READ_SIZE + 5000:
        forms = [f"w{n}_{k}" for k in range(rng.randint(1, 30))]
        nl = "\r\n" if rng.random() < 0.3 else "\n"
        block = nl.join([f"# newdoc id = d{n}"] + [row(i, f, misc="_") for i, f in enumerate(forms, 1)])
        parts.append(block + rng.choice(seps))
        expected.append((f"d{n}", forms))
        size += len(parts[-1])
        n += 1
    data = "".join(parts)
    r = corpus.run("k", "conllu", {"big.conllu": data.encode("ascii")})
    got = [(a["doc_id"], a["forms"]) for a in r.sidecar]
    assert got == expected
    assert r.drops == {}


def test_crlf_pair_split_exactly_at_the_read_size(corpus):
    """ADDENDUM 3.2: a CR ending one read and the LF opening the next are ONE line end, not a
    blank line that would split the sentence."""
    head = "# newdoc id = a\r\n# "
    tail = "\r\n" + row(1, "x")
    data = (head + "p" * (READ_SIZE - 1 - len(head) - len(tail)) + tail + "\r\n" + row(2, "y")
            + "\r\n\r\n# newdoc id = b\r\n" + row(1, "w") + "\r\n")
    assert data.encode()[READ_SIZE - 2: READ_SIZE + 2] == b"_\r\n2"
    r = corpus.run("k", "conllu", {"f.conllu": data.encode()})
    assert docs_of(r) == [("a", 1), ("b", 1)]
    assert [a["forms"] for a in r.sidecar] == [["x", "y"], ["w"]]


def test_sentence_longer_than_a_read(corpus):
    n = READ_SIZE // 30 + 100
    big = "\n".join(row(i, f"t{i}") for i in range(1, n + 1))
    r = corpus.run("k", "conllu", {"f.conllu": sent("a") + big + "\n\n" + sent("z")})
    assert r.sidecar[0]["sentences"] == [[0, 0], [1, n], [n + 1, n + 1]]
    assert r.sidecar[0]["forms"][n] == f"t{n}"


def test_large_file_whose_blank_lines_all_hold_spaces(corpus):
    """D11: with no empty line anywhere, the reads are cut at the space-only blank lines."""
    blocks = [f"# newdoc id = d{i}\n" + "\n".join(row(j, f"w{i}.{j}") for j in range(1, 40)) for i in range(2000)]
    data = "\n \t \n".join(blocks) + "\n"
    assert len(data) > 2 * READ_SIZE and "\n\n" not in data
    r = corpus.run("k", "conllu", {"f.conllu": data})
    assert r.ids == [f"d{i}" for i in range(2000)]
    assert all(len(a["forms"]) == 39 for a in r.sidecar)


def test_sharded_run_is_byte_identical_to_one_worker(tmp_path):
    """D18/D2: with >= 8 files and two workers, text and decompressed sidecar equal a serial run."""
    raw = tmp_path / "raw" / "k"
    raw.mkdir(parents=True)
    for i in range(10):
        content = "".join(sent(f"f{i}s{j}a", f"b{j}", comments=[f"# sent_id = p{j // 2}.{j}"], nospace=(1,))
                          for j in range(5))
        (raw / f"file{i:02d}.conllu").write_text(content)
    (raw / "file03.conllu").write_text(sent("no", "id", comments=["# sent_id = .x"]))  # a D3 fallback id
    outputs = {}
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        cfg = tmp_path / f"extract{workers}.yaml"
        cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": out.name,
                                       "datasets": {"k": {"extractor": "conllu", "domain": "d"}}}))
        plan = plan_dataset(load_catalog(cfg).dataset("k"), force=True, workers=workers)
        assert len(plan.shards) >= 8
        extract_and_publish(plan)
        outputs[workers] = ((out / "k.jsonl").read_bytes(),
                            gzip.decompress((out / "k.annotations.jsonl.gz").read_bytes()))
    assert outputs[1] == outputs[2]
    assert outputs[1][0].count(b"\n") == 28  # 9 files x 3 prefixes + 1
    assert b'"doc_id":"file03:000000"' in outputs[1][0].replace(b" ", b"")


def test_real_corpora_match_expected_outputs(tmp_path):
    """The four CoNLL-U samples of shared/corpora, through the plain pipeline, equal expected/."""
    compare = load_compare_outputs()
    config = corpora_config(tmp_path)
    catalog = load_catalog(config)
    keys = ["ssj500k", "sst", "janes_tag", "clarinsi_samples_conllu"]
    expected = Path(compare.__file__).resolve().parents[1] / "corpora" / "expected"
    for key in keys:
        extract_and_publish(plan_dataset(catalog.dataset(key), force=True, workers=1))
        compare.compare_key(key, tmp_path / "out", expected)  # raises Mismatch naming the line


# ----------------------------------------------------------------------------- model check


def _model(text: str, stem: str) -> list:
    """A line-by-line transcription of ADDENDUM 5 + D11/S5 (no speed tricks): (id, forms, texts)."""
    docs, cur, forms, texts = [], stem, [], []
    newdoc_seen = prefix_set = False
    block: list[str] = []

    def emit():
        if forms:
            docs.append((cur, list(forms), list(texts)))
        forms.clear()
        texts.clear()

    for line in (text.replace("\r\n", "\n").replace("\r", "\n").split("\n") + [""]):
        if line.strip(" \t"):
            block.append(line)
            continue
        if not block:
            continue
        lead = []
        for ln in block:
            if not ln.startswith("#"):
                break
            lead.append(ln)
        nd = next((ln for ln in lead if ln.startswith("# newdoc") and (len(ln) == 8 or ln[8].isspace())), None)
        sid = next((ln[12:] for ln in lead if ln.startswith("# sent_id = ")), None)
        if nd is not None:
            emit()
            _, eq, rest = nd.partition("=")
            cur = (rest[1:] if rest.startswith(" ") else rest) if eq else None
            newdoc_seen = True
        elif sid is not None and not newdoc_seen and "." in sid:
            p = sid.split(".", 1)[0]
            if not prefix_set:
                cur, prefix_set = p, True
            elif p != cur:
                emit()
                cur = p
        rows = [ln.split("\t") for ln in block if not ln.startswith("#")]
        rows = [r for r in rows if len(r) >= 10 and "-" not in r[0] and "." not in r[0]]
        t = [ln[9:] for ln in block if ln.startswith("# text = ")]
        if rows:
            fs = [r[1] for r in rows]
            sp = ["SpaceAfter=No" not in r[9].split("|") for r in rows]
            forms.extend(fs)
            texts.append(t[-1] if t and t[-1] else sentence_text(fs, sp))
        block = []
    emit()
    return [(d if d is None or d.strip() else None, f, t) for d, f, t in docs]


_piece = st.sampled_from([
    "# newdoc id = A", "# newdoc", "# sent_id = p.1", "# sent_id = q.2", "# sent_id = nodot", "# text = T x",
    "# text = ", "# c", row(1, "a"), row(2, "b", misc="SpaceAfter=No"), row(3, "_", "_", "_", "_"),
    "1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_", "4.1\te\t_\t_\t_\t_\t_\t_\t_\t_", "", "", "", " ", "\t",
    row(5, "c") + "\textra", "# newdoc id = B", "# sent_id = .z",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_piece, max_size=25), newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_fast_path_agrees_with_a_line_by_line_model(tmp_path, lines, newline):
    text = newline.join(lines)
    path = tmp_path / "m.conllu"
    path.write_bytes(text.encode())
    docs = list(ConlluExtractor(None).extract(InputFile(path, "m.conllu"), ExtractContext("k", tmp_path)))
    got = [(d.doc_id, d.annotations.forms, d.text.split("\n")) for d in docs]
    assert got == _model(text, "m")


# ----------------------------------------------------------------------------- max_document_bytes (docs/memory.md)


def test_a_document_over_the_cap_is_dropped_as_when_built_whole(corpus):
    """Its columns are let go once its text passes the cap; the drop, its fallback id (a newdoc
    without an id), a blank document's empty_text and the order of the warnings stay."""
    text = ("# text = " + "č" * 30,)
    many = "".join(sent(f"beseda{i}", "in", "še", comments=text if i % 3 else ()) for i in range(40))
    data = ("# newdoc id = kratek\n" + sent("ena") + "# newdoc\n" + many + "# newdoc id = prazen\n"
            + sent(*["\u3000"] * 100) + "# newdoc id = slab\n" + sent("dve")
            + "1\tkratka vrstica\n\n" + many + "# newdoc id = zadnji\n" + sent("konec"))
    whole = corpus.run("d", "conllu", {"a.conllu": data})
    cap = 200
    assert sorted(len(line["text"].encode()) > cap for line in whole.lines) == [False, False, True, True]
    capped = corpus.run("d", "conllu", {"a.conllu": data}, max_document_bytes=cap)
    lines, too_large = over_cap_expectation(whole, cap, "d/a.conllu")
    assert capped.lines == lines
    assert [w for w in capped.warnings if "document_too_large" in w] == too_large
    assert "'a:000001'" in too_large[0]  # the fallback id the encoder gives it (D3)
    assert capped.drops == {**whole.drops, "document_too_large": 2}
    # a blank document over the cap is still empty_text; the malformed row inside an over-cap
    # document keeps its place before that document's drop
    assert [w.rsplit("[", 1)[1] for w in capped.warnings] == [
        "document_too_large]", "empty_text]", "malformed_row]", "document_too_large]"]


def test_a_sentence_longer_than_a_slice_is_read_in_slices_with_the_same_result(corpus):
    """Token rows over 1 MiB under a cap are split in slices: a late `# text = ` still wins, a
    malformed row is still named by its line, and the document is kept or dropped as whole."""
    rows = [row(i, f"w{i % 97}", misc="SpaceAfter=No" if i % 5 == 0 else "_") for i in range(1, 40_001)]
    rows[20_000] = "20001\tkratka"  # malformed: named by its line
    rows.insert(30_000, "# text = pozno besedilo")  # a late text comment wins
    big = "# newdoc id = velik\n" + "\n".join(rows) + "\n\n"
    data = ("# newdoc id = prvi\n" + sent("ena") + big + "# newdoc id = brez\n"
            + big.replace("# text = pozno besedilo\n", ""))
    assert len(big) > 1 << 20
    whole = corpus.run("d", "conllu", {"a.conllu": data})
    kept = corpus.run("d", "conllu", {"a.conllu": data}, max_document_bytes=1 << 30)
    assert (kept.lines, kept.sidecar, kept.warnings) == (whole.lines, whole.sidecar, whole.warnings)
    for cap in (10, 300_000):
        capped = corpus.run("d", "conllu", {"a.conllu": data}, max_document_bytes=cap)
        lines, too_large = over_cap_expectation(whole, cap, "d/a.conllu")
        assert capped.lines == lines
        assert [w for w in capped.warnings if "document_too_large" in w] == too_large
        assert [w for w in capped.warnings if "malformed_row" in w] == [w for w in whole.warnings if "malformed" in w]
