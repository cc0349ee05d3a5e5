"""storage/mirror.py: a store's objects mirrored into a local folder (issue 42, the first step of a raw
folder in a bucket): only what changed moves, the object's time becomes the file's mtime, files the
mirror did not write are never touched, unsafe names are skipped with a warning, memory is bounded
by the chunk, `changed_since` names what changed before a publish, and a SIGKILL at any
file-system mutation leaves whole files that the next mirror repairs. Each test runs against a
folder (DiskStore) and against a bucket prefix on the local S3 server (BucketStore through
`open_store`, the s3_bucket fixture of tests/support/s3.py)."""

import io
import json
import multiprocessing
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from slm4ie_assets.storage import mirror as mirror_module
from slm4ie_assets.storage.base import StoredObject
from slm4ie_assets.storage.disk import DiskStore
from slm4ie_assets.storage.mirror import CHUNK, changed_since, mirror
from slm4ie_assets.storage.mirror_state import MirroredFile, MirrorStateError, load_state
from slm4ie_assets.storage.urls import open_store
from support import kill_points

OLD = {"a.jsonl": b'{"text": "a"}\n', "deep/b.txt": b"b" * 3000, "deep/er/c.txt": b"c", "gone.txt": b"old only",
       "folder/x.txt": b"becomes a file's name", ".f.jsonl.Ab12Cd": b"rsync's temp", "d.part": b"partial"}
NEW = {"a.jsonl": b'{"text": "A"}\n', "deep/b.txt": b"B" * 3000, "deep/er/c.txt": b"c", "new/n.txt": b"new",
       "folder": b"now a file", ".f.jsonl.Ab12Cd": b"rsync's temp", "d.part": b"partial"}


def open_test_store(url: str):
    """The store behind `url`, a bucket prefix or a folder, as the stage opens it."""
    if not url.startswith("s3://"):
        Path(url).mkdir(parents=True, exist_ok=True)
    return open_store(url)


class Place:
    """A store (a folder, or a bucket prefix), the local folder and the mirror's state under `work`."""

    def __init__(self, url: str, work: Path):
        self.url = url
        self.store = open_test_store(url)
        self.local = work / "raw" / "d"
        self.state = work / "state" / "d.json"

    def put(self, files: dict) -> None:
        for name, data in files.items():
            self.store.write(name, io.BytesIO(data))

    def become(self, files: dict) -> None:
        """The bucket holds exactly `files` afterwards (unchanged bytes are not written again)."""
        for obj in list(self.store.list()):
            if obj.name not in files:
                self.store.delete(obj.name)
                self._drop_empty_folders(obj.name)
        self.put({n: d for n, d in files.items() if not self._holds(n, d)})

    def _drop_empty_folders(self, name: str) -> None:
        """A folder has folders a bucket has not: one left empty would keep its name from an object."""
        if self.url.startswith("s3://"):
            return
        root = Path(self.url)
        folder = (root / name).parent
        while folder != root and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent

    def _holds(self, name: str, data: bytes) -> bool:
        try:
            return self.store.read_range(name, 0, len(data) + 1) == data
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return False

    def mirror(self):
        return mirror(self.store, self.local, self.state)

    def local_files(self) -> dict:
        return {p.relative_to(self.local).as_posix(): p.read_bytes()
                for p in sorted(self.local.rglob("*")) if p.is_file()}


@pytest.fixture(params=["disk", "bucket"])
def place(request, tmp_path) -> Place:
    if request.param == "disk":
        return Place(str(tmp_path / "bucket"), tmp_path / "work")
    bucket = request.getfixturevalue("s3_bucket")
    return Place(f"{bucket.url}/corpora/d", tmp_path / "work")


def test_the_first_mirror_copies_every_object_with_its_time_and_copy_tools_names_as_listed(place):
    place.put(OLD)
    report = place.mirror()
    assert place.local_files() == OLD
    assert sorted(report.downloaded) == sorted(OLD) and report.bytes_downloaded == sum(map(len, OLD.values()))
    for obj in place.store.list():
        assert os.stat(place.local / obj.name).st_mtime_ns == obj.modified_ns  # the settle rule sees its age
    assert [o.name for o in report.mirrored] == [o.name for o in place.store.list()]
    assert report.removed == () and report.skipped == () and report.warnings == ()


def test_a_second_mirror_with_nothing_changed_downloads_nothing(place):
    place.put(OLD)
    place.mirror()
    inodes = {p: p.stat().st_ino for p in place.local.rglob("*")}
    again = place.mirror()
    assert again.downloaded == () and again.bytes_downloaded == 0 and again.removed == ()
    assert {p: p.stat().st_ino for p in place.local.rglob("*")} == inodes
    assert place.local_files() == OLD


def test_only_what_changed_moves_and_vanished_objects_go_with_their_empty_folders(place):
    place.put(OLD)
    place.mirror()
    place.become(NEW)
    report = place.mirror()
    assert place.local_files() == NEW
    assert sorted(report.downloaded) == ["a.jsonl", "deep/b.txt", "folder", "new/n.txt"]
    assert sorted(report.removed) == ["folder/x.txt", "gone.txt"]
    assert place.mirror().downloaded == ()


def test_a_local_copy_lost_or_altered_is_fetched_again(place):
    place.put(OLD)
    place.mirror()
    (place.local / "a.jsonl").unlink()
    (place.local / "deep/b.txt").write_bytes(b"edited by hand")
    assert sorted(place.mirror().downloaded) == ["a.jsonl", "deep/b.txt"]
    assert place.local_files() == OLD


def test_files_the_mirror_did_not_write_are_never_removed_or_replaced(place):
    place.put({"keep.txt": b"object", "a.txt": b"a"})
    place.local.mkdir(parents=True)
    (place.local / "mine.txt").write_bytes(b"put here by hand")
    (place.local / "keep.txt").write_bytes(b"also by hand")
    report = place.mirror()
    assert report.skipped == ("keep.txt",) and "keep.txt" in report.warnings[0]
    assert "a file the mirror did not write" in report.warnings[0]
    assert place.local_files() == {"a.txt": b"a", "keep.txt": b"also by hand", "mine.txt": b"put here by hand"}
    place.become({})
    assert place.mirror().removed == ("a.txt",)
    assert place.local_files() == {"keep.txt": b"also by hand", "mine.txt": b"put here by hand"}
    assert changed_since(place.store, report) == ["a.txt"]


def test_a_symlink_on_an_objects_path_is_not_followed(place, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    place.local.mkdir(parents=True)
    (place.local / "sub").symlink_to(outside)
    place.put({"sub/x.txt": b"x"})
    report = place.mirror()
    assert report.skipped == ("sub/x.txt",) and "symbolic link" in report.warnings[0]
    assert list(outside.iterdir()) == []


class ListedAs:
    """A store whose objects are listed under other names, as a bucket may name them ('/a', 'a/../b',
    'a//b', and 'x' beside 'x/y', which a folder cannot hold; not every S3 server keeps them all)."""

    def __init__(self, store, names: dict):
        self.inner, self.names = store, names  # listed name -> the object's own name

    @property
    def url(self) -> str:
        return "listed-as:" + self.inner.url

    def list(self, prefix=""):
        for listed, real in sorted(self.names.items(), key=lambda item: item[0].encode()):
            obj = self.inner.stat(real)
            yield StoredObject(listed, obj.size, obj.tag, obj.modified_ns)

    def open_read(self, name, start=0, end=None):
        return self.inner.open_read(self.names[name], start, end)


def test_names_that_are_not_safe_paths_are_skipped_with_a_warning_naming_them(place):
    place.put({"f1": b"1", "f2": b"2", "f3": b"3", "f4": b"4", "f5": b"5", "f6": b"6"})
    names = {"/abs": "f1", "a/../b": "f2", "a//b": "f3", "x": "f4", "x/y": "f5", "ok/z": "f6"}
    report = mirror(ListedAs(place.store, names), place.local, place.state)  # type: ignore[arg-type]
    assert place.local_files() == {"x/y": b"5", "ok/z": b"6"}
    assert sorted(report.skipped) == ["/abs", "a/../b", "a//b", "x"]
    for name in report.skipped:
        assert any(repr(name) in text for text in report.warnings)


def test_changed_since_names_changed_and_vanished_objects_not_new_ones(place):
    place.put(OLD)
    report = place.mirror()
    assert changed_since(place.store, report) == []
    place.put({"a.jsonl": b'{"text": "b"}\n', "brand_new.txt": b"n"})  # same size, new bytes: a new tag
    place.store.delete("gone.txt")
    assert changed_since(place.store, report) == ["a.jsonl", "gone.txt"]


def test_bytes_stream_in_chunks_whatever_the_object_size(place, monkeypatch):
    big = os.urandom(1 << 16) * ((2 * CHUNK + 12345) >> 16) + b"tail"
    place.put({"big.bin": big})
    asked: list = []
    opened = place.store.open_read

    def open_read(name, start=0, end=None):
        stream = opened(name, start, end)
        real = stream.read

        def read(size=-1):
            asked.append(size)
            return real(size)
        stream.read = read
        return stream

    monkeypatch.setattr(place.store, "open_read", open_read)
    place.mirror()
    assert (place.local / "big.bin").read_bytes() == big
    assert len(asked) >= 3 and all(0 < size <= CHUNK for size in asked)


def test_the_state_is_a_typed_record_that_names_its_store(place):
    place.put(OLD)
    place.mirror()
    state = load_state(place.state, place.store.url)
    assert set(state.files) == set(OLD) and all(isinstance(f, MirroredFile) and f.whole for f in state.files.values())
    assert json.loads(place.state.read_text())["store"] == place.store.url
    with pytest.raises(MirrorStateError, match=f"the state of a mirror of {re.escape(place.url)}, not of /elsewhere"):
        mirror(DiskStore(Path("/elsewhere")), place.local, place.state)
    place.state.write_text("{not json")
    with pytest.raises(MirrorStateError, match=f"{place.state}: not a readable mirror state"):
        place.mirror()


# ----------------------------------------------------------------------------- kills


def _kill_each_point(url: str, root: str, saved: str, environ: dict, stride: int) -> None:
    """In a clean process (a forkserver's child, no threads): for k = 0, stride, ... the saved work folder
    is copied to kills/<k>/ and a forked child mirrors into it, SIGKILLed before its k-th file-system
    mutation, until a child passes every point; the exit codes go to kills.json."""
    os.environ.update(environ)  # a bucket's endpoint and credentials
    Place(url, Path(saved))  # a bucket client's API model is loaded once, before the forks
    results = []
    for kill_at in range(0, 10_000, stride):
        work = Path(root) / "kills" / str(kill_at)
        shutil.copytree(saved, work, symlinks=True)  # copy2 keeps the mtimes the mirror checks
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                kill_points.arm(kill_at)
                Place(url, work).mirror()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        results.append((kill_at, os.waitstatus_to_exitcode(status)))
        if status == 0:
            break
    (Path(root) / "kills.json").write_text(json.dumps(results))


def test_a_kill_at_any_mutation_leaves_whole_files_and_the_next_mirror_repairs_them(place, tmp_path):
    place.put(OLD)
    place.mirror()
    place.local.joinpath("by_hand.txt").write_bytes(b"not the mirror's")
    saved = tmp_path / "saved"
    shutil.copytree(tmp_path / "work", saved, symlinks=True)  # copy2 keeps the mtimes the mirror checks
    place.become(NEW)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["slm4ie_assets.storage.mirror", "support.kill_points", __name__])
    environ = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    # every point on a folder; every third against the bucket, whose requests make each repair slower (the
    # points are the local folder's mutations either way)
    stride = 1 if isinstance(place.store, DiskStore) else 3
    runner = ctx.Process(target=_kill_each_point, args=(place.url, str(tmp_path), str(saved), environ, stride))
    runner.start()
    runner.join(120)
    assert runner.exitcode == 0
    results = json.loads((tmp_path / "kills.json").read_text())
    assert results[-1][1] == 0 and results[-1][0] > 20, "the mirror passes many points; is the harness armed?"
    allowed = {name: {OLD.get(name), NEW.get(name)} - {None} for name in set(OLD) | set(NEW)}
    allowed["by_hand.txt"] = {b"not the mirror's"}
    for kill_at, code in results[:-1]:
        assert code == -signal.SIGKILL, f"kill {kill_at}: exit {code}"
        killed = Place(place.url, tmp_path / "kills" / str(kill_at))
        for name, data in killed.local_files().items():  # only whole files, each some version of its object
            assert data in allowed[name], f"kill {kill_at}: {name} holds {data[:40]!r}"
        report = killed.mirror()
        assert killed.local_files() == {**NEW, "by_hand.txt": b"not the mirror's"}, f"kill {kill_at}"
        assert not mirror_module._temp_dir(killed.local).exists()
        assert changed_since(killed.store, report) == [] and killed.mirror().downloaded == ()
