"""An XML file's DOCTYPE never makes a worker open a file outside raw/<key>/ (docs/guarantees.md 4).

libxml2 loads the external DTD a DOCTYPE names when ids are not collected (the tei route), from the
local disk, relative to the worker's working folder. Every tei and macocu parser answers such a
request with empty text (xml.parser.refuse_external): a DOCTYPE naming a FIFO would otherwise hang
the run for ever, and one naming any other local file would be read (and, not being a DTD, end the
file's parse). Run in a subprocess with a wall-clock limit, so a regression fails instead of hanging.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.files import read_jsonl, write_config

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
RUN = """
import json, sys
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
catalog = load_catalog(sys.argv[1])
report = extract_dataset(catalog.dataset(sys.argv[2]), catalog, force=True, workers=1)
print(json.dumps(report.warnings))
"""


def tei(doctype: str, annotated: bool) -> str:
    body = ('<p xml:id="p1"><s><w lemma="dober">Dober</w> <w lemma="dan">dan</w></s></p>' if annotated
            else '<p xml:id="p1">Dober dan.</p>')
    return (f'<?xml version="1.0"?>\n{doctype}\n<TEI {NS}><teiHeader/><text><body>{body}'
            '<p xml:id="p2">Lep pozdrav.</p></body></text></TEI>\n')


def macocu(doctype: str) -> str:
    return (f'<?xml version="1.0"?>\n{doctype}\n<corpus><doc id="d1"><p>Dober dan.</p></doc>'
            '<doc id="d2"><p>Lep pozdrav.</p></doc></corpus>\n')


def extract(tmp_path: Path, key: str, extractor: str, text: str) -> tuple[list[dict], list[str]]:
    """The published lines and the run's warnings of one file, extracted in a fresh process."""
    raw = tmp_path / "raw" / key
    raw.mkdir(parents=True)
    (raw / "a.xml").write_text(text, encoding="utf-8")
    config = write_config(tmp_path, {key: {"extractor": extractor, "domain": "test"}})
    done = subprocess.run([sys.executable, "-c", RUN, str(config), key], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return read_jsonl(tmp_path / "out" / f"{key}.jsonl"), json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(("extractor", "annotated"), [("tei", False), ("tei", True), ("macocu", False)],
                         ids=["tei-plain", "tei-annotated", "macocu"])
@pytest.mark.parametrize("target", ["fifo", "plain_file", "relative_plain_file"])
def test_a_doctype_naming_a_local_file_reads_nothing_and_keeps_every_document(tmp_path, extractor, annotated,
                                                                              target):
    outside = tmp_path / "outside"
    outside.mkdir()
    if target == "fifo":
        named = outside / "pipe"
        os.mkfifo(named)  # opening it for reading would block until a writer comes: never
        system = str(named)
    else:
        named = outside / "notes.txt"
        named.write_text("not a DTD at all\n")
        system = str(named) if target == "plain_file" else "outside/notes.txt"  # the working folder's
    doctype = f'<!DOCTYPE {"TEI" if extractor == "tei" else "corpus"} SYSTEM "{system}">'
    text = tei(doctype, annotated) if extractor == "tei" else macocu(doctype)
    lines, warnings = extract(tmp_path, "k", extractor, text)
    control = text.replace(doctype, "")  # the same file without a DOCTYPE
    expected, control_warnings = extract(tmp_path, "control", extractor, control)
    assert lines and [line["text"] for line in lines] == [line["text"] for line in expected]
    assert warnings == control_warnings == []
