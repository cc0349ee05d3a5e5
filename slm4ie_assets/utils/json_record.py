"""Reading a frozen dataclass back from its JSON object, field by field (PartMeta, Manifest).

The object's keys are the dataclass's fields, in declaration order (orjson writes them so). A key
the file lacks takes the field's default: a field added later with a default is one line in the
dataclass, and every file written before it still reads, so an upgrade re-extracts nothing. A key
missing for a field without a default makes the file unreadable (KeyError), as does a value of
the wrong shape (TypeError); keys the dataclass does not know are ignored.
"""

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any, TypeVar

T = TypeVar("T")


def record_from_json(cls: type[T], obj: Any, convert: Mapping[str, Callable[[Any], Any]]) -> T:
    """`cls(**obj)`, with `convert[name]` applied to the JSON value of each field it names (lists to
    tuples, nested records), and defaults for absent keys."""
    if not isinstance(obj, dict):
        raise TypeError(f"expected a JSON object for {cls.__name__}, got {type(obj).__name__}")
    values = {}
    for field in fields(cls):  # type: ignore[arg-type]
        if field.name in obj:
            value = obj[field.name]
            values[field.name] = convert[field.name](value) if field.name in convert else value
        elif field.default is not MISSING:
            values[field.name] = field.default
        elif field.default_factory is not MISSING:
            values[field.name] = field.default_factory()
        else:
            raise KeyError(field.name)
    return cls(**values)
