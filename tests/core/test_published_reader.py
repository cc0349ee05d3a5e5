"""store/published_reader.py's reads of a bucket's version on the local S3 server: a reader that
may stop after a page (`inspect`) fetches a small range first, not the read-ahead's chunks, and a
whole pass through the same stream gets every byte (the CLI and the checks over it:
tests/dagster_layer/test_bucket_readers.py)."""

import io
import json

from slm4ie_assets.storage.urls import open_store
from slm4ie_assets.store.manifest import Manifest
from slm4ie_assets.store.published_reader import FIRST_RANGED_READ, PublishedVersion


class CountedStore:
    """A real store that counts the bytes its reads hand back (ranged reads and streams alike)."""

    def __init__(self, store) -> None:
        self.store, self.fetched = store, 0

    @property
    def url(self) -> str:
        return self.store.url

    def read_range(self, name: str, start: int, length: int) -> bytes:
        data = self.store.read_range(name, start, length)
        self.fetched += len(data)
        return data

    def open_read(self, name: str, start: int = 0, end: int | None = None):
        counted, stream = self, self.store.open_read(name, start, end)

        class Counted(io.RawIOBase):
            def readable(self) -> bool:
                return True

            def readinto(self, buffer) -> int:
                data = stream.read(len(buffer))
                buffer[:len(data)] = data
                counted.fetched += len(data)
                return len(data)

            def close(self) -> None:
                stream.close()
                super().close()

        return io.BufferedReader(Counted())


def test_a_page_of_a_bucket_version_reads_a_small_range_and_a_whole_pass_every_byte(s3_bucket):
    """6 MiB of lines in the bucket, read as a version's text: the first documents cost one 64 KiB
    ranged read; reading on crosses the growing ranged reads into the store's stream, byte for byte."""
    lines = b"".join(json.dumps({"n": i, "text": "besedilo " * (i % 50)}).encode() + b"\n" for i in range(30000))
    assert len(lines) > 6 << 20
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="out/big.jsonl", Body=lines)
    manifest = Manifest(1, "big", "r", (), 1, 30000, 0, 0, 0, len(lines), 0, False, 0, {}, (), {}, 0, (), "")
    version = PublishedVersion("big", manifest, CountedStore(open_store(f"{s3_bucket.url}/out")), "big.jsonl", None,
                               "test", FIRST_RANGED_READ)
    with version.open_text(page=True) as text:
        first = [next(text) for _ in range(5)]
    assert first == lines.splitlines(keepends=True)[:5] and version.store.fetched == FIRST_RANGED_READ
    with version.open_text(page=True) as text:
        assert list(text) == lines.splitlines(keepends=True)
    assert version.store.fetched == FIRST_RANGED_READ + len(lines)
