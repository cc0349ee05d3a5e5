"""One S3 multipart upload: parts sent from bytes or copied server-side, completed under a condition,
aborted on any failure.

An object over one request's worth is written in parts, and S3 shows nothing under its name until
CompleteMultipartUpload, which is where the conditions go (If-None-Match: * for create-only,
If-Match for compare-and-swap): so a large object too becomes visible only whole, or not at all.
Parts go out on a few threads, at most `concurrency` in flight, so memory is bounded by
(concurrency + 1) parts however long the source. An upload that is not completed is aborted; one
whose abort failed too (the host died) is left for `list_uploads`/`abort_uploads` to find.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, BinaryIO

MIN_PART = 5 << 20  # S3's smallest part but the last
MAX_PARTS = 10_000  # S3's most parts in one upload
MAX_COPY_PART = 5 << 30  # S3's largest part, and largest CopyObject source


@dataclass(frozen=True, slots=True)
class PendingUpload:
    """A multipart upload begun and neither completed nor aborted: a running writer's, or a dead one's."""

    name: str  # relative to the store's root
    upload_id: str
    initiated_ns: int  # whole seconds, as S3 reports them


def part_size_for(number: int, base: int) -> int:
    """Part `number`'s size (1-based): `base` for the first thousand parts, then one `base` more every
    thousand, so 10,000 parts of an 8 MiB base hold 430 GiB while an ordinary file's parts stay small."""
    return base * (1 + (number - 1) // 1000)


class MultipartUpload:
    """`with MultipartUpload(...) as upload: upload.add(...); upload.complete(...)`: aborted unless completed."""

    def __init__(self, client: Any, bucket: str, key: str, *, concurrency: int = 4) -> None:
        self._client, self._bucket, self._key = client, bucket, key
        self._concurrency = max(1, concurrency)
        self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix=f"upload {key}")
        self._pending: list[Future[dict[str, Any]]] = []
        self._parts: list[dict[str, Any]] = []
        self._upload_id = ""
        self._completed = False

    def __enter__(self) -> MultipartUpload:
        self._upload_id = self._client.create_multipart_upload(Bucket=self._bucket, Key=self._key)["UploadId"]
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if not self._completed:
                self._abort()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    @property
    def parts(self) -> int:
        return len(self._parts) + len(self._pending)

    def add(self, data: bytes) -> None:
        """Send `data` as the next part (on a pool thread); waits while `concurrency` parts are in flight."""
        number = self._next_number()
        self._submit(lambda: {"PartNumber": number, "ETag": self._client.upload_part(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number, Body=data)["ETag"]})

    def add_copy(self, source_key: str, start: int, end: int, source_tag: str | None = None) -> None:
        """Copy bytes [start, end) of `source_key` in this bucket as the next part, server-side; with
        `source_tag`, only while the source still has that ETag."""
        number = self._next_number()
        extra = {"CopySourceIfMatch": source_tag} if source_tag else {}

        def copy() -> dict[str, Any]:
            result = self._client.upload_part_copy(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number,
                CopySource={"Bucket": self._bucket, "Key": source_key}, CopySourceRange=f"bytes={start}-{end - 1}",
                **extra)
            return {"PartNumber": number, "ETag": result["CopyPartResult"]["ETag"]}

        self._submit(copy)

    def complete(self, *, if_match: str | None = None, if_none_match: str | None = None) -> dict[str, Any]:
        """Wait for every part, then make the object visible whole, under the given condition."""
        self._drain(0)
        extra = {k: v for k, v in (("IfMatch", if_match), ("IfNoneMatch", if_none_match)) if v}
        result: dict[str, Any] = self._client.complete_multipart_upload(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
            MultipartUpload={"Parts": sorted(self._parts, key=lambda p: p["PartNumber"])}, **extra)
        self._completed = True
        return result

    def _next_number(self) -> int:
        number = self.parts + 1
        if number > MAX_PARTS:
            raise ValueError(f"{self._key}: more than {MAX_PARTS} parts (S3's limit); use larger parts")
        return number

    def _submit(self, send: Any) -> None:
        self._drain(self._concurrency - 1)
        self._pending.append(self._pool.submit(send))

    def _drain(self, keep: int) -> None:
        """Wait for the oldest parts until at most `keep` are in flight; a failed part raises here."""
        while len(self._pending) > keep:
            self._parts.append(self._pending.pop(0).result())

    def _abort(self) -> None:
        for future in self._pending:
            future.cancel()
        for future in self._pending:
            if not future.cancelled():
                future.exception()  # wait: a part still sending would otherwise outlive the abort
        if self._upload_id:
            try:
                self._client.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
            except Exception:  # the original error matters; abort_uploads finds the upload later
                pass


def read_part(source: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes of `source`: fewer only at its end (a pipe or socket may return less per read)."""
    chunks: list[bytes] = []
    wanted = size
    while wanted > 0:
        chunk = source.read(wanted)
        if not chunk:
            break
        chunks.append(chunk)
        wanted -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def list_uploads(client: Any, bucket: str, root: str, prefix: str) -> list[PendingUpload]:
    """Every multipart upload begun under `root + prefix` and not yet completed or aborted, oldest
    first, named relative to `root`."""
    found: list[PendingUpload] = []
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=root + prefix):
        for upload in page.get("Uploads", []):
            initiated: datetime = upload["Initiated"]
            found.append(PendingUpload(upload["Key"][len(root):], upload["UploadId"],
                                       int(initiated.timestamp()) * 10**9))
    return sorted(found, key=lambda u: (u.initiated_ns, u.name))
