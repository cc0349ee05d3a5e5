"""Crash safety (README "Guarantees" 1; D17, docs/architecture.md "Parts and publish"): no crash, kill or full disk ever
leaves a partial or mixed output visible, and the next run completes and removes every leftover.

Three ways of dying are proven here (test_crash.py already kills plain-Python runs at random times):

1. SIGKILL of the real `dagster asset materialize` CLI (the whole process group, pool workers too) at
   seeded random moments measured from the start of the first extraction step, so the kills land in
   archive unpacking, extraction, part writes, publishing and the asset checks, across four formats
   (jsonl with annotations, text, conllu, tei), each with an archive in raw/ that changes between
   versions. The normal suite kills a few runs of all four datasets at once; `make test-long` kills
   200 single-dataset runs (50 per format). Seeds are printed and recorded (`SLM4IE_CRASH_SEED`
   replays one).
2. SIGKILL at EVERY file-system mutation of a run (each rename, link, unlink, mkdir, open for
   writing, fsync ...): the run executes in a child forked from a clean fork server, with the `os`
   functions wrapped so that call number k kills the process before it happens. Timing luck cannot
   miss a window, however short (the rename of `current` is one call).
3. A full disk: a small tmpfs mounted over the output (or raw) folder (root only; skipped where
   mounting is not permitted), and portably a child run with RLIMIT_FSIZE and SIGXFSZ ignored, so a
   write past the limit fails with EFBIG exactly as a full disk fails with ENOSPC.

After every death: the published pair is the complete previous one or the complete new one, the
manifest agrees with the files on disk, and the next run publishes the new version and leaves no
`.partial`, no uncommitted part, no unpublished version and no temporary file in raw/.
"""

import gzip
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, VENV_BIN, dagster_env, write_config
from slm4ie_assets.archives import is_temp_name
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import ShardBatch, extract_dataset, extract_shard_batch, plan_dataset, unpack
from slm4ie_assets.store import PARTIAL, DatasetStore, OutputWriteError

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'
DATASETS = {"c_jsonl": "jsonl", "c_text": "text", "c_conllu": "conllu", "c_tei": "tei"}


def seed_for(default: int) -> int:
    return int(os.environ.get("SLM4IE_CRASH_SEED", default))


# ----------------------------------------------------------------------------- corpora


def _jsonl(version: str, name: str, docs: int) -> bytes:
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


MAKERS = {"jsonl": (_jsonl, ".jsonl"), "text": (_text, ".txt"), "conllu": (_conllu, ".conllu"), "tei": (_tei, ".xml")}


def _archive(kind: str, members: dict) -> bytes:
    buf = io.BytesIO()
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    elif kind == "gz":
        [data] = members.values()
        return gzip.compress(data, mtime=0)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
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
    members = {f"arch_{m}{ext}": make(version, f"arch{m}", docs) for m in (("a", "b") if version == "old" else ("b", "c"))}
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


class Project:
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
        cat = load_catalog(write_config(fresh, {k: {"extractor": f, "domain": "test"} for k, f in self.datasets.items()}))
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


def phase_after_kill(spec, before: tuple, after: tuple) -> str:
    """Where a kill left a dataset, named from what is on disk: inside an archive (`unpack`), after
    unpacking (`unpacked`), inside a part or between parts not yet published (`extract`), inside the
    publish (`publish`), after the swap (`published`), or before anything was touched (`untouched`)."""
    store = DatasetStore(spec)
    if any(is_temp_name(p.name) for p in spec.raw_dir.rglob("*")):
        return "unpack"
    if snapshot(spec) == after and before != after:
        return "published"
    versions = list(store.versions.iterdir()) if store.versions.is_dir() else []
    if len(versions) > 1 or any(p.name.endswith(PARTIAL) for p in spec.output_dir.glob("*")):
        return "publish"
    metas = {p.name.split(".")[0]: json.loads(p.read_bytes()) for p in store.parts.glob("*.meta.json")}
    if any(p.name.endswith(PARTIAL) or p.name.split(".")[0] not in metas for p in store.parts.iterdir()):
        return "extract"
    published = set(manifest.shards) if (manifest := store.published_manifest()) else set()
    if any((m["shard"], m["fingerprint"]) not in published for m in metas.values()):
        return "extract"  # between parts: some parts of the new version are committed
    state = json.loads((store.state / "archives.json").read_bytes()) if (store.state / "archives.json").exists() else {}
    archives = [p for p in spec.raw_dir.rglob("*") if p.name.endswith((".gz", ".zip"))]
    recorded = json.dumps(state)
    if archives and all(str(p.stat().st_mtime_ns) in recorded for p in archives):
        return "unpacked"
    return "untouched" if snapshot(spec) == before else "other"


# ----------------------------------------------------------------------------- the real CLI


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


MOMENTS = ("unpack", "extract", "publish", "anywhere")


def _any_file(root: Path, test) -> bool:
    for dirpath, _, filenames in os.walk(root):
        if any(test(name) for name in filenames):
            return True
    return False


def kill_moment(rng: random.Random, spec, plain_seconds: float, moment: str | None = None) -> tuple:
    """(moment, trigger, delay, workers): the kill comes `delay` seconds after `trigger()` first
    holds, i.e. after the dataset's run was seen on disk inside one stretch of its work: a temporary
    file in raw/ (an archive is unpacking; archives are padded with incompressible bytes so this
    lasts), a `.partial` part file (parts are being written; with 2 workers they are the pool's),
    or a second version folder (a publish is under way)."""
    moment = moment or rng.choice(MOMENTS)
    store = DatasetStore(spec)
    workers = rng.choice((1, 2))
    if moment == "anywhere":  # from the start of the dataset's step (seen in the run log) to past its end
        marker = f"extracted__{spec.key} - STEP_START"
        return (moment, lambda run: any(line and marker in line for line in list(run.lines)),
                rng.uniform(0, plain_seconds * 1.5 + (6 if workers == 2 else 2)), workers)
    if moment == "unpack":
        return moment, lambda run: _any_file(spec.raw_dir, is_temp_name), rng.uniform(0, 0.05), workers
    if moment == "extract":
        def writing_parts(run) -> bool:
            try:
                return any(e.name.endswith(PARTIAL) for e in os.scandir(store.parts))
            except FileNotFoundError:
                return False
        return moment, writing_parts, rng.uniform(0, plain_seconds * 0.6), workers

    def publishing(run) -> bool:
        try:
            return sum(1 for _ in os.scandir(store.versions)) > 1
        except FileNotFoundError:
            return False
    return moment, publishing, rng.uniform(0, 0.15), workers


def run_cli_kills(tmp_path: Path, points: int, seed: int, docs: int, select_all: bool, record,
                  moments: tuple | None = None, pad: int = 0) -> dict:
    """Publish, then `points` times: write the other raw version, start the CLI, SIGKILL it at a
    random moment of one dataset's work, check every dataset, recover (the last recovery is a CLI
    run). Returns the phases the kills hit, named from what was left on disk."""
    print(f"\nCLI kill seed={seed} points={points} (replay: SLM4IE_CRASH_SEED={seed})")
    record("seed", seed)
    rng = random.Random(seed)
    project = Project(tmp_path, docs, pad=pad)
    home = instance_home(tmp_path / "dagster_home")
    keys = list(DATASETS)
    project.write("old")
    project.run_plain()
    phases: dict = {}
    published = "old"
    for i in range(points):
        target = "new" if published == "old" else "old"
        chosen = keys if select_all else [keys[i % len(keys)]]
        victim = rng.choice(chosen)
        moment, trigger, delay, workers = kill_moment(rng, project.spec(victim), project.seconds[victim],
                                                      moments[i % len(moments)] if moments else None)
        note = f"seed={seed} kill {i}: {delay:.3f}s into the {moment} of {victim}, {workers} worker(s)"
        project.write(target, chosen)
        run = Cli(project.config, home, chosen, workers=workers)
        killed = run.kill_when(trigger, delay)
        if killed is None:  # the stretch was too short to be seen: a completed run still has to be right
            print(f"  {note}: not seen, the run completed")
        if not killed:
            assert run.proc.returncode == 0, f"{note}: {run.log[-3000:]}"
        for key in keys:
            spec = project.spec(key)
            before = project.expected[published][key]
            after = project.expected[target][key] if key in chosen else before
            state = assert_consistent(spec, {published: before, target: after}, note)
            if key == victim:
                phase = phase_after_kill(spec, before, after) if killed else "finished"
                phases[phase] = phases.get(phase, 0) + 1
                print(f"  {note} -> {phase}")
                assert phase != "other", note
            elif key not in chosen and state != published:
                raise AssertionError(f"{note}: {key} was not selected but changed")
        if i == points - 1:  # the next run is the CLI itself: a killed run blocks nothing
            rerun = Cli(project.config, home, chosen)
            assert rerun.wait() == 0, rerun.log[-4000:]
        else:
            project.run_plain(chosen)
        for key in chosen:
            spec = project.spec(key)
            assert snapshot(spec) == project.expected[target][key], f"{note}: recovery of {key}"
            assert_no_leftovers(spec, note)
        if select_all:
            published = target
        else:
            project.write(published, chosen)  # back to the common version for the next dataset
            project.run_plain(chosen)
    print(f"phases hit: {phases}")
    record("phases", json.dumps(phases))
    return phases


@pytest.fixture(scope="module")
def killed_cli_runs(tmp_path_factory):
    """Seeded SIGKILLs of a real `dagster asset materialize` of four datasets at once (jsonl with
    annotations, text, conllu, tei; archives in raw/), checked inside `run_cli_kills`; the last
    recovery is a CLI run. Returns (phases hit, DAGSTER_HOME) for the tests below."""
    root = tmp_path_factory.mktemp("cli_kills")
    recorded = {}
    phases = run_cli_kills(root, points=2, seed=seed_for(8_2026), docs=1000, select_all=True,
                           record=lambda k, v: recorded.setdefault(k, v), moments=("extract", "publish"), pad=4 << 20)
    return phases, root / "dagster_home", recorded


@pytest.mark.slow
def test_sigkill_of_the_dagster_cli_never_exposes_a_partial_pair(killed_cli_runs, record_property):
    """Issue #8 / D17: after every kill the published pairs are whole (old or new), the manifests
    agree with the files, and the next run publishes the new version and leaves nothing behind."""
    phases, _, recorded = killed_cli_runs
    for key, value in recorded.items():
        record_property(key, value)
    assert set(phases) - {"finished", "published"}, f"no kill landed inside the work: {phases}"


@pytest.mark.long
def test_sigkill_of_the_dagster_cli_at_200_moments(tmp_path, record_property):
    """200 kill points, 50 per format, each run materializing one dataset."""
    phases = run_cli_kills(tmp_path, points=200, seed=seed_for(20_261_129), docs=3000, select_all=False,
                           record=record_property, pad=24 << 20)
    assert all(phases.get(p) for p in ("unpack", "extract", "publish")), phases
    assert phases.get("published", 0) + phases.get("finished", 0), phases


# ----------------------------------------------------------------------------- every mutation point


_MUTATORS = ("replace", "rename", "symlink", "link", "unlink", "remove", "mkdir", "makedirs", "rmdir", "fsync",
             "ftruncate", "truncate", "utime", "chmod")


def _child(config: str, keys: list, kill_at: int, counter) -> None:
    """Run the plain pipeline; the `kill_at`-th file-system mutation SIGKILLs the process first
    (-1: never, only count them into `counter`)."""
    import builtins
    import io as io_module

    calls = [0]

    def point():
        calls[0] += 1
        if calls[0] - 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(fn):
        def wrapped(*args, **kwargs):
            point()
            return fn(*args, **kwargs)
        return wrapped

    for name in _MUTATORS:
        if hasattr(os, name):
            setattr(os, name, wrap(getattr(os, name)))
    real_os_open = os.open

    def os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
            point()
        return real_os_open(path, flags, *args, **kwargs)

    os.open = os_open
    real_open = io_module.open

    def opener(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+"):
            point()
        return real_open(file, mode, *args, **kwargs)

    builtins.open = io_module.open = opener
    from slm4ie_assets.catalog import load_catalog as load
    from slm4ie_assets.pipeline import extract_dataset as run

    cat = load(config)
    for key in keys:
        run(cat.dataset(key), cat, workers=1)
    counter.value = calls[0]


def _fork_context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["slm4ie_assets.pipeline", "slm4ie_assets.archives", "slm4ie_assets.extractors.jsonl",
                                "slm4ie_assets.extractors.text", "slm4ie_assets.extractors.conllu",
                                "slm4ie_assets.extractors.tei.extractor", "numpy", __name__])
    return ctx


def _run_child(ctx, config: Path, keys: list, kill_at: int) -> tuple[int, int]:
    counter = ctx.Value("i", -1)
    proc = ctx.Process(target=_child, args=(str(config), keys, kill_at, counter))
    proc.start()
    proc.join(120)
    assert proc.exitcode is not None, "child hung"
    return proc.exitcode, counter.value


class Frozen:
    """A copy of a project's raw/ and out/ (links, modes and mtimes kept), restored before each kill:
    much faster than re-extracting, and exactly the same starting state every time."""

    def __init__(self, root: Path):
        self.root = root
        self.saved = root.parent / f"{root.name}.frozen"
        shutil.rmtree(self.saved, ignore_errors=True)
        for name in ("raw", "out"):
            shutil.copytree(root / name, self.saved / name, symlinks=True)

    def restore(self) -> None:
        for name in ("raw", "out"):
            shutil.rmtree(self.root / name)
            shutil.copytree(self.saved / name, self.root / name, symlinks=True)


def run_every_mutation_point(tmp_path: Path, key: str, docs: int, stride: int, seed: int, record) -> int:
    """Old published, new raw written; then a kill before mutation k, for every k (stride 1) or a
    seeded sample of them."""
    print(f"\nmutation-point kills: {key} stride={stride} seed={seed}")
    record("seed", seed)
    project = Project(tmp_path / "p", docs, {key: DATASETS[key]})
    spec = project.spec(key)
    ctx = _fork_context()
    project.write("old")
    project.run_plain()
    project.write("new")
    frozen = Frozen(project.root)
    code, total = _run_child(ctx, project.config, [key], -1)
    assert code == 0 and total > 20, (code, total)
    assert snapshot(spec) == project.expected["new"][key]
    offset = random.Random(seed).randrange(stride)
    points = list(range(offset, total, stride))
    hits = {}
    for k in points:
        frozen.restore()
        code, _ = _run_child(ctx, project.config, [key], k)
        note = f"{key}: kill before mutation {k} of {total} (seed={seed})"
        assert code == -signal.SIGKILL, f"{note}: exit code {code}"
        state = assert_consistent(spec, {"old": project.expected["old"][key], "new": project.expected["new"][key]},
                                  note)
        hits[state] = hits.get(state, 0) + 1
        project.run_plain()
        assert snapshot(spec) == project.expected["new"][key], note
        assert_no_leftovers(spec, note)
    print(f"{len(points)} of {total} points; published right after the kill: {hits}")
    if stride == 1:
        assert hits.get("old") and hits.get("new"), hits
    return total


def test_sigkill_before_sampled_file_system_mutations(tmp_path, record_property):
    """A seeded sample (every 6th) of the mutation points of an old -> new jsonl run: archive
    unpacking, parts with a sidecar, a vanished and a new shard, publish."""
    run_every_mutation_point(tmp_path, "c_jsonl", docs=30, stride=6, seed=seed_for(4711), record=record_property)


@pytest.mark.long
@pytest.mark.parametrize("key", list(DATASETS))
def test_sigkill_before_every_file_system_mutation(tmp_path, key, record_property):
    run_every_mutation_point(tmp_path, key, docs=30, stride=1, seed=0, record=record_property)


def publish_dropping_the_sidecar(tmp_path: Path, stride: int, seed: int) -> None:
    """D17 at every point of a publish: the new version has no annotations, so the swap must also
    retire the old sidecar; no kill may show the new text beside the old sidecar (or the reverse)."""
    root = tmp_path / "p"
    raw = root / "raw" / "k"
    with_ann = _jsonl("old", "f0", 20)
    without = b"".join(json.dumps({"doc_id": f"x{i}", "text": f"brez {i}"}).encode() + b"\n" for i in range(20))
    root.mkdir(parents=True)
    cfg = write_config(root, {"k": {"extractor": "jsonl", "domain": "test"}})
    cat = load_catalog(cfg)
    spec = cat.dataset("k")

    def publish(data: bytes):
        raw.mkdir(parents=True, exist_ok=True)
        (raw / "a.jsonl").write_bytes(data)
        extract_dataset(spec, cat, workers=1)
        return snapshot(spec)

    expected_without = publish(without)
    expected_with = publish(with_ann)
    assert expected_with[1] is not None and expected_without[1] is None
    (raw / "a.jsonl").write_bytes(without)  # the new version's parts, as a shards/<key> run leaves them
    extract_shard_batch(ShardBatch(spec, plan_dataset(spec).stale))
    frozen = Frozen(root)
    ctx = _fork_context()
    code, total = _run_child(ctx, cfg, ["k"], -1)  # only the publish is left to do
    assert code == 0 and total >= 10, total
    offset = random.Random(seed).randrange(stride)
    print(f"\n{total} mutation points in the publish, stride {stride}, seed {seed}")
    for k in range(offset, total, stride):
        frozen.restore()
        code, _ = _run_child(ctx, cfg, ["k"], k)
        assert code == -signal.SIGKILL
        assert_consistent(spec, {"with": expected_with, "without": expected_without}, f"kill before mutation {k}")
        extract_dataset(spec, cat, workers=1)
        assert snapshot(spec) == expected_without
        assert not spec.sidecar_path.exists() and not spec.sidecar_path.is_symlink(), f"kill {k}: stale sidecar link"
        assert_no_leftovers(spec, f"kill {k}")


def test_sigkill_in_a_publish_that_drops_the_sidecar(tmp_path):
    publish_dropping_the_sidecar(tmp_path, stride=2, seed=seed_for(99))


@pytest.mark.long
def test_sigkill_at_every_point_of_a_publish_that_drops_the_sidecar(tmp_path):
    publish_dropping_the_sidecar(tmp_path, stride=1, seed=0)


# ----------------------------------------------------------------------------- full disk


@pytest.fixture
def small_tmpfs(tmp_path):
    """Mount tmpfs filesystems of a given size (root with CAP_SYS_ADMIN only); unmounted after."""
    mounted = []

    def mount(path: Path, size: int) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                             text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({res.stderr.strip() or res.returncode}); "
                        "the RLIMIT_FSIZE test covers full disks portably")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, leave: int) -> Path:
    """Fill the filesystem holding `path` until `leave` bytes are free."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler.bin"
    with open(filler, "wb") as fh:
        remaining = max(0, free - leave)
        chunk = b"\0" * (1 << 16)
        try:
            while remaining > 0:
                remaining -= fh.write(chunk[: min(len(chunk), remaining)])
        except OSError:
            pass
    return filler


def full_disk_project(tmp_path: Path, small_tmpfs, size: int) -> Project:
    small_tmpfs(tmp_path / "out", size)
    return Project(tmp_path, docs=300, datasets={"c_jsonl": "jsonl"})


def full_disk_after_a_good_run(tmp_path: Path, small_tmpfs):
    """`c_jsonl` published ("old") on a 16 MB out/, then the disk filled to 64 kB and new input
    written: (project, spec, snapshot of the old output, the filler file)."""
    project = full_disk_project(tmp_path, small_tmpfs, 16 << 20)
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    filler = fill(spec.output_dir, leave=64 << 10)
    project.write("new")
    return project, spec, old, filler


def test_full_disk_while_writing_parts_fails_naming_the_dataset_and_keeps_the_output(tmp_path, small_tmpfs):
    project, spec, old, filler = full_disk_after_a_good_run(tmp_path, small_tmpfs)
    with pytest.raises(OutputWriteError) as err:
        project.run_plain()
    message = str(err.value)
    assert "dataset 'c_jsonl'" in message and "No space left on device" in message, message
    assert "published output is unchanged" in message
    assert snapshot(spec) == old == project.expected["old"]["c_jsonl"]
    assert not [p for p in spec.output_dir.rglob("*") if p.name.endswith(PARTIAL)]  # cleaned on the spot
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the disk was freed")


def test_full_disk_while_publishing_removes_the_new_version_and_keeps_the_output(tmp_path, small_tmpfs):
    """Parts fit, the version does not: the half-written version is removed at once and the previous
    pair stays published."""
    project = full_disk_project(tmp_path, small_tmpfs, 16 << 20)
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    unpack(spec, project.catalog)
    plan = plan_dataset(spec)
    extract_shard_batch(ShardBatch(spec, plan.stale))  # the shards/<key> step: parts only
    filler = fill(spec.output_dir, leave=16 << 10)
    with pytest.raises(OutputWriteError, match="dataset 'c_jsonl'.*No space left on device"):
        project.run_plain()
    assert snapshot(spec) == old
    assert [v.name for v in DatasetStore(spec).versions.iterdir()] == [DatasetStore(spec).current.resolve().name]
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the disk was freed")


def test_full_disk_while_unpacking_fails_and_leaves_raw_and_output_whole(tmp_path, small_tmpfs):
    """The raw folder's disk fills while an archive unpacks: the run fails naming the archive, no
    half-written member stays, the published pair is untouched."""
    project = Project(tmp_path, docs=300, datasets={"c_conllu": "conllu"})
    spec = project.spec("c_conllu")
    raw = spec.raw_dir
    shutil.rmtree(raw, ignore_errors=True)
    small_tmpfs(raw, 8 << 20)
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    filler = fill(raw, leave=8 << 10)
    with pytest.raises(OSError) as err:
        project.run_plain()
    assert "c_conllu/pack.zip" in str(err.value) and "No space left on device" in str(err.value), str(err.value)
    assert not [p for p in raw.rglob("*") if is_temp_name(p.name)]
    assert snapshot(spec) == old
    filler.unlink()
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_conllu"]
    assert_no_leftovers(spec, "after the disk was freed")


FSIZE_RUNNER = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
extract_dataset(cat.dataset(sys.argv[3]), cat, workers=1)
"""


@pytest.mark.parametrize("limit", [1 << 15, 1 << 18])
def test_file_size_limit_fails_naming_the_dataset_portably(tmp_path, limit):
    """RLIMIT_FSIZE (works without root): a part or version file that cannot grow fails the run with
    a message naming the dataset; the published pair is intact; the next run cleans up."""
    project = Project(tmp_path, docs=300, datasets={"c_jsonl": "jsonl"})
    spec = project.spec("c_jsonl")
    project.write("old")
    project.run_plain()
    old = snapshot(spec)
    project.write("new")
    unpack(spec, project.catalog)  # the raw side is not under test here (test_archives covers it)
    res = subprocess.run([sys.executable, "-c", FSIZE_RUNNER, str(project.config), str(limit), "c_jsonl"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    assert "OutputWriteError" in res.stderr and "dataset 'c_jsonl'" in res.stderr, res.stderr[-2000:]
    assert "File too large" in res.stderr
    assert snapshot(spec) == old
    project.run_plain()
    assert snapshot(spec) == project.expected["new"]["c_jsonl"]
    assert_no_leftovers(spec, "after the limit was lifted")


@pytest.mark.long
def test_full_disk_through_the_dagster_cli_names_the_dataset(tmp_path, small_tmpfs):
    """The same failure as a user sees it: the CLI run fails and its log names the dataset."""
    project, spec, old, filler = full_disk_after_a_good_run(tmp_path, small_tmpfs)
    run = Cli(project.config, instance_home(tmp_path / "home"), ["c_jsonl"])
    assert run.wait() != 0
    assert "dataset 'c_jsonl': cannot write under" in run.log and "No space left on device" in run.log
    assert snapshot(spec) == old
    filler.unlink()
    project.run_plain()
    assert_no_leftovers(spec)


@pytest.mark.slow
def test_a_killed_cli_run_does_not_keep_holding_the_extraction_pool(killed_cli_runs):
    """After kills and a successful next CLI run, no dead run of the instance still holds the pool
    that the queued run coordinator uses to admit extraction runs one at a time: the next run's first
    extraction step marked them failed (stale_runs.py; test_stale_runs.py covers the sensor too)."""
    from dagster import DagsterInstance, DagsterRunStatus

    from dagster import DagsterEventType

    phases, home, _ = killed_cli_runs
    killed = sum(v for k, v in phases.items() if k != "finished")
    assert killed, "no run was killed"
    instance = DagsterInstance.from_config(str(home))
    try:
        runs = instance.get_runs()
        stuck = [r.run_id for r in runs if r.status == DagsterRunStatus.STARTED
                 and r.run_op_concurrency and "slm4ie_extract" in (r.run_op_concurrency.all_pools or ())]
        failed = [r.run_id for r in runs if r.status == DagsterRunStatus.FAILURE]
        reasons = [e.message for run_id in failed for e in instance.all_logs(run_id, of_type=DagsterEventType.RUN_FAILURE)]
    finally:
        instance.dispose()
    assert not stuck, f"dead runs still holding the slm4ie_extract pool: {stuck}"
    assert len(failed) == killed and all("is gone" in m for m in reasons), reasons
