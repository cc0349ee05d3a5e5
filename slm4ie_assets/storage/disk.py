"""A folder on a disk as a Store: the same six operations, with a file's inode and times as its tag.

Writes go through a hidden temporary name and a rename (whole or not at all), a create-only write
through `link`, which fails when the name is taken on every POSIX file system (NFS included), so
the commit point of a publish means the same thing here as in a bucket. A conditional overwrite or
delete checks the tag just before its rename or unlink; two writers that both pass that check
would race, so on a disk the callers serialise those writes under the dataset's flock as before.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..utils.durable import fsync_dir
from .base import AlreadyExists, StoredObject, TagMismatch

_TEMP_MARK = ".slm4ie-store-tmp-"
_COPY_CHUNK = 1 << 20


class DiskStore:
    """Objects are the regular files under `root`, named by their '/'-separated relative paths."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def url(self) -> str:
        return str(self.root)

    def _path(self, name: str) -> Path:
        parts = name.split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"{self.root}: not an object name: {name!r}")
        return self.root.joinpath(*parts)

    def _record(self, name: str, st: os.stat_result) -> StoredObject:
        tag = f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"
        return StoredObject(name=name, size=st.st_size, tag=tag, modified_ns=st.st_mtime_ns)

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        found: list[tuple[bytes, StoredObject]] = []
        for folder, dirs, files in os.walk(self.root):
            rel = Path(folder).relative_to(self.root).as_posix()
            base = "" if rel == "." else rel + "/"
            dirs[:] = [d for d in dirs if (base + d + "/").startswith(prefix[: len(base + d) + 1])]
            for file in files:
                name = base + file
                if not name.startswith(prefix) or _TEMP_MARK in file:
                    continue
                try:
                    st = os.stat(os.path.join(folder, file), follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if os.path.isfile(os.path.join(folder, file)) and not os.path.islink(os.path.join(folder, file)):
                    found.append((name.encode(), self._record(name, st)))
        yield from (record for _, record in sorted(found, key=lambda item: item[0]))

    def stat(self, name: str) -> StoredObject:
        path = self._path(name)
        st = os.stat(path, follow_symlinks=False)
        if not path.is_file() or path.is_symlink():
            raise FileNotFoundError(f"{path}: not a regular file")
        return self._record(name, st)

    def read_range(self, name: str, start: int, length: int) -> bytes:
        with open(self._path(name), "rb") as file:
            return os.pread(file.fileno(), length, start)

    def open_read(self, name: str, start: int = 0, end: int | None = None) -> BinaryIO:
        file = open(self._path(name), "rb")
        file.seek(start)
        if end is None:
            return file
        return _Bounded(file, end - start)  # type: ignore[return-value]

    def write(self, name: str, source: BinaryIO, if_tag: str | None = None) -> StoredObject:
        path = self._path(name)
        temp = self._temp_copy(path, source)
        try:
            if if_tag is not None:
                self._check_tag(name, if_tag)
            os.rename(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        fsync_dir(path.parent)
        return self.stat(name)

    def create(self, name: str, data: bytes) -> StoredObject:
        import io

        path = self._path(name)
        temp = self._temp_copy(path, io.BytesIO(data))
        try:
            os.link(temp, path)
        except FileExistsError:
            raise AlreadyExists(f"{path}: already exists (another writer created it first)") from None
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        return self.stat(name)

    def delete(self, name: str, if_tag: str | None = None) -> None:
        path = self._path(name)
        if if_tag is not None:
            self._check_tag(name, if_tag)
        path.unlink(missing_ok=True)

    def _check_tag(self, name: str, if_tag: str) -> None:
        try:
            tag = self.stat(name).tag
        except FileNotFoundError:
            tag = None
        if tag != if_tag:
            raise TagMismatch(f"{self._path(name)}: changed since it was read (expected tag {if_tag}, found {tag})")

    def _temp_copy(self, path: Path, source: BinaryIO) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}{_TEMP_MARK}{os.getpid()}-{id(source):x}")
        try:
            with open(temp, "xb") as out:
                shutil.copyfileobj(source, out, _COPY_CHUNK)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return temp


class _Bounded:
    """A file object that ends `remaining` bytes after where it was opened."""

    def __init__(self, file: BinaryIO, remaining: int) -> None:
        self._file, self._remaining = file, max(0, remaining)

    def read(self, size: int = -1) -> bytes:
        size = self._remaining if size is None or size < 0 else min(size, self._remaining)
        data = self._file.read(size)
        self._remaining -= len(data)
        return data

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> _Bounded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
