"""Code and data versions for the Dagster layer (issue 15), as pure functions of what is persisted.

Dagster compares these strings across runs, processes and machines, so each one is a sha256 of a
canonical JSON list (never Python's `hash()`, which is salted per process):
  - the code version of `extracted/<key>` and `shards/<key>`: the extractor, the format version and
    the dataset's recipe (which already folds in the key, domain and `metadata:` block). An edit that
    changes the bytes written changes it, and the UI marks the assets "code version changed";
  - the data version of `extracted/<key>`: the published manifest's identity fields (format, dataset,
    recipe, shard keys and fingerprints). The bytes of a publish are a pure function of those (D2),
    so a skipped run reports the same version as the run that published, and a raw change a new one;
  - the data version of one `shards/<key>` partition: its part's identity (format, recipe, shard key,
    fingerprint), the same fields `DatasetStore.part_is_current` compares;
  - the data version of the external `raw/<key>`: the shard keys and fingerprints the raw sensor
    computes from stat calls.
"""

import hashlib
from collections.abc import Iterable

import orjson

from ..catalog import FORMAT_VERSION, DatasetSpec
from ..planning.shards import Shard
from ..store.manifest import Manifest
from ..store.part_meta import PartMeta

_LENGTH = 24  # hex characters kept: 96 bits, far beyond any collision among one dataset's versions


def _digest(kind: str, fields: list) -> str:
    blob = orjson.dumps([kind, *fields], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()[:_LENGTH]


def code_version(spec: DatasetSpec) -> str:
    """Readable prefix (extractor, format), then the digest that decides."""
    digest = _digest("code", [spec.extractor, FORMAT_VERSION, spec.recipe])
    return f"{spec.extractor}-f{FORMAT_VERSION}-{digest}"


def dataset_version(fmt: int, dataset: str, recipe: str, shards: Iterable[tuple[str, str]]) -> str:
    """THE data version of a published dataset; `plan_version` and `manifest_version` both call it."""
    return _digest("dataset", [fmt, dataset, recipe, [list(pair) for pair in shards]])


def plan_version(spec: DatasetSpec, shards: Iterable[Shard]) -> str:
    """The version the publish of these shards will have (or has, when the run skips)."""
    return dataset_version(FORMAT_VERSION, spec.key, spec.recipe, ((s.key, s.fingerprint) for s in shards))


def manifest_version(manifest: Manifest) -> str:
    return dataset_version(manifest.format, manifest.dataset, manifest.recipe, manifest.shards)


def part_version(meta: PartMeta) -> str:
    """A part's version; a shard whose part is current has the version of that part."""
    return _digest("part", [meta.format, meta.recipe, meta.shard, meta.fingerprint])


def shard_version(spec: DatasetSpec, shard: Shard) -> str:
    """The version the part of `shard` has once it is current (equal to `part_version` of its meta)."""
    return _digest("part", [FORMAT_VERSION, spec.recipe, shard.key, shard.fingerprint])


def raw_version(shards: Iterable[Shard]) -> str:
    """The raw tree as the planner sees it: shard keys and stat fingerprints, in shard order."""
    return _digest("raw", [[s.key, s.fingerprint] for s in shards])


def batch_version(spec: DatasetSpec, shards: list[Shard]) -> str:
    """The version of a `shards/<key>` run's output: Dagster 1.13 writes one data version for every
    partition of a step (DAGSTER_NOTES 6), so one shard gets its own, several the batch's digest."""
    if len(shards) == 1:
        return shard_version(spec, shards[0])
    return _digest("batch", [FORMAT_VERSION, spec.recipe, [[s.key, s.fingerprint] for s in shards]])
