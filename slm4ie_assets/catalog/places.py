"""Where a catalog reads and writes, from extract.yaml's `input_dir`, `output_dir` (each a path or
`s3://bucket/prefix`), `work_dir` and `storage_options`: read, checked at their lines, and checked
against each dataset's raw folder so that no run reads its own outputs back (catalog/locations.py
has the values)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fields
from .locations import (
    OUTPUT_AREA,
    RAW_AREA,
    Location,
    StorageOptions,
    mirror_state_file,
    overlap,
    parse_local_folder,
    parse_location,
)
from .problems import Problems, setting_value

if TYPE_CHECKING:
    from .located_yaml import KeyPath


@dataclass(frozen=True, slots=True)
class Places:
    """Where a catalog's datasets are read and written: the locations as extract.yaml gave them, the
    work folder, the buckets' options, and the local folders the POSIX pipeline uses for them."""

    input: Location
    output: Location
    work_dir: Path
    storage_options: StorageOptions = StorageOptions()

    @property
    def input_dir(self) -> Path:
        return self.input.local(self.work_dir, RAW_AREA)

    @property
    def output_dir(self) -> Path:
        return self.output.local(self.work_dir, OUTPUT_AREA)

    def raw_of(self, key: str) -> Location:
        return self.input.child(key)

    def dataset_fields(self, key: str) -> dict[str, Any]:
        """A DatasetSpec's fields for where dataset `key` lives (the bucket ones None for paths)."""
        raw = self.raw_of(key)
        return {"raw_dir": self.input_dir / key, "output_dir": self.output_dir,
                "raw_location": raw.url if raw.is_bucket else None,
                "output_location": self.output.url if self.output.is_bucket else None,
                "storage_options": self.storage_options,
                "mirror_state": mirror_state_file(self.work_dir, raw) if raw.is_bucket else None}


def read_places(doc: dict, base: Path, problems: Problems) -> Places:
    """input_dir, output_dir (paths or bucket URLs), work_dir and storage_options; a bad value is a
    problem at its line and the default stands in for it."""
    found = []
    for name in ("input_dir", "output_dir"):
        setting = fields.by_name(fields.TOP, name)
        value = setting_value(doc, (), setting, problems)
        try:
            found.append(parse_location(value, base))
        except ValueError as exc:
            problems.add((name,), str(exc))
            found.append(parse_location(setting.default, base))
    work_setting = fields.by_name(fields.TOP, "work_dir")
    try:
        work_dir = parse_local_folder(setting_value(doc, (), work_setting, problems), base)
    except ValueError as exc:
        problems.add(("work_dir",), str(exc))
        work_dir = parse_local_folder(work_setting.default, base)
    return Places(found[0], found[1], work_dir, _storage_options(doc.get("storage_options"), problems))


def _storage_options(value: Any, problems: Problems) -> StorageOptions:
    where: KeyPath = ("storage_options",)
    allowed = ", ".join(s.name for s in fields.STORAGE_OPTIONS)
    if value is None:
        return StorageOptions()
    if not isinstance(value, dict):
        problems.add(where, f"expected a mapping of {allowed} to strings, got {value!r}")
        return StorageOptions()
    for k in sorted(set(value) - fields.names(fields.STORAGE_OPTIONS), key=str):
        problems.add(where + (k,), f"unknown key (allowed: {allowed}; credentials come from the AWS environment "
                                   "or a profile, never from extract.yaml)")
    given = {s.name: setting_value(value, where, s, problems) for s in fields.STORAGE_OPTIONS if s.name in value}
    endpoint = given.get("endpoint_url")
    if endpoint and not re.match(r"https?://[^/\s]", endpoint):
        problems.add(where + ("endpoint_url",), f"expected an http:// or https:// address, got {endpoint!r}")
    return StorageOptions(**{k: v for k, v in given.items() if isinstance(v, str) and v})


def check_output_apart(doc: dict, places: Places, datasets: dict, problems: Problems) -> None:
    """An output folder inside a raw folder makes every run read its own parts and versions back as
    input (2 -> 8 -> 30 documents); a raw folder inside the output folder mixes inputs with what
    clean-up and publish own. Both are refused, at the `output_dir` line (or the dataset's), for
    buckets too (one prefix inside the other), and for the local folders a bucket stands for under
    work_dir (at the `work_dir` line)."""
    for key, spec in datasets.items():
        raw = places.raw_of(key) if places.input.is_bucket else Location(spec.raw_dir.resolve())
        what = overlap(places.output, raw, key)
        where: KeyPath = ("output_dir",) if "output_dir" in doc else ("datasets", key)
        if what is None and (places.input.is_bucket or places.output.is_bucket):
            what = overlap(Location(spec.output_dir), Location(spec.raw_dir.resolve()), key)
            where = ("work_dir",) if "work_dir" in doc else where
        if what is not None:
            problems.add(where, f"{what}: each run would read its own outputs back as input (or clean-up would "
                                "touch raw files); put output_dir and input_dir/<key> side by side")
