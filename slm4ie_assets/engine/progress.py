"""Progress of one extraction: a line every few seconds (documents, MB read of MB total, MB/s, ETA)
and one summary table at the end.

Why it looks like this:
- Extraction runs in pool workers (or in the calling process with one worker); only the calling
  process may log, because logging in a pool worker reaches only Dagster's raw compute logs
  (DAGSTER_NOTES 5). So workers publish two numbers per shard (documents written, input bytes read)
  into `ShardCounters` shared with the calling process, and a timer thread there sums them with the
  finished parts and calls the run's `log` (the Dagster context logger).
- Bytes read inside a file are sampled, not reported: a thread in each worker reads the read offset
  of the shard's current input file from `/proc/self/fdinfo` (Linux), where Python file objects and
  libxml2 alike show up, so no extractor has to count anything. Elsewhere (or for inputs read
  through a memory map, or a huggingface config directory) only finished files count; documents
  still come from the part writer's hook. A pass that reads a file twice (a structure scan, then
  the parse) shows the furthest offset reached. A range of a split file counts from its start.
"""

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..extractors.input_file import InputFile
from ..planning.shards import Shard
from ..store.manifest import Manifest
from ..store.part_meta import PartMeta, merged_drops
from ..utils.byte_units import byte_unit, duration, human_bytes, human_rate
from ..utils.byte_units import in_unit as _in_unit

INTERVAL_ENV = "SLM4IE_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 10.0
MIN_INTERVAL = 0.01
Log = Callable[[str], None]
_FD_DIR = "/proc/self/fd"


def progress_interval(setting: float | None = None) -> float:
    """Seconds between progress lines: the run's setting, else $SLM4IE_PROGRESS_SECONDS, else 10."""
    if setting is None:
        raw = os.environ.get(INTERVAL_ENV, "").strip()
        if not raw:
            return DEFAULT_INTERVAL
        try:
            setting = float(raw)
        except ValueError:
            raise ValueError(f"{INTERVAL_ENV}={raw!r} is not a number of seconds") from None
    if not setting >= MIN_INTERVAL:  # also refuses NaN
        raise ValueError(f"the progress interval must be at least {MIN_INTERVAL} s, got {setting}")
    return float(setting)


@dataclass(frozen=True, slots=True)
class ShardCounters:
    """Per task of one `extract_parts` call, the documents written and the input bytes read so far:
    written where the task runs, read by the calling process (its progress lines, its stall watch).
    Pool workers share one array with it (`shared=True`, reaching them through the pool's
    initializer); one worker extracting in the calling process needs only a list."""

    slots: MutableSequence[int]  # two per task, in task order: documents, then input bytes read

    @classmethod
    def for_tasks(cls, tasks: int, shared: bool) -> "ShardCounters":
        return cls(multiprocessing.RawArray("q", 2 * tasks) if shared else [0] * (2 * tasks))

    def docs(self, task: int) -> int:
        return self.slots[2 * task]

    def bytes_read(self, task: int) -> int:
        return self.slots[2 * task + 1]

    def numbers(self, task: int) -> tuple[int, int]:
        """Documents and bytes read together: what a stall watch compares from one look to the next."""
        return self.docs(task), self.bytes_read(task)

    def set_docs(self, task: int, docs: int) -> None:
        self.slots[2 * task] = docs

    def raise_bytes_read(self, task: int, read: int) -> None:
        """Bytes read never go back (a pass that reads a file twice shows the furthest offset)."""
        if read > self.slots[2 * task + 1]:
            self.slots[2 * task + 1] = read


# ----------------------------------------------------------------------------- worker side


def _open_offset(real_path: str) -> int | None:
    """The largest read offset among this process's open descriptors of `real_path`; None when it
    is not open or /proc is unavailable."""
    try:
        fds = os.listdir(_FD_DIR)
    except OSError:
        return None
    best = None
    for fd in fds:
        try:
            if os.readlink(f"{_FD_DIR}/{fd}") != real_path:
                continue
            with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
                pos = int(info.readline().split()[1])  # first line: "pos:\t<offset>"
        except (OSError, ValueError, IndexError):
            continue  # closed meanwhile, or not the expected format
        best = pos if best is None else max(best, pos)
    return best


class _Tracked:
    """The shard one process is extracting, as the sampler sees it."""

    def __init__(self, task: int, shard: Shard):
        self.task, self.shard = task, shard
        self.files_done = 0  # set by the part writer's hook, in the extracting thread
        self._finished_bytes = 0  # bytes of files[:_counted]
        self._counted = 0
        self._real: tuple[int, str | None] | None = None  # (file index, its real path; None: not a file)

    def bytes_read(self) -> int:
        files, done = self.shard.files, min(self.files_done, len(self.shard.files))
        while self._counted < done:
            self._finished_bytes += _size(files[self._counted])
            self._counted += 1
        read = self._finished_bytes
        if done < len(files):
            if self._real is None or self._real[0] != done:
                path = files[done].path  # a directory's offset (huggingface) is a cookie, not bytes
                self._real = (done, os.path.realpath(path) if os.path.isfile(path) else None)
            if self._real[1] is not None:
                file = files[done]  # a range of a split file (docs/splitting.md) is read from its start
                start = file.range.start if file.range is not None else 0
                read += max(0, (_open_offset(self._real[1]) or start) - start)
        return min(read, self.shard.size) if done < len(files) else self.shard.size


def _size(file: InputFile) -> int:
    """Bytes of a finished input file (a range's own length)."""
    if file.range is not None and file.range.end is not None:
        return file.range.end - file.range.start
    try:
        return os.stat(file.path).st_size - (file.range.start if file.range is not None else 0)
    except OSError:
        return 0


class ShardReporter:
    """Publishes, for the shard this process extracts, documents (from the part writer's hook) and
    input bytes read (sampled every `period` s by a daemon thread) into `counters`."""

    def __init__(self, counters: ShardCounters, period: float):
        self._counters, self._period = counters, period
        self._tracked: _Tracked | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def track(self, task: int, shard: Shard) -> Iterator[Callable[[int, int, int], None]]:
        """The part writer's progress hook for `shard`, while it is extracted."""
        tracked = _Tracked(task, shard)
        set_docs = self._counters.set_docs

        def hook(docs: int, text_bytes: int, files_done: int) -> None:
            set_docs(task, docs)
            tracked.files_done = files_done

        self._tracked = tracked
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="slm4ie-progress-sampler", daemon=True)
            self._thread.start()
        try:
            yield hook
        finally:
            self._tracked = None

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            tracked = self._tracked
            if tracked is not None:
                self._counters.raise_bytes_read(tracked.task, tracked.bytes_read())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def sampling_period(interval: float) -> float:
    """Workers sample twice per line, at most once a second: a line is never more than half an
    interval behind, and a 10 s interval costs one /proc read per worker per second."""
    return min(interval / 2, 1.0)


# ----------------------------------------------------------------------------- calling process


@dataclass(frozen=True, slots=True)
class ProgressLine:
    """One progress line of one dataset."""

    dataset: str
    shards_done: int
    shards: int
    docs: int
    read_bytes: int
    total_bytes: int
    seconds: float

    def eta(self) -> str:
        if self.read_bytes <= 0:
            return "unknown"
        return duration((self.total_bytes - self.read_bytes) * self.seconds / self.read_bytes)

    def render(self, final: bool = False) -> str:
        """Bytes in the unit the dataset's size calls for (B, kB, MB, GB); no byte counts for a dataset
        of empty files, and no rate or ETA before anything was read."""
        scale, unit = byte_unit(self.total_bytes)
        counts = f"{self.shards_done} of {self.shards} shards, {self.docs:,} documents"
        if self.total_bytes > 0:
            share = 100 * self.read_bytes / self.total_bytes
            counts = (f"{_in_unit(self.read_bytes, scale)} of {_in_unit(self.total_bytes, scale)} {unit} "
                      f"({share:.0f}%), " + counts)
        rate = f"{_in_unit(round(self.read_bytes / max(self.seconds, 1e-6)), scale)} {unit}/s"
        if final:
            return f"{self.dataset}: done: {counts} in {duration(self.seconds)}" + (
                f" ({rate})" if self.read_bytes > 0 else "")
        if self.read_bytes <= 0:
            return f"{self.dataset}: {counts}, starting"
        return f"{self.dataset}: {counts}, {rate}, ETA {self.eta()}"


class ProgressBoard:
    """The calling process's view of one `extract_parts` call: finished parts plus the live
    counters of running shards, logged every `interval` s by a timer thread and once at the end."""

    def __init__(self, dataset: str, shards: Sequence[Shard], counters: ShardCounters, interval: float, log: Log):
        self._dataset, self._shards, self._counters = dataset, shards, counters
        self._interval, self._log = interval, log
        self._total = sum(s.size for s in shards)
        self._done: dict[int, PartMeta] = {}
        self._lock = threading.Lock()
        self._shown = 0  # bytes of the last line: lines never go backwards
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slm4ie-progress", daemon=True)

    def __enter__(self) -> "ProgressBoard":
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            self._log(self.snapshot().render(final=True))

    def part_done(self, task: int, meta: PartMeta) -> None:
        with self._lock:
            self._done[task] = meta

    def _run(self) -> None:
        # deadlines from the start, so the time a log call takes (an event-log write) adds no drift
        next_at = self._started + self._interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._log(self.snapshot().render())
            next_at = max(next_at + self._interval, time.monotonic())

    def snapshot(self) -> ProgressLine:
        with self._lock:
            done = dict(self._done)
        docs = sum(m.docs for m in done.values())
        read = sum(self._shards[t].size for t in done)
        for task, shard in enumerate(self._shards):
            if task not in done:
                docs += self._counters.docs(task)
                read += min(self._counters.bytes_read(task), shard.size)
        read = self._shown = max(self._shown, min(read, self._total))
        return ProgressLine(self._dataset, len(done), len(self._shards), docs, read, self._total,
                            time.monotonic() - self._started)


# ----------------------------------------------------------------------------- summary


def summary_table(dataset: str, parts: Sequence[PartMeta], manifest: Manifest | None, seconds: float) -> str:
    """The end-of-run table: what this run extracted and, after a publish, what is published."""
    run_docs = sum(m.docs for m in parts)
    in_bytes = sum(m.input_bytes for m in parts)
    rows: list[tuple[str, str, str]] = [
        ("shards", f"{len(parts):,}", f"{len(manifest.shards):,}" if manifest else ""),
        ("documents", f"{run_docs:,}", f"{manifest.docs:,}" if manifest else ""),
        ("annotated", _share(sum(m.annotated_docs for m in parts), run_docs),
         _share(manifest.annotated_docs, manifest.docs) if manifest else ""),
        ("tokens", f"{sum(m.tokens for m in parts):,}", f"{manifest.tokens:,}" if manifest else ""),
        ("input", human_bytes(in_bytes), ""),
        ("text", human_bytes(sum(m.text_bytes for m in parts)), human_bytes(manifest.text_bytes) if manifest else ""),
        ("sidecar", "", human_bytes(manifest.sidecar_bytes) if manifest else ""),
        ("input rate", human_rate(in_bytes, seconds), ""),
        ("seconds", f"{seconds:.1f}", ""),
    ]
    run_drops, published_drops = merged_drops(parts), manifest.drops if manifest else {}
    for reason in [*run_drops, *(r for r in published_drops if r not in run_drops)]:
        rows.append((f"dropped: {reason}", f"{run_drops.get(reason, 0):,}",
                     f"{published_drops.get(reason, 0):,}" if manifest else ""))
    if not run_drops and not published_drops:
        rows.append(("dropped", "0", "0" if manifest else ""))
    rows.append(("duplicate uids", "", f"{manifest.duplicate_uids:,}" if manifest else ""))
    return f"{dataset}: run summary\n" + _format_rows([("", "this run", "published" if manifest else "")] + rows)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _format_rows(rows: list[tuple[str, str, str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [f"  {label:<{widths[0]}}  {run:>{widths[1]}}  {pub:>{widths[2]}}".rstrip() for label, run, pub in rows]
    return "\n".join(lines)
