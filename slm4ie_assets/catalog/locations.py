"""Where a catalog's folders are: a path on this host, or a prefix in a bucket (`s3://bucket/prefix`, D26).

A bucket's raw folders are mirrored into a local work folder and extracted there with the POSIX
pipeline, so a dataset on a bucket still has local `raw_dir` and `output_dir` Paths; the Location
says where the bucket side is. The local folders are named after the bucket and the prefix alone
(`<work_dir>/raw/<bucket>/<prefix>/<key>`, `<work_dir>/extracted/<bucket>/<prefix>`): the same on
every host, and a raw mirror and an output folder sit in separate trees, so no two can overlap.
A mirror's state file is named by a digest of its URL, in a flat folder: prefixes may hold any
name, so no nesting of them can make one state file a folder of another.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..storage.urls import parse_bucket_url
from . import fields

_URL_RE = re.compile(fields.URL_SCHEME_PATTERN)
RAW_AREA, OUTPUT_AREA, STATE_AREA = "raw", "extracted", "mirror-state"


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """extract.yaml's `storage_options`: what a bucket's client takes beside the AWS environment."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None

    def given(self) -> dict[str, str]:
        """The options that were set, as `storage.urls.open_store` takes them."""
        return {name: getattr(self, name) for name in fields.names(fields.STORAGE_OPTIONS)
                if getattr(self, name) is not None}


@dataclass(frozen=True, slots=True)
class Location:
    """A folder on this host (`path`) or a prefix in a bucket (`bucket`, `prefix` without a leading or
    trailing '/', '' for the whole bucket)."""

    path: Path | None = None
    bucket: str = ""
    prefix: str = ""

    @property
    def is_bucket(self) -> bool:
        return self.path is None

    @property
    def url(self) -> str:
        """As messages and `open_store` take it: `s3://bucket/prefix`, or the path."""
        if self.path is not None:
            return str(self.path)
        return f"{fields.BUCKET_SCHEME}{self.bucket}/{self.prefix}" if self.prefix else \
            f"{fields.BUCKET_SCHEME}{self.bucket}"

    def child(self, name: str) -> Location:
        if self.path is not None:
            return Location(self.path / name)
        return Location(None, self.bucket, f"{self.prefix}/{name}" if self.prefix else name)

    def holds(self, other: Location) -> bool:
        """`other` is this location or lies inside it (a path and a bucket never hold each other)."""
        if self.path is not None or other.path is not None:
            return self.path is not None and other.path is not None and other.path.is_relative_to(self.path)
        if self.bucket != other.bucket:
            return False
        mine = self.prefix.split("/") if self.prefix else []
        return other.prefix.split("/")[: len(mine)] == mine if mine else True

    def local(self, work_dir: Path, area: str) -> Path:
        """The local folder that stands for this location: the path itself, or its place under
        `work_dir/<area>` named by bucket and prefix."""
        if self.path is not None:
            return self.path
        return work_dir.joinpath(area, self.bucket, *(self.prefix.split("/") if self.prefix else ()))


def mirror_state_file(work_dir: Path, raw: Location) -> Path:
    """Where the mirror of the bucket location `raw` keeps its state (storage/mirror.py)."""
    digest = hashlib.sha256(raw.url.encode()).hexdigest()[:32]
    return work_dir / STATE_AREA / f"{digest}.json"


def parse_location(value: str, base: Path) -> Location:
    """`value` as extract.yaml wrote it: `s3://bucket/prefix`, or a path relative to `base`. A URL of
    another scheme, a bad bucket name or a prefix with an empty, '.' or '..' part is a ValueError
    whose message names the value."""
    bucket = parse_bucket_url(value)
    if bucket is not None:
        return Location(None, bucket.bucket, bucket.prefix)
    return Location(parse_local_folder(value, base))


def parse_local_folder(value: str, base: Path) -> Path:
    """A folder that must be on this host (`work_dir`): a URL is a ValueError naming it."""
    if _URL_RE.match(value):
        raise ValueError(f"{value!r}: must be a folder on this host, not a URL")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def overlap(output: Location, raw: Location, key: str) -> str | None:
    """Why an output location and dataset `key`'s raw location cannot both be used, or None. An output
    inside a raw folder makes every run read its own parts back as input; a raw folder inside the
    output mixes inputs with what clean-up and publish own."""
    kind = "folder" if output.path is not None and raw.path is not None else "location"
    if raw.holds(output):
        return f"the output {kind} {output.url} is inside dataset {key!r}'s raw {kind} {raw.url}"
    if output.holds(raw):
        return f"the output {kind} {output.url} holds dataset {key!r}'s raw {kind} {raw.url}"
    return None

