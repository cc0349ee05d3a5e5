"""A damaged input names itself (issue 34, point 5).

- A huggingface `.arrow` file truncated in place while it is read is that config's `read_failed`,
  naming the file; before, touching its missing mapped pages killed the process with SIGBUS (rc
  135) and no message. The reading runs in a child process, so a regression fails this test
  instead of killing pytest.
- A pool worker that dies while it holds a shard (here: a real SIGBUS sent to it while it waits
  for the shard's lock, which this test holds) fails the run with `WorkerDied` naming the dataset,
  the shard, its file and the signal, where a bare `BrokenProcessPool` named nothing.
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.worker_pool import WorkerDied
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.planning.shards import list_shards
from slm4ie_assets.store.dataset_store import DatasetStore
from support.files import write_config, write_files
from support.saved_dataset import write_saved_dataset

_TRUNCATE_WHILE_READING = r"""
import json, os, sys
from pathlib import Path
from slm4ie_assets.extractors.drop_ledger import DropLedger
from slm4ie_assets.extractors.extract_context import ExtractContext
from slm4ie_assets.extractors.input_file import InputFile
from slm4ie_assets.extractors.huggingface import HuggingfaceExtractor

config, arrow = Path(sys.argv[1]), Path(sys.argv[2])
ledger = DropLedger()
docs = HuggingfaceExtractor().extract(InputFile(config, config.name), ExtractContext("k", config.parent, ledger))
assert HuggingfaceExtractor.__module__ and "datasets" not in sys.modules
first = next(docs)  # the first batch is read: the file is mapped and being read
assert "datasets" not in sys.modules  # read on the pyarrow path, memory-mapped
os.truncate(arrow, arrow.stat().st_size // 3)
rest = list(docs)
print(json.dumps({"docs": 1 + len(rest), "drops": dict(ledger.counts), "warnings": ledger.warnings}))
"""


def _config(root: Path, rows: int) -> Path:
    """A `save_to_disk` folder (support.saved_dataset) under raw/k/cfg."""
    folder = root / "raw" / "k" / "cfg"
    write_saved_dataset(folder, rows, lambda i: f"besedilo številka {i} " * 8)
    return folder


def test_an_arrow_file_truncated_in_place_while_read_is_that_files_read_failed(tmp_path):
    folder = _config(tmp_path, 6_000)
    (arrow,) = sorted(folder.glob("*.arrow"))
    done = subprocess.run([sys.executable, "-c", _TRUNCATE_WHILE_READING, str(folder), str(arrow)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the reading process died (rc {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(done.stdout)
    assert result["drops"] == {"read_failed": 1}
    assert 0 < result["docs"] < 6_000  # the rows read before the truncation are kept
    (warning,) = result["warnings"]
    assert warning.startswith("k/cfg: reading the batch at row ") and arrow.name in warning
    assert "shrank from" in warning and "[read_failed]" in warning, warning


def _holder_of(path: Path) -> int | None:
    """The pid of another process that has `path` open (a worker waiting for that lock)."""
    target = str(path)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
        except OSError:
            continue
    return None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the worker through /proc")
def test_a_worker_killed_mid_shard_fails_the_run_naming_the_shard_and_signal(tmp_path):
    write_files(tmp_path / "raw" / "d", {"a.txt": b"ena\n\ndva\n", "b.txt": b"tri\n"})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "text", "domain": "t"}}))
    spec = catalog.dataset("d")
    store = DatasetStore(spec)
    (held,) = [s for s in list_shards(spec) if s.files[0].rel == "a.txt"]
    lock = store.shard_lock(held.key)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the worker given shard a.txt waits for it, inside its task
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            extract_dataset(spec, catalog, workers=2)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        pid = None
        while pid is None and time.monotonic() < deadline and runner.is_alive():
            time.sleep(0.1)
            pid = _holder_of(lock)
        assert pid is not None, "no worker took the shard"
        os.kill(pid, signal.SIGBUS)
        runner.join(60)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        runner.join(60)
    (exc,) = outcome
    assert isinstance(exc, WorkerDied), repr(exc)
    assert (f"a pool worker (pid {pid}) running dataset 'd' shard {held.key!r} (file a.txt) died with SIGBUS "
            "(rc 135)") in str(exc), str(exc)
    assert not (tmp_path / "out" / "d.jsonl").exists()  # nothing was published
