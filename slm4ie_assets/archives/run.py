"""One unpacking pass over raw/<key>/: read back what a killed run intended, find the archives,
unpack each one that is new or changed, then the archives that came out of them, until nothing new
appears (D16, S14)."""

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from ..catalog import ArchiveLimits
from ..extractors.discovery import escaped_name, sort_key
from ..utils.byte_units import duration, human_bytes, human_rate
from ..utils.fswalk import walk
from .errors import ArchiveError, RefusesRoot, SkipArchive, WouldReplace, WriteFailure
from .formats import unpack_into
from .journal import Intent, Journal, journal_path, read_journal
from .names import ArchiveKind, archive_kind, is_temp_name
from .outputs import (
    StaleOutputs,
    forget_vanished,
    interrupted_entry,
    is_current,
    remove_stale,
    resolve_intent,
    same_version,
    withdraw,
)
from .ownership import Owners, blocker_of, still_blocks
from .roots import MAX_ROUNDS, Root, Roots
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

SAVE_EVERY = 30.0  # seconds between intermediate state-file saves
_DEFAULT_LIMITS = ArchiveLimits()


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
        self.owners = Owners(raw_dir, self.state.archives)  # both replaced once the state is read
        self.roots = Roots(raw_dir, limits, self.state.archives, self.owners)
        self._journal = Journal(journal_path(state_file))
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
        todo = self._scan()  # a raw folder that cannot be listed fails here, before the state is touched
        self._recover()  # a failure here keeps the journal, to be read again next time
        self.owners = Owners(self.raw_dir, self.state.archives)
        self.roots = Roots(self.raw_dir, self.limits, self.state.archives, self.owners)
        # roots first: an inner archive whose root is unpacked again is then charged to the budget
        # that root spends now, not beside it
        todo.sort(key=lambda rel: (len(self.roots.chain(rel)), sort_key(rel)))
        try:
            # each round is one level deeper; an archive MAX_ROUNDS deep is refused, not unpacked
            while todo:
                produced: list[str] = []
                for rel in todo:
                    produced.extend(self._handle(rel))
                    if self._dirty and time.monotonic() - self._last_save >= SAVE_EVERY:
                        self._save_state()
                todo = sorted(set(produced), key=sort_key)
        finally:
            try:
                if forget_vanished(self.raw_dir, self.state, {rel for rel, _, _ in self._seen}):
                    self._dirty = True
                if self._dirty or not self.state_file.exists():
                    self._save_state()
            finally:
                self._journal.close()
        r = self.report
        if r.unpacked or r.skipped:
            self.info(f"{self.raw_dir.name}: archives: {len(r.unpacked)} unpacked, "
                      f"{len(r.up_to_date)} up to date, {len(r.skipped)} skipped")
        return r

    def _save_state(self) -> None:
        """Save the state, which holds every intent of the journal, then remove the journal."""
        if self._journal.name:
            self.state.journal = self._journal.name
        save_state(self.state_file, self.state)
        self._journal.remove()
        self._dirty = False
        self._last_save = time.monotonic()

    def _recover(self) -> None:
        """Read back the intents of a run killed before it saved the state: each archive's record
        then holds what it renamed into place (or, half done, both versions, to unpack again)."""
        name, intents = read_journal(self._journal.path, self.state.journal, self.warn)
        for intent in intents:
            stale = resolve_intent(self.raw_dir, self.state.archives, intent)
            if stale is not None:
                self._warn_stale(intent.archive, stale)
        if intents:
            self.info(f"{self.raw_dir.name}: read back what an interrupted run was unpacking "
                      f"({len(intents)} archive(s))")
            self.state.journal = name
            self._dirty = True
            self._save_state()  # the state holds the intents now: the journal goes
        else:
            self._journal.remove()  # none, one the state holds already, or one cut short

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
        root, depth = self.roots.of(rel, st)
        if root.refused:
            return []
        if depth >= MAX_ROUNDS:
            self._refuse_root(root, f"holds archives nested more than {MAX_ROUNDS} deep (reached at "
                                    f"{self.where(rel)}; archives that hold each other?)")
            return []
        if previous is not None and same_version(previous, st):
            previous = self._withdraw(rel, previous)
        started = time.monotonic()
        try:
            entry = self._unpack(path, rel, kind, st, root.budget, previous)
        except SkipArchive as exc:
            blocker = exc.blocker if isinstance(exc, WouldReplace) else None
            if isinstance(exc, RefusesRoot) and root.rel != rel:
                self._refuse_root(root, str(exc), blocker)
                return []
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=False, blocker=blocker)
            self._skipped(rel, str(exc))
            return []
        except ArchiveError as exc:
            if exc.about_archive:
                self._remember_failure(rel, st, str(exc), refused=True)
            raise
        self._log_speed(rel, entry.outputs, time.monotonic() - started)
        self._record(rel, previous, entry)
        self._count_duplicates(rel, entry.dropped)
        inner = [out for out in entry.outputs if archive_kind(out.rpartition("/")[2])]
        self.roots.produced(inner, root, depth)
        return inner

    def _refuse_root(self, root: Root, reason: str, blocker: str | None = None) -> None:
        """Something inside `root` refuses it (its budget breached, a member over somebody's file,
        nesting too deep): skip the root (`bad_archive`, remembered while it and the limits are
        unchanged) and remove what its tree produced, in this run or before, as recorded, so
        nothing of it is left to extract; files it found in place or that were changed since stay."""
        root.refused = True
        self._seen.add((root.rel, root.st.st_size, root.st.st_mtime_ns))  # not handled again in this run
        gone = {root.rel}
        entry = self.state.archives.pop(root.rel, None)
        if entry is not None:
            stale = remove_stale(self.raw_dir, self.state.archives, root.rel, entry, {})
            gone.update(stale.removed)
            self._warn_left(root.rel, stale, "it produced")
        self._remember_failure(root.rel, root.st, reason, refused=False, blocker=blocker)
        r = self.report
        r.unpacked = [rel for rel in r.unpacked if rel not in gone]
        r.up_to_date = [rel for rel in r.up_to_date if rel not in gone]
        for rel in gone:
            r.outputs.pop(rel, None)
        self._skipped(root.rel, reason)

    def _withdraw(self, rel: str, entry: ArchiveEntry) -> ArchiveEntry | None:
        """The same version of `rel` is unpacked again (a kill, an output lost or changed): what it
        produced goes first, as recorded, so its old tree never stands beside the new one uncharged
        by the root's budget (issue 39). Returns what its record still claims."""
        removed = withdraw(self.raw_dir, self.state.archives, rel, entry).removed
        self._dirty = True
        if removed:
            self.info(f"{self.where(rel)}: removed {len(removed)} file(s) it produced before, to unpack it again")
        return self.state.archives.get(rel)

    def _replay_failure(self, rel: str, st: os.stat_result) -> bool:
        """The same bytes failed before: say so again without reading (and, for a bomb, writing) them."""
        failure = self.state.failed.get(rel)
        if failure is None or failure.key != self._failure_key(st):
            return False
        if failure.blocker is not None and not still_blocks(self.raw_dir, failure.blocker):
            return False  # the file in the member's way was moved or changed: try again
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

    def _remember_failure(self, rel: str, st: os.stat_result, reason: str, refused: bool,
                          blocker: str | None = None) -> None:
        stands = blocker_of(self.raw_dir, blocker) if blocker is not None else None
        self.state.failed[rel] = FailureRecord(self._failure_key(st), refused, reason, stands)
        self._dirty = True

    def _unpack(self, path: Path, rel: str, kind: ArchiveKind, st: os.stat_result, budget: Budget,
                previous: ArchiveEntry | None) -> ArchiveEntry:
        """The archive's record, its outputs committed: staged, written down as an intent, then
        renamed into place."""
        where = self.where(rel)
        if st.st_size == 0:
            raise SkipArchive("the file is empty (0 bytes)")
        staging = Staging(path, rel.rpartition("/")[0], where, budget, self.warn, self._log, self.owners)
        self.info(f"{where}: unpacking ({human_bytes(st.st_size)})")
        try:
            unpack_into(path, kind, staging, where)
            outputs, found = staging.staged()
            entry = ArchiveEntry(st.st_size, st.st_mtime_ns, outputs, tuple(staging.duplicates), found)
            self._intend(rel, previous, entry)
            staging.commit()
            return entry
        except BaseException:
            staging.rollback()
            raise

    def _intend(self, rel: str, previous: ArchiveEntry | None, entry: ArchiveEntry) -> None:
        """Before the first rename: the intent on disk, and a record that claims both versions'
        outputs (what a failure among the renames leaves is then still known)."""
        try:
            self._journal.append(Intent(rel, entry))
        except OSError as exc:
            raise WriteFailure(exc.errno, f"{self.where(rel)}: cannot write the archive intents "
                                          f"{self._journal.path}: {exc.strerror}") from exc
        self._note_overlaps(rel, entry.outputs)
        self.state.archives[rel] = interrupted_entry(self.raw_dir, previous, entry)
        self.owners.claim(rel, entry.outputs)
        self._dirty = True

    def _log_speed(self, rel: str, outputs: dict[str, OutputStamp], seconds: float) -> None:
        total = sum(stamp.size for stamp in outputs.values())
        self.info(f"{self.where(rel)}: unpacked {len(outputs)} file(s), {human_bytes(total)} in {duration(seconds)} "
                  f"({human_rate(total, seconds)})")

    # -- what an unpacked archive changes

    def _record(self, rel: str, previous: ArchiveEntry | None, entry: ArchiveEntry) -> None:
        if self.state.failed.pop(rel, None) is not None:
            self._dirty = True
        self.state.archives[rel] = entry
        self._dirty = True
        if rel in self.report.up_to_date:  # rewritten by another archive after it was checked
            self.report.up_to_date.remove(rel)
        if rel not in self.report.unpacked:
            self.report.unpacked.append(rel)
        self.report.outputs[rel] = list(entry.outputs)
        if previous is not None:
            self._remove_stale(rel, previous, entry.outputs)

    def _note_overlaps(self, rel: str, outputs: dict[str, OutputStamp]) -> None:
        clashes = []
        for out in outputs:
            other = self._written_by.get(out) or self.owners.owner(out)
            if other is not None and other != rel:
                other_entry = self.state.archives.get(other)
                if other_entry is not None and out in other_entry.outputs:
                    clashes.append((out, other))
            self._written_by[out] = rel
        if clashes:
            shown = ", ".join(f"{out} (also from {other})" for out, other in clashes[:3])
            more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
            self.warn(f"{self.where(rel)}: overwrote files another archive also produces: {shown}{more}; "
                      f"the archives will keep replacing each other's copy")

    def _remove_stale(self, rel: str, old: ArchiveEntry, new: dict[str, OutputStamp]) -> None:
        self._warn_stale(rel, remove_stale(self.raw_dir, self.state.archives, rel, old, new))

    def _warn_stale(self, rel: str, stale: StaleOutputs) -> None:
        if stale.state_changed:
            self._dirty = True
        if stale.removed:
            self.warn(f"{self.where(rel)}: removed {len(stale.removed)} file(s) that an earlier version of the "
                      f"archive produced and this one does not: {', '.join(sorted(stale.removed)[:5])}"
                      f"{' ...' if len(stale.removed) > 5 else ''}")
        self._warn_left(rel, stale, "from an earlier version of the archive")

    def _warn_left(self, rel: str, stale: StaleOutputs, whose: str) -> None:
        if stale.kept:
            self.warn(f"{self.where(rel)}: {len(stale.kept)} file(s) {whose} were changed since and are left "
                      f"in place: {', '.join(sorted(stale.kept)[:5])}")
        if stale.found:
            self.warn(f"{self.where(rel)}: {len(stale.found)} file(s) that were in place before the archive was "
                      f"unpacked (no archive wrote them) are left: {', '.join(sorted(stale.found)[:5])}")
