"""`max_document_bytes` bounds memory, and a `.json` array is read record by record (issue 34,
point 2; docs/memory.md).

Each case extracts a generated input far bigger than the cap through the real pipeline in a child
process and reads the child's own peak RSS (`os.wait4`). The bound is the peak of the same child
on a tiny input of the format (imports, the writer) plus the cap plus a fixed allowance for the
reader's chunks. Before the bounds the same inputs peaked at 6-20x their size (docs/memory.md has
the figures). That the documents, drops and warnings are the ones of the reading without the
bound is tested in tests/extractors/ and tests/reliability/test_split_warnings.py.
"""

import json

import pytest

from support.peak_rss import ALLOWANCE, CAP, MB, peak_of_extraction, write_lines

# conllu keeps a document's token columns until its text passes the cap: about 50 bytes of Python
# objects per byte of text (five columns of strings per token), so its bound is TOKENS x its cap
CONLLU_CAP = 200_000
TOKENS = 60
_WORDS = ("beseda", "hiša", "pot", "in", "je", "dolga", "čas", "ki")


def _sentence_row(i: int) -> str:
    w = _WORDS[i % len(_WORDS)]
    return f"{i}\t{w}\t{w}\tNOUN\t_\tCase=Nom\t0\troot\t_\t_\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The peak of each format's child on a one-document input: what the bounds add to."""
    inputs = {"text": ("a.txt", "ena\n"), "conllu": ("a.conllu", _sentence_row(1)),
              "json": ("a.json", '[{"text": "ena"}]'),
              "macocu": ("a.xml", '<corpus><doc id="a"><p>ena</p></doc></corpus>')}
    return {fmt: peak_of_extraction(tmp_path_factory.mktemp(fmt), fmt, name, lambda fh, t=text: fh.write(t))[0]
            for fmt, (name, text) in inputs.items()}


def test_a_text_block_far_over_the_cap_is_counted_not_kept(tmp_path, tiny):
    def write(fh):
        fh.write("prvi\n\n")
        write_lines(fh, 20 * MB, lambda i: " ".join(_WORDS) + f" {i}\n")
        fh.write("\nzadnji\n")

    peak, warnings = peak_of_extraction(tmp_path, "text", "a.txt", write)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.txt:3: a block of ")
    assert warnings[0].endswith("[document_too_large]")
    assert peak < tiny["text"] + CAP + ALLOWANCE, (peak // MB, tiny["text"] // MB)  # was 7x the block


def test_a_conllu_document_of_many_sentences_over_the_cap_lets_its_columns_go(tmp_path, tiny):
    def write(fh):
        fh.write("# newdoc id = velik\n")
        write_lines(fh, 16 * MB, lambda i: "".join(map(_sentence_row, range(1, 11))) + "\n")
        fh.write("# newdoc id = zadnji\n" + _sentence_row(1))

    peak, warnings = peak_of_extraction(tmp_path, "conllu", "a.conllu", write, CONLLU_CAP)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.conllu: document 'velik': its text is ")
    assert peak < tiny["conllu"] + TOKENS * CONLLU_CAP + ALLOWANCE, (peak // MB, tiny["conllu"] // MB)


def test_one_conllu_sentence_far_over_the_cap_is_read_in_slices(tmp_path, tiny):
    """A single sentence is held as its block of text (about 4x its bytes: the bytes, the decoded
    text, the block), never split into all its fields at once (before: ~22x)."""
    size = 10 * MB

    def write(fh):
        fh.write("# newdoc id = velik\n")
        write_lines(fh, size, _sentence_row)

    peak, warnings = peak_of_extraction(tmp_path, "conllu", "a.conllu", write, CONLLU_CAP)
    assert len(warnings) == 1 and "document 'velik': its text is " in warnings[0]
    assert peak < tiny["conllu"] + TOKENS * CONLLU_CAP + 6 * size + ALLOWANCE, (peak // MB, tiny["conllu"] // MB)


def test_a_json_array_is_read_record_by_record(tmp_path, tiny):
    def write(fh):
        fh.write("[\n")
        write_lines(fh, 16 * MB, lambda i: json.dumps({"doc_id": f"r{i}", "score": i / 7, "text": " ".join(_WORDS)},
                                                ensure_ascii=False) + ",\n")
        fh.write('{"text": "zadnji"}]\n')

    peak, warnings = peak_of_extraction(tmp_path, "json", "a.json", write)
    assert warnings == []
    assert peak < tiny["json"] + ALLOWANCE, (peak // MB, tiny["json"] // MB)  # was 7x the file


def test_a_macocu_doc_far_over_the_cap_lets_its_paragraphs_go(tmp_path, tiny):
    def write(fh):
        fh.write('<corpus>\n<doc id="velik">\n')
        write_lines(fh, 16 * MB, lambda i: f"<p>{' '.join(_WORDS)} {i}</p>\n")
        fh.write('</doc>\n<doc id="zadnji"><p>konec</p></doc>\n</corpus>\n')

    peak, warnings = peak_of_extraction(tmp_path, "macocu", "a.xml", write)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.xml: document 'velik': its text is ")
    assert peak < tiny["macocu"] + CAP + ALLOWANCE, (peak // MB, tiny["macocu"] // MB)  # was 10x the <doc>
