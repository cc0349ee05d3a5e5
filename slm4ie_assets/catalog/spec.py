"""Load and validate `extract.yaml` into typed dataset specs (DECISIONS D15).

The whole file is checked when the code location loads; every problem is reported at once,
each naming the dataset and field and the `file:line` it sits on, so a bad config is one clear
error, not a deep traceback. A key written twice is one of those problems: plain YAML loading
would silently keep the last one. The keys, their types, bounds and wording are the table in
`catalog/fields.py`, from which `catalog/json_schema.py` writes `schemas/extract.schema.json` for editors.

The YAML loader and the cron parser are imported only when a file is loaded: pool workers unpickle
a `DatasetSpec` but never read extract.yaml, and their forkserver imports this module
(engine/pool_server.py), ~60 ms less start-up for every pooled run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..extractors.registry import EXTRACTORS, get_extractor_class
from . import fields
from .fields import (
    DEFAULT_MAX_SETTLE_WAIT,
    DEFAULT_MAX_SHARDS_PER_RUN,
    DEFAULT_SETTLE_SECONDS,
    DEFAULT_SPLIT_BYTES,
    DEFAULT_STALL_SECONDS,
    DEFAULT_STALL_TIMEOUT_SECONDS,
)
from .locations import Location, StorageOptions
from .places import Places, check_output_apart, read_places
from .problems import CatalogError, Problems, dotted, setting_value

if TYPE_CHECKING:
    from .located_yaml import KeyPath, YamlLocations

CONFIG_ENV = "SLM4IE_EXTRACT_CONFIG"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
FORMAT_VERSION = 1  # bump when the bytes an extractor writes change for the same input

_KEY_RE = re.compile(fields.DATASET_KEY_PATTERN)  # used with fullmatch: `$` would let a trailing newline through
_TOP_KEYS = fields.names(fields.TOP)
_DATASET_KEYS = fields.names(fields.DATASET)
_ARCHIVE_KEYS = fields.names(fields.ARCHIVES)


@dataclass(frozen=True)
class ArchiveLimits:
    """Decompression-bomb limits (D16); defaults and meaning: `catalog_fields.ARCHIVES`."""

    max_ratio: float = fields.by_name(fields.ARCHIVES, "max_ratio").default
    max_bytes: int = fields.by_name(fields.ARCHIVES, "max_bytes").default
    max_members: int = fields.by_name(fields.ARCHIVES, "max_members").default


@dataclass(frozen=True)
class DatasetSpec:
    key: str
    extractor: str
    domain: str
    options: Any  # the extractor's parsed `metadata:` block
    raw_options: Any = None
    strict: bool = False
    watch: bool = True
    watch_interval: int = fields.DEFAULT_WATCH_INTERVAL
    schedule: str | None = None
    owners: tuple[str, ...] = ()  # Dagster asset owners: e-mail addresses or `team:<name>`
    # 0: files are never split; None: the fixed automatic range size (shards.range_bytes); not in the
    # recipe (the same bytes whatever the ranges)
    split_bytes: int | None = DEFAULT_SPLIT_BYTES
    max_shards_per_run: int = DEFAULT_MAX_SHARDS_PER_RUN  # fan-out of shard backfills and sensor runs (D24)
    settle_seconds: int = DEFAULT_SETTLE_SECONDS  # an mtime this old has settled (planning/settling.py)
    max_settle_wait: int = DEFAULT_MAX_SETTLE_WAIT  # the raw sensor plans what has settled at least this often
    stall_seconds: int = DEFAULT_STALL_SECONDS  # a pool worker without progress this long is reported
    stall_timeout_seconds: int = DEFAULT_STALL_TIMEOUT_SECONDS  # ... and fails the run (0: never)
    max_document_bytes: int = 0  # a document (its text line) over this is dropped; 0: no cap (recipe when set)
    raw_dir: Path = Path()  # local: for a dataset in a bucket, its mirror under work_dir
    output_dir: Path = Path()  # local: for an output bucket, the parts' and versions' folder under work_dir
    raw_location: str | None = None  # s3://bucket/prefix/<key> when the raw folder is in a bucket, else None
    output_location: str | None = None  # s3://bucket/prefix when publishing to a bucket, else None
    storage_options: StorageOptions = StorageOptions()  # for open_store(raw_location/output_location, ...)
    mirror_state: Path | None = None  # the raw mirror's state file (storage/mirror.py), with raw_location

    @property
    def text_path(self) -> Path:
        return self.output_dir / f"{self.key}.jsonl"

    @property
    def sidecar_path(self) -> Path:
        return self.output_dir / f"{self.key}.annotations.jsonl.gz"

    @property
    def recipe(self) -> str:
        """Everything besides the input bytes that decides a part's bytes. A document cap joins it
        only when set, so the recipe (and every part) of a dataset without one stays as it was."""
        fields: list[Any] = [FORMAT_VERSION, self.key, self.extractor, self.domain, self.raw_options]
        if self.max_document_bytes:
            fields.append({"max_document_bytes": self.max_document_bytes})
        blob = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Catalog:
    path: Path
    input_dir: Path  # local: a bucket's is its mirror's folder under work_dir
    output_dir: Path  # local: an output bucket's is the parts' folder under work_dir
    input_location: Location  # as extract.yaml wrote it: the path, or the bucket and prefix
    output_location: Location
    work_dir: Path
    storage_options: StorageOptions
    max_workers: int = 0
    archives: ArchiveLimits = ArchiveLimits()
    shard_group_threshold: int = 1000
    datasets: dict = field(default_factory=dict)
    split_bytes: int | None = DEFAULT_SPLIT_BYTES
    max_shards_per_run: int = DEFAULT_MAX_SHARDS_PER_RUN

    def dataset(self, key: str) -> DatasetSpec:
        try:
            return self.datasets[key]
        except KeyError:
            raise KeyError(f"unknown dataset {key!r} in {self.path}") from None


def default_config_path() -> Path:
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return PROJECT_ROOT / "extract.yaml"


def load_catalog(path: Path | str | None = None) -> Catalog:
    path = Path(path).resolve() if path else default_config_path()
    if not path.is_file():
        raise CatalogError(f"{path}: config file not found (set {CONFIG_ENV} to point at one)")
    import yaml

    from .located_yaml import load_located_yaml

    try:
        doc, locations = load_located_yaml(path.read_text(encoding="utf-8-sig"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise CatalogError(f"{where}: not valid YAML: {exc}") from None
    return parse_catalog(doc, path, locations)


# ----------------------------------------------------------------------------- validation


def parse_catalog(doc: Any, path: Path, locations: YamlLocations | None = None) -> Catalog:
    """Validate an already parsed document; `locations` (from `load_located_yaml`) adds file lines."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        where = f"{path}:{locations.line_of(())}" if locations is not None else str(path)
        raise CatalogError(f"{where}: top level must be a mapping")
    problems = Problems(locations)
    for duplicate in locations.duplicates if locations is not None else ():
        problems.add(duplicate.path, f"duplicate key (first at line {duplicate.first_line}, again at line "
                                     f"{duplicate.again_line}); YAML keeps only the last one, so remove or rename one")
    for key in sorted(set(doc) - _TOP_KEYS, key=str):
        problems.add((key,), f"unknown top-level key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    places = read_places(doc, path.parent, problems)
    max_workers = setting_value(doc, (), fields.by_name(fields.TOP, "max_workers"), problems)
    threshold = setting_value(doc, (), fields.by_name(fields.TOP, "shard_group_threshold"), problems)
    limits = _archive_limits(doc.get("archives"), problems)
    defaults = {s.name: setting_value(doc, (), s, problems) for s in fields.INHERITED}
    datasets = _parse_datasets(doc.get("datasets", {}), places, problems, defaults)
    check_output_apart(doc, places, datasets, problems)
    problems.raise_if_any(path)
    return Catalog(path, places.input_dir, places.output_dir, places.input, places.output, places.work_dir,
                   places.storage_options, max_workers, limits, threshold, datasets, defaults["split_bytes"],
                   defaults["max_shards_per_run"])


def _archive_limits(arch: Any, problems: Problems) -> ArchiveLimits:
    limits = ArchiveLimits()
    if arch is None:
        return limits
    if not isinstance(arch, dict):
        problems.add(("archives",), "expected a mapping with max_ratio and/or max_bytes")
        return limits
    for k in sorted(set(arch) - _ARCHIVE_KEYS, key=str):
        problems.add(("archives", k), f"unknown key (allowed: {', '.join(s.name for s in fields.ARCHIVES)})")
    ratio, mbytes, members = (setting_value(arch, ("archives",), s, problems) for s in fields.ARCHIVES)
    return ArchiveLimits(float(ratio), int(mbytes), int(members))


def _parse_datasets(raw_sets: Any, places: Places, problems: Problems, defaults: dict) -> dict:
    if raw_sets is None:
        return {}
    if not isinstance(raw_sets, dict):
        problems.add(("datasets",), "expected a mapping of dataset key -> settings")
        return {}
    datasets: dict[str, DatasetSpec] = {}
    for key, entry in raw_sets.items():
        spec = _parse_dataset(key, entry, places, problems, defaults)
        if spec is not None:
            datasets[key] = spec
    return datasets


def _parse_dataset(key: Any, entry: Any, places: Places, problems: Problems, defaults: dict) -> DatasetSpec | None:
    where = ("datasets", key)
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        problems.add(where, "dataset key must be letters, digits and underscores only "
                            "(it names files under extracted/ and Dagster assets)")
        return None
    if not isinstance(entry, dict):
        problems.add(where, "expected a mapping with extractor and domain")
        return None
    n_before = len(problems)
    for k in sorted(set(entry) - _DATASET_KEYS, key=str):
        problems.add(where + (k,), f"unknown key (allowed: {', '.join(sorted(_DATASET_KEYS))})")
    extractor = entry.get("extractor")
    if extractor is None:
        problems.add(where + ("extractor",), f"missing (one of {', '.join(sorted(EXTRACTORS))})")
    elif extractor not in EXTRACTORS:
        problems.add(where + ("extractor",),
                     f"unknown extractor {extractor!r} (one of {', '.join(sorted(EXTRACTORS))})")
    domain = entry.get("domain")
    if domain is None:
        problems.add(where + ("domain",), "missing (a provenance tag such as web, legal, news)")
    elif not isinstance(domain, str) or not domain.strip():
        problems.add(where + ("domain",), f"expected a non-empty string, got {domain!r}")
    options = None
    raw_options = entry.get("metadata")
    if extractor in EXTRACTORS:
        try:
            options = get_extractor_class(extractor).parse_options(raw_options, f"{dotted(where)}.metadata")
        except ValueError as exc:
            problems.add_reported(where + ("metadata",), str(exc))
    settings = _dataset_settings(entry, where, problems)
    for setting in fields.INHERITED:
        settings[setting.name] = setting_value(entry, where, setting, problems, defaults[setting.name])
    if len(problems) > n_before:
        return None
    assert isinstance(extractor, str) and isinstance(domain, str)  # checked above, else a problem was added
    return DatasetSpec(
        key=key, extractor=extractor, domain=domain, options=options, raw_options=raw_options,
        **places.dataset_fields(key), **settings,
    )


def _dataset_settings(entry: dict, where: KeyPath, problems: Problems) -> dict:
    """The dataset's run settings (not part of its recipe: they never change the bytes written)."""
    settings: dict[str, Any] = {}
    for name in ("strict", "watch", "watch_interval"):
        settings[name] = setting_value(entry, where, fields.by_name(fields.DATASET, name), problems)
    schedule = entry.get("schedule")
    if schedule is not None and not _is_valid_cron(schedule):
        problems.add(where + ("schedule",), "expected a valid 5-field cron string (minute hour day-of-month "
                                            f"month day-of-week) such as '0 3 * * 0', got {schedule!r}")
        schedule = None
    settings["schedule"] = schedule
    settings["owners"] = _owners(entry.get("owners"), where, problems)
    return settings


def _owners(value: Any, where: KeyPath, problems: Problems) -> tuple[str, ...]:
    """Checked here with Dagster's rule for owners (docs/decisions.md, "Catalog checks without
    Dagster"), so a bad owner is a located config error, not a load crash."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and _is_valid_owner(v) for v in value):
        problems.add(where + ("owners",), "expected a list of owners, each an e-mail address or 'team:<name>', "
                                          f"got {value!r}")
        return ()
    return tuple(value)


_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,7}\b")


def _is_valid_owner(owner: str) -> bool:
    """An e-mail address or `team:<name>`: the rule Dagster applies to asset owners."""
    return bool(_EMAIL.fullmatch(owner)) or (owner.startswith("team:") and len(owner) > 5)


def _is_valid_cron(value: Any) -> bool:
    """A cron string Dagster will build a schedule from: croniter (the parser Dagster vendors)
    accepts it, it expands to the 5 fields of minute resolution, and it is no 30th or 31st of
    February. The core imports no Dagster (docs/architecture.md); a test holds this rule to
    Dagster's own check."""
    from croniter import croniter

    if not isinstance(value, str) or len(value.split()) != 5 or not croniter.is_valid(value):
        return False
    fields = croniter.expand(value)[0]
    if len(fields) != 5:
        return False
    return not (fields[3] == [2] and len(fields[2]) == 1 and fields[2][0] in (30, 31))
