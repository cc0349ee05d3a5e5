"""Where a dataset's published version goes besides its output folder, chosen once per dataset
(`publish_target`): nowhere more for a plain path (the POSIX route and its speed unchanged), or a
store at `output_dir: s3://bucket/prefix`, which receives the version published in the local work
folder under the dataset's lease and commits it atomically (store/remote_publish.py).

The pipeline asks the target two things and never which kind it is: is the store's newest version
exactly this plan's (skip-unless-force), and deliver the local version there. The local folder
stays the place parts are written and versions assembled; docs/guarantees.md, "On a bucket", says
what that costs and what a later step changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..catalog import DatasetSpec
from ..planning.shards import Shard
from ..storage.base import Store
from ..storage.urls import open_store
from .dataset_store import DatasetStore, read_manifest
from .lease import Lease
from .locks import dataset_lock
from .remote_publish import LocalVersion, needs_nothing, publish_version, settle
from .remote_versions import published_matches, read_published, record_matches

Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a delivery to a store did: `committed` the version it published (its commit record's
    sequence number), or `skipped` because the store's newest version already was this one."""

    location: str
    seq: int
    skipped: bool


class PublishTarget(Protocol):
    def is_current(self, spec: DatasetSpec, shards: Sequence[Shard], discovery: list[str]) -> bool:
        """The target holds exactly the version this plan would publish."""
        ...

    def deliver(self, dataset: DatasetStore, shards: Sequence[Shard], discovery: list[str], force: bool,
                log: Log | None) -> Delivery | None:
        """Bring the target to the locally published version (None: nothing beyond the folder)."""
        ...


class OutputFolder:
    """A plain output path: the local publish is the publish."""

    def is_current(self, spec: DatasetSpec, shards: Sequence[Shard], discovery: list[str]) -> bool:
        return True

    def deliver(self, dataset: DatasetStore, shards: Sequence[Shard], discovery: list[str], force: bool,
                log: Log | None) -> Delivery | None:
        return None


@dataclass(frozen=True)
class StoreTarget:
    """A store (a bucket prefix) that receives each version published locally."""

    location: str
    options: Mapping[str, str] = field(default_factory=dict)

    def open(self) -> Store:
        return open_store(self.location, self.options)

    def is_current(self, spec: DatasetSpec, shards: Sequence[Shard], discovery: list[str]) -> bool:
        return published_matches(self.open(), spec.key, spec.recipe, shards, discovery)

    def deliver(self, dataset: DatasetStore, shards: Sequence[Shard], discovery: list[str], force: bool,
                log: Log | None) -> Delivery | None:
        """Under the local dataset lock held shared (no local publish swaps the version being read)
        and the store's lease: skip when the store's newest version is this plan's (unless forced),
        else upload the local version and commit it."""
        spec = dataset.spec
        store = self.open()
        newest = read_published(store, spec.key)  # read once for both looks at it
        if not force and record_matches(newest, spec.recipe, shards, discovery) \
                and needs_nothing(store, spec.key, newest):
            return Delivery(self.location, newest.seq if newest else 0, skipped=True)
        with dataset_lock(dataset.lock, spec.key, log=log, shared=True), Lease(store, spec.key, log=log) as lease:
            newest = read_published(store, spec.key)  # again under the lease: another run may have committed
            if not force and record_matches(newest, spec.recipe, shards, discovery):
                settle(store, spec.key, lease)
                return Delivery(self.location, newest.seq if newest else 0, skipped=True)
            version = dataset.current.resolve()
            manifest = read_manifest(version)
            sidecar = version / spec.sidecar_path.name
            local = LocalVersion(version / spec.text_path.name, sidecar if manifest.has_sidecar else None)
            record = publish_version(store, spec.key, local, manifest, lease)
        if log is not None:
            log(f"{spec.key}: published to {self.location} as version {record.seq}")
        return Delivery(self.location, record.seq, skipped=False)


def publish_target(spec: DatasetSpec) -> PublishTarget:
    """The one place that tells a bucket output from a folder."""
    if spec.output_location is None:
        return OutputFolder()
    return StoreTarget(spec.output_location, spec.storage_options.given())
