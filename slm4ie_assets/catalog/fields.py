"""The keys of extract.yaml in one table: the loader (`catalog/spec.py`) checks values with it and the
schema generator (`catalog/json_schema.py`) writes `schemas/extract.schema.json` from it, so the two
cannot drift apart. Order here is the order of the schema file.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..storage.urls import BUCKET_NAME_PATTERN, URL_SCHEME_PATTERN  # the one rule, the store's

# None: a file is cut every 8 MiB, whatever the host (shards.range_bytes, docs/splitting.md)
DEFAULT_SPLIT_BYTES: int | None = None
# 0: a backfill of shards/<key> is one run per contiguous key range (the in-run pool uses the cores);
# N: runs of at most N shards, which the run queue runs side by side (D24)
DEFAULT_MAX_SHARDS_PER_RUN = 0
# the raw sensor plans a file once its size and mtime held still between two ticks, or its mtime is this old
# (planning/settling.py); with the 30 s tick, a small file copied in is published about a minute later
DEFAULT_SETTLE_SECONDS = 15
# while files keep arriving, the raw sensor still plans what has settled at least this often (dagster_layer/sensors.py)
DEFAULT_MAX_SETTLE_WAIT = 600
DEFAULT_WATCH_INTERVAL = 30
# a pool worker whose shard shows no progress this long is reported; with a timeout, the run fails (engine/stalls.py)
DEFAULT_STALL_SECONDS = 600
DEFAULT_STALL_TIMEOUT_SECONDS = 0  # 0: never fail, only report
DATASET_KEY_PATTERN = r"[A-Za-z0-9_]+"  # a dataset key names files under extracted/ and Dagster assets

BUCKET_SCHEME = "s3://"  # input_dir/output_dir written so name a bucket prefix (catalog/locations.py)
# S3's rule for a bucket's name: 3 to 63 lowercase letters, digits, '.' and '-', a letter or digit at
# both ends (and no '..', which the loader checks); used with fullmatch
# the schema's check of a location: a path (no URL scheme) or s3:// with a well-formed bucket name
LOCATION_PATTERN = f"^(?!{URL_SCHEME_PATTERN})|^[sS]3://{BUCKET_NAME_PATTERN}(/|$)"
PATH_PATTERN = f"^(?!{URL_SCHEME_PATTERN})"  # a local folder only


@dataclass(frozen=True)
class Setting:
    """One key. A plain value (`type` set) is checked here; `shape` is the schema of a key the
    loader checks by hand (cron strings, owners, nested blocks)."""

    name: str
    description: str
    type: str | None = None  # integer, number, boolean or string (a string must not be empty)
    default: Any = None
    minimum: int | None = None
    exclusive: bool = False  # the value must be above `minimum`, not at least it
    nullable: bool = False  # null is accepted and means the default
    expected: str = ""  # the loader's words for a bad value: "expected <expected>, got <value>"
    per_dataset: str = ""  # a dataset may set its own: what 0 means, for that key's description
    shape: Mapping[str, Any] | None = None
    pattern: str | None = None  # a string's schema pattern (the loader checks it in its own words)

    def accepts(self, value: Any) -> bool:
        if self.type == "boolean":
            return isinstance(value, bool)
        if self.type == "string":
            return isinstance(value, str) and bool(value)
        if isinstance(value, bool) or not isinstance(value, (int, float) if self.type == "number" else int):
            return False
        if self.minimum is None:
            return True
        return value > self.minimum if self.exclusive else value >= self.minimum

    def schema(self, in_dataset: bool = False) -> dict:
        """This key's JSON Schema; `in_dataset`: a dataset's override of a top-level key."""
        if self.shape is not None or self.type is None:  # no type: the generator writes the rest
            return {"description": self.description, **(self.shape or {})}
        out: dict[str, Any] = {"description": self.description}
        if in_dataset:
            out["description"] = f"This dataset's {self.name} (default: the top-level one); {self.per_dataset}."
        out["type"] = [self.type, "null"] if self.nullable else self.type
        if self.type == "string":
            out["minLength"] = 1
            if self.pattern is not None:
                out["pattern"] = self.pattern
        if self.minimum is not None:
            out["exclusiveMinimum" if self.exclusive else "minimum"] = self.minimum
        if not in_dataset and (self.default is not None or self.nullable):
            out["default"] = self.default
        return out


def _whole(name: str, default: int, expected: str, per_dataset: str, description: str) -> Setting:
    """A whole number >= 0 that a dataset may set for itself."""
    return Setting(name, description, "integer", default, 0, expected=expected, per_dataset=per_dataset)


INHERITED = (  # top-level settings each dataset may override
    Setting("split_bytes",
            "A text, jsonl, coleslaw, conllu or macocu file (a huggingface config) over this many bytes is "
            "extracted as several ranges on record boundaries, with the same output (docs/splitting.md); 0 = never "
            "split. Unset (or null): ranges of 8 MiB (a file over 2 GiB: 256 ranges), the same on every host, "
            "so shard keys never depend on the cores. A dataset may set its own.",
            "integer", DEFAULT_SPLIT_BYTES, 0, nullable=True,
            expected="a whole number of bytes >= 0 (0 = never split a file; null = ranges of 8 MiB)",
            per_dataset="0 = never split a file; null = ranges of 8 MiB"),
    _whole("max_shards_per_run", DEFAULT_MAX_SHARDS_PER_RUN, "a whole number >= 0 (0 = one run per backfill range)",
           "0 = one run per contiguous range",
           "A backfill of shards/<key> (the UI's Materialize all) and the raw sensor's runs for new shards become "
           "runs of at most this many shards, which the run queue runs side by side (D24); 0 = one run per "
           "contiguous range of shards. Default 0; a dataset may set its own."),
    _whole("settle_seconds", DEFAULT_SETTLE_SECONDS, "whole seconds >= 0 (0 = plan files as soon as they appear)",
           "0 = plan files as soon as they appear",
           "The raw sensor plans a file once it has settled: its size and mtime are unchanged since the "
           "previous tick, or its mtime is at least this many seconds old. It skips its tick while any file has "
           "not settled or has a copy tool's temporary name (rsync's .name.XXXXXX, *.part, *.partial, *.tmp, "
           "*.crdownload, *~; files in .~tmp~/, .rsync-partial/, .azDownload-* are never inputs), for "
           "max_settle_wait at most. 0 = plan files as soon as they appear. Default 15; a dataset may set its own."),
    _whole("max_settle_wait", DEFAULT_MAX_SETTLE_WAIT,
           "whole seconds >= 0 (0 = plan what has settled at every tick)", "0 = plan what has settled at every tick",
           "While files keep arriving in raw/<key>/, the raw sensor waits at most this many seconds, then plans "
           "the files that have settled (those still arriving wait for a later tick). 0 = plan what has settled "
           "at every tick. Default 600; a dataset may set its own."),
    _whole("stall_seconds", DEFAULT_STALL_SECONDS, "whole seconds >= 0 (0 = never report a worker without progress)",
           "0 = never report",
           "A pool worker whose shard shows no progress (no document written, no input byte read) for this many "
           "seconds is reported in the run log, naming the shard and the worker's pid. 0 = never. Default 600; a "
           "dataset may set its own."),
    _whole("stall_timeout_seconds", DEFAULT_STALL_TIMEOUT_SECONDS,
           "whole seconds >= 0 (0 = never fail a run for a worker without progress)", "0 = never fail",
           "A pool worker without progress for this many seconds is killed and the run fails, naming the shard "
           "and the worker. 0 = never (only stall_seconds reports). Default 0; a dataset may set its own."),
    _whole("max_document_bytes", 0, "a whole number of bytes >= 0 (0 = no cap on a document's size)", "0 = no cap",
           "A document whose text line is over this many bytes is dropped as document_too_large (jsonl and "
           "coleslaw skip such a line before parsing it); bounds the memory one freak record can take. 0 = no "
           "cap. Default 0; a dataset may set its own."),
)

ARCHIVES = (
    Setting("max_ratio", "Everything unpacked from one raw archive, at any depth, beyond this many times that "
            "archive's size: the archive is skipped (bad_archive).", "number", 50.0, 0,
            exclusive=True, expected="a positive number"),
    Setting("max_bytes", "Bytes unpacked from one raw archive, at any depth, beyond this: the archive is skipped "
            "(default 200 GiB).", "integer", 200 * 1024**3, 0,
            exclusive=True, expected="a positive whole number"),
    # files and folders in one raw archive's tree (each costs an inode and a state entry)
    Setting("max_members", "A raw archive holding, at any depth, more members (files and folders) than this is "
            "skipped (default 200000).", "integer", 200_000, 0, exclusive=True, expected="a positive whole number"),
)

STORAGE_OPTIONS = (  # what extract.yaml may set for its buckets; credentials never (they would sit in git)
    Setting("endpoint_url", "The S3 API's address, e.g. http://127.0.0.1:9000 for a MinIO on the local network "
            "(default: AWS_ENDPOINT_URL, else AWS).", "string", expected="a non-empty string"),
    Setting("region", "The bucket's region (default: AWS_REGION or the profile's).", "string",
            expected="a non-empty string"),
    Setting("profile", "A profile of ~/.aws/config and ~/.aws/credentials (default: AWS_PROFILE, else the "
            "environment's keys).", "string", expected="a non-empty string"),
)

TOP = (
    Setting("input_dir", "Folder holding one raw/<key>/ folder per dataset, relative to this file's folder "
            "(default data/raw); or a bucket prefix s3://bucket/prefix holding one <key>/ prefix per dataset, "
            "mirrored into work_dir before a run.", "string", "data/raw",
            expected="a path string or s3://bucket/prefix", pattern=LOCATION_PATTERN),
    Setting("output_dir", "Folder receiving extracted/<key>.jsonl and its sidecar, relative to this file's "
            "folder (default data/extracted); or a bucket prefix s3://bucket/prefix, published to atomically.",
            "string", "data/extracted", expected="a path string or s3://bucket/prefix", pattern=LOCATION_PATTERN),
    Setting("work_dir", "Local folder for what a bucket needs on this host: the mirror of raw folders in a bucket "
            "and the parts of datasets published to one, relative to this file's folder (default .slm4ie-work); "
            "unused while input_dir and output_dir are paths.", "string", ".slm4ie-work",
            expected="a path string (a local folder, not a URL)", pattern=PATH_PATTERN),
    Setting("storage_options", "Settings for the buckets of input_dir and output_dir beside the AWS environment "
            "(AWS_ENDPOINT_URL, AWS_REGION, AWS_PROFILE, ~/.aws); credentials come only from there."),
    Setting("max_workers", "Worker processes per dataset; 0 (or null) = all cores (those the process may use).",
            "integer", 0, 0, nullable=True, expected="a whole number >= 0 (0 = all cores)"),
    Setting("shard_group_threshold", "Above this many files, shards become groups of files.", "integer", 1000, 1,
            expected="a whole number >= 1"),
    *INHERITED,
    Setting("archives", "Decompression-bomb limits for archives unpacked under raw/<key>/ (D16)."),
    Setting("datasets", "Dataset key -> settings; the key names raw/<key>/, extracted/<key>.jsonl and the "
            "Dagster assets."),
)

_OWNER = {"type": "string", "pattern": "^(team:.+|[^@\\s]+@[^@\\s]+\\.[^@\\s]+)$"}

DATASET = (
    Setting("extractor", "The input format of raw/<key>/."),  # its enum: the registry's names
    Setting("domain", "Provenance tag copied into every document (web, legal, news, ...).",
            shape={"type": "string", "pattern": "\\S"}),
    *INHERITED,
    Setting("strict", "true: any skipped item fails the run.", "boolean", False, expected="true or false"),
    Setting("watch", "A sensor watches raw/<key>/ (false: no sensor).", "boolean", True, expected="true or false"),
    Setting("watch_interval", "Seconds between sensor ticks (default 30).", "integer", DEFAULT_WATCH_INTERVAL, 5,
            expected="whole seconds >= 5"),
    Setting("owners", "Owners shown on the dataset's Dagster assets: e-mail addresses or team names written "
            "'team:<name>'.", shape={"type": "array", "items": _OWNER}),
    Setting("schedule", "5-field cron string (minute hour day-of-month month day-of-week, UTC) for a periodic "
            "forced re-extraction, e.g. '0 3 * * 0'.",
            shape={"type": ["string", "null"], "pattern": "^\\s*\\S+(\\s+\\S+){4}\\s*$"}),
    Setting("metadata", "Extractor-specific settings"),  # its shape per extractor: catalog/json_schema.py
)


def names(settings: tuple[Setting, ...]) -> frozenset[str]:
    return frozenset(s.name for s in settings)


def by_name(settings: tuple[Setting, ...], name: str) -> Setting:
    return next(s for s in settings if s.name == name)
