"""Room on the call stack for CPython's recursive JSON decoder and encoder (D25).

The stdlib's C scanner and encoder count each level of nesting against the recursion limit, which
the frames already on the stack use up: a Dagster run has hundreds more of them than the CLI, so
the same record decoded in one and failed in the other. Within `recursion_room(levels)` the limit is
raised by `levels` frames, so a value whose nesting was bounded before (by the reader's check, by
orjson's own limit) is read and written alike on every call stack.
"""

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_RAISING = threading.Lock()  # one raise-and-restore at a time: two interleaved would restore the wrong limit


@contextmanager
def recursion_room(levels: int) -> Iterator[None]:
    """At least `levels` frames of recursion beyond the caller's, for the block only."""
    with _RAISING:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + levels)
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)
