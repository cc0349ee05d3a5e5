"""Crash-test corpora and runs: datasets of four formats with an `old` and a `new` raw version (archives
included) and the exact outputs each must publish, the real `dagster asset materialize` CLI in its own
process group, and the checks made after every death (D17)."""

import gzip
import io
import json
import os
import random
import signal
import subprocess
import threading
import time
import zipfile
from pathlib import Path

from slm4ie_assets.archives import is_temp_name
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset, plan_dataset
from slm4ie_assets.store.dataset_store import PARTIAL, DatasetStore
from support.archive_files import tar_of
from support.dagster_cli import dagster_env
from support.files import write_config
from support.paths import REPO, VENV_BIN

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
DATASETS = {"c_jsonl": "jsonl", "c_text": "text", "c_conllu": "conllu", "c_tei": "tei"}


def seed_for(default: int) -> int:
    return int(os.environ.get("SLM4IE_CRASH_SEED", default))


def jsonl_corpus(version: str, name: str, docs: int) -> bytes:
    lines = []
    for d in range(docs):
        words = [f"{version}{name}", "beseda", str(d)] * 6
        rec = {"doc_id": f"{version}-{name}-{d}", "text": " ".join(words), "n": d}
        if d % 3 == 0:
            rec["paragraphs"] = [{"sentences": [{"tokens": [{"form": w, "lemma": w.lower(), "upos": "X",
                                                             "space_after": i % 5 != 4}
                                                            for i, w in enumerate(words)]}]}]
        lines.append(json.dumps(rec, ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode()


def _text(version: str, name: str, docs: int) -> bytes:
    return "\n\n".join(f"{version} {name} dokument {d}. " * 8 for d in range(docs)).encode() + b"\n"


def _conllu(version: str, name: str, docs: int) -> bytes:
    out = []
    for d in range(docs):
        if d % 10 == 0:
            out.append(f"# newdoc id = {version}-{name}-{d}")
        out.append(f"# sent_id = {name}.{d}")
        for i, form in enumerate((version, name, "beseda", str(d), "."), 1):
            misc = "SpaceAfter=No" if i == 4 else "_"
            out.append(f"{i}\t{form}\t{form.lower()}\tX\t_\tCase=Nom\t0\tdep\t_\t{misc}")
        out.append("")
    return ("\n".join(out) + "\n").encode()


def _tei(version: str, name: str, docs: int) -> bytes:
    if name.endswith("1"):  # an annotated per-file document
        sents = "".join(f'<s><w lemma="a">{version}</w><w msd="UPosTag=NOUN|Case=Nom">{name}</w>'
                        f'<w join="right">{d}</w><pc>.</pc></s>' for d in range(docs))
        body = f"<p>{sents}</p>"
    else:
        body = "".join(f'<p xml:id="{version}-{name}-{d}">{version} {name} odstavek {d}.</p>' for d in range(docs))
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<TEI {NS}><text><body>{body}</body></text></TEI>\n'.encode()


MAKERS = {"jsonl": (jsonl_corpus, ".jsonl"), "text": (_text, ".txt"), "conllu": (_conllu, ".conllu"),
          "tei": (_tei, ".xml")}


def _archive(kind: str, members: dict) -> bytes:
    """A `.zip`, a `.gz` of the one member, or (any other kind) a `.tar.gz`."""
    if kind == "gz":
        [data] = members.values()
        return gzip.compress(data, mtime=0)
    if kind != "zip":
        return tar_of(members, "w:gz")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


_PADDING: dict = {}


def padding(version: str, size: int) -> bytes:
    """Incompressible bytes no extractor reads: they make unpacking last long enough to be killed
    inside, without making extraction longer (and stay far below the 50x expansion limit)."""
    if (version, size) not in _PADDING:
        _PADDING[(version, size)] = random.Random(version).randbytes(size)
    return _PADDING[(version, size)]


def raw_version(fmt: str, version: str, docs: int, pad: int = 0) -> tuple[dict, set]:
    """(files to write, files of the other version to delete). The versions differ in content, in
    their file sets (a vanished and a new shard) and in their archive, whose outputs change too."""
    make, ext = MAKERS[fmt]
    names = ["f0", "f1", "f2"] if version == "old" else ["f1", "f2", "f3"]
    files = {f"{n}{ext}": make(version, n, docs) for n in names}
    member_names = ("a", "b") if version == "old" else ("b", "c")
    members = {f"arch_{m}{ext}": make(version, f"arch{m}", docs) for m in member_names}
    if pad:
        members["padding.bin"] = padding(version, pad)
    if fmt == "text":
        files["deep/bulk.txt.gz"] = _archive("gz", {"bulk.txt": make(version, "bulk", docs * 2)})
        if pad:
            files["deep/pad.bin.gz"] = _archive("gz", {"pad.bin": padding(version, pad)})
    elif fmt == "conllu":
        files["pack.zip"] = _archive("zip", members)
    else:
        files["pack.tar.gz"] = _archive("tar", members)
    other = {f"{n}{ext}" for n in (["f1", "f2", "f3"] if version == "old" else ["f0", "f1", "f2"])} - set(files)
    return files, other


def write_raw(raw: Path, fmt: str, version: str, docs: int, pad: int = 0) -> None:
    files, gone = raw_version(fmt, version, docs, pad)
    for rel in gone:
        (raw / rel).unlink(missing_ok=True)
    for rel, data in files.items():
        p = raw / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".writing")  # never seen half-written by a run started meanwhile
        tmp.write_bytes(data)
        os.replace(tmp, p)


class TwoVersionProject:
    """Four datasets under one root, each with an `old` and a `new` raw version and the exact
    outputs each version must publish (computed by clean plain-Python runs on fresh trees)."""

    def __init__(self, root: Path, docs: int, datasets: dict = DATASETS, pad: int = 0):
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.docs = docs
        self.pad = pad
        self.datasets = datasets
        self.config = write_config(root, {k: {"extractor": f, "domain": "test"} for k, f in datasets.items()})
        self.catalog = load_catalog(self.config)
        self.seconds: dict = {}  # plain-Python seconds per dataset for a whole version (unpack included)
        self.expected = {v: self._expected(v) for v in ("old", "new")}

    def _expected(self, version: str) -> dict:
        fresh = self.root / f"expected_{version}"
        for key, fmt in self.datasets.items():
            write_raw(fresh / "raw" / key, fmt, version, self.docs, self.pad)
        datasets = {k: {"extractor": f, "domain": "test"} for k, f in self.datasets.items()}
        cat = load_catalog(write_config(fresh, datasets))
        out = {}
        for key in self.datasets:
            started = time.monotonic()
            extract_dataset(cat.dataset(key), cat, workers=1)
            self.seconds[key] = max(self.seconds.get(key, 0), time.monotonic() - started)
            out[key] = snapshot(cat.dataset(key))
            assert out[key][0], f"{key} {version}: no documents"
        return out

    def spec(self, key: str):
        return self.catalog.dataset(key)

    def write(self, version: str, keys=None) -> None:
        for key in keys or self.datasets:
            write_raw(self.spec(key).raw_dir, self.datasets[key], version, self.docs, self.pad)

    def run_plain(self, keys=None, **kw) -> None:
        for key in keys or self.datasets:
            extract_dataset(self.spec(key), self.catalog, workers=1, **kw)


def snapshot(spec) -> tuple:
    text = spec.text_path.read_bytes() if spec.text_path.exists() else None
    side = gzip.decompress(spec.sidecar_path.read_bytes()) if spec.sidecar_path.exists() else None
    return text, side


def assert_consistent(spec, allowed: dict, note: str) -> str:
    """The published pair is one of the allowed complete versions and the manifest agrees with the
    files; returns the version's name."""
    state = snapshot(spec)
    names = [name for name, snap in allowed.items() if snap == state]
    assert names, f"{note}: {spec.key} shows a partial or mixed pair"
    manifest = DatasetStore(spec).published_manifest()
    assert manifest is not None, f"{note}: {spec.key} has files but no manifest"
    text, side = state
    assert manifest.docs == text.count(b"\n") and manifest.text_bytes == len(text), note
    assert manifest.has_sidecar == (side is not None), note
    if side is not None:
        assert manifest.sidecar_lines == side.count(b"\n") == manifest.docs, note
        assert manifest.sidecar_bytes == spec.sidecar_path.stat().st_size, note
        text_uids = [json.loads(line)["uid"] for line in text.splitlines()]
        assert [json.loads(line)["uid"] for line in side.splitlines()] == text_uids, note
    current = DatasetStore(spec).current.resolve()
    assert spec.text_path.resolve() == current / spec.text_path.name, note
    return names[0]


def assert_no_leftovers(spec, note: str = "") -> None:
    """D17: after a successful run nothing of an interrupted one survives."""
    store = DatasetStore(spec)
    names = [p.name for p in spec.output_dir.rglob("*")]
    assert not [n for n in names if n.endswith(PARTIAL)], (note, [n for n in names if n.endswith(PARTIAL)])
    committed = {p.name.split(".")[0] for p in store.parts.glob("*.meta.json")}
    assert all(p.name.split(".")[0] in committed for p in store.parts.iterdir()), note
    plan = plan_dataset(spec)
    assert committed == {store.part_id(s.key) for s in plan.shards}, f"{note}: parts of vanished shards remain"
    versions = list(store.versions.iterdir())
    assert len(versions) == 1 and store.current.resolve() == versions[0].resolve(), (note, versions)
    temps = [p for p in spec.raw_dir.rglob("*") if is_temp_name(p.name)]
    assert not temps, (note, temps)
    assert plan.up_to_date, f"{note}: the next plan still finds work to do"


def instance_home(path: Path) -> Path:
    """A DAGSTER_HOME with the project's own dagster.yaml (queued run coordinator, the run pool),
    its storage folders moved under `path`."""
    path.mkdir(parents=True, exist_ok=True)
    text = (REPO / "dagster.yaml").read_text()
    text = text.replace("base_dir: .dagster", f"base_dir: {path / '.dagster'}")
    (path / "dagster.yaml").write_text(text)
    # create the storage now: two processes creating a fresh sqlite instance at once race in
    # Dagster's schema creation ("table runs already exists"), which is not what is under test
    from dagster import DagsterInstance

    DagsterInstance.from_config(str(path)).dispose()
    return path


class Cli:
    """`dagster asset materialize` in its own process group, its log read as it is written."""

    def __init__(self, config: Path, home: Path, keys: list, force: bool = False, workers: int | None = None):
        args = [str(VENV_BIN / "dagster"), "asset", "materialize", "--select", ",".join(f"extracted/{k}" for k in keys)]
        settings = {"force": True} if force else {}
        if workers is not None:
            settings["max_workers"] = workers
        if settings:
            args += ["--config-json", json.dumps({"resources": {"extract": {"config": settings}}})]
        self.proc = subprocess.Popen(args, cwd=REPO, env=dagster_env(config, home), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self.lines.append(None)  # end of the log
            self._changed.notify_all()

    def wait(self, timeout: float = 900) -> int:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=30)
        return rc

    def kill_when(self, trigger, delay: float, timeout: float = 900) -> bool | None:
        """SIGKILL the whole process group `delay` seconds after `trigger()` first returned true
        (polled every millisecond). True: killed; False: the run ended during the delay; None: it
        ended before the trigger ever held."""
        deadline = time.monotonic() + timeout
        while not trigger(self):
            if self.proc.poll() is not None:
                self._reader.join(timeout=30)
                return None
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"trigger not seen within {timeout}s")
            time.sleep(0.001)
        try:
            self.proc.wait(timeout=delay)
            self._reader.join(timeout=30)
            return False
        except subprocess.TimeoutExpired:
            self.kill()
            return True

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._reader.join(timeout=30)

    @property
    def log(self) -> str:
        return "".join(line for line in self.lines if line is not None)
