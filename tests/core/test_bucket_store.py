"""storage/bucket.py against a real S3 API server (moto's, deploy/s3/local-s3.sh; tests/support/s3.py).

The first half is the `Store` contract (storage/base.py) written over the `store` fixture alone, so
the same tests hold any store: the fixture's params name the stores it is run over. The second
half is what only a bucket has or must prove: multipart uploads that fail or race, abandoned
uploads, reads pinned to an ETag, server-side copies, s3:// URLs and messages, the server script.
"""

from __future__ import annotations

import io
import os
import pickle
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from slm4ie_assets.storage.base import AlreadyExists, Store, StoredObject, TagMismatch
from slm4ie_assets.storage.bucket import BucketStore, ClientOptions, Transfer
from slm4ie_assets.storage.disk import DiskStore
from slm4ie_assets.storage.urls import open_store, parse_bucket_url
from support.s3 import SCRIPT, ScratchBucket, free_port

MiB = 1 << 20
# the smallest parts S3 (and moto) accept, so an 11 MiB write is a three-part upload
SMALL_PARTS = Transfer(part_size=5 * MiB, read_chunk=4096, read_depth=1, copy_part_size=5 * MiB, list_page=2)


@pytest.fixture(params=["disk", "bucket"])
def store(request: pytest.FixtureRequest, tmp_path) -> Store:
    """Each kind of store the contract runs over: a folder, and a prefix of a fresh bucket."""
    if request.param == "disk":
        return DiskStore(tmp_path / "data" / "set")
    bucket: ScratchBucket = request.getfixturevalue("s3_bucket")
    return BucketStore(bucket.name, "data/set", transfer=SMALL_PARTS)


@pytest.fixture
def bucket_store(s3_bucket: ScratchBucket) -> BucketStore:
    return BucketStore(s3_bucket.name, "data/set", transfer=SMALL_PARTS)


def put(store: Store, name: str, data: bytes) -> StoredObject:
    return store.write(name, io.BytesIO(data))


def read_all(store: Store, name: str) -> bytes:
    with store.open_read(name) as stream:
        return stream.read()


class WatchedSource(io.RawIOBase):
    """A source of `data` that calls `look()` before every read, or raises after `fail_after` bytes."""

    def __init__(self, data: bytes, look: Callable[[], None] = lambda: None, fail_after: int | None = None) -> None:
        super().__init__()
        self.data, self.look, self.fail_after, self.offset = data, look, fail_after, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.look()
        if self.fail_after is not None and self.offset >= self.fail_after:
            raise OSError("the source broke mid-write")
        end = len(self.data) if size < 0 else self.offset + size
        chunk = self.data[self.offset:end]
        self.offset += len(chunk)
        return chunk


# ---------------------------------------------------------------- the Store contract


def test_written_objects_are_listed_in_name_order_relative_to_the_root_and_read_back(store: Store) -> None:
    objects = {"b": b"bee", "a/b/c": b"deep", "a/b2": b"", "\u010d/\u017e": "\u017eaba".encode(), "a/a": b"x" * 5000}
    written = {name: put(store, name, data) for name, data in objects.items()}
    listed = list(store.list())
    assert [o.name for o in listed] == sorted(objects, key=lambda n: n.encode())
    assert {o.name: o for o in listed} == {name: store.stat(name) for name in objects}
    for record in listed:
        assert record == written[record.name] and record.size == len(objects[record.name])
        assert read_all(store, record.name) == objects[record.name]
    assert [o.name for o in store.list("a/b")] == ["a/b/c", "a/b2"]
    assert list(store.list("nothing/")) == []


def test_a_missing_object_is_file_not_found_and_deleting_it_is_nothing(store: Store) -> None:
    for call in (lambda: store.stat("gone"), lambda: store.read_range("gone", 0, 10),
                 lambda: store.open_read("gone"), lambda: store.read_range("gone", 0, 0)):
        with pytest.raises(FileNotFoundError, match="gone"):
            call()
    store.delete("gone")
    put(store, "here", b"1")
    store.delete("here")
    assert list(store.list()) == []


def test_read_range_returns_fewer_bytes_only_at_the_end(store: Store) -> None:
    data = bytes(range(256)) * 40
    put(store, "f", data)
    assert store.read_range("f", 100, 50) == data[100:150]
    assert store.read_range("f", len(data) - 3, 10) == data[-3:]
    assert store.read_range("f", len(data), 10) == b""
    assert store.read_range("f", len(data) + 7, 10) == b""
    assert store.read_range("f", 5, 0) == b""


def test_open_read_returns_exactly_the_bytes_of_every_range(store: Store) -> None:
    data = random.Random(7).randbytes(20_000)
    put(store, "split.jsonl", data)
    rng = random.Random(42)
    pairs: list[tuple[int, int | None]] = [(0, None), (0, len(data)), (5, 5), (4096, 8192), (4095, 8193),
                                           (len(data) - 1, None), (len(data), None), (100, len(data) + 500)]
    for _ in range(12):
        low, high = sorted(rng.sample(range(len(data) + 1), 2))
        pairs.append((low, high))
    for start, end in pairs:
        want = data[start:end]
        with store.open_read("split.jsonl", start, end) as stream:
            pieces = []
            while piece := stream.read(rng.choice([1, 777, 4096, 10_000])):
                pieces.append(piece)
        assert b"".join(pieces) == want, (start, end)


def test_of_two_racing_creates_exactly_one_wins(store: Store) -> None:
    for round_ in range(5):
        name = f"manifest-{round_}.json"
        barrier, won, lost = threading.Barrier(2), [], []

        def create(data: bytes, name: str = name, barrier: threading.Barrier = barrier,
                   won: list[bytes] = won, lost: list[str] = lost) -> None:
            barrier.wait()
            try:
                store.create(name, data)
                won.append(data)
            except AlreadyExists as exc:
                lost.append(str(exc))

        racers = [threading.Thread(target=create, args=(data,)) for data in (b"run A", b"run B")]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert len(won) == 1 and len(lost) == 1, (won, lost)
        assert name in lost[0]
        assert read_all(store, name) == won[0]
    with pytest.raises(AlreadyExists, match="manifest-0.json"):
        store.create("manifest-0.json", b"late")


def test_a_tagged_overwrite_or_delete_is_refused_after_a_change(store: Store) -> None:
    first = put(store, "lease", b"owner 1")
    second = store.write("lease", io.BytesIO(b"owner 2"), if_tag=first.tag)
    assert second.tag != first.tag and read_all(store, "lease") == b"owner 2"
    with pytest.raises(TagMismatch, match="lease"):
        store.write("lease", io.BytesIO(b"owner 3"), if_tag=first.tag)
    with pytest.raises(TagMismatch, match="lease"):
        store.delete("lease", if_tag=first.tag)
    assert read_all(store, "lease") == b"owner 2"
    store.delete("lease", if_tag=second.tag)
    with pytest.raises(FileNotFoundError):
        store.stat("lease")
    with pytest.raises(TagMismatch):  # gone is changed too
        store.write("lease", io.BytesIO(b"owner 4"), if_tag=second.tag)
    with pytest.raises(TagMismatch):
        store.delete("lease", if_tag=second.tag)


def test_a_large_write_is_visible_only_whole(store: Store) -> None:
    old = put(store, "big.jsonl", b"old version\n")
    new = random.Random(3).randbytes(11 * MiB + 123)
    seen_during: list[StoredObject] = []
    bodies: set[bytes] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            bodies.add(store.read_range("big.jsonl", 0, 12 * MiB))

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        done = store.write("big.jsonl", WatchedSource(new, look=lambda: seen_during.append(store.stat("big.jsonl"))))
    finally:
        stop.set()
        watcher.join()
    bodies.add(store.read_range("big.jsonl", 0, 12 * MiB))
    assert len(seen_during) >= 3 and all(seen == old for seen in seen_during)
    assert bodies <= {b"old version\n", new} and new in bodies
    assert store.stat("big.jsonl") == done and done.size == len(new)


def test_a_write_that_fails_midway_leaves_the_old_object(store: Store) -> None:
    put(store, "out.jsonl", b"old\n")
    with pytest.raises(OSError, match="broke mid-write"):
        store.write("out.jsonl", WatchedSource(os.urandom(12 * MiB), fail_after=6 * MiB))
    assert read_all(store, "out.jsonl") == b"old\n"
    assert [o.name for o in store.list()] == ["out.jsonl"]


# ---------------------------------------------------------------- what a bucket must prove besides


def test_failed_multipart_writes_leave_no_upload_behind(bucket_store: BucketStore) -> None:
    big = os.urandom(11 * MiB)
    current = put(bucket_store, "a.jsonl", b"a")
    with pytest.raises(OSError):
        bucket_store.write("b.jsonl", WatchedSource(big, fail_after=6 * MiB))
    with pytest.raises(AlreadyExists, match="s3://.*/data/set/a.jsonl"):
        bucket_store.create("a.jsonl", big)  # refused at CompleteMultipartUpload
    with pytest.raises(TagMismatch, match="s3://.*/data/set/a.jsonl"):
        bucket_store.write("a.jsonl", io.BytesIO(big), if_tag='"' + "0" * 32 + '"')
    assert bucket_store.stat("a.jsonl") == current
    assert bucket_store.list_uploads() == ()
    assert bucket_store.create("c.jsonl", big).size == len(big)


def test_abandoned_uploads_are_listed_and_aborted_sparing_younger_ones(bucket_store: BucketStore,
                                                                      s3_bucket: ScratchBucket) -> None:
    client = s3_bucket.client
    dead = client.create_multipart_upload(Bucket=s3_bucket.name, Key="data/set/parts/p1")["UploadId"]
    client.upload_part(Bucket=s3_bucket.name, Key="data/set/parts/p1", UploadId=dead, PartNumber=1, Body=b"x")
    client.create_multipart_upload(Bucket=s3_bucket.name, Key="elsewhere/p2")  # outside the store's root
    found = bucket_store.list_uploads()
    assert [(u.name, u.upload_id) for u in found] == [("parts/p1", dead)]
    assert bucket_store.list_uploads("other/") == ()
    assert bucket_store.abort_uploads(initiated_before_ns=found[0].initiated_ns) == ()  # not older: spared
    assert bucket_store.abort_uploads("parts/") == found
    assert bucket_store.list_uploads() == ()
    assert len(client.list_multipart_uploads(Bucket=s3_bucket.name)["Uploads"]) == 1  # elsewhere/ untouched


def test_a_read_is_pinned_to_the_object_it_opened(bucket_store: BucketStore) -> None:
    data = os.urandom(5 * 4096)
    put(bucket_store, "raw.jsonl", data)
    with bucket_store.open_read("raw.jsonl") as stream:
        assert stream.read(4096) == data[:4096]
        put(bucket_store, "raw.jsonl", os.urandom(5 * 4096))  # replaced while read
        with pytest.raises(TagMismatch, match="s3://.*/data/set/raw.jsonl.*changed while it was read"):
            stream.read()


def test_server_side_copies_small_and_in_parts(bucket_store: BucketStore) -> None:
    small, big = b"part text\n", os.urandom(11 * MiB + 5)
    tag = put(bucket_store, "parts/1", small).tag
    put(bucket_store, "parts/2", big)
    assert bucket_store.copy("parts/1", "out/1").tag == tag
    assert bucket_store.copy("parts/2", "out/2").size == len(big)  # UploadPartCopy: 5 + 5 + 1 MiB
    assert bucket_store.read_range("out/1", 0, 100) == small and bucket_store.read_range("out/2", 0, 12 * MiB) == big
    with pytest.raises(TagMismatch, match="parts/1"):
        bucket_store.copy("parts/1", "out/3", source_tag='"' + "0" * 32 + '"')


def test_a_listing_crosses_pages_and_stays_inside_its_prefix(bucket_store: BucketStore,
                                                             s3_bucket: ScratchBucket) -> None:
    for name in ("k1", "k2", "k3", "k4", "k5"):
        put(bucket_store, name, name.encode())
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="data/set2/k0", Body=b"sibling")
    s3_bucket.client.put_object(Bucket=s3_bucket.name, Key="data/set/folder/", Body=b"")  # a console's marker
    assert [o.name for o in bucket_store.list()] == ["k1", "k2", "k3", "k4", "k5"]  # three pages of two


def test_every_error_names_the_object_as_an_s3_url(bucket_store: BucketStore, s3_bucket: ScratchBucket) -> None:
    where = f"s3://{s3_bucket.name}/data/set/nope"
    with pytest.raises(FileNotFoundError, match=where):
        bucket_store.stat("nope")
    with pytest.raises(FileNotFoundError, match=where):
        bucket_store.read_range("nope", 0, 1)
    with pytest.raises(ValueError, match="s3://.*'a//b' is not an object name"):
        bucket_store.stat("a//b")
    missing = BucketStore("slm4ie-no-such-bucket", "p")
    with pytest.raises(FileNotFoundError, match="s3://slm4ie-no-such-bucket/p"):
        list(missing.list())


def test_a_store_crosses_into_another_process_by_pickle(bucket_store: BucketStore) -> None:
    put(bucket_store, "x", b"1")
    copy = pickle.loads(pickle.dumps(bucket_store))
    assert copy.url == bucket_store.url and copy.stat("x") == bucket_store.stat("x")


# ---------------------------------------------------------------- URLs and the one seam


@pytest.mark.parametrize("url, bucket, prefix", [
    ("s3://corpora", "corpora", ""), ("s3://corpora/", "corpora", ""), ("s3://my-bucket.eu/raw/kas/", "my-bucket.eu",
                                                                          "raw/kas"), ("S3://abc/x", "abc", "x")])
def test_s3_urls_are_taken_apart(url: str, bucket: str, prefix: str) -> None:
    location = parse_bucket_url(url)
    assert location is not None and (location.bucket, location.prefix) == (bucket, prefix)


@pytest.mark.parametrize("url, why", [
    ("s3://ab/raw", "not a bucket name"), ("s3://Corpora/raw", "not a bucket name"), ("s3:///raw", "not a bucket"),
    ("s3://corpora/raw//kas", "empty"), ("s3://corpora/../x", "'..'"), ("gs://corpora/raw", "no store for this URL")])
def test_a_bad_url_is_an_error_naming_it(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(url)) + ".*" + re.escape(why)):
        parse_bucket_url(url)


def test_paths_stay_paths() -> None:
    for path in ("/srv/corpora/raw", "raw", "./s3:/x", "C:relative"):
        assert parse_bucket_url(path) is None


def test_open_store_takes_the_endpoint_from_the_environment_or_the_options(s3_bucket: ScratchBucket,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from_env = open_store(f"s3://{s3_bucket.name}/data/set/")
    assert from_env.url == f"s3://{s3_bucket.name}/data/set"
    put(from_env, "x", b"1")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    from_options = open_store(f"s3://{s3_bucket.name}/data", {"endpoint_url": s3_bucket.server.endpoint,
                                                              "region": "eu-central-1"})
    assert isinstance(from_options, BucketStore) and from_options.options == ClientOptions(
        endpoint_url=s3_bucket.server.endpoint, region="eu-central-1")
    assert [o.name for o in from_options.list()] == ["set/x"]
    with pytest.raises(ValueError, match="unknown storage option.*secret_key"):
        open_store(f"s3://{s3_bucket.name}", {"secret_key": "x"})


def test_open_store_on_a_path_is_the_disk_store(tmp_path) -> None:
    disk = pytest.importorskip("slm4ie_assets.storage.disk", reason="storage/disk.py is merged from its own branch")
    assert isinstance(open_store(tmp_path), disk.DiskStore) and isinstance(open_store(str(tmp_path)), disk.DiskStore)


# ---------------------------------------------------------------- deploy/s3/local-s3.sh


@pytest.fixture
def script_env(tmp_path) -> Iterator[dict[str, str]]:
    env = dict(os.environ, S3_PORT=str(free_port()), SLM4IE_S3_HOME=str(tmp_path / "s3"))
    yield env
    subprocess.run([SCRIPT, "stop"], env=env, timeout=30)


def run_script(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, command], env=env, capture_output=True, text=True, timeout=60)


def test_the_server_script_starts_once_answers_and_stops(script_env: dict[str, str]) -> None:
    endpoint = f"http://127.0.0.1:{script_env['S3_PORT']}"
    assert run_script("status", script_env).returncode == 1
    assert run_script("start", script_env).returncode == 0
    pid = (script_env["SLM4IE_S3_HOME"] + "/moto.pid")
    first = open(pid).read()
    again = run_script("start", script_env)
    assert again.returncode == 0 and endpoint in again.stdout and open(pid).read() == first
    assert run_script("status", script_env).stdout.strip() == endpoint
    assert run_script("stop", script_env).returncode == 0
    assert run_script("status", script_env).returncode == 1
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and os.path.exists(f"/proc/{first.strip()}"):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{first.strip()}"), "stop left the server running"


def test_the_server_script_refuses_a_port_something_else_holds(script_env: dict[str, str]) -> None:
    other = ThreadingHTTPServer(("127.0.0.1", int(script_env["S3_PORT"])), BaseHTTPRequestHandler)  # 501 to all
    serving = threading.Thread(target=other.serve_forever)
    serving.start()
    try:
        refused = run_script("start", script_env)
    finally:
        other.shutdown()
        serving.join()
        other.server_close()
    assert refused.returncode == 1 and "not an S3 server of ours" in refused.stderr
