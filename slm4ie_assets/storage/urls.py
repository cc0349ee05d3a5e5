"""`open_store`: the one seam from a location as the user wrote it to a `Store`.

`s3://bucket/prefix` is a bucket prefix; anything else is a path on a file system and stays one
(a `DiskStore`, with the POSIX route and its speed unchanged). Credentials and the endpoint come
the way every AWS tool takes them (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION, AWS_PROFILE, ~/.aws); extract.yaml's storage options may set the endpoint, the region
and the profile for its stores, nothing else (a secret in extract.yaml would sit in version control).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slm4ie_assets.storage.base import Store
from slm4ie_assets.storage.disk import DiskStore

SCHEME = "s3://"
OPTION_NAMES = ("endpoint_url", "region", "profile")
# S3's rule for bucket names (the one the catalog's schema states too): 3 to 63 lowercase letters,
# digits, '.' and '-', a letter or digit at both ends, no '..'
BUCKET_NAME_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
URL_SCHEME_PATTERN = r"[A-Za-z][A-Za-z0-9+.-]*://"  # any URL: a scheme other than s3:// is refused
_BUCKET = re.compile(BUCKET_NAME_PATTERN)
_OTHER_SCHEME = re.compile(URL_SCHEME_PATTERN)


@dataclass(frozen=True, slots=True)
class BucketLocation:
    """`s3://bucket/prefix`, taken apart; `prefix` has no leading or trailing '/'."""

    bucket: str
    prefix: str


def parse_bucket_url(location: str) -> BucketLocation | None:
    """The bucket and prefix of an `s3://` URL; None for anything else (a path). A malformed URL, or
    a URL of a scheme we have no store for, is a ValueError naming it."""
    if location[: len(SCHEME)].lower() != SCHEME:
        if _OTHER_SCHEME.match(location):
            raise ValueError(f"{location!r}: no store for this URL scheme; use s3://bucket/prefix (Google Cloud "
                             "Storage, R2, MinIO and Ceph speak S3: set the endpoint) or a path")
        return None
    bucket, _, prefix = location[len(SCHEME):].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ValueError(f"{location!r}: {bucket!r} is not a bucket name (3 to 63 lowercase letters, digits, "
                         "'.' and '-', a letter or digit at both ends, no '..')")
    prefix = prefix.rstrip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"{location!r}: the prefix {prefix!r} has an empty, '.' or '..' part")
    return BucketLocation(bucket, prefix)


def checked_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """extract.yaml's storage options that are set; an unknown name is a ValueError."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(OPTION_NAMES))
    if unknown:
        raise ValueError(f"unknown storage option(s) {', '.join(unknown)}: known are {', '.join(OPTION_NAMES)} "
                         "(credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile)")
    return {name: str(value) for name, value in given.items() if value not in (None, "")}


def open_store(location: str | os.PathLike[str], options: Mapping[str, str] | None = None) -> Store:
    """The store at `location`: a bucket prefix for `s3://...`, else the folder at that path
    (`options` apply to buckets only and are checked either way)."""
    settings = checked_options(options)
    bucket = parse_bucket_url(os.fspath(location)) if isinstance(location, str) else None
    if bucket is not None:
        # only here: importing boto3 costs ~0.6 s, which a run on a plain path never pays
        from slm4ie_assets.storage.bucket import BucketStore, ClientOptions

        return BucketStore(bucket.bucket, bucket.prefix, ClientOptions(**settings))
    return DiskStore(Path(location))
