"""The messages of issue 34, case 7: each says what happened, in words a user reads without a bug
report. Real files, real locks, a real pool whose workers are really stopped."""

import json
import logging
import os
import signal
import time

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.stalls import WorkerStalled
from slm4ie_assets.parts.document_encoder import Drop, encode_document
from slm4ie_assets.pipeline import extract_and_publish, extract_dataset, plan_dataset
from slm4ie_assets.schema import Document
from slm4ie_assets.store.dataset_store import DatasetStore
from slm4ie_assets.store.locks import LockFileError, check_opened_lock, dataset_lock
from slm4ie_assets.utils.type_names import a_type_name
from support.files import write_config, write_files
from support.processes import pool_workers

# ----------------------------------------------------------------------------- a lock that vanished


def test_a_lock_file_removed_with_its_folder_right_after_it_was_opened_says_so(tmp_path):
    """Before: "... is a hard link (0 names for one file), so writing it would change another file
    too". A file with no name is not a hard link: it was removed after this run created it."""
    lock = tmp_path / "out" / ".slm4ie" / "locks" / "kas.lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)  # what the run opened, the moment before the check
    try:
        lock.unlink()
        lock.parent.rmdir()  # the folder vanished with it
        with pytest.raises(LockFileError) as err:
            check_opened_lock(os.fstat(fd), f"kas: the dataset lock {lock}", lock, "remove it")
    finally:
        os.close(fd)
    message = str(err.value)
    assert "hard link" not in message and "0 names" not in message
    assert f"kas: the dataset lock {lock} was removed while this run opened it" in message
    assert f"its folder {lock.parent}" in message and "then run again" in message
    with dataset_lock(lock, "kas"):  # the next run recreates both
        assert lock.is_file()


# ----------------------------------------------------------------------------- a/an


def test_type_errors_name_the_type_with_the_right_article(tmp_path):
    assert [a_type_name(v) for v in (5, "x", 1.5, True, [], {}, None)] == [
        "an int", "a str", "a float", "a bool", "a list", "a dict", "a NoneType"]
    records = [{"id": "a", "text": 5}, {"id": "b", "text": ["x"]},
               {"id": "c", "text": "ok", "paragraphs": [{"sentences": [{"tokens": [{"form": 7}]}]}]},
               {"id": "d", "text": "ok too"}]
    write_files(tmp_path / "raw" / "d", {"a.jsonl": "".join(json.dumps(r) + "\n" for r in records)})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "jsonl", "domain": "t"}}))
    warnings = extract_dataset(catalog.dataset("d"), catalog).warnings
    assert any("d/a.jsonl:1: field 'text' is an int, not a string" in w for w in warnings), warnings
    assert any("d/a.jsonl:2: field 'text' is a list, not a string" in w for w in warnings), warnings
    assert any("d/a.jsonl:3: token 1's 'form' is an int (7), not a string" in w for w in warnings), warnings
    assert not any(" a int" in w for w in warnings)
    dropped = encode_document(Document(text=3), "d", "t", "a", 0)
    assert isinstance(dropped, Drop) and dropped.message == "text is an int, not a string; document skipped"


# ----------------------------------------------------------------------------- the stall kill


def test_the_stall_kill_prints_no_callback_traceback_before_worker_stalled(tmp_path, capfd, caplog):
    """Before: "exception calling callback for <Future ...> ... InvalidStateError: CANCELLED" on
    stderr, then the right WorkerStalled. The futures the run cancelled end quietly now."""
    docs = "".join(json.dumps({"id": f"x{i}", "text": f"dokument {i}"}) + "\n" for i in range(120_000))
    write_files(tmp_path / "raw" / "d", {"a.jsonl": docs, "b.jsonl": docs, "c.jsonl": docs})
    catalog = load_catalog(write_config(tmp_path, {"d": {"extractor": "jsonl", "domain": "t", "stall_seconds": 1,
                                                         "stall_timeout_seconds": 2}}))
    spec = catalog.dataset("d")
    plan = plan_dataset(spec, workers=2, progress_seconds=0.1)
    stopped: list[int] = []

    def log(message: str) -> None:
        if not stopped and len(list(DatasetStore(spec).parts.glob("*.jsonl.partial"))) == 2:
            stopped.extend(pool_workers())  # both workers, each in the middle of its shard
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)

    caplog.set_level(logging.ERROR)
    try:
        with pytest.raises(WorkerStalled, match=r"d: shard '[abc]\.jsonl' \(worker pid \d+\) has made no progress"):
            extract_and_publish(plan, log=log)
        time.sleep(0.5)  # the pool's management thread settles the killed tasks' futures meanwhile
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert stopped
    err = capfd.readouterr().err
    logged = "\n".join(r.getMessage() + (str(r.exc_info[1]) if r.exc_info else "") for r in caplog.records)
    assert "InvalidStateError" not in err and "exception calling callback" not in err, err
    assert "InvalidStateError" not in logged and "exception calling callback" not in logged, logged
