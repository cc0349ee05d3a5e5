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
import os
import subprocess
import sys
from pathlib import Path

import pytest

MB = 1 << 20
CAP = 1_000_000
# conllu keeps a document's token columns until its text passes the cap: about 50 bytes of Python
# objects per byte of text (five columns of strings per token), so its bound is TOKENS x its cap
CONLLU_CAP = 200_000
TOKENS = 60
ALLOWANCE = 40 * MB  # the reader's chunks and their copies (text: 4 MiB reads, conllu: 1 MiB), the writer
_CHILD = """
import json, sys
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
catalog = load_catalog(sys.argv[1])
report = extract_dataset(catalog.dataset("d"), catalog, force=True, workers=1)
print(json.dumps(report.warnings))
"""
_WORDS = ("beseda", "hiša", "pot", "in", "je", "dolga", "čas", "ki")


def _peak(root: Path, extractor: str, name: str, write, cap: int = CAP) -> tuple[int, list]:
    """Peak RSS in bytes of a child extracting `raw/d/<name>` (written by `write(fh)`), and the
    run's warnings."""
    raw = root / "raw" / "d"
    raw.mkdir(parents=True)
    with open(raw / name, "w", encoding="utf-8", newline="\n") as fh:
        write(fh)
    yaml = root / "extract.yaml"
    yaml.write_text(f"input_dir: raw\noutput_dir: out\nsplit_bytes: 0\ndatasets:\n  d:\n    extractor: {extractor}\n"
                    f"    domain: test\n    max_document_bytes: {cap}\n")
    with open(root / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(yaml)], cwd=root, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (root / "stderr").read_text()[-2000:]
    return usage.ru_maxrss * 1024, json.loads(out.decode().splitlines()[-1])


def _lines(fh, size: int, line) -> int:
    """Write `line(i)` for i = 1, 2, ... until `size` bytes; the number of lines."""
    n = written = 0
    while written < size:
        n += 1
        s = line(n)
        fh.write(s)
        written += len(s.encode())
    return n


def _sentence_row(i: int) -> str:
    w = _WORDS[i % len(_WORDS)]
    return f"{i}\t{w}\t{w}\tNOUN\t_\tCase=Nom\t0\troot\t_\t_\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    """The peak of each format's child on a one-document input: what the bounds add to."""
    inputs = {"text": ("a.txt", "ena\n"), "conllu": ("a.conllu", _sentence_row(1)),
              "json": ("a.json", '[{"text": "ena"}]'),
              "macocu": ("a.xml", '<corpus><doc id="a"><p>ena</p></doc></corpus>')}
    return {fmt: _peak(tmp_path_factory.mktemp(fmt), fmt, name, lambda fh, t=text: fh.write(t))[0]
            for fmt, (name, text) in inputs.items()}


def test_a_text_block_far_over_the_cap_is_counted_not_kept(tmp_path, tiny):
    def write(fh):
        fh.write("prvi\n\n")
        _lines(fh, 20 * MB, lambda i: " ".join(_WORDS) + f" {i}\n")
        fh.write("\nzadnji\n")

    peak, warnings = _peak(tmp_path, "text", "a.txt", write)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.txt:3: a block of ")
    assert warnings[0].endswith("[document_too_large]")
    assert peak < tiny["text"] + CAP + ALLOWANCE, (peak // MB, tiny["text"] // MB)  # was 7x the block


def test_a_conllu_document_of_many_sentences_over_the_cap_lets_its_columns_go(tmp_path, tiny):
    def write(fh):
        fh.write("# newdoc id = velik\n")
        _lines(fh, 16 * MB, lambda i: "".join(map(_sentence_row, range(1, 11))) + "\n")
        fh.write("# newdoc id = zadnji\n" + _sentence_row(1))

    peak, warnings = _peak(tmp_path, "conllu", "a.conllu", write, CONLLU_CAP)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.conllu: document 'velik': its text is ")
    assert peak < tiny["conllu"] + TOKENS * CONLLU_CAP + ALLOWANCE, (peak // MB, tiny["conllu"] // MB)


def test_one_conllu_sentence_far_over_the_cap_is_read_in_slices(tmp_path, tiny):
    """A single sentence is held as its block of text (about 4x its bytes: the bytes, the decoded
    text, the block), never split into all its fields at once (before: ~22x)."""
    size = 10 * MB

    def write(fh):
        fh.write("# newdoc id = velik\n")
        _lines(fh, size, _sentence_row)

    peak, warnings = _peak(tmp_path, "conllu", "a.conllu", write, CONLLU_CAP)
    assert len(warnings) == 1 and "document 'velik': its text is " in warnings[0]
    assert peak < tiny["conllu"] + TOKENS * CONLLU_CAP + 6 * size + ALLOWANCE, (peak // MB, tiny["conllu"] // MB)


def test_a_json_array_is_read_record_by_record(tmp_path, tiny):
    def write(fh):
        fh.write("[\n")
        _lines(fh, 16 * MB, lambda i: json.dumps({"doc_id": f"r{i}", "score": i / 7, "text": " ".join(_WORDS)},
                                                ensure_ascii=False) + ",\n")
        fh.write('{"text": "zadnji"}]\n')

    peak, warnings = _peak(tmp_path, "json", "a.json", write)
    assert warnings == []
    assert peak < tiny["json"] + ALLOWANCE, (peak // MB, tiny["json"] // MB)  # was 7x the file


def test_a_macocu_doc_far_over_the_cap_lets_its_paragraphs_go(tmp_path, tiny):
    def write(fh):
        fh.write('<corpus>\n<doc id="velik">\n')
        _lines(fh, 16 * MB, lambda i: f"<p>{' '.join(_WORDS)} {i}</p>\n")
        fh.write('</doc>\n<doc id="zadnji"><p>konec</p></doc>\n</corpus>\n')

    peak, warnings = _peak(tmp_path, "macocu", "a.xml", write)
    assert len(warnings) == 1 and warnings[0].startswith("d/a.xml: document 'velik': its text is ")
    assert peak < tiny["macocu"] + CAP + ALLOWANCE, (peak // MB, tiny["macocu"] // MB)  # was 10x the <doc>
