"""A lease on one dataset in any Store, so that two runs never interleave their writes where no
`flock` reaches (a bucket; docs/guarantees.md, "On a bucket").

The lease is a sequence of generations, `.slm4ie/<key>/lease/<generation:012d>.json`. The run that
creates the newest generation (create-only: exactly one of two creators wins) holds the lease; it
rewrites its record every ttl/3 with a conditional write on the tag it last saw, and a newer
generation or a changed tag means it has lost the lease. Nobody ever deletes or rewrites the newest
generation but its holder, so breaking a lease needs no conditional delete: a waiter breaks it by
creating the next generation, once the holder is judged gone (see `_why_breakable`), and a store
whose delete cannot be conditional (a disk checks and unlinks in two steps) is as safe as one that can.

Timing, without trusting other hosts' clocks: the holder counts the lease valid until ttl * 5/6 after
the start of its last confirmed write, by its own monotonic clock, and once it lapses it never holds
again; a waiter breaks only a record it has seen unchanged for a whole ttl by its own clock, or one
whose `expires_at` passed more than a ttl ago (clocks agreeing within a ttl), or one whose holder is a
process of this host that is gone. So a killed run on this host costs nothing, and a lost host costs
one ttl after a waiter saw its last renewal, two at most (60 s by default, `$SLM4IE_LEASE_TTL`).
"""

from __future__ import annotations

import io
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

import orjson

from ..storage.base import AlreadyExists, Store, StoredObject, StoreError, TagMismatch
from ..utils.json_record import record_from_json
from .locks import DEFAULT_TIMEOUT

TTL_ENV = "SLM4IE_LEASE_TTL"
DEFAULT_TTL = 60.0
_VALID_PART = 5 / 6  # of the ttl after a confirmed write: the holder's margin for drift and a slow write
_GENERATION = re.compile(r"^(\d{12})\.json$")

Log = Callable[[str], None]


def ttl_from_env() -> float:
    """The lease's time to live: 60 s, or $SLM4IE_LEASE_TTL seconds (what a lost host costs)."""
    raw = os.environ.get(TTL_ENV, "").strip()
    value = float(raw) if re.fullmatch(r"\d+(\.\d*)?", raw) else (DEFAULT_TTL if not raw else -1.0)
    if not value > 0:
        raise ValueError(f"{TTL_ENV}={raw!r}: expected the lease's time to live in seconds, a number > 0")
    return value


class LeaseTimeout(TimeoutError):
    """Another run held the lease for longer than this run would wait; the message names the lease
    object and its holder."""


class LeaseLost(RuntimeError):
    """This run's lease was taken over or not renewed in time: it must not commit anything more."""


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds a lease: enough for a message, and for a run on the same host to tell it is gone."""

    host: str
    pid: int
    run_id: str
    process: str  # "<boot id>/<pid namespace inode>/<start ticks>"; "" where /proc cannot tell

    @classmethod
    def here(cls, run_id: str) -> LeaseHolder:
        return cls(socket.gethostname(), os.getpid(), run_id, _process_identity(os.getpid()))

    def gone_from_here(self) -> bool:
        """Recorded by a process of this host, boot and pid namespace that no longer runs (a pid
        reused since has another start time)."""
        if not self.process or self.host != socket.gethostname():
            return False
        scope = _scope()
        return bool(scope) and self.process.rsplit("/", 1)[0] == scope and _process_identity(self.pid) != self.process

    def __str__(self) -> str:
        return f"run {self.run_id} (pid {self.pid} on {self.host})"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One generation's object (field order = key order)."""

    holder: LeaseHolder
    generation: int
    ttl: float
    taken_at: str  # UTC, for people
    expires_at: float  # epoch seconds by the holder's clock: renewed with every write
    released: bool = False

    def to_json(self) -> bytes:
        return orjson.dumps(self, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> LeaseRecord:
        return record_from_json(cls, orjson.loads(data), {"holder": lambda v: record_from_json(LeaseHolder, v, {})})


@dataclass(slots=True)
class _Watch:
    """What a waiter saw of the newest generation, and since when by its own clock."""

    name: str = ""
    tag: str = ""
    since: float = 0.0


class Lease:
    """`with Lease(store, key):` waits for, takes, renews and finally releases the dataset's lease.
    `held` and `check()` say whether this run may still commit."""

    def __init__(self, store: Store, key: str, *, ttl: float | None = None, timeout: float = DEFAULT_TIMEOUT,
                 poll: float | None = None, run_id: str | None = None, log: Log | None = None) -> None:
        self.store, self.key = store, key
        self.folder = f".slm4ie/{key}/lease/"
        self.ttl = ttl_from_env() if ttl is None else ttl
        self.timeout, self.log = timeout, log
        self.poll = min(1.0, self.ttl / 6) if poll is None else poll
        self.holder = LeaseHolder.here(run_id or uuid.uuid4().hex[:12])
        self._mutex = threading.Lock()
        self._record: LeaseRecord | None = None
        self._tag = ""
        self._confirmed = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def where(self, generation: int | None = None) -> str:
        gen = self._record.generation if generation is None and self._record else generation
        return f"{self.store.url.rstrip('/')}/{self._name(gen) if gen is not None else self.folder}"

    def _name(self, generation: int) -> str:
        return f"{self.folder}{generation:012d}.json"

    @property
    def generation(self) -> int | None:
        return None if self._record is None else self._record.generation

    @property
    def held(self) -> bool:
        with self._mutex:
            if self._record is None or self._lost is not None:
                return False
            if time.monotonic() >= self._confirmed + self.ttl * _VALID_PART:
                self._lost = f"not renewed within {self.ttl * _VALID_PART:.0f}s"
                return False
            return True

    def check(self) -> None:
        """Raise LeaseLost unless this run still holds the lease (called right before each commit)."""
        if not self.held:
            raise LeaseLost(f"{self.key}: this run ({self.holder}) no longer holds the lease {self.where()}: "
                            f"{self._lost or 'never taken'}; it stops before committing anything more")

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        watch, announced = _Watch(), False
        while True:
            newest = self._newest()
            if newest is None:
                if self._take(1):
                    return
                continue
            obj, record = newest
            generation = int(_GENERATION.match(obj.name[len(self.folder):]).group(1))  # type: ignore[union-attr]
            if self._why_breakable(obj, record, watch) is not None and self._take(generation + 1):
                return
            holder = str(record.holder) if record else "an unreadable record"
            if not announced and self.log is not None:
                self.log(f"{self.key}: another run holds the lease {self.where(generation)} ({holder}); waiting")
                announced = True
            if time.monotonic() >= deadline:
                raise LeaseTimeout(f"{self.key}: gave up after {self.timeout:.0f}s waiting for the lease "
                                   f"{self.where(generation)} held by {holder}")
            time.sleep(self.poll)

    def _newest(self) -> tuple[StoredObject, LeaseRecord | None] | None:
        """The newest generation's object and record (None: no generation yet)."""
        while True:
            found = [o for o in self.store.list(self.folder) if _GENERATION.match(o.name[len(self.folder):])]
            if not found:
                return None
            obj = found[-1]
            try:
                data = self.store.read_range(obj.name, 0, obj.size)
            except FileNotFoundError:
                continue  # removed between the listing and the read: only an older one is ever removed
            try:
                return obj, LeaseRecord.from_json(data)
            except (ValueError, KeyError, TypeError):
                return obj, None

    def _why_breakable(self, obj: StoredObject, record: LeaseRecord | None, watch: _Watch) -> str | None:
        """Why the newest generation no longer protects its holder, or None while it does."""
        now = time.monotonic()
        if (watch.name, watch.tag) != (obj.name, obj.tag):
            watch.name, watch.tag, watch.since = obj.name, obj.tag, now
        if record is not None:
            if record.released:
                return "released"
            if record.holder.gone_from_here():
                return f"{record.holder} is gone from this host"
            if time.time() > record.expires_at + record.ttl:
                return "expired more than a ttl ago"
        ttl = record.ttl if record is not None else self.ttl
        return f"not renewed for {ttl:.0f}s" if now - watch.since >= ttl else None

    def _take(self, generation: int) -> bool:
        """Create `generation`; True when this run won it (then older generations are removed)."""
        record = LeaseRecord(self.holder, generation, self.ttl, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             time.time() + self.ttl)
        started = time.monotonic()
        try:
            obj = self.store.create(self._name(generation), record.to_json())
        except AlreadyExists:
            return False
        with self._mutex:
            self._record, self._tag, self._confirmed, self._lost = record, obj.tag, started, None
        for old in list(self.store.list(self.folder)):
            match = _GENERATION.match(old.name[len(self.folder):])
            if match and int(match.group(1)) < generation:
                self.store.delete(old.name)  # its holder, if alive, loses at its next renewal
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name=f"lease-{self.key}", daemon=True)
        self._renewer.start()
        return True

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            if not self._renew_once():
                return

    def _renew_once(self) -> bool:
        """One renewal; False once the lease is lost for good."""
        assert self._record is not None
        started = time.monotonic()
        record = replace(self._record, expires_at=time.time() + self.ttl)
        try:
            obj = self.store.write(self._name(record.generation), io.BytesIO(record.to_json()), if_tag=self._tag)
            newer = [o.name for o in self.store.list(self.folder) if o.name > self._name(record.generation)]
        except TagMismatch:
            return self._lose("its object was changed or removed by another run")
        except (OSError, StoreError) as exc:
            if not self.held:
                return False
            if self.log is not None:
                self.log(f"{self.key}: renewing the lease {self.where()} failed ({exc}); trying again")
            return True
        if newer:
            return self._lose(f"a newer generation {newer[-1]} was taken")
        with self._mutex:
            if self._lost is not None:
                return False
            self._record, self._tag, self._confirmed = record, obj.tag, started
        return True

    def _lose(self, reason: str) -> bool:
        with self._mutex:
            self._lost = self._lost or reason
        if self.log is not None:
            self.log(f"{self.key}: lost the lease {self.where()}: {reason}")
        return False

    def release(self) -> None:
        """Stop renewing and mark the generation released, so a waiter takes over at once; a failure
        here costs waiters one ttl at most."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
        if self._record is None or not self.held:
            return
        record = replace(self._record, released=True)
        try:
            self.store.write(self._name(record.generation), io.BytesIO(record.to_json()), if_tag=self._tag)
        except (OSError, StoreError):
            pass
        with self._mutex:
            self._lost = "released"


def _scope() -> str:
    """"<boot id>/<pid namespace inode>": where this host's pids mean what they say; "" unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        namespace = os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]")
        own_proc = os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return ""
    return f"{boot}/{namespace}" if boot and namespace.isdigit() and own_proc else ""


def _process_identity(pid: int) -> str:
    """"<scope>/<start ticks>" of a running process; "" when it is not running or /proc cannot tell."""
    scope = _scope()
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return ""
    fields = data[data.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    if not scope or fields[0] in ("Z", "X"):
        return ""
    return f"{scope}/{fields[19]}"
