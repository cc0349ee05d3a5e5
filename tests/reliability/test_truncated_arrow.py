"""A damaged Arrow file names itself with one worker too (issue 39, point 7).

With one worker a run extracts in its own process. The huggingface fast path memory-mapped the
Arrow files and checked their sizes before each window of rows, but a truncation in the instant
between the check and the copy of the rows killed the process with SIGBUS: `slm4ie extract` ended
with rc 135 and no message in 3 of 10 tries, where two workers named the file. Now the files are
read at offsets, never mapped: a file that shrank is a short read, the config's `read_failed`
naming the file, and the run's stamp check then fails it with `InputChanged`, naming it.

Each try truncates the file at the worst moment there is: a child process reads a config of a few
windows of rows and says when it has handed on the last row of the first window, so the next
window is being read while the file is cut to one page. Before, most tries died with SIGBUS.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_and_publish, plan_dataset
from slm4ie_assets.planning.input_stamps import InputChanged
from support.files import write_config
from support.saved_dataset import write_saved_dataset

TRIES = 6  # before, 13 tries in 20 died with SIGBUS: all six passing on the old code is a chance of 0.2%
ROWS = 3 * 1024  # three windows of rows (huggingface.BATCH_ROWS)
_CHILD = r"""
import json, sys
from pathlib import Path
from slm4ie_assets.extractors.drop_ledger import DropLedger
from slm4ie_assets.extractors.extract_context import ExtractContext
from slm4ie_assets.extractors.huggingface import BATCH_ROWS, HuggingfaceExtractor

config = Path(sys.argv[1])
from slm4ie_assets.extractors.input_file import InputFile
ledger = DropLedger()
docs = 0
for doc in HuggingfaceExtractor().extract(InputFile(config, config.name), ExtractContext("k", config.parent, ledger)):
    docs += 1
    if docs == BATCH_ROWS:  # the first window handed on: the next one is read now
        print("cut", flush=True)
print(json.dumps({"docs": docs, "drops": dict(ledger.counts), "warnings": ledger.warnings}), flush=True)
"""


def save_config(folder: Path, rows: int) -> Path:
    """A `save_to_disk` folder (support.saved_dataset); its Arrow file. Each text is 20 kB, so
    copying a window of rows out of the file takes tens of milliseconds."""
    return write_saved_dataset(folder, rows, lambda i: f"vrstica {i} " + "čebela " * 2500)


def test_an_arrow_file_cut_while_the_next_rows_are_read_is_named_not_a_sigbus(tmp_path):
    pristine = tmp_path / "pristine"
    arrow = save_config(pristine, ROWS)
    data = arrow.read_bytes()
    for attempt in range(TRIES):
        config = tmp_path / f"try{attempt}" / "cfg"
        save_config(config, 0)  # the folder's other files; the Arrow file is the pristine one
        victim = config / arrow.name
        victim.write_bytes(data)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(config)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "cut\n", (line, child.stderr.read() if child.stderr else "")
        os.truncate(victim, 4096)
        out, err = child.communicate(timeout=120)
        assert child.returncode >= 0, (f"try {attempt}: the reading process died with "
                                       f"{signal.Signals(-child.returncode).name}: {err[-2000:]}")
        assert child.returncode == 0, err[-2000:]
        result = json.loads(out)
        assert result["drops"] == {"read_failed": 1} and 1024 <= result["docs"] < ROWS, result
        (warning,) = result["warnings"]
        assert warning.startswith("k/cfg: reading the batch at row ") and arrow.name in warning, warning
        assert "shrank from" in warning and warning.endswith("[read_failed]"), warning


def test_one_worker_fails_the_run_naming_the_file_that_shrank(tmp_path):
    """Through the pipeline with one worker: the file cut while it is read (here: after planning,
    which stamps it) fails the run with `InputChanged` naming the file, and nothing is published."""
    arrow = save_config(tmp_path / "raw" / "k" / "cfg", 2 * 1024)
    catalog = load_catalog(write_config(tmp_path, {"k": {"extractor": "huggingface", "domain": "t"}}))
    plan = plan_dataset(catalog.dataset("k"), force=True, workers=1)
    os.truncate(arrow, arrow.stat().st_size // 2)
    try:
        extract_and_publish(plan)
    except InputChanged as exc:
        assert "k/cfg" in str(exc) and arrow.name in str(exc), exc
    else:
        raise AssertionError("the run did not fail")
    assert not (tmp_path / "out" / "k.jsonl").exists()
