"""Expected errors end a Dagster run with one clear message; anything else keeps its traceback.

A missing raw folder, a strict dataset with skipped items, a lock that cannot be taken, a full disk
or a refused archive is the user's to fix, and the exception already names the dataset and the
path. Dagster would print it wrapped in its own error with the chained stack of our frames, twice
(step and run failure). Raised as a `Failure` without a chained cause, the CLI and the UI's error
view show the message plus what to do; the stack Dagster still prints is its own executor frames
and the one `raise` below (DAGSTER_NOTES 11). Every other exception is a bug and passes through
untouched, traceback and all.
"""

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from dagster import Failure, MetadataValue

_Fn = TypeVar("_Fn", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Remedy:
    """What the user does about one kind of expected error; `retry_helps` feeds Dagster's retry policy."""

    error: type[BaseException]
    what_to_do: str  # empty when the error's own message already says it
    retry_helps: bool = False


@functools.cache
def remedies() -> tuple[Remedy, ...]:
    """The expected errors, by type (none derives from another; any other OSError is not here: it
    is a bug). Imported on first use, so the code location does not load the archive codecs."""
    from .archives.errors import ArchiveError, WriteFailure
    from .extractors.base import ExtractorError
    from .input_stamps import InputChanged
    from .locks import TIMEOUT_ENV, LockFileError, LockTimeout
    from .pipeline import MissingRawDir, StrictModeViolation
    from .stalls import WorkerStalled
    from .store import OutputWriteError, UnsafeOutputTree
    from .worker_pool import WorkerDied

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


def as_failure(exc: BaseException, remedy: Remedy) -> Failure:
    # an OSError made as cls(errno, message) would print "[Errno 28] message"
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror and exc.filename is None else str(exc)
    message = text.rstrip(". ")
    description = f"{message}. What to do: {remedy.what_to_do}." if remedy.what_to_do else f"{message}."
    return Failure(
        description=description,
        metadata={"error": MetadataValue.text(type(exc).__name__)},
        allow_retries=remedy.retry_helps,
    )


def expected_errors_as_failures(fn: _Fn) -> _Fn:
    """Wrap a Dagster entry point (asset body, `handle_output`): an expected error becomes a
    Failure raised `from None`, so Dagster shows its message and not the chain of our frames."""

    @functools.wraps(fn)
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Failure as failure:  # already a clear message (an unknown partition key): drop our frames
            raise failure.with_traceback(None) from None
        except Exception as exc:
            remedy = remedy_for(exc)
            if remedy is None:
                raise
            raise as_failure(exc, remedy) from None

    return entry_point  # type: ignore[return-value]


VALIDATION_ENV = "DAGSTER_IS_DEFS_VALIDATION_CLI"  # set by `dg check defs` / `dagster definitions validate`


def config_error_at_load(exc: Exception) -> BaseException:
    """What loading the code location raises for a bad extract.yaml: its file:line list, once.

    Dagster has no supported way to report a load error without a stack, so each entry point gets
    the shortest path it allows (docs/dagster-notes.md, "A bad extract.yaml"): the validation CLIs
    (which document `DAGSTER_IS_DEFS_VALIDATION_CLI` for code to act on) get the message and exit 1;
    the CLIs that load in their own process (`dg launch`, `dagster asset materialize`) let it
    propagate uncaught, and a process hook prints only the message; a code server (`dg dev`, the UI)
    keeps it as the location's load error, whose stack the caller cuts to the one `raise`."""
    message = str(exc)
    if os.environ.get(VALIDATION_ENV) == "1":
        print(message, file=sys.stderr, flush=True)
        return SystemExit(1)
    previous = sys.excepthook

    def message_only(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if value is exc:
            print(message, file=sys.stderr, flush=True)
        else:
            previous(kind, value, tb)

    sys.excepthook = message_only
    return exc.with_traceback(None)
