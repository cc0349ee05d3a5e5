"""Expected errors end a run with one clear message that says what to do, no traceback of ours, and
a non-zero exit; a real bug keeps its traceback (issue 15 item 6, slm4ie_assets/dagster_layer/user_errors.py).

Through the real `dagster asset materialize` of this venv, a temp project and a temp DAGSTER_HOME.
Dagster itself still prints its executor frames under a Failure ("Stack Trace:", see
DAGSTER_NOTES 11): what is asserted is that no frame of ours but the one
`raise` of dagster_layer/user_errors.py is shown, that no exception is chained, and that no Python traceback is.
"""

import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, asset, materialize

from slm4ie_assets.dagster_layer.assets import partitions_name
from slm4ie_assets.dagster_layer.user_errors import expected_errors_as_failures
from slm4ie_assets.store.locks import dataset_lock

REPO = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).parent / "dagster"
CATALOG = """\
input_dir: raw
output_dir: out
max_workers: 1
datasets:
  kas:
    extractor: tei
    domain: academic
  news:
    extractor: text
    domain: news
    strict: true
  web:
    extractor: text
    domain: web
"""


class Project:
    """A catalog, its raw/ and out/ folders and a Dagster instance, all under one temp folder."""

    def __init__(self, root: Path):
        self.root = root
        self.config = root / "extract.yaml"
        self.config.write_text(CATALOG, encoding="utf-8")
        self.home = root / "dagster_home"
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
        DagsterInstance.from_config(str(self.home)).dispose()  # the storage exists before any limit applies

    def raw(self, key: str, files: dict[str, bytes]) -> Path:
        folder = self.root / "raw" / key
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return folder

    def state(self, key: str) -> Path:
        return self.root / "out" / ".slm4ie" / key

    def materialize(self, *args: str, preexec_fn=None, **extra_env: str) -> tuple[int, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
        env.update(SLM4IE_EXTRACT_CONFIG=str(self.config), DAGSTER_HOME=str(self.home), **extra_env)
        done = subprocess.run([str(DAGSTER), "asset", "materialize", *args], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                              preexec_fn=preexec_fn)
        return done.returncode, done.stdout

    def step_failure(self):
        """The StepFailureData of the instance's only run, as the UI's error view reads it."""
        with DagsterInstance.from_config(str(self.home)) as instance:
            (run,) = instance.get_runs()
            (entry,) = instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_FAILURE)
            return entry.dagster_event.step_failure_data


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path)


def our_frames(output: str) -> list[str]:
    """The project's files in the printed stacks, besides the one raise that makes the Failure."""
    return [f for f in re.findall(r'File "([^"]+)"', output)
            if "/slm4ie_assets/" in f and not f.endswith("/user_errors.py")]


def assert_one_clear_failure(rc: int, output: str, *phrases: str) -> None:
    assert rc != 0, output
    for phrase in phrases:
        assert phrase in output, (phrase, output)
    assert "What to do: " in output or "run again" in output, output  # LockFileError etc. say it themselves
    assert "Traceback (most recent call last)" not in output, output
    assert "The above exception" not in output, output  # nothing chained under the message
    assert our_frames(output) == [], output
    assert "Error: Materialization failed." in output


def test_a_missing_raw_folder_is_one_message_in_the_cli_and_the_event_log(project):
    rc, output = project.materialize("--select", "extracted/kas")  # the literal command of a fresh clone
    raw = project.root / "raw" / "kas"
    assert_one_clear_failure(rc, output, f"dataset 'kas': raw folder {raw} does not exist",
                             "What to do: create the folder with the dataset's input files")
    failure = project.step_failure()
    assert failure.user_failure_data.description == (
        f"dataset 'kas': raw folder {raw} does not exist (put the tei input files under it). What to do: create "
        "the folder with the dataset's input files (or correct `input_dir` in extract.yaml), then materialize again.")
    assert failure.user_failure_data.metadata["error"].value == "MissingRawDir"
    assert failure.error.cause is None


def test_a_strict_violation_is_one_message_and_nothing_is_published(project):
    project.raw("news", {"a.txt": b"dober dan\n\nslab \xff bajt\n"})
    rc, output = project.materialize("--select", "extracted/news")
    assert_one_clear_failure(rc, output, "dataset 'news' is strict and 1 item(s) were skipped (invalid_utf8: 1)",
                             "What to do: nothing was published")
    assert not (project.root / "out" / "news.jsonl").exists()


def test_a_symlink_planted_at_the_lock_is_one_message_and_its_target_is_untouched(project):
    project.raw("web", {"a.txt": b"dober dan\n"})
    victim = project.root / "victim.txt"
    victim.write_bytes(b"keep me\n")
    project.state("web").mkdir(parents=True)
    (project.state("web") / "lock").symlink_to(victim)
    rc, output = project.materialize("--select", "extracted/web")
    assert_one_clear_failure(rc, output, "web: the dataset lock", "is a symbolic link", "refusing to follow it")
    assert victim.read_bytes() == b"keep me\n"


def test_a_linked_parts_folder_is_one_message_and_its_target_is_untouched(project):
    project.raw("web", {"a.txt": b"dober dan\n"})
    elsewhere = project.root / "bigger_disk"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_bytes(b"keep me\n")
    project.state("web").mkdir(parents=True)
    (project.state("web") / "parts").symlink_to(elsewhere)
    rc, output = project.materialize("--select", "extracted/web")
    assert_one_clear_failure(rc, output, "is a symbolic link; clean-up never deletes through links",
                             "Replace it with a real folder")
    assert (elsewhere / "keep.txt").read_bytes() == b"keep me\n"
    assert project.step_failure().user_failure_data.metadata["error"].value == "UnsafeOutputTree"


def test_a_lock_timeout_is_one_message(project):
    """Another run (this test) holds the dataset lock; the run gives up after SLM4IE_LOCK_TIMEOUT."""
    project.raw("web", {"a.txt": b"dober dan\n"})
    lock = project.state("web") / "lock"
    with dataset_lock(lock, "web"):
        rc, output = project.materialize("--select", "extracted/web", SLM4IE_LOCK_TIMEOUT="0.5")
    assert_one_clear_failure(rc, output, f"web: gave up after 0s waiting for the dataset lock {lock} held by "
                             f"another run (pid {os.getpid()} since ",
                             "What to do: another run of this dataset still holds the lock",
                             "SLM4IE_LOCK_TIMEOUT sets how long a run waits")
    assert not (project.root / "out" / "web.jsonl").exists()


def _file_size_limit(limit: int):
    def apply() -> None:  # in the child: a write past the limit fails with EFBIG, as a full disk with ENOSPC
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_is_one_message(project):
    """RLIMIT_FSIZE stands in for a full disk (tests/reliability/test_crash_full_disk.py does both):
    the 6 MB part cannot grow past 2 MB, the instance's own small files can."""
    block = b"Dober dan, to je dolga vrstica besedila za poln disk.\n\n"
    project.raw("web", {"big.txt": block * (6_000_000 // len(block))})
    rc, output = project.materialize("--select", "extracted/web", preexec_fn=_file_size_limit(2 << 20))
    assert_one_clear_failure(rc, output, "Failure: dataset 'web': cannot write under", "File too large",
                             "What to do: free space")
    assert not (project.root / "out" / "web.jsonl").exists()


def test_a_partition_key_without_a_shard_is_one_message(project):
    project.raw("web", {"a.txt": b"dober dan\n"})
    with DagsterInstance.from_config(str(project.home)) as instance:  # registered, then the file went away
        instance.add_dynamic_partitions(partitions_name("web"), ["gone.txt"])
    rc, output = project.materialize("--select", "shards/web", "--partition", "gone.txt")
    assert_one_clear_failure(rc, output, "web: no shard of", "has the partition key(s) 'gone.txt'",
                             "What to do: materialize extracted/web to resynchronise")


def test_a_real_bug_keeps_its_traceback(project):
    """Internal state nobody should meet (a file where the state folder belongs) is not an expected
    error: the run fails with the stack of our frames, for a bug report."""
    project.raw("web", {"a.txt": b"dober dan\n"})
    (project.root / "out").mkdir()
    (project.root / "out" / ".slm4ie").write_bytes(b"")
    rc, output = project.materialize("--select", "extracted/web")
    assert rc != 0
    assert "NotADirectoryError" in output
    assert "What to do: " not in output
    assert any(f.endswith("/slm4ie_assets/store/locks.py") for f in our_frames(output)), output


def test_a_lock_timeout_is_one_failure_through_dagster(tmp_path, instance):
    """In process: the Failure as the UI's error view reads it (description, no cause, no frame of
    ours), from an asset of this test that waits 0 s for a lock this test holds."""
    lock = tmp_path / "out" / ".slm4ie" / "kas" / "lock"

    @asset
    @expected_errors_as_failures
    def waits_for_kas() -> None:
        with dataset_lock(lock, "kas", timeout=0):
            pass

    with dataset_lock(lock, "kas"):  # "another run"
        result = materialize([waits_for_kas], instance=instance, raise_on_error=False)
    assert not result.success
    (event,) = result.get_step_failure_events()
    failure = event.step_failure_data
    description = failure.user_failure_data.description
    assert description.startswith(f"kas: gave up after 0s waiting for the dataset lock {lock} held by another run")
    assert "What to do: another run of this dataset still holds the lock" in description
    assert failure.error.cause is None and failure.error.context is None
    assert our_frames("".join(failure.error.stack)) == []


def test_a_bug_passes_the_wrapper_untouched():
    @expected_errors_as_failures
    def buggy() -> None:
        raise TypeError("unsupported operand")

    with pytest.raises(TypeError, match="unsupported operand") as err:
        buggy()
    assert err.traceback[-1].name == "buggy"  # the frame that raised is still there


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_lock_timeout_setting_is_refused_naming_it(value):
    env = {**os.environ, "SLM4IE_LOCK_TIMEOUT": value}
    done = subprocess.run([sys.executable, "-c", "import slm4ie_assets.store.locks"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert f"SLM4IE_LOCK_TIMEOUT={value!r}: expected the seconds a run waits for a lock, a number >= 0" in done.stderr
