"""The expected errors and what the user does about each, worded once for the CLI and Dagster.

A missing raw folder, a strict dataset with skipped items, a lock that cannot be taken, a full disk
or a refused archive is the user's to fix, and the exception already names the dataset and the
path: the message is that text plus what to do, one line. Every other exception is a bug and keeps
its traceback. Standard library only, so the plain `slm4ie` CLI prints these lines without loading
Dagster; `dagster_layer/user_errors.py` raises the same line as a Dagster `Failure`.
"""

import functools
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Remedy:
    """What the user does about one kind of expected error; `retry_helps` feeds Dagster's retry policy."""

    error: type[BaseException]
    what_to_do: str  # empty when the error's own message already says it
    retry_helps: bool = False


@functools.cache
def remedies() -> tuple[Remedy, ...]:
    """The expected errors, by type (none derives from another; any other OSError is not here: it
    is a bug). Imported on first use, so neither the code location nor the CLI loads the archive
    codecs or the pipeline before an error needs them."""
    from .archives.errors import ArchiveError, WriteFailure
    from .engine.stalls import WorkerStalled
    from .engine.worker_pool import WorkerDied
    from .extractors.base import ExtractorError
    from .pipeline import MissingRawDir, StrictModeViolation
    from .planning.input_stamps import InputChanged
    from .store.dataset_store import OutputWriteError, UnsafeOutputTree
    from .store.locks import TIMEOUT_ENV, LockFileError, LockTimeout

    again = "then materialize again"
    return (
        Remedy(MissingRawDir, "create the folder with the dataset's input files (or correct `input_dir` in "
                              f"extract.yaml), {again}"),
        Remedy(StrictModeViolation, "nothing was published; fix or remove the skipped inputs (each is a warning "
                                    "in this run's log) or set `strict: false` for the dataset in extract.yaml, "
                                    f"{again}"),
        Remedy(LockTimeout, "another run of this dataset still holds the lock: let it finish or terminate it "
                            f"(the UI's Runs page), {again} ({TIMEOUT_ENV} sets how long a run waits, "
                            "default 6 h)", retry_helps=True),
        Remedy(LockFileError, ""),  # the message names the file and the command that removes it
        Remedy(OutputWriteError, "free space (or raise the quota) where the output folder lives, "
                                 f"{again}; the next run removes what this one left"),
        Remedy(WriteFailure, f"free space where the raw folder lives (or make it writable), {again}"),
        Remedy(ArchiveError, "replace or remove the archive named above (an archive with links, devices or "
                             f"members outside its folder is never unpacked), {again}"),
        Remedy(ExtractorError, f"fix the dataset's `metadata:` block in extract.yaml or the file it names, {again}"),
        Remedy(InputChanged, "let whatever writes the file named above finish (write elsewhere, then move into "
                             f"raw/), {again}; the published version is unchanged", retry_helps=True),
        Remedy(UnsafeOutputTree, ""),  # the message names the path and the fix
        Remedy(WorkerStalled, "look at the stuck worker named above (a hung network file system, a stopped "
                              "process), or raise `stall_timeout_seconds` in extract.yaml if the shard is only "
                              f"slow, {again}"),
        Remedy(WorkerDied, ""),  # the message names the shard, its file, the signal and what to check
    )


def remedy_for(exc: BaseException) -> Remedy | None:
    """The remedy of an expected error, None for anything else (a bug)."""
    return next((r for r in remedies() if isinstance(exc, r.error)), None)


def with_remedy(text: str, remedy: Remedy) -> str:
    """An expected error's text as one sentence, followed by what to do when the remedy says more."""
    message = text.rstrip(". ")
    return f"{message}. What to do: {remedy.what_to_do}." if remedy.what_to_do else f"{message}."

