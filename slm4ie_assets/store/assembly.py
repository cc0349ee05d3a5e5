"""A version's text and sidecar: the current parts concatenated in shard order, staged while the
run still extracts later parts, so the publish does not copy every byte after the last part.

Without reflinks (ext4: copy_file_range copies in the kernel) the bytes of all parts but one must
be copied once into the version. `VersionStager` does that copy on a helper thread as soon as each
prefix of the shard order is committed (copy_file_range and zlib release the GIL), into a folder
under `.slm4ie/<key>/staging/` that no reader looks at. Only committed part files are read, and a
part is never rewritten in place (a new part replaces the name), so a staged copy holds whole
bytes; each is stamped with its meta and the inode, size and ctime of its files. `finish`, called
by the publish under the dataset lock EXCLUSIVE, keeps the staged prefix up to the first part whose
stamp no longer matches (another run replaced it meanwhile), appends the rest itself, and renames
the folder into `versions/` (D17: a folder left by a kill is removed by the next clean-up).
"""

import errno
import os
import queue
import shutil
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import BinaryIO

from ..planning.shards import Shard
from ..utils.cpus import usable_cpus
from ..utils.gzipio import GzipMemberWriter, start_writeback
from .dataset_store import DatasetStore
from .member_builds import CopyTimer, MemberBuilds, PartStamp, part_stamp
from .offset_copy import CopyJob, append_file, copy_all_at
from .part_meta import PartMeta
from .sidecar_units import MemberFeed, Source, is_split, publish_units, sidecar_source

_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EACCES}


def assemble(path: Path, sources: list[Source]) -> None:
    """Write `path` as the concatenation of `sources`, durable once this returns.

    A single part file is hard-linked: parts are fsynced before their meta commits them, and never
    rewritten in place (a new part replaces the old name), so the version keeps its own bytes.
    """
    if len(sources) == 1 and isinstance(sources[0], Path):
        try:
            os.link(sources[0], path)
            return
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
    with open(path, "xb", opener=create_0644) as out:
        for src in sources:
            append_source(out, src)
        out.flush()
        os.fsync(out.fileno())


def append_source(out: BinaryIO, src: Source) -> None:
    if isinstance(src, Path):
        append_file(src, out)
        start_writeback(out.fileno())
    else:
        writer = GzipMemberWriter(out, threaded=False)
        for line in src():
            writer.write(line)
        writer.close()


def create_0644(path: str, flags: int) -> int:
    return os.open(path, flags, 0o644)


def _truncate(fh: BinaryIO, size: int) -> None:
    """Make `fh` end at `size` (a no-op when it does: truncating costs a metadata write)."""
    fh.flush()
    if os.fstat(fh.fileno()).st_size != size:
        fh.truncate(size)
    fh.seek(size)


_WAKE = object()  # a stager queue item: a member's task ended


class _Replaced(Exception):
    """A part was replaced while it was being staged: the staged prefix stops before it."""


class VersionStager:
    """The text and sidecar of the next version, appended on a helper thread as each prefix of
    `shards` is committed (`committed`): the text part by part, the sidecar by publish unit (a
    shard, or the ranges of one split file, one gzip member); `finish` completes them under the
    dataset lock EXCLUSIVE, `discard` removes them."""

    def __init__(self, store: DatasetStore, shards: list[Shard], text_name: str, sidecar_name: str,
                 timer: CopyTimer = nullcontext):
        self.store, self.shards = store, shards
        self._timer = timer  # around its copying: the run's `stage` seconds (member_builds.CopyTimer)
        self.name = f"v{time.time_ns()}-{os.getpid()}"
        self.folder = store.staging / self.name
        self._text_name, self._side_name = text_name, sidecar_name
        self._groups = publish_units(shards)
        self._metas: list[PartMeta | None] = [None] * len(shards)
        self._stamps: list[PartStamp] = []  # per shard in the text, in order
        self._text_ends: list[int] = []  # text size after each shard
        self._side_ends: list[int] = []  # sidecar size after each group, once it is open
        self._side: BinaryIO | None = None
        self._annotated = False  # a committed part has annotations: the version has a sidecar
        self._failed: BaseException | None = None
        self._done = False
        self.folder.mkdir(parents=True)
        self._text: BinaryIO = open(self.folder / text_name, "xb", opener=create_0644)
        # each split file's member, built apart as its ranges are committed (store/member_builds.py)
        self._members = MemberBuilds(self.folder, store, shards, [g for g in self._groups if is_split(shards[g.start])],
                                     usable_cpus(), self._timer)
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="slm4ie-stager", daemon=True)
        self._thread.start()

    def committed(self, index: int, meta: PartMeta) -> None:
        """Shard `index` has a current part with `meta` (written by this run or found current)."""
        self._queue.put((index, meta))

    def _woken(self) -> None:
        """A member's task ended: look again (start the next, append what is complete)."""
        self._queue.put(_WAKE)

    def _run(self) -> None:
        stopped = False
        try:
            while (item := self._queue.get()) is not None:
                if item is not _WAKE:
                    index, meta = item
                    self._metas[index] = meta
                    self._annotated = self._annotated or meta.has_annotations
                if self._annotated:  # no sidecar without a part with annotations: no member to build
                    self._members.start_ready(self._metas, self._woken)
                with self._timer():
                    self._advance(checked=True)
        except _Replaced:
            stopped = True
        except BaseException as exc:  # finish starts over without the staged files
            self._failed = exc
            stopped = True
        if stopped:
            while self._queue.get() is not None:
                pass

    def _advance(self, checked: bool) -> None:
        """Append every shard (and complete group) whose turn has come and whose part is known."""
        self._append_complete_groups(checked)
        while len(self._stamps) < len(self.shards) and (meta := self._metas[len(self._stamps)]) is not None:
            self._append_text(len(self._stamps), meta, checked)
            self._append_complete_groups(checked)

    def _append_text(self, i: int, meta: PartMeta, checked: bool) -> None:
        """`checked`: the part is read without the dataset lock exclusive, so its stamp is taken
        before and after the copy; a replaced part stops the staging here."""
        paths = self.store.part_paths(self.shards[i].key)
        stamp = part_stamp(paths, meta)
        append_file(paths.text, self._text)
        start_writeback(self._text.fileno())
        if checked and part_stamp(paths, meta) != stamp:
            raise _Replaced(i)
        self._stamps.append(stamp)
        self._text_ends.append(self._text.tell())

    def _append_rest_at_offsets(self) -> None:
        """`finish`: the text of every part not staged yet, copied side by side at its offset
        (store/offset_copy.py); the caller holds the dataset lock exclusive, so no stamp check."""
        self._text.flush()
        offset = self._text_ends[-1] if self._text_ends else 0
        jobs = []
        for i in range(len(self._stamps), len(self.shards)):
            meta = self._metas[i]
            assert meta is not None
            paths = self.store.part_paths(self.shards[i].key)
            stamp = part_stamp(paths, meta)
            if stamp.text is None:
                raise FileNotFoundError(errno.ENOENT, "a committed part's text is missing", str(paths.text))
            jobs.append(CopyJob(paths.text, offset, stamp.text[1]))
            offset += stamp.text[1]
            self._stamps.append(stamp)
            self._text_ends.append(offset)
        if jobs:
            copy_all_at(jobs, self._text.fileno())
            self._text.seek(offset)
            start_writeback(self._text.fileno())

    def _append_complete_groups(self, checked: bool) -> None:
        staged = len(self._stamps)
        if self._side is None:
            if not any(s.meta.has_annotations for s in self._stamps[len(self._side_ends):]):
                return
            self._side = open(self.folder / self._side_name, "xb", opener=create_0644)
        while len(self._side_ends) < len(self._groups):
            members = self._groups[len(self._side_ends)]
            if members.stop > staged:
                return
            if is_split(self.shards[members.start]):
                if not self._append_member(members, checked):
                    return
                continue
            pairs = [(self.shards[i], self._stamps[i].meta) for i in members]
            src = sidecar_source(self.store, pairs)
            if src is not None:
                append_source(self._side, src)
            self._side.flush()
            if checked and [part_stamp(self.store.part_paths(s.key), m) for s, m in pairs] != [
                    self._stamps[i] for i in members]:
                raise _Replaced(members.start)
            self._side_ends.append(self._side.tell())

    def _append_member(self, members: range, checked: bool) -> bool:
        """Append the split file `members`' member, built apart from the very parts staged; at the
        publish (`checked` False) one not built so is written here, from the parts. False: not
        ready yet."""
        assert self._side is not None
        build = self._members.builds[members.start]
        if build.holds(self._stamps[members.start:members.stop]):
            append_file(build.path, self._side)
            build.discard()
        elif checked:
            return False
        else:  # the publish, under the exclusive lock: fed again from the current parts
            member = MemberFeed(self._side, members.start)
            for i in members:
                member.feed(self.store.part_paths(self.shards[i].key), self._stamps[i].meta)
            member.close()
        self._side.flush()
        self._side_ends.append(self._side.tell())
        return True

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._members.stop()

    def _kept(self, metas: list[PartMeta]) -> int:
        """Staged shards, from the first, whose parts are all still the ones staged."""
        for i, stamp in enumerate(self._stamps):
            if stamp != part_stamp(self.store.part_paths(self.shards[i].key), metas[i]):
                return i
        return len(self._stamps)

    def _rewind(self, shards: int) -> None:
        """Keep the first `shards` staged text parts and the sidecar groups within them (and drop
        what a stopped append left after them)."""
        _truncate(self._text, self._text_ends[shards - 1] if shards else 0)
        del self._stamps[shards:], self._text_ends[shards:]
        if self._side is not None:
            groups = sum(1 for g in self._groups[:len(self._side_ends)] if g.stop <= shards)
            _truncate(self._side, self._side_ends[groups - 1] if groups else 0)
            del self._side_ends[groups:]

    def _staged_files_are_ours(self) -> bool:
        """False when another run's clean-up removed the folder while this run held no lock."""
        try:
            return os.stat(self.folder / self._text_name).st_ino == os.fstat(self._text.fileno()).st_ino
        except FileNotFoundError:
            return False

    def finish(self, metas: list[PartMeta]) -> Path | None:
        """The complete version folder (text, sidecar if any part has annotations; no manifest yet),
        moved into `versions/`; None if the staged files are gone or failed (publish starts over).
        The caller holds the dataset lock EXCLUSIVE and `metas` are the current parts'."""
        self._stop()
        if self._failed is not None or self._members.failed is not None or not self._staged_files_are_ours():
            self.discard()
            return None
        self._rewind(self._kept(metas))
        self._metas = list(metas)
        self._append_rest_at_offsets()
        self._advance(checked=False)  # the sidecar groups left
        has_sidecar = any(m.has_annotations for m in metas)
        if not has_sidecar and self._side is not None:
            self._side.close()
            self._side = None
            (self.folder / self._side_name).unlink()
        for fh in (self._text, self._side):
            if fh is not None:
                fh.flush()
                os.fsync(fh.fileno())
                fh.close()
        self._members.discard()  # members built but not used (their files were fed again above)
        version = self.store.versions / self.name
        self.store.versions.mkdir(parents=True, exist_ok=True)
        os.rename(self.folder, version)
        self._done = True
        return version

    def discard(self) -> None:
        """Stop and remove the staged files (nothing after a successful `finish`)."""
        self._stop()
        if self._done:
            return
        self._done = True
        self._members.discard()
        for fh in (self._text, self._side):
            if fh is not None:
                try:
                    fh.close()
                except OSError:
                    pass
        shutil.rmtree(self.folder, ignore_errors=True)
