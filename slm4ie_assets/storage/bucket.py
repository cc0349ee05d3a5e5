"""A prefix in an S3-compatible bucket (AWS S3, GCS's S3 API, R2, MinIO, Ceph) as a `Store`, through boto3.

boto3 because it is AWS's own SDK: AWS_ENDPOINT_URL, the other AWS_* variables, profiles and an
http:// endpoint work exactly as in every AWS tool, and it sends the conditions S3 checks
atomically (If-None-Match: * and If-Match on PutObject and on CompleteMultipartUpload, If-Match on
DeleteObject), which are the whole of create-only and compare-and-swap here (README,
"Dependencies"; the measurements in docs/performance.md, "Object stores").

A tag is the object's ETag as S3 sends it (quotes included). Times are whole seconds: a listing
gives LastModified to the millisecond but HEAD only to the second, and a listed record must equal a
stat'ed one. Keys ending in '/' (the folder markers consoles create) are not objects here.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, BinaryIO

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from slm4ie_assets.storage.base import AlreadyExists, StoredObject, StoreError, TagMismatch
from slm4ie_assets.storage.multipart import (
    MAX_COPY_PART,
    MIN_PART,
    MultipartUpload,
    PendingUpload,
    list_uploads,
    part_size_for,
    read_part,
)
from slm4ie_assets.storage.read_ahead import open_read_ahead

_MISSING = {"NoSuchKey", "404", "NotFound"}
_REFUSED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}
_CONDITION_FAILED = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_SESSIONS_LOCK = threading.Lock()
_LOADER: Any = None


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """What extract.yaml may set beside the environment; None leaves it to boto3 (AWS_ENDPOINT_URL,
    AWS_REGION, AWS_PROFILE, ~/.aws/config)."""

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class Transfer:
    """Sizes of requests: memory is about (concurrency + 1) parts on a write and (read_depth + 2)
    chunks on a read, whatever the object's size."""

    part_size: int = 8 << 20  # multipart from this size on; each part this large (S3: >= 5 MiB)
    concurrency: int = 4  # parts in flight
    read_chunk: int = 8 << 20  # one ranged GET of open_read
    read_depth: int = 2  # chunks fetched ahead
    copy_part_size: int = MAX_COPY_PART  # server-side copies larger than this go in ranged parts
    list_page: int = 1000  # keys per listing request (S3's most)

    def __post_init__(self) -> None:
        if not MIN_PART <= self.part_size <= MAX_COPY_PART or not MIN_PART <= self.copy_part_size <= MAX_COPY_PART:
            raise ValueError(f"S3 parts are 5 MiB to 5 GiB, not {self.part_size} or {self.copy_part_size} bytes")


class BucketStore:
    """Objects under `s3://bucket/prefix`, named relative to it."""

    def __init__(self, bucket: str, prefix: str = "", options: ClientOptions | None = None,
                 transfer: Transfer | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.options = options or ClientOptions()
        self.transfer = transfer or Transfer()
        self._root = f"{self.prefix}/" if self.prefix else ""
        self._client_lock = threading.Lock()
        self._client_and_pid: tuple[Any, int] | None = None

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"BucketStore({self.url!r})"

    # A store crosses into pool workers (pickled, or inherited by fork): the client, its connection
    # pool and its lock stay behind, and each process makes its own on first use.
    def __getstate__(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "prefix": self.prefix, "options": self.options, "transfer": self.transfer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    @property
    def client(self) -> Any:
        """This process's boto3 S3 client (thread-safe once made)."""
        with self._client_lock:
            if self._client_and_pid is None or self._client_and_pid[1] != os.getpid():
                self._client_and_pid = (self._new_client(), os.getpid())
            return self._client_and_pid[0]

    def _new_client(self) -> Any:
        """A client reading the environment as it is now; the parsed S3 API model is shared by every
        store of the process (parsing it again costs ~0.1 s of CPU per client)."""
        global _LOADER
        config = Config(max_pool_connections=max(10, 2 * self.transfer.concurrency), retries={"mode": "standard"})
        with _SESSIONS_LOCK:  # botocore sessions are not thread-safe while they are set up
            try:
                core = botocore.session.Session()
                _LOADER = _LOADER or core.get_component("data_loader")
                core.register_component("data_loader", _LOADER)
                session = boto3.session.Session(botocore_session=core, profile_name=self.options.profile,
                                                region_name=self.options.region)
                return session.client("s3", endpoint_url=self.options.endpoint_url, config=config)
            except (BotoCoreError, ValueError) as exc:  # an unknown profile, a malformed endpoint
                raise StoreError(f"{self.url}: {exc}") from exc

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        if prefix.startswith("/"):
            raise ValueError(f"{self.url}: a listing prefix is relative to the root, not {prefix!r}")
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self._root + prefix, PaginationConfig={"PageSize": self.transfer.list_page})
        with self._errors(prefix):
            for page in pages:
                for entry in page.get("Contents", []):
                    if entry["Key"].endswith("/"):
                        continue
                    yield StoredObject(entry["Key"][len(self._root):], entry["Size"], entry["ETag"],
                                       _seconds_ns(entry["LastModified"]))

    def stat(self, name: str) -> StoredObject:
        with self._errors(name):
            head = self.client.head_object(Bucket=self.bucket, Key=self._key(name))
        return _record(name, head["ContentLength"], head)

    def read_range(self, name: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise ValueError(f"{self._where(name)}: no range starts at {start} with length {length}")
        if length == 0:
            self.stat(name)  # still FileNotFoundError when there is no such object
            return b""
        return self._get(name, start, length, None)

    def open_read(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        """The range in chunks of `read_chunk` fetched ahead on one thread, each GET pinned to the
        ETag the object had when opened: a change while it is read raises TagMismatch, never a mix."""
        if start < 0 or (end is not None and end < start):
            raise ValueError(f"{self._where(name)}: [{start}, {end}) is not a range of bytes")
        found = self.stat(name)
        stop = max(start, found.size if end is None else min(end, found.size))
        return open_read_ahead(lambda offset, length: self._get(name, offset, length, found.tag), start, stop,
                               chunk=self.transfer.read_chunk, depth=self.transfer.read_depth, name=self._where(name))

    def write(self, name: str, source: BinaryIO, if_tag: str | None = None) -> StoredObject:
        conflict = _Conflict(TagMismatch, f"{self._where(name)}: not written", if_tag) if if_tag else None
        return self._put(name, source, {"IfMatch": if_tag} if if_tag else {}, conflict)

    def create(self, name: str, data: bytes) -> StoredObject:
        return self._put(name, io.BytesIO(data), {"IfNoneMatch": "*"},
                         _Conflict(AlreadyExists, f"{self._where(name)}: not created"))

    def delete(self, name: str, if_tag: str | None = None) -> None:
        conflict = _Conflict(TagMismatch, f"{self._where(name)}: not deleted", if_tag) if if_tag else None
        with self._errors(name, conflict):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(name),
                                      **({"IfMatch": if_tag} if if_tag else {}))

    # ---------------------------------------------------------------- beyond base.Store (buckets only)

    def copy(self, source: str, name: str, source_tag: str | None = None) -> StoredObject:
        """`source`'s bytes under `name` too, copied inside the bucket (no bytes through this host),
        visible whole; pinned to `source_tag` (else the tag it has now): TagMismatch if it changes."""
        found = self.stat(source)
        tag = source_tag or found.tag
        conflict = _Conflict(TagMismatch, f"{self._where(source)}: not copied to {name}", tag)
        if tag != found.tag:  # S3 checks CopySourceIfMatch itself; moto's server (5.2) does not
            raise conflict.error(gone=False)
        with self._errors(name, conflict):
            if found.size <= self.transfer.copy_part_size:
                self.client.copy_object(Bucket=self.bucket, Key=self._key(name), CopySourceIfMatch=tag,
                                        CopySource={"Bucket": self.bucket, "Key": self._key(source)})
                return self.stat(name)
            with MultipartUpload(self.client, self.bucket, self._key(name),
                                 concurrency=self.transfer.concurrency) as upload:
                for offset in range(0, found.size, self.transfer.copy_part_size):
                    upload.add_copy(self._key(source), offset, min(found.size, offset + self.transfer.copy_part_size),
                                    tag)
                done = upload.complete()
        return self._written(name, found.size, done)

    def list_uploads(self, prefix: str = "") -> tuple[PendingUpload, ...]:
        """Multipart uploads begun under `prefix` and neither completed nor aborted, oldest first."""
        with self._errors(prefix):
            return tuple(list_uploads(self.client, self.bucket, self._root, prefix))

    def abort_uploads(self, prefix: str = "", initiated_before_ns: int | None = None) -> tuple[PendingUpload, ...]:
        """Abort the uploads `list_uploads` finds (only those begun before `initiated_before_ns`, so a
        live writer's can be spared), and say which; their parts stop costing storage."""
        aborted: list[PendingUpload] = []
        for upload in self.list_uploads(prefix):
            if initiated_before_ns is not None and upload.initiated_ns >= initiated_before_ns:
                continue
            with self._errors(upload.name):
                try:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(upload.name),
                                                       UploadId=upload.upload_id)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":  # finished meanwhile
                        raise
                    continue
            aborted.append(upload)
        return tuple(aborted)

    # ---------------------------------------------------------------- the requests

    def _get(self, name: str, start: int, length: int, pin: str | None) -> bytes:
        """Bytes [start, start + length) (fewer at the end, none past it); with `pin`, only while the
        object still has that tag."""
        changed = _Conflict(TagMismatch, f"{self._where(name)}: read stopped (the object changed while it was read)",
                            pin, missing_too=False) if pin else None
        with self._errors(name, changed):
            try:
                answer = self.client.get_object(Bucket=self.bucket, Key=self._key(name),
                                                Range=f"bytes={start}-{start + length - 1}",
                                                **({"IfMatch": pin} if pin else {}))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "InvalidRange":  # at or past the end
                    return b""
                raise
            body = answer["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def _put(self, name: str, source: BinaryIO, condition: dict[str, str], conflict: _Conflict | None) -> StoredObject:
        """Single PutObject below one part's size, else a multipart upload streamed from `source` (at
        most `concurrency` + 1 parts in memory), the condition checked where the object appears."""
        key = self._key(name)
        base = self.transfer.part_size
        with self._errors(name, conflict):
            first = read_part(source, base)
            if len(first) < base:
                done = self.client.put_object(Bucket=self.bucket, Key=key, Body=first, **condition)
                return self._written(name, len(first), done)
            size = len(first)
            self._still_holds(key, condition, conflict)  # before sending gigabytes in vain
            with MultipartUpload(self.client, self.bucket, key, concurrency=self.transfer.concurrency) as upload:
                upload.add(first)
                del first
                while part := read_part(source, part_size_for(upload.parts + 1, base)):
                    size += len(part)
                    upload.add(part)
                self._still_holds(key, condition, conflict)
                done = upload.complete(if_match=condition.get("IfMatch"), if_none_match=condition.get("IfNoneMatch"))
        return self._written(name, size, done)

    def _still_holds(self, key: str, condition: dict[str, str], conflict: _Conflict | None) -> None:
        """The write's condition checked by a HEAD, to fail early. S3 checks it again, atomically, at
        CompleteMultipartUpload; moto's server (5.2) checks only If-None-Match there, so against it
        this look is what refuses a stale If-Match, up to the moment of completing."""
        if "IfMatch" in condition:
            self.client.head_object(Bucket=self.bucket, Key=key, IfMatch=condition["IfMatch"])
        elif "IfNoneMatch" in condition and conflict is not None:
            try:
                self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in _MISSING:
                    return
                raise
            raise conflict.error(gone=False)

    def _written(self, name: str, size: int, answer: dict[str, Any]) -> StoredObject:
        """The record of what this call wrote: its time from a HEAD of that very ETag (a writer that
        replaced it since gets the time of the write, as near as this host knows it)."""
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self._key(name), IfMatch=answer["ETag"])
            return _record(name, size, head)
        except ClientError:
            return StoredObject(name, size, answer["ETag"], int(time.time()) * 10**9, answer.get("VersionId"))

    def _key(self, name: str) -> str:
        parts = name.split("/")
        if not name or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"{self.url}: {name!r} is not an object name ('/'-separated, no empty, . or .. parts)")
        return self._root + name

    def _where(self, name: str) -> str:
        return f"{self.url}/{name}" if name else self.url

    @contextmanager
    def _errors(self, name: str, conflict: _Conflict | None = None) -> Iterator[None]:
        """boto3's errors as the Store's: FileNotFoundError, PermissionError, the caller's conflict
        (AlreadyExists, TagMismatch), else StoreError; every message names s3://bucket/prefix/name."""
        try:
            yield
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = str(error.get("Code", "")), error.get("Message", "")
            if conflict is not None and (code in _CONDITION_FAILED or (conflict.missing_too and code in _MISSING)):
                raise conflict.error(gone=code in _MISSING) from exc
            if code in _MISSING:
                raise FileNotFoundError(f"{self._where(name)}: no such object") from exc
            if code == "NoSuchBucket":
                raise FileNotFoundError(f"{self._where(name)}: no such bucket {self.bucket!r}") from exc
            if code in _REFUSED:
                raise PermissionError(f"{self._where(name)}: refused ({code}): check the credentials "
                                      "(AWS_ACCESS_KEY_ID, AWS_PROFILE) and the bucket's policy") from exc
            raise StoreError(f"{self._where(name)}: {code or 'error'}: {message or exc}") from exc
        except BotoCoreError as exc:
            raise StoreError(f"{self._where(name)}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Conflict:
    """What a failed condition (412, or 409 while another conditional write to the name is under
    way) means for one call, and the message that says so."""

    kind: type[StoreError]  # AlreadyExists for create-only, TagMismatch for If-Match
    refused: str  # "s3://bucket/prefix/name: not written"
    tag: str | None = None
    missing_too: bool = True  # under If-Match, an object gone since is a changed one too

    def error(self, gone: bool) -> StoreError:
        if self.kind is AlreadyExists:
            return AlreadyExists(f"{self.refused}: another writer created it first")
        if self.tag is None:
            return self.kind(self.refused)
        return self.kind(f"{self.refused}: it {'is gone' if gone else 'changed'} since it had tag {self.tag}")


def _seconds_ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 10**9


def _record(name: str, size: int, head: dict[str, Any]) -> StoredObject:
    version = head.get("VersionId")
    return StoredObject(name, size, head["ETag"], _seconds_ns(head["LastModified"]),
                        version if version and version != "null" else None)
