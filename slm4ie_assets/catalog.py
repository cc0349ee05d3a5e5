"""Load and validate `extract.yaml` into typed dataset specs (DECISIONS D15).

The whole file is checked when the code location loads; every problem is reported at once,
each naming the dataset and field, so a bad config is one clear error, not a deep traceback.
"""

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .extractors.registry import EXTRACTORS, get_extractor_class

CONFIG_ENV = "SLM4IE_EXTRACT_CONFIG"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
FORMAT_VERSION = 1  # bump when the bytes an extractor writes change for the same input

_KEY_RE = re.compile(r"[A-Za-z0-9_]+")  # used with fullmatch: `$` would let a trailing newline through
_TOP_KEYS = {"input_dir", "output_dir", "max_workers", "datasets", "archives", "shard_group_threshold"}
_DATASET_KEYS = {"extractor", "domain", "metadata", "strict", "watch", "watch_interval", "schedule"}
_ARCHIVE_KEYS = {"max_ratio", "max_bytes"}


class CatalogError(ValueError):
    """One or more problems in extract.yaml; the message lists every one."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_ratio: float = 50.0
    max_bytes: int = 200 * 1024**3


@dataclass(frozen=True)
class DatasetSpec:
    key: str
    extractor: str
    domain: str
    options: Any  # the extractor's parsed `metadata:` block
    raw_options: Any = None
    strict: bool = False
    watch: bool = True
    watch_interval: int = 60
    schedule: str | None = None
    raw_dir: Path = Path()
    output_dir: Path = Path()

    @property
    def text_path(self) -> Path:
        return self.output_dir / f"{self.key}.jsonl"

    @property
    def sidecar_path(self) -> Path:
        return self.output_dir / f"{self.key}.annotations.jsonl.gz"

    @property
    def recipe(self) -> str:
        """Everything besides the input bytes that decides a part's bytes."""
        blob = json.dumps(
            [FORMAT_VERSION, self.key, self.extractor, self.domain, self.raw_options],
            sort_keys=True, default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Catalog:
    path: Path
    input_dir: Path
    output_dir: Path
    max_workers: int = 0
    archives: ArchiveLimits = ArchiveLimits()
    shard_group_threshold: int = 1000
    datasets: dict = field(default_factory=dict)

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
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    return parse_catalog(doc, path)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_catalog(doc: Any, path: Path) -> Catalog:
    errors: list[str] = []
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise CatalogError(f"{path}: top level must be a mapping")
    for key in sorted(set(doc) - _TOP_KEYS):
        errors.append(f"{key}: unknown top-level key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    base = path.parent

    def directory(name: str, default: str) -> Path:
        value = doc.get(name, default)
        if not isinstance(value, str) or not value:
            errors.append(f"{name}: expected a path string, got {value!r}")
            value = default
        p = Path(value).expanduser()
        return (p if p.is_absolute() else base / p).resolve()

    input_dir = directory("input_dir", "data/raw")
    output_dir = directory("output_dir", "data/extracted")
    max_workers = doc.get("max_workers", 0)
    if max_workers is None:
        max_workers = 0
    if not _is_int(max_workers) or max_workers < 0:
        errors.append(f"max_workers: expected a whole number >= 0 (0 = all cores), got {max_workers!r}")
        max_workers = 0
    threshold = doc.get("shard_group_threshold", 1000)
    if not _is_int(threshold) or threshold < 1:
        errors.append(f"shard_group_threshold: expected a whole number >= 1, got {threshold!r}")
        threshold = 1000
    limits = ArchiveLimits()
    arch = doc.get("archives")
    if arch is not None:
        if not isinstance(arch, dict):
            errors.append("archives: expected a mapping with max_ratio and/or max_bytes")
        else:
            for k in sorted(set(arch) - _ARCHIVE_KEYS):
                errors.append(f"archives.{k}: unknown key (allowed: max_ratio, max_bytes)")
            ratio = arch.get("max_ratio", limits.max_ratio)
            mbytes = arch.get("max_bytes", limits.max_bytes)
            if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or ratio <= 0:
                errors.append(f"archives.max_ratio: expected a positive number, got {ratio!r}")
                ratio = limits.max_ratio
            if not _is_int(mbytes) or mbytes <= 0:
                errors.append(f"archives.max_bytes: expected a positive whole number, got {mbytes!r}")
                mbytes = limits.max_bytes
            limits = ArchiveLimits(float(ratio), int(mbytes))

    datasets: dict[str, DatasetSpec] = {}
    raw_sets = doc.get("datasets", {})
    if raw_sets is None:
        raw_sets = {}
    if not isinstance(raw_sets, dict):
        errors.append("datasets: expected a mapping of dataset key -> settings")
        raw_sets = {}
    for key, entry in raw_sets.items():
        spec = _parse_dataset(key, entry, input_dir, output_dir, errors)
        if spec is not None:
            datasets[key] = spec
    if errors:
        lines = "\n".join(f"  - {e}" for e in errors)
        raise CatalogError(f"{path}: {len(errors)} problem(s) in the extraction config:\n{lines}")
    return Catalog(path, input_dir, output_dir, max_workers, limits, threshold, datasets)


def _parse_dataset(key: Any, entry: Any, input_dir: Path, output_dir: Path, errors: list) -> DatasetSpec | None:
    where = f"datasets.{key}"
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        errors.append(f"{where}: dataset key must be letters, digits and underscores only "
                      "(it names files under extracted/ and Dagster assets)")
        return None
    if not isinstance(entry, dict):
        errors.append(f"{where}: expected a mapping with extractor and domain")
        return None
    n_before = len(errors)
    for k in sorted(set(entry) - _DATASET_KEYS):
        errors.append(f"{where}.{k}: unknown key (allowed: {', '.join(sorted(_DATASET_KEYS))})")
    extractor = entry.get("extractor")
    if extractor is None:
        errors.append(f"{where}.extractor: missing (one of {', '.join(sorted(EXTRACTORS))})")
    elif extractor not in EXTRACTORS:
        errors.append(f"{where}.extractor: unknown extractor {extractor!r} (one of {', '.join(sorted(EXTRACTORS))})")
    domain = entry.get("domain")
    if domain is None:
        errors.append(f"{where}.domain: missing (a provenance tag such as web, legal, news)")
    elif not isinstance(domain, str) or not domain.strip():
        errors.append(f"{where}.domain: expected a non-empty string, got {domain!r}")
    options = None
    raw_options = entry.get("metadata")
    if extractor in EXTRACTORS:
        try:
            options = get_extractor_class(extractor).parse_options(raw_options, f"{where}.metadata")
        except ValueError as exc:
            errors.append(str(exc))
    flags = {}
    for name, default in (("strict", False), ("watch", True)):
        value = entry.get(name, default)
        if not isinstance(value, bool):
            errors.append(f"{where}.{name}: expected true or false, got {value!r}")
            value = default
        flags[name] = value
    interval = entry.get("watch_interval", 60)
    if not _is_int(interval) or interval < 5:
        errors.append(f"{where}.watch_interval: expected whole seconds >= 5, got {interval!r}")
        interval = 60
    schedule = entry.get("schedule")
    if schedule is not None:
        if not isinstance(schedule, str) or len(schedule.split()) != 5:
            errors.append(f"{where}.schedule: expected a 5-field cron string such as '0 3 * * 0', got {schedule!r}")
            schedule = None
    if len(errors) > n_before:
        return None
    return DatasetSpec(
        key=key, extractor=extractor, domain=domain, options=options, raw_options=raw_options,
        strict=flags["strict"], watch=flags["watch"], watch_interval=interval, schedule=schedule,
        raw_dir=input_dir / key, output_dir=output_dir,
    )
