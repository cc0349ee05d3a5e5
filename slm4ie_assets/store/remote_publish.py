"""Publish a version through the Store interface, so a bucket gets the guarantees a disk has
(docs/guarantees.md, "On a bucket"; the layout is in store/remote_versions.py).

A version assembled on local disk is uploaded under a name no other run uses; then the commit
point: its commit record is created, create-only, under the newest sequence number + 1, so of two
runs racing, exactly one wins and the other removes its version and says who won. Only then are
the top-level copies rewritten and the leftovers removed. Every step before the commit changes
nothing a reader follows, and the commit is one request, so a kill anywhere leaves the previous
version or the new one. The caller holds the dataset's lease (store/lease.py) throughout; the
publish checks it before every write, and the create-only commit protects the rest.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..storage.base import AlreadyExists, Store, StoredObject, StoreError, TagMismatch
from .manifest import Manifest
from .remote_cleanup import StoreAbilities, abilities_of, clean_leftovers
from .remote_versions import (
    CommitRecord,
    RemoteLayout,
    TopLevelRecord,
    commit_objects,
    newest_seq,
    objects_intact,
    read_commit,
    read_object,
    read_published,
)


class Guard(Protocol):
    """What the publish asks of the lease: raise unless this run may still commit (`Lease.check`),
    and who this run is (`Lease.holder`), for the message of a run that loses the race."""

    @property
    def holder(self) -> object: ...

    def check(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LocalVersion:
    """A version's files assembled on local disk (as store/assembly.py writes them), to upload."""

    text: Path
    sidecar: Path | None


class PublishedByAnother(StoreError):
    """Another run committed the sequence number this run tried; this run's version was removed."""

    def __init__(self, message: str, winner: CommitRecord | None) -> None:
        super().__init__(message)
        self.winner = winner


def publish_version(store: Store, key: str, local: LocalVersion, manifest: Manifest, lease: Guard,
                    abilities: StoreAbilities | None = None) -> CommitRecord:
    """Upload `local`, commit it with `manifest`, then make the top-level copies and clean up.
    Raises PublishedByAnother when another run committed first, and what `lease.check` raises
    when the lease is lost before the commit; either way nothing of this version stays visible."""
    abilities = abilities_of(store) if abilities is None else abilities
    layout = RemoteLayout(key)
    _check_sizes(key, local, manifest)
    lease.check()
    clean_leftovers(store, layout, abilities)
    version = layout.new_version()
    folder = layout.version_folder(version)
    committed = False
    try:
        text = _upload(store, folder + layout.text, local.text, lease)
        sidecar = _upload(store, folder + layout.sidecar, local.sidecar, lease) if local.sidecar else None
        record = CommitRecord(newest_seq(store, layout) + 1, version, text, sidecar, manifest, str(lease.holder))
        created = _commit(store, layout, record, lease)
        committed = True
    finally:
        if not committed:
            _remove_version(store, layout, version, best_effort=True)
    _confirm(store, layout, record, created)
    settle_top_level(store, layout, record, lease, abilities)
    clean_leftovers(store, layout, abilities, keep_version=version)
    return record


def settle(store: Store, key: str, lease: Guard, abilities: StoreAbilities | None = None) -> bool:
    """What a run does under the lease before it decides to skip: remove leftovers, and make the
    top-level copies those of the published version (a kill between the commit and the copies, or
    a copy changed by hand). True when a copy was rewritten."""
    abilities = abilities_of(store) if abilities is None else abilities
    layout = RemoteLayout(key)
    lease.check()
    clean_leftovers(store, layout, abilities)
    record = read_published(store, key)
    return record is not None and settle_top_level(store, layout, record, lease, abilities)


def _upload(store: Store, name: str, path: Path, lease: Guard) -> str:
    lease.check()
    size = path.stat().st_size
    with open(path, "rb") as source:
        stored = store.write(name, source)
    if stored.size != size:
        raise StoreError(f"{store.url}: {name} holds {stored.size} bytes after uploading {size} from {path}")
    return name


def _commit(store: Store, layout: RemoteLayout, record: CommitRecord, lease: Guard) -> StoredObject:
    """The commit point: one create-only request. Raises PublishedByAnother when the name is taken."""
    lease.check()
    try:
        return store.create(layout.commit_name(record.seq), record.to_json())
    except AlreadyExists:
        raise _lost_race(store, layout, record) from None


def _confirm(store: Store, layout: RemoteLayout, record: CommitRecord, created: StoredObject) -> None:
    """A run that lost its lease while suspended can still reach the create; if a newer commit exists
    or its version was removed meanwhile, its record is withdrawn at once (readers skip a record whose
    objects are missing: `read_published`)."""
    newest = newest_seq(store, layout)
    if newest == record.seq and objects_intact(store, record):
        return
    try:
        store.delete(layout.commit_name(record.seq), if_tag=created.tag)
    except TagMismatch:
        pass
    _remove_version(store, layout, record.version)
    if newest > record.seq:
        raise _lost_race(store, layout, record, newest)
    raise PublishedByAnother(
        f"dataset {layout.key!r}: another run removed this run's version {record.version} while this run held "
        f"no renewed lease, so its commit {store.url.rstrip('/')}/{layout.commit_name(record.seq)} was withdrawn "
        "and nothing of it is visible. Run again", None)


def _lost_race(store: Store, layout: RemoteLayout, mine: CommitRecord, seq: int | None = None) -> PublishedByAnother:
    seq = mine.seq if seq is None or seq <= mine.seq else seq
    winner = next((read_commit(store, o) for o in commit_objects(store, layout) if layout.seq_of(o.name) == seq), None)
    who = f"{winner.published_by or 'another run'} published version {winner.version}" if winner else \
        "another run published"
    return PublishedByAnother(
        f"dataset {layout.key!r}: {who} first (commit {store.url.rstrip('/')}/{layout.commit_name(seq)}); this "
        f"run's version {mine.version} was removed and nothing of it is visible. Run again to publish after it",
        winner)


def _remove_version(store: Store, layout: RemoteLayout, version: str, best_effort: bool = False) -> None:
    """Remove a version no commit names; `best_effort` while another error is on its way out (what
    stays is the next publisher's clean-up)."""
    try:
        for obj in list(store.list(layout.version_folder(version))):
            store.delete(obj.name)
    except (OSError, StoreError):
        if not best_effort:
            raise


def _check_sizes(key: str, local: LocalVersion, manifest: Manifest) -> None:
    """The Manifest describes these files (readers check the objects against its sizes)."""
    sizes = (local.text.stat().st_size, local.sidecar.stat().st_size if local.sidecar else 0, local.sidecar is not None)
    if sizes != (manifest.text_bytes, manifest.sidecar_bytes, manifest.has_sidecar):
        raise ValueError(f"dataset {key!r}: the manifest says text {manifest.text_bytes} bytes, sidecar "
                         f"{manifest.sidecar_bytes if manifest.has_sidecar else 'none'}, but the files to publish "
                         f"are {local.text} ({sizes[0]} bytes) and {local.sidecar or 'no sidecar'} ({sizes[1]} bytes)")


def settle_top_level(store: Store, layout: RemoteLayout, record: CommitRecord, lease: Guard,
                     abilities: StoreAbilities) -> bool:
    """Make `<key>.jsonl` and `<key>.annotations.jsonl.gz` whole copies of `record`'s version; False
    when they already are. The sidecar goes first (or is removed), so the new text is never seen
    beside an older sidecar; the top-level record is written last and says which commit they hold."""
    if _top_level_holds(store, layout, record):
        return False
    tags: dict[str, str] = {}
    lease.check()
    if record.sidecar is not None:
        tags[layout.sidecar] = _copy(store, record.sidecar, layout.sidecar, abilities).tag
    else:
        store.delete(layout.sidecar)
    lease.check()
    tags[layout.text] = _copy(store, record.text, layout.text, abilities).tag
    lease.check()
    store.write(layout.top_level_record, io.BytesIO(TopLevelRecord(record.seq, record.version, tags).to_json()))
    return True


def needs_nothing(store: Store, key: str, record: CommitRecord | None) -> bool:
    """`record` (the newest commit, as read) is whole and the top-level copies are its own: a run that
    would skip has nothing to settle, so it takes no lease and writes nothing (a second run rewrites
    no object). Anything else (leftovers aside) is settled under the lease."""
    return record is not None and _top_level_holds(store, RemoteLayout(key), record)


def _top_level_holds(store: Store, layout: RemoteLayout, record: CommitRecord) -> bool:
    try:
        top = TopLevelRecord.from_json(read_object(store, store.stat(layout.top_level_record)))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return False
    if (top.seq, top.version) != (record.seq, record.version):
        return False
    for name in (layout.text, layout.sidecar):
        try:
            tag: str | None = store.stat(name).tag
        except FileNotFoundError:
            tag = None
        if tag != top.tags.get(name):
            return False
    return True


def _copy(store: Store, source: str, name: str, abilities: StoreAbilities) -> StoredObject:
    if abilities.copier is not None:
        return abilities.copier.copy(source, name)
    stream = store.open_read(source)
    try:
        return store.write(name, stream)
    finally:
        stream.close()

