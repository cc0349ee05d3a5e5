"""Where a dataset's raw files come from, chosen once per dataset (`raw_source`): its raw folder
(the POSIX route, unchanged), or a bucket prefix mirrored into the local raw folder under work_dir
(storage/mirror.py, D26), from which every later step reads as from any raw folder.

The pipeline asks three things and never which kind it is: is there a raw folder at all, bring it
up to date (under the dataset lock held exclusive, before the archive stage), and which inputs
changed since (a run does not publish from inputs that changed under it: InputChanged). The raw
sensor asks a fourth: what the local folder lacks and whether that has settled, from one listing
(planning/bucket_listing.py); a folder read in place has nothing to list, and the sensor reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..catalog import DatasetSpec
from ..storage.base import Store
from ..storage.mirror import changed_objects, mirror, mirrorable
from ..storage.mirror_state import load_state
from ..storage.urls import open_store
from ..utils.byte_units import human_bytes
from .bucket_listing import ListingChanges, compare_listing
from .input_stamps import InputChanged
from .settling import Look

Log = Callable[[str], None]
_LOG = logging.getLogger(__name__)


class RawSource(Protocol):
    def present(self, spec: DatasetSpec) -> bool:
        """There is a raw folder (or a prefix with objects) to read."""
        ...

    def bring_in(self, spec: DatasetSpec, log: Log | None) -> None:
        """Make the local raw folder what the source holds now (nothing to do for a folder)."""
        ...

    def check_unchanged(self, spec: DatasetSpec) -> None:
        """Raise InputChanged naming the first input that changed since it was brought in."""
        ...

    def changes(self, spec: DatasetSpec, previous: Look, now_ns: int | None = None) -> ListingChanges | None:
        """What the source holds that the local raw folder lacks, and whether it has settled since the
        previous tick's look, from one listing (nothing downloaded); None when the raw folder is the
        source itself (the sensor then reads it in place)."""
        ...


class RawFolder:
    """A raw folder on a file system: read in place; its changes are caught by the parts' stamps."""

    def present(self, spec: DatasetSpec) -> bool:
        return spec.raw_dir.is_dir()

    def bring_in(self, spec: DatasetSpec, log: Log | None) -> None:
        return None

    def check_unchanged(self, spec: DatasetSpec) -> None:
        return None

    def changes(self, spec: DatasetSpec, previous: Look, now_ns: int | None = None) -> ListingChanges | None:
        return None


@dataclass(frozen=True)
class MirroredBucket:
    """A bucket prefix, mirrored into the dataset's local raw folder (D26)."""

    location: str
    options: Mapping[str, str] = field(default_factory=dict)

    def open(self) -> Store:
        return open_store(self.location, self.options)

    def present(self, spec: DatasetSpec) -> bool:
        return spec.raw_dir.is_dir() or next(iter(self.open().list()), None) is not None

    def bring_in(self, spec: DatasetSpec, log: Log | None) -> None:
        assert spec.mirror_state is not None  # set by the catalog exactly when raw_location is
        spec.raw_dir.mkdir(parents=True, exist_ok=True)
        report = mirror(self.open(), spec.raw_dir, spec.mirror_state)
        if log is not None:
            log(f"{spec.key}: mirrored {self.location}: {len(report.downloaded)} object(s) downloaded "
                f"({human_bytes(report.bytes_downloaded)}), {len(report.removed)} removed, "
                f"{len(report.mirrored)} in all")
            for warning in report.warnings:
                log(f"{spec.key}: {warning}")

    def check_unchanged(self, spec: DatasetSpec) -> None:
        assert spec.mirror_state is not None
        store = self.open()
        mirrored = load_state(spec.mirror_state, store.url).files
        for name, obj in changed_objects(store, {n: (f.size, f.tag) for n, f in mirrored.items()})[:1]:
            what = "was removed" if obj is None else "was replaced"
            raise InputChanged(f"dataset {spec.key!r}: {self.location.rstrip('/')}/{name} {what} during the run "
                               "(nothing was published to the output; run again to extract what it holds now)", name)

    def changes(self, spec: DatasetSpec, previous: Look, now_ns: int | None = None) -> ListingChanges:
        assert spec.mirror_state is not None
        store = self.open()
        listing = mirrorable(list(store.list()))
        mirrored = load_state(spec.mirror_state, store.url).files
        return compare_listing(listing, mirrored, spec.settle_seconds, previous, now_ns)


def raw_source(spec: DatasetSpec) -> RawSource:
    """The one place that tells a bucket's raw prefix from a raw folder."""
    if spec.raw_location is None:
        return RawFolder()
    return MirroredBucket(spec.raw_location, spec.storage_options.given())
