"""One unpacking pass over raw/<key>/: find the archives, unpack each one that is new or changed,
then the archives that came out of them, until nothing new appears (D16, S14)."""

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..catalog import ArchiveLimits
from ..extractors.discovery import escaped_name, sort_key
from ..utils.byte_units import duration, human_bytes, human_rate
from ..utils.fswalk import walk
from .errors import ArchiveError, BudgetExceeded, SkipArchive
from .formats import unpack_into
from .names import ArchiveKind, archive_kind, is_temp_name
from .outputs import forget_vanished, is_current, remove_stale
from .staging import Budget, Staging
from .state import (
    ArchiveEntry,
    ArchiveReport,
    ArchiveState,
    FailureRecord,
    OutputStamp,
    SkippedArchive,
    load_state,
    save_state,
)

Log = Callable[[str], None]

MAX_ROUNDS = 32  # nesting depth; a deeper chain is taken for archives that recreate each other
SAVE_EVERY = 30.0  # seconds between intermediate state-file saves
_DEFAULT_LIMITS = ArchiveLimits()


@dataclass(slots=True)
class _Root:
    """A raw archive (one no other archive produced) and the budget every archive unpacked from
    it, at any depth, is charged to (issue 34: nesting must not multiply the limits)."""

    rel: str
    st: os.stat_result
    budget: Budget
    refused: bool = False  # the budget was breached: what is left of its tree is not unpacked


def unpack_archives(raw_dir: Path, state_file: Path, limits: ArchiveLimits = _DEFAULT_LIMITS,
                    log: Log | None = None) -> ArchiveReport:
    """Unpack every archive under `raw_dir` that is new or changed, nested ones included (D16, S14).

    Paths in the report are posix, relative to raw_dir. Raises ArchiveError for an unsafe archive;
    what was unpacked before it stays (and is recorded).
    """
    return _Run(Path(raw_dir), Path(state_file), limits, log).run()


def _old_budget_refusal(reason: str) -> bool:
    """A state file written before budgets were per root recorded a bomb as a refusal (the dataset
    failed); it is a skip now, like a bomb found today."""
    return ": unpacks to more than " in reason or " members (limit archives.max_members;" in reason


class _Run:
    def __init__(self, raw_dir: Path, state_file: Path, limits: ArchiveLimits, log: Log | None):
        self.raw_dir = raw_dir
        self.state_file = state_file
        self.limits = limits
        self._log = log
        self.report = ArchiveReport()
        self.state = ArchiveState()
        self._dirty = False
        self._seen: set[tuple[str, int, int]] = set()
        self._written_by: dict[str, str] = {}  # output -> archive that wrote it in this run
        self._claims: dict[str, str] = {}  # output -> an archive whose recorded outputs hold it
        self._root_of: dict[str, _Root] = {}  # archive produced in this run -> its root
        self._last_save = time.monotonic()

    # -- reporting

    def where(self, rel: str) -> str:
        return f"{self.raw_dir.name}/{rel}"

    def warn(self, message: str) -> None:
        message = escaped_name(message)  # a name that is not UTF-8 is shown with \xNN escapes
        self.report.warnings.append(message)
        if self._log is not None:
            self._log(f"WARNING {message}")

    def info(self, message: str) -> None:
        if self._log is not None:
            self._log(escaped_name(message))

    # -- the loop

    def run(self) -> ArchiveReport:
        self.state = load_state(self.state_file, self.warn)
        self._claims = {out: rel for rel, entry in self.state.archives.items() for out in entry.outputs}
        todo = self._scan()  # a raw folder that cannot be listed fails here, before the state is touched
        try:
            rounds = 0
            while todo:
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise ArchiveError(f"{self.raw_dir.name}: archives still produce new archives after "
                                       f"{MAX_ROUNDS} rounds (archives that recreate each other?): "
                                       f"{', '.join(todo[:5])}")
                produced: list[str] = []
                for rel in todo:
                    produced.extend(self._handle(rel))
                    if self._dirty and time.monotonic() - self._last_save >= SAVE_EVERY:
                        self._save_state()
                todo = sorted(set(produced), key=sort_key)
        finally:
            if forget_vanished(self.raw_dir, self.state, {rel for rel, _, _ in self._seen}):
                self._dirty = True
            if self._dirty or not self.state_file.exists():
                self._save_state()
        r = self.report
        if r.unpacked or r.skipped:
            self.info(f"{self.raw_dir.name}: archives: {len(r.unpacked)} unpacked, "
                      f"{len(r.up_to_date)} up to date, {len(r.skipped)} skipped")
        return r

    def _save_state(self) -> None:
        save_state(self.state_file, self.state)
        self._dirty = False
        self._last_save = time.monotonic()

    def _scan(self) -> list[str]:
        """Every archive in the tree (hidden folders included, linked ones not entered); leftover
        temporary files of an interrupted run are removed on the way."""
        found: list[str] = []
        for item in walk(self.raw_dir, self._unlistable):
            entry = item.entry
            if item.type_error is not None:
                continue
            try:
                if entry.is_symlink():
                    if archive_kind(entry.name):
                        self.warn(f"{self.where(item.rel)}: a symbolic link to an archive is not followed, "
                                  f"so it is not unpacked (put the archive itself in the folder)")
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if is_temp_name(entry.name):
                self._remove_leftover(item.rel, entry.path)
            elif archive_kind(entry.name):
                found.append(item.rel)
        return sorted(found, key=sort_key)

    def _unlistable(self, folder: str, exc: OSError) -> None:
        if not folder:
            raise exc
        self.warn(f"{self.where(folder)}: folder cannot be listed, archives in it are "
                  f"not unpacked: {exc.strerror or exc}")

    def _remove_leftover(self, rel: str, path: str) -> None:
        try:
            os.unlink(path)
            self.warn(f"{self.where(rel)}: removed a temporary file left by an interrupted run")
        except OSError as exc:
            self.warn(f"{self.where(rel)}: cannot remove a leftover temporary file: {exc.strerror}")

    # -- one archive

    def _handle(self, rel: str) -> list[str]:
        """Unpack one archive unless it is current; returns the archives among its new outputs."""
        path = self.raw_dir / rel
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return []
        if not stat.S_ISREG(st.st_mode):
            return []
        fingerprint = (rel, st.st_size, st.st_mtime_ns)
        if fingerprint in self._seen:
            return []
        self._seen.add(fingerprint)
        previous = self.state.archives.get(rel)
        if previous is not None and is_current(self.raw_dir, previous, st):
            self.report.up_to_date.append(rel)
            self.report.outputs[rel] = list(previous.outputs)
            self._count_duplicates(rel, previous.dropped)
            return []
        if self._replay_failure(rel, st):
            return []
        kind = archive_kind(path.name)
        assert kind is not None  # only archive names are scanned or produced
        root = self._root_for(rel, st)
        if root.refused:
            return []
        started = time.monotonic()
        try:
            outputs, duplicates = self._unpack(path, rel, kind, st.st_size, root.budget)
        except SkipArchive as exc:
            if isinstance(exc, BudgetExceeded) and root.rel != rel:
                self._refuse_root(root, str(exc))
                return []
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=False)
            self._skipped(rel, str(exc))
            return []
        except ArchiveError as exc:
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=True)
            raise
        self._log_speed(rel, outputs, time.monotonic() - started)
        self._record(rel, st, previous, outputs, duplicates)
        self._count_duplicates(rel, duplicates)
        inner = [out for out in outputs if archive_kind(out.rpartition("/")[2])]
        self._root_of.update((out, root) for out in inner)
        return inner

    # -- one budget per root archive (D16, issue 34)

    def _root_for(self, rel: str, st: os.stat_result) -> _Root:
        """The root whose budget unpacking `rel` is charged to: the one that produced it in this
        run; else, for an archive an earlier run unpacked from another, that one's root, charged
        with what the rest of its tree holds (as recorded); else `rel` itself."""
        known = self._root_of.get(rel)
        if known is not None:
            return known
        top, seen = rel, {rel}
        while (parent := self._claims.get(top)) is not None and parent not in seen:
            seen.add(parent)
            top = parent
        if top == rel:
            return _Root(rel, st, self._budget(st.st_size, rel))
        try:
            top_st = os.lstat(self.raw_dir / top)
        except OSError:
            return _Root(rel, st, self._budget(st.st_size, rel))
        budget = self._budget(top_st.st_size, top)
        budget.written, budget.members = self._recorded_usage(top, rel)
        return _Root(top, top_st, budget)

    def _recorded_usage(self, top: str, exclude: str) -> tuple[int, int]:
        """Bytes and files the state records for the tree of archive `top`, without the subtree
        of `exclude` (unpacked again now, so charged as it is written)."""
        written = files = 0
        stack, seen = [top], {exclude}
        while stack:
            rel = stack.pop()
            entry = self.state.archives.get(rel)
            if rel in seen or entry is None:
                continue
            seen.add(rel)
            for out, stamp in entry.outputs.items():
                written += stamp.size
                files += 1
                stack.append(out)
        return written, files

    def _refuse_root(self, root: _Root, reason: str) -> None:
        """An archive inside `root` breached the root's budget: skip the root (`bad_archive`,
        remembered while it and the limits are unchanged) and remove what its tree produced, in
        this run or before, so nothing of it is left to extract."""
        root.refused = True
        self._seen.add((root.rel, root.st.st_size, root.st.st_mtime_ns))  # not handled again in this run
        gone = {root.rel}
        entry = self.state.archives.pop(root.rel, None)
        if entry is not None:
            stale = remove_stale(self.raw_dir, self.state.archives, root.rel, entry.outputs, {})
            gone.update(stale.removed)
            if stale.kept:
                self.warn(f"{self.where(root.rel)}: {len(stale.kept)} file(s) it produced were changed since "
                          f"and are left in place: {', '.join(sorted(stale.kept)[:5])}")
        self._remember_failure(root.rel, root.st, reason, refused=False)
        r = self.report
        r.unpacked = [rel for rel in r.unpacked if rel not in gone]
        r.up_to_date = [rel for rel in r.up_to_date if rel not in gone]
        for rel in gone:
            r.outputs.pop(rel, None)
        self._skipped(root.rel, reason)

    def _replay_failure(self, rel: str, st: os.stat_result) -> bool:
        """The same bytes failed before: say so again without reading (and, for a bomb, writing) them."""
        failure = self.state.failed.get(rel)
        if failure is None or failure.key != self._failure_key(st):
            return False
        if failure.refused and not _old_budget_refusal(failure.reason):
            raise ArchiveError(f"{failure.reason} (unchanged since it was refused)")
        self._skipped(rel, failure.reason, " (unchanged since the last try)")
        return True

    def _skipped(self, rel: str, reason: str, note: str = "") -> None:
        self.report.skipped.append(SkippedArchive(rel, reason))
        self.warn(f"{self.where(rel)}: skipped, {reason}{note}")
        self.report.drops.append(escaped_name(f"{self.where(rel)}: archive skipped, {reason} [bad_archive]"))

    def _count_duplicates(self, rel: str, duplicates: tuple[str, ...]) -> None:
        self.report.drops.extend(escaped_name(f"{self.where(rel)}: {message} [duplicate_member]")
                                 for message in duplicates)

    def _failure_key(self, st: os.stat_result) -> tuple:
        """What must stay the same for a failure to hold: the archive (its ctime too, so a chmod
        retries an unreadable one) and the limits."""
        return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, self.limits.max_ratio, self.limits.max_bytes,
                self.limits.max_members)

    def _remember_failure(self, rel: str, st: os.stat_result, reason: str, refused: bool) -> None:
        self.state.failed[rel] = FailureRecord(self._failure_key(st), refused, reason)
        self._dirty = True

    def _unpack(self, path: Path, rel: str, kind: ArchiveKind, size: int,
                budget: Budget) -> tuple[dict[str, OutputStamp], tuple[str, ...]]:
        """The archive's outputs, committed, and its members a later copy replaced."""
        where = self.where(rel)
        if size == 0:
            raise SkipArchive("the file is empty (0 bytes)")
        staging = Staging(path, rel.rpartition("/")[0], where, budget, self.warn, self._log)
        self.info(f"{where}: unpacking ({human_bytes(size)})")
        try:
            unpack_into(path, kind, staging, where)
            return staging.commit(), tuple(staging.duplicates)
        except BaseException:
            staging.rollback()
            raise

    def _budget(self, size: int, root: str) -> Budget:
        """A fresh budget for the root archive `root` of `size` bytes."""
        by_ratio = int(self.limits.max_ratio * size)
        members, where = self.limits.max_members, self.where(root)
        if by_ratio < self.limits.max_bytes:
            return Budget(by_ratio, f"max_ratio {self.limits.max_ratio:g} x {size:,} root archive bytes",
                          members, where)
        return Budget(self.limits.max_bytes, f"max_bytes {self.limits.max_bytes:,}", members, where)

    def _log_speed(self, rel: str, outputs: dict[str, OutputStamp], seconds: float) -> None:
        total = sum(stamp.size for stamp in outputs.values())
        self.info(f"{self.where(rel)}: unpacked {len(outputs)} file(s), {human_bytes(total)} in {duration(seconds)} "
                  f"({human_rate(total, seconds)})")

    # -- what an unpacked archive changes

    def _record(self, rel: str, st: os.stat_result, previous: ArchiveEntry | None,
                outputs: dict[str, OutputStamp], duplicates: tuple[str, ...] = ()) -> None:
        if self.state.failed.pop(rel, None) is not None:
            self._dirty = True
        self.state.archives[rel] = ArchiveEntry(st.st_size, st.st_mtime_ns, outputs, duplicates)
        self._dirty = True
        if rel in self.report.up_to_date:  # rewritten by another archive after it was checked
            self.report.up_to_date.remove(rel)
        if rel not in self.report.unpacked:
            self.report.unpacked.append(rel)
        self.report.outputs[rel] = list(outputs)
        self._note_overlaps(rel, outputs)
        if previous is not None:
            self._remove_stale(rel, previous.outputs, outputs)

    def _note_overlaps(self, rel: str, outputs: dict[str, OutputStamp]) -> None:
        clashes = []
        for out in outputs:
            other = self._written_by.get(out) or self._claims.get(out)
            if other is not None and other != rel:
                other_entry = self.state.archives.get(other)
                if other_entry is not None and out in other_entry.outputs:
                    clashes.append((out, other))
            self._written_by[out] = rel
            self._claims[out] = rel
        if clashes:
            shown = ", ".join(f"{out} (also from {other})" for out, other in clashes[:3])
            more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
            self.warn(f"{self.where(rel)}: overwrote files another archive also produces: {shown}{more}; "
                      f"the archives will keep replacing each other's copy")

    def _remove_stale(self, rel: str, old: dict[str, OutputStamp], new: dict[str, OutputStamp]) -> None:
        stale = remove_stale(self.raw_dir, self.state.archives, rel, old, new)
        if stale.state_changed:
            self._dirty = True
        if stale.removed:
            self.warn(f"{self.where(rel)}: removed {len(stale.removed)} file(s) that an earlier version of the "
                      f"archive produced and this one does not: {', '.join(sorted(stale.removed)[:5])}"
                      f"{' ...' if len(stale.removed) > 5 else ''}")
        if stale.kept:
            self.warn(f"{self.where(rel)}: {len(stale.kept)} file(s) from an earlier version of the archive were "
                      f"changed since and are left in place: {', '.join(sorted(stale.kept)[:5])}")
