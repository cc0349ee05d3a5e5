"""Expected errors end a Dagster run with one clear message; anything else keeps its traceback.

Which errors are expected, and what the user does about each, is remedies.py: Dagster-free, so the
plain CLI words them the same without loading Dagster. Dagster would print such an error wrapped in
its own error with the chained stack of our frames, twice (step and run failure). Raised as a
`Failure` without a chained cause, the CLI and the UI's error view show the message plus what to
do; the stack Dagster still prints is its own executor frames and the one `raise` below
(DAGSTER_NOTES 11). Every other exception is a bug and passes through untouched, traceback and all.
"""

import functools
import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from dagster import Failure, MetadataValue

from ..remedies import Remedy, remedy_for, with_remedy

_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def as_failure(exc: BaseException, remedy: Remedy) -> Failure:
    # an OSError made as cls(errno, message) would print "[Errno 28] message"
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror and exc.filename is None else str(exc)
    return Failure(
        description=with_remedy(text, remedy),
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
