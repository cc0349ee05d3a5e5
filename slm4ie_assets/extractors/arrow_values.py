"""What a huggingface row's values become in JSON (D20/S11): dates and times at any depth become
ISO-8601 strings; bytes, Decimal and timedelta cannot be held, so their row is skipped. Planned once
per column from its Arrow type, so plain columns are never walked.
"""

import datetime as dt
from decimal import Decimal
from typing import Any


class UnsupportedValue(ValueError):
    """A value JSON cannot hold and D20/S11 does not convert (bytes, Decimal, timedelta, ...)."""


_PLAIN = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """`value` with every datetime, date and time turned into its ISO-8601 string, at any depth
    (S11: times as HH:MM:SS[.ffffff]); raises UnsupportedValue for what JSON cannot hold."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):  # isoformat is ISO-8601 for all three
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise UnsupportedValue("bytes")
    if isinstance(value, (Decimal, dt.timedelta)):
        raise UnsupportedValue(type(value).__name__)
    item = getattr(value, "item", None)  # numpy scalars (float16 comes out of Arrow this way)
    if item is not None and type(value).__module__ == "numpy":
        return jsonable(item())
    raise UnsupportedValue(type(value).__name__)


def is_plain_type(t) -> bool:
    """Arrow types whose Python values JSON holds as they are, so their columns need no walk."""
    import pyarrow.types as pt

    if (pt.is_string(t) or pt.is_large_string(t) or pt.is_integer(t) or pt.is_float32(t) or pt.is_float64(t)
            or pt.is_boolean(t) or pt.is_null(t)):
        return True
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return is_plain_type(t.value_type)
    if pt.is_struct(t):
        return all(is_plain_type(t.field(i).type) for i in range(t.num_fields))
    if pt.is_dictionary(t):
        return is_plain_type(t.value_type)
    return False


def _isoformat(value) -> str:
    return value.isoformat()


def converter(t):
    """How a column's values become JSON-ready: None when they already are, a bare isoformat for a
    flat date/time column, the recursive `jsonable` otherwise."""
    import pyarrow.types as pt

    if is_plain_type(t):
        return None
    if pt.is_timestamp(t) or pt.is_date(t) or pt.is_time(t):
        return _isoformat
    return jsonable


def never_skipped(t) -> bool:
    """A column type none of whose values makes `jsonable` skip the row (D20, S11): plain values,
    dates and times, float16, in lists, structs and maps of them at any depth (Arrow IPC reads at
    most 64 levels, far below what the encoder handles)."""
    import pyarrow.types as pt

    if is_plain_type(t) or pt.is_timestamp(t) or pt.is_date(t) or pt.is_time(t) or pt.is_float16(t):
        return True
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return never_skipped(t.value_type)
    if pt.is_struct(t):
        return all(never_skipped(t.field(i).type) for i in range(t.num_fields))
    if pt.is_map(t):
        return never_skipped(t.key_type) and never_skipped(t.item_type)
    return False
