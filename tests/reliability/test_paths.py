"""Config and paths (docs/guarantees.md 4): nothing a config, a partition key or the raw tree holds makes the
pipeline write outside `extracted/` (or, for archive unpacking, outside `raw/<key>/`), and raw
entries that cannot be read are reported, never followed forever or silently lost (D6, D15, D16,
ADDENDUM 3.1).

Unreadable files: the tests run as root, for whom `chmod 000` blocks nothing. The run under test is
therefore started through `setpriv --bounding-set=-dac_override,-dac_read_search`: still uid 0 (it can
reach the venv under /root), but without the two capabilities that let root ignore file modes, so a
mode-000 file or folder really is unreadable to it. As a non-root user the run is started directly.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from slm4ie_assets.catalog import CatalogError, load_catalog, parse_catalog
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.store.dataset_store import DatasetStore
from support.files import read_jsonl, write_config, write_files

NS = 'xmlns="http://www.tei-c.org/ns/1.0"'

# one small valid input per file-based extractor: (file suffix, content template with {n})
SAMPLES = {
    "text": (".txt", "besedilo {n}\n"),
    "jsonl": (".jsonl", '{{"doc_id": "{n}", "text": "besedilo {n}"}}\n'),
    "json": (".json", '[{{"doc_id": "{n}", "text": "besedilo {n}"}}]'),
    "conllu": (".conllu", "# newdoc id = {n}\n1\tbesedilo\tbesedilo\tNOUN\t_\t_\t0\troot\t_\t_\n"
                          "2\t{n}\t{n}\tNUM\t_\t_\t1\tnummod\t_\t_\n\n"),
    "tei": (".xml", f'<TEI {NS}><text><body><p xml:id="{{n}}">besedilo {{n}}</p></body></text></TEI>'),
    "macocu": (".xml", '<corpus><doc id="{n}"><p>besedilo {n}</p></doc></corpus>'),
    "coleslaw": (".jsonl", '{{"doc_id": "{n}", "text": "besedilo {n}"}}\n'),
}


def sample(extractor: str, n: str) -> tuple[str, str]:
    suffix, template = SAMPLES[extractor]
    return suffix, template.format(n=n)


@contextmanager
def deadline(seconds: float):
    """Fail instead of hanging: a blocking open of a fifo (or a loop followed forever) is cut off."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds}s: something blocked or looped")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def tree(root: Path) -> dict:
    """Every path under root (links not followed) with its kind, size and mtime."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            is_dir = stat.S_ISDIR(st.st_mode)  # a folder's own mtime changes with its entries: not compared
            found[p.relative_to(root).as_posix()] = (st.st_mode >> 12, None if is_dir else st.st_size,
                                                     None if is_dir else st.st_mtime_ns)
    return found


# ----------------------------------------------------------------------------- dataset keys (D15)


ESCAPING_KEYS = ["../x", "..", ".", "/abs", "/etc/passwd", "a/b", "a\\b", "..\\x", "x/../../y", "", " ", "x.y",
                 "x y", "~root", "$HOME", "kas\n", "kas\r", "kas\x00", "ključ", "kas:1", "*"]


@pytest.mark.parametrize("key", ESCAPING_KEYS, ids=repr)
def test_d15_dataset_key_that_could_leave_extracted_is_refused_at_load(tmp_path, key):
    """A dataset key names `extracted/<key>.jsonl` and `raw/<key>/`: only [A-Za-z0-9_] is accepted,
    the whole key (a trailing newline included), with an error naming the key; nothing is created."""
    (tmp_path / "raw").mkdir()
    cfg = tmp_path / "extract.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                   "datasets": {key: {"extractor": "text", "domain": "web"}}}), encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        load_catalog(cfg)
    assert f"datasets.{key}: dataset key must be letters, digits and underscores only" in str(err.value)
    # the same document handed over already parsed (the Dagster code location path)
    with pytest.raises(CatalogError):
        parse_catalog({"datasets": {key: {"extractor": "text", "domain": "web"}}}, cfg)
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extract.yaml", "raw"]


@pytest.mark.parametrize("key", [123, True, None, 1.5, ("a", "b")], ids=repr)
def test_d15_non_string_dataset_keys_are_refused(tmp_path, key):
    with pytest.raises(CatalogError, match="dataset key must be letters, digits and underscores only"):
        parse_catalog({"datasets": {key: {"extractor": "text", "domain": "web"}}}, tmp_path / "extract.yaml")


def test_accepted_keys_resolve_inside_input_and_output_dirs(tmp_path):
    cfg = write_config(tmp_path, {k: {"extractor": "text", "domain": "web"} for k in ("kas", "K_2", "_x9")})
    cat = load_catalog(cfg)
    for spec in cat.datasets.values():
        for path in (spec.text_path, spec.sidecar_path, DatasetStore(spec).state):
            assert path.resolve().parent in (cat.output_dir, cat.output_dir / ".slm4ie")
        assert spec.raw_dir.resolve().parent == cat.input_dir


# ----------------------------------------------------------------------------- shard keys


HOSTILE_SHARD_KEYS = ["../../../escape", "/etc/passwd", "a/../../b", "..%2F..%2Fx", "x\\..\\..\\y", "%head", "",
                      "." * 300, "\x00", "x/" * 200]


@pytest.mark.parametrize("key", HOSTILE_SHARD_KEYS, ids=lambda k: repr(k)[:40])
def test_a_shard_key_never_becomes_a_path(tmp_path, key):
    """Part files are named by a hash of the shard key, so no key (a hand-typed partition key
    included) can point a part outside `.slm4ie/<key>/parts/`."""
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "web"}})
    store = DatasetStore(load_catalog(cfg).dataset("kas"))
    for path in store.part_paths(key):
        assert path.parent == store.parts and path.resolve().parent == store.parts.resolve()
        assert path.name.split(".", 1)[0].isalnum() and len(path.name) < 64


def test_hand_typed_partition_key_fails_the_run_and_writes_nothing(tmp_path):
    """`shards/<key>` with a partition key that names no file (here one shaped like a path escape)
    fails with a message naming the key; no file is created anywhere."""
    watched, tmp_path = tmp_path, tmp_path / "a" / "b" / "project"  # room for escapes to land in
    from dagster import AssetSelection, instance_for_test, materialize

    from slm4ie_assets.dagster_layer.assets import partitions_name, shards_key
    from slm4ie_assets.dagster_layer.io_manager import ExtractIOManager
    from slm4ie_assets.dagster_layer.resources import ExtractSettings
    from slm4ie_assets.definitions import build_definitions

    write_files(tmp_path / "raw" / "kas", {"a.txt": "prvi\n"})
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "web"}})
    defs = build_definitions(load_catalog(cfg))
    resources = {"extract": ExtractSettings(), "extract_io": ExtractIOManager()}
    home = tmp_path / "home"
    home.mkdir()
    with instance_for_test(temp_dir=str(home)) as instance:
        evil = "../../../../escaped"
        instance.add_dynamic_partitions(partitions_name("kas"), [evil])
        before = tree(watched)
        result = materialize([*defs.assets], instance=instance, selection=AssetSelection.assets(shards_key("kas")),
                             partition_key=evil, resources=resources, raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        assert repr(evil) in failure.event_specific_data.error.message
        after = tree(watched)
    changed = {p for p in set(after) | set(before) if before.get(p) != after.get(p)}
    assert all(p == "a/b/project/home" or p.startswith("a/b/project/home/") for p in changed), sorted(changed)[:10]


def test_files_with_hostile_names_publish_and_write_only_under_extracted(tmp_path):
    """Raw files whose names hold `..`, `%`, `,`, brackets, backslashes, spaces, newlines and
    255-byte names are extracted; every path the run creates lies in `extracted/`."""
    names = ["..a.txt", "a..b.txt", "...txt", "%2e%2e.txt", "a,b[1].txt", "back\\slash.txt", "s p a c e.txt",
             "new\nline.txt", "tab\t.txt", "č" * 60 + ".txt", "x" * 251 + ".txt", "sub/..x/y.txt"]
    watched, tmp_path = tmp_path, tmp_path / "a" / "b" / "project"
    write_files(tmp_path / "raw" / "kas", {n: f"dokument {i}\n" for i, n in enumerate(names)})
    cfg = write_config(tmp_path, {"kas": {"extractor": "text", "domain": "web"}})
    cat = load_catalog(cfg)
    raw_before = tree(tmp_path / "raw")
    outside_before = tree(watched)
    extract_dataset(cat.dataset("kas"), cat, workers=1)
    lines = read_jsonl(tmp_path / "out" / "kas.jsonl")
    assert sorted(r["text"] for r in lines) == sorted(f"dokument {i}" for i in range(len(names)))
    assert tree(tmp_path / "raw") == raw_before  # nothing is written into raw/ (no archives here)
    outside_after = tree(watched)
    changed = {p for p in set(outside_after) | set(outside_before) if outside_before.get(p) != outside_after.get(p)}
    assert all(p == "a/b/project/out" or p.startswith("a/b/project/out/") for p in changed), sorted(changed)[:5]
    assert {p.split("/")[4] for p in changed if p.count("/") >= 4} == {"kas.jsonl", ".slm4ie"}


# ----------------------------------------------------------------------------- links, loops, fifos (ADDENDUM 3.1, D6)


@pytest.mark.parametrize("extractor", sorted(SAMPLES))
def test_d6_link_loops_broken_links_and_fifos_are_reported_never_followed(tmp_path, extractor):
    """Symlinked folders are not descended (a loop is never followed); a link loop, a broken link
    and a fifo named like an input are each counted as `unreadable_path` with a warning naming the
    entry, and never opened (a fifo would block forever); the readable files are all extracted."""
    suffix, _ = SAMPLES[extractor]
    raw = tmp_path / "raw" / "k"
    files = {f"a{suffix}": sample(extractor, "a")[1], f"sub/b{suffix}": sample(extractor, "b")[1]}
    write_files(raw, files)
    (raw / "sub" / "loop").symlink_to("..", target_is_directory=True)  # raw/k/sub/loop -> raw/k
    (raw / "up").symlink_to(raw.parent, target_is_directory=True)
    (raw / f"self{suffix}").symlink_to(f"self{suffix}")
    (raw / f"ping{suffix}").symlink_to(f"pong{suffix}")
    (raw / f"pong{suffix}").symlink_to(f"ping{suffix}")
    (raw / f"gone{suffix}").symlink_to(tmp_path / "nowhere" / f"x{suffix}")
    os.mkfifo(raw / f"pipe{suffix}")
    cfg = write_config(tmp_path, {"k": {"extractor": extractor, "domain": "web"}})
    cat = load_catalog(cfg)
    with deadline(60):
        report = extract_dataset(cat.dataset("k"), cat, workers=1)
    lines = read_jsonl(tmp_path / "out" / "k.jsonl")
    assert [r["text"] for r in lines] == ["besedilo a", "besedilo b"]
    manifest = report.manifest
    assert manifest.drops == {"unreadable_path": 5}
    expected = {f"k/self{suffix}: a symbolic link loop", f"k/ping{suffix}: a symbolic link loop",
                f"k/pong{suffix}: a symbolic link loop", f"k/gone{suffix}: a symbolic link whose target does not exist",
                f"k/pipe{suffix}: not a regular file (a fifo)"}
    reported = {w.split(";")[0] for w in report.warnings if w.endswith("[unreadable_path]")}
    assert reported == expected
    assert set(manifest.discovery_warnings) == {w for w in report.warnings if w.endswith("[unreadable_path]")}


def test_d6_strict_dataset_fails_on_an_unreadable_entry(tmp_path):
    write_files(tmp_path / "raw" / "k", {"a.txt": "ena\n"})
    os.mkfifo(tmp_path / "raw" / "k" / "pipe.txt")
    cfg = write_config(tmp_path, {"k": {"extractor": "text", "domain": "web", "strict": True}})
    cat = load_catalog(cfg)
    from slm4ie_assets.pipeline import StrictModeViolation

    with deadline(60), pytest.raises(StrictModeViolation, match=r"unreadable_path: 1.*k/pipe\.txt"):
        extract_dataset(cat.dataset("k"), cat, workers=1)
    assert not (tmp_path / "out" / "k.jsonl").exists()


def test_addendum_3_1_symlinked_file_out_of_raw_is_read_but_a_linked_folder_is_not(tmp_path):
    """ADDENDUM 3.1 includes symlinked files, wherever they point (the link is the dataset's own
    choice of input; only archives refuse links out, D16), and does not descend symlinked folders.
    Documented in docs/guarantees.md."""
    outside = tmp_path / "elsewhere"
    write_files(outside, {"x.txt": "zunaj\n", "dir/y.txt": "tudi zunaj\n"})
    raw = tmp_path / "raw" / "k"
    write_files(raw, {"a.txt": "notri\n"})
    (raw / "link.txt").symlink_to(outside / "x.txt")
    (raw / "linked_dir").symlink_to(outside / "dir", target_is_directory=True)
    cfg = write_config(tmp_path, {"k": {"extractor": "text", "domain": "web"}})
    cat = load_catalog(cfg)
    report = extract_dataset(cat.dataset("k"), cat, workers=1)
    lines = read_jsonl(tmp_path / "out" / "k.jsonl")
    assert [(r["doc_id"], r["text"]) for r in lines] == [("a:000000", "notri"), ("link:000000", "zunaj")]
    assert report.manifest.drops == {}
    assert (outside / "x.txt").read_text() == "zunaj\n"  # read, never written


# ----------------------------------------------------------------------------- unreadable files (D6)


RUNNER = """
import json, sys
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
cat = load_catalog(sys.argv[1])
results = {}
for key in sys.argv[2:]:
    try:
        r = extract_dataset(cat.dataset(key), cat, workers=1)
        results[key] = {"drops": r.manifest.drops, "warnings": r.warnings}
    except Exception as exc:
        results[key] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(results))
"""


def run_without_file_permissions_bypass(args: list, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run python with file modes enforced: as root, through setpriv without the DAC capabilities."""
    cmd = [sys.executable, *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: file modes cannot be enforced")
        cmd = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_permission_denied_is_really_enforced_for_the_runs_below(tmp_path):
    """Guards the method: without this, the tests below could pass because nothing was unreadable."""
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    res = run_without_file_permissions_bypass(["-c", f"open({str(secret)!r}).read()"])
    assert res.returncode != 0 and "PermissionError" in res.stderr


def test_d6_unreadable_files_and_folders_cost_only_themselves_in_every_extractor(tmp_path):
    """A file that cannot be opened (permission denied) is skipped and counted as `unreadable_file`
    with a warning naming it; a folder that cannot be listed is counted as `unreadable_path`; every
    other file of the dataset is still extracted."""
    datasets = {}
    for extractor in sorted(SAMPLES):
        suffix, _ = SAMPLES[extractor]
        key = f"d_{extractor}"
        raw = tmp_path / "raw" / key
        write_files(raw, {f"a{suffix}": sample(extractor, "a")[1], f"b{suffix}": sample(extractor, "b")[1],
                          f"c{suffix}": sample(extractor, "c")[1], f"locked/d{suffix}": sample(extractor, "d")[1]})
        (raw / f"b{suffix}").chmod(0)
        (raw / "locked").chmod(0)
        datasets[key] = {"extractor": extractor, "domain": "web"}
    cfg = write_config(tmp_path, datasets)
    res = run_without_file_permissions_bypass(["-c", RUNNER, str(cfg), *datasets])
    assert res.returncode == 0, res.stderr[-3000:]
    results = json.loads(res.stdout)
    for key, spec in datasets.items():
        suffix, _ = SAMPLES[spec["extractor"]]
        got = results[key]
        assert "error" not in got, (key, got)
        assert got["drops"] == {"unreadable_file": 1, "unreadable_path": 1}, (key, got)
        texts = [r["text"] for r in read_jsonl(tmp_path / "out" / f"{key}.jsonl")]
        assert texts == ["besedilo a", "besedilo c"], key
        assert any(w.startswith(f"{key}/b{suffix}") and "Permission denied" in w for w in got["warnings"]), got
        assert any(w.startswith(f"{key}/locked: folder cannot be listed") for w in got["warnings"]), got


def test_unlistable_raw_folder_fails_the_dataset_and_keeps_the_previous_output(tmp_path):
    """A raw/<key>/ that cannot be listed is an error naming it, never an empty dataset published
    over the previous output."""
    write_files(tmp_path / "raw" / "k", {"a.txt": "prvi\n"})
    cfg = write_config(tmp_path, {"k": {"extractor": "text", "domain": "web"}})
    cat = load_catalog(cfg)
    extract_dataset(cat.dataset("k"), cat, workers=1)
    before = (tmp_path / "out" / "k.jsonl").read_bytes()
    (tmp_path / "raw" / "k").chmod(0)
    try:
        res = run_without_file_permissions_bypass(["-c", RUNNER.replace("workers=1)", "workers=1, force=True)"),
                                                   str(cfg), "k"])
    finally:
        (tmp_path / "raw" / "k").chmod(0o755)
    assert res.returncode == 0, res.stderr[-3000:]
    error = json.loads(res.stdout)["k"]["error"]
    assert "Permission denied" in error and str(tmp_path / "raw" / "k") in error
    assert (tmp_path / "out" / "k.jsonl").read_bytes() == before
