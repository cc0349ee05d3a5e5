"""A split file's sidecar member built apart while the run extracts: in a file of its own in the
staging folder, on a thread of a small pool, as its ranges are committed (issue 41).

A split file's sidecar is one gzip member, written line by line as the unsplit part would be
(docs/splitting.md, "Publishing a split file"): one deflate stream, so one thread per file. The
version stager used to feed every file's member itself, in shard order, on its one thread; with
8 MiB ranges most files of an annotated corpus are split (509 MB of CoNLL-U in 32 files: 77
ranges), and that one thread, recompressing every file's annotations one after the other, became
the run's tail (7.3 s after the last part, against 17 s of extraction, on 2 cores). Now each file's
member is built by its own task, beside the other files' (zlib releases the GIL), and the stager
only appends finished members in order. Each range fed is stamped before and after (`part_stamp`):
a member fed from a part that another run replaced meanwhile is built again at the publish.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, NamedTuple

from ..planning.shards import Shard
from .dataset_store import DatasetStore, PartPaths
from .part_meta import PartMeta
from .sidecar_units import MemberFeed

FileStamp = tuple[int, int, int, int] | None  # (inode, size, mtime_ns, ctime_ns); None: no file
# what staging's copying is timed by, entered around each stretch of it on the thread that copies: the
# run's stage clock under "stage" (pipeline.py hands it in), so the store never sees the engine
CopyTimer = Callable[[], AbstractContextManager[object]]
MAX_BUILDERS = 8  # members built at once at most: beyond, the copy and the disk bind, not the threads


def _file_stamp(path: Path) -> FileStamp:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class PartStamp(NamedTuple):
    """What a staged copy was made from; equal stamps mean the same committed bytes."""

    meta: PartMeta
    text: FileStamp
    annotations: FileStamp


def part_stamp(paths: PartPaths, meta: PartMeta) -> PartStamp:
    return PartStamp(meta, _file_stamp(paths.text), _file_stamp(paths.annotations) if meta.has_annotations else None)


class MemberBuild:
    """The member of the split file whose ranges are the shards `unit`, in `path`: fed in range
    order as their metas come (`feed_ready`, one call at a time), closed after the last range."""

    def __init__(self, path: Path, unit: range):
        self.path, self.unit = path, unit
        self.fed: list[PartStamp] = []  # the stamp of each range fed, in order
        self.done = False  # every range fed, the member closed
        self.stale = False  # a range was replaced while it was fed: built again at the publish
        self.busy = False  # a pool task is feeding it
        self._out: BinaryIO | None = None
        self._feed: MemberFeed | None = None

    @property
    def next(self) -> int:
        """The shard index of the next range to feed."""
        return self.unit.start + len(self.fed)

    def feed_ready(self, store: DatasetStore, shards: list[Shard], metas: list[PartMeta | None]) -> None:
        """Feed every range whose part is committed (`metas`), in order, up to the first that is not."""
        while not (self.done or self.stale) and self.next < self.unit.stop:
            meta = metas[self.next]
            if meta is None:
                return
            paths = store.part_paths(shards[self.next].key)
            stamp = part_stamp(paths, meta)
            if self._feed is None:
                self._out = open(self.path, "xb")
                self._feed = MemberFeed(self._out, self.unit.start)
            self._feed.feed(paths, meta)
            if part_stamp(paths, meta) != stamp:
                self.stale = True
                return
            self.fed.append(stamp)
        if not (self.done or self.stale):
            self._close()
            self.done = True

    def holds(self, stamps: list[PartStamp]) -> bool:
        """Built whole from exactly these parts."""
        return self.done and not self.stale and self.fed == stamps

    def _close(self) -> None:
        if self._feed is not None and self._out is not None:
            self._feed.close()
            self._out.close()

    def discard(self) -> None:
        """Close and remove the member's file (appended, or not wanted): not to be appended again."""
        if self._out is not None and not self._out.closed:
            self._out.close()
        self.path.unlink(missing_ok=True)
        self.stale = True


class MemberBuilds:
    """The members of a version's split files, each built on a pool thread as its ranges come."""

    def __init__(self, folder: Path, store: DatasetStore, shards: list[Shard], units: list[range], workers: int,
                 timer: CopyTimer):
        self._store, self._shards, self._timer = store, shards, timer
        self.builds = {u.start: MemberBuild(folder / f"member-{u.start}", u) for u in units}
        self._pool = ThreadPoolExecutor(max(1, min(workers, MAX_BUILDERS)), thread_name_prefix="slm4ie-member")
        self._lock = threading.Lock()
        self.failed: BaseException | None = None  # a build that failed (a full disk): the publish starts over

    def start_ready(self, metas: list[PartMeta | None], woken: Callable[[], None]) -> None:
        """Start a task for each member whose next range is committed and that no task feeds;
        `woken` is called when a task ends (the stager looks again)."""
        with self._lock:
            ready = [b for b in self.builds.values()
                     if not (b.busy or b.done or b.stale) and metas[b.next] is not None]
            for b in ready:
                b.busy = True
        for b in ready:
            self._pool.submit(self._run, b, metas, woken)

    def _run(self, build: MemberBuild, metas: list[PartMeta | None], woken: Callable[[], None]) -> None:
        try:
            with self._timer():
                build.feed_ready(self._store, self._shards, metas)
        except BaseException as exc:  # noqa: BLE001 - the publish starts over without the staged files
            self.failed = exc
        finally:
            with self._lock:
                build.busy = False
            woken()

    def stop(self) -> None:
        """Wait for the tasks running now; none is started after."""
        self._pool.shutdown(wait=True)

    def discard(self) -> None:
        """Close and remove every member file (after `stop`)."""
        for build in self.builds.values():
            build.discard()
