"""A catalog, its raw tree and its Definitions under tmp_path, materialized in-process as Dagster runs them."""

import gzip
import os
from pathlib import Path

import yaml
from dagster import AssetKey, AssetSelection, materialize

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.assets import extracted_key
from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
from slm4ie_assets.dagster_layer.resources import ExtractSettings
from slm4ie_assets.definitions import build_definitions
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.store.dataset_store import DatasetStore
from support.files import write_config


class DagsterProject:
    """A catalog, its raw tree and its Definitions under tmp_path, run the way Dagster runs it."""

    def __init__(self, root: Path, datasets: dict, **top):
        top.setdefault("settle_seconds", 0)  # tests write files and tick at once; settling has its own tests
        self.root = root
        self.datasets = datasets
        self.top = top
        self.config = write_config(root, datasets, **top)
        self.catalog = load_catalog(self.config)
        self.defs = build_definitions(self.catalog)
        self.assets = [*self.defs.assets, *self.defs.asset_checks]

    @classmethod
    def from_config(cls, config: Path) -> "DagsterProject":
        """A project over an existing extract.yaml (e.g. a copy of the shared corpora's)."""
        p = cls.__new__(cls)
        doc = yaml.safe_load(config.read_text())
        p.root, p.config, p.datasets = config.parent, config, doc["datasets"]
        p.top = {k: v for k, v in doc.items() if k not in ("datasets", "input_dir", "output_dir")}
        p.catalog = load_catalog(config)
        p.defs = build_definitions(p.catalog)
        p.assets = [*p.defs.assets, *p.defs.asset_checks]
        return p

    def raw(self, key: str) -> Path:
        return self.catalog.dataset(key).raw_dir

    def spec(self, key: str):
        return self.catalog.dataset(key)

    def materialize(self, instance, selection, partition_key=None, tags=None, force=False, workers=1,
                    raise_on_error=True, run_config=None):
        resources = {"extract": ExtractSettings(force=force, max_workers=workers), "extract_io": ExtractIOManager()}
        return materialize(self.assets, instance=instance, selection=selection, partition_key=partition_key,
                           tags=tags, resources=resources, raise_on_error=raise_on_error, run_config=run_config)

    def publish(self, instance, key: str, **kw):
        return self.materialize(instance, AssetSelection.assets(extracted_key(key)), **kw)

    def execute(self, instance, request, **kw):
        """Run what a sensor's RunRequest asks for, as the daemon would launch it."""
        return self.materialize(instance, request.asset_selection, partition_key=request.partition_key,
                                tags=request.tags, **kw)

    def published(self, key: str) -> tuple[bytes, bytes | None]:
        return _outputs(self.spec(key))

    def fresh(self, key: str) -> tuple[bytes, bytes | None]:
        """A fresh full extraction of the same raw tree into another folder (no parts reused)."""
        fresh_root = self.root / "fresh"
        if fresh_root.exists():
            import shutil

            shutil.rmtree(fresh_root)
        fresh_root.mkdir()
        doc = {"input_dir": str(self.catalog.input_dir), "output_dir": "out", **self.top, "datasets": self.datasets}
        (fresh_root / "extract.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        cat = load_catalog(fresh_root / "extract.yaml")
        extract_dataset(cat.dataset(key), cat, force=True, workers=1)
        return _outputs(cat.dataset(key))


def _outputs(spec) -> tuple[bytes, bytes | None]:
    side = spec.sidecar_path
    return spec.text_path.read_bytes(), (gzip.decompress(side.read_bytes()) if side.exists() else None)


def output_metadata(result, asset_key: AssetKey) -> dict:
    for ev in result.get_asset_materialization_events():
        m = ev.event_specific_data.materialization
        if m.asset_key == asset_key:
            return {k: v.value for k, v in m.metadata.items()}
    raise AssertionError(f"no materialization of {asset_key}")


def part_meta_mtimes(spec) -> dict:
    store = DatasetStore(spec)
    return {p.name: p.stat().st_mtime_ns for p in store.parts.glob("*.meta.json")}


def touch(path: Path, text: str | None = None) -> None:
    """Change a file so that its stat fingerprint changes even within one clock tick."""
    st = path.stat()
    if text is not None:
        path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
