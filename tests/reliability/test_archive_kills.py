"""Unpacking that survives a kill (issue 39, case 3; D16, D17).

Before (55def41): what an archive produced was recorded in memory and saved every 30 s and at the
end, so a run killed after an archive's outputs were renamed into place left them without a claim.
The next run unpacked every inner archive on a budget of its own (`raw/t` peaked at 600 MB against
the root's 67 MB budget), and files a newer version of the root no longer held were never withdrawn
(their text stayed published). Now each archive's outputs are written down durably, as an intent,
before the first of them is renamed into place, and the next run reads the intents back.

Proof: a nested unpack is SIGKILLed before EVERY file-system mutation it makes (each open for
writing, rename, unlink, mkdir, fsync ...), in a child forked from a clean fork server whose `os`
functions kill the process just before call k, so no window is too short to hit. After each kill
the next run, by the real pipeline:
- budget: a root whose tree breaches its budget is still a counted `bad_archive` skip with nothing of
  its tree left, and the next run never made the raw tree hold more than the root's budget, no
  slack: what the killed run left of the tree is charged as recorded, or withdrawn before its
  archive is unpacked again (before, every inner archive had a budget of its own; then, the killed
  run's copy of an inner archive's outputs stood beside the new one: up to twice the budget);
- withdrawal: a root replaced by a version without some members publishes none of their text and
  leaves none of their files (nested ones included);
and no temporary file is left behind."""

import gzip
import multiprocessing
import os
import shutil
import signal
from pathlib import Path

import pytest

from slm4ie_assets.archives import unpack_archives
from slm4ie_assets.archives.names import TEMP_MARK
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
from support import kill_points
from support.archive_files import files_under, tar_of
from support.files import read_jsonl, write_config, write_files

INNER_TEXT = b"".join(f"Dober dan, to je vrstica {i:05d} besedila.\n".encode() for i in range(300))
INNER = 5  # .txt.gz members of the budget root; its budget holds them and one of their texts


def tree_bytes(raw: Path, besides: frozenset[str]) -> int:
    """Bytes of every file under `raw` other than `besides` (the raw files the test wrote)."""
    total = 0
    for folder, _dirs, names in os.walk(raw):
        for name in names:
            path = Path(folder) / name
            if path.relative_to(raw).as_posix() not in besides:
                total += os.lstat(path).st_size
    return total


def _child(raw: str, state: str, max_bytes: int, save_every: float | None, kill_at: int, counter, besides,
           peak) -> None:
    """Unpack raw/ once; the `kill_at`-th file-system mutation SIGKILLs the process first (-1:
    never, count them into `counter`). `peak` gets the most bytes the tree held at any mutation.
    `save_every`, when given, replaces the seconds between the run's state saves."""
    def measure() -> None:
        peak.value = max(peak.value, tree_bytes(Path(raw), besides))

    points = kill_points.arm(kill_at, measure)
    from slm4ie_assets.archives import run, unpack_archives
    from slm4ie_assets.catalog import ArchiveLimits

    if save_every is not None:
        run.SAVE_EVERY = save_every
    unpack_archives(Path(raw), Path(state), ArchiveLimits(max_ratio=1e9, max_bytes=max_bytes))
    counter.value = points.count


class KilledUnpack:
    """Runs `_child` in processes forked from one clean fork server."""

    def __init__(self, raw: Path, state: Path, max_bytes: int, besides: frozenset[str],
                 save_every: float | None = None):
        self.ctx = multiprocessing.get_context("forkserver")
        # the server cannot import this module (tests/ is not on its path), so each child imports
        # it; everything it imports is preloaded here, pytest included (about 0.3 s a child without)
        self.ctx.set_forkserver_preload(["slm4ie_assets.pipeline", "slm4ie_assets.archives", "yaml", "pytest",
                                         __name__])
        self.args = (str(raw), str(state), max_bytes, save_every)
        self.besides = besides

    def run(self, kill_at: int) -> tuple[int | None, int, int]:
        """(exit code, mutations made, most bytes the tree held)."""
        counter, peak = self.ctx.Value("i", -1), self.ctx.Value("q", 0)
        proc = self.ctx.Process(target=_child, args=(*self.args, kill_at, counter, self.besides, peak))
        proc.start()
        proc.join(60)
        assert proc.exitcode is not None, "child hung"
        return proc.exitcode, counter.value, peak.value


def reset(root: Path, raw_files: dict[str, bytes]) -> None:
    for name in ("raw", "out"):
        shutil.rmtree(root / name, ignore_errors=True)
    write_files(root / "raw" / "t", raw_files)


class Peak:
    """The most bytes the raw tree (its files other than `besides`) held before any file-system
    mutation of this process: temporary files are whole before they are renamed."""

    def __init__(self, raw: Path, besides: frozenset[str]):
        self.raw, self.besides, self.bytes = raw, besides, 0

    def patch(self, monkeypatch) -> None:
        for name in ("replace", "rename", "unlink", "open", "fsync"):
            real = getattr(os, name)

            def measured(*args, _real=real, **kwargs):
                self.bytes = max(self.bytes, tree_bytes(self.raw, self.besides))
                return _real(*args, **kwargs)
            monkeypatch.setattr(os, name, measured)


@pytest.mark.slow  # 45 + 63 kills, 3-6 s each variant on a loaded 2-core host (pytest preloaded in the fork server)
# the run's state saved only at its end (its intents read back from the journal), or after every
# archive (a roll-back that a kill cuts short is then read back from the state, not the journal)
@pytest.mark.parametrize("save_every", [None, pytest.param(0.0, marks=pytest.mark.long)],  # CI: the journal's
                         ids=["journal", "state-saved-after-each-archive"])  # route; `make test-long`: both
def test_a_killed_nested_unpack_keeps_the_root_budget_at_every_step(tmp_path, monkeypatch, save_every):
    inner = gzip.compress(INNER_TEXT, mtime=0)
    root = tar_of({f"part{i}.txt.gz": inner for i in range(INNER)})
    raw_files = {"root.tar": root, "plain.txt": b"navadna datoteka\n"}
    limit = len(inner) * INNER + len(INNER_TEXT) * 6 // 5  # the root's members and one of their texts fit, two do not
    cfg = write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}}, archives={"max_bytes": limit})
    catalog = load_catalog(cfg)
    raw, state = tmp_path / "raw" / "t", tmp_path / "out" / ".slm4ie" / "t" / "archives.json"
    reset(tmp_path, raw_files)
    killed = KilledUnpack(raw, state, limit, frozenset(raw_files), save_every)
    code, total, peak = killed.run(-1)
    assert code == 0 and total > 20 and peak <= limit, (code, total, peak)

    peaks = []
    for k in range(total):
        reset(tmp_path, raw_files)
        code, _, _ = killed.run(k)
        note = f"kill before mutation {k} of {total}"
        assert code == -signal.SIGKILL, f"{note}: exit code {code}"
        peak = Peak(raw, frozenset(raw_files))
        with monkeypatch.context() as patched:
            peak.patch(patched)
            unpack_archives(raw, state, catalog.archives)  # the next run, measured
        # the root is unchanged, so nothing of its tree stands uncharged: what the killed run left is
        # either charged as recorded or withdrawn before its archive is unpacked again
        assert peak.bytes <= limit, f"{note}: the raw tree held {peak.bytes:,} bytes, budget {limit:,}"
        peaks.append(peak.bytes)
        report = extract_dataset(catalog.dataset("t"), catalog)
        assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}, note
        assert files_under(raw) == set(raw_files), f"{note}: {sorted(files_under(raw) - set(raw_files))}"
        assert [r["text"] for r in read_jsonl(tmp_path / "out" / "t.jsonl")] == ["navadna datoteka"], note
    print(f"\n{total} kills; the next run's raw tree peaked at {max(peaks):,} bytes (budget {limit:,})")


@pytest.mark.slow  # 27 kills, 2-3 s on a loaded 2-core host
def test_a_killed_nested_unpack_withdraws_what_a_newer_root_dropped_at_every_step(tmp_path):
    deeper = gzip.compress(b"v1 globoko\n", mtime=0)
    old = tar_of({"a.txt": b"v1 a\n", "b.txt": b"v1 b\n",
                  "in.tar.gz": tar_of({"c.txt": b"v1 c\n", "deeper.txt.gz": deeper}, "w:gz")})
    new = tar_of({"a.txt": b"v2 a\n"})
    cfg = write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}})
    catalog = load_catalog(cfg)
    raw, state = tmp_path / "raw" / "t", tmp_path / "out" / ".slm4ie" / "t" / "archives.json"
    reset(tmp_path, {"a_root.tar": old})
    killed = KilledUnpack(raw, state, 1 << 30, frozenset({"a_root.tar"}))
    code, total, _ = killed.run(-1)
    assert code == 0 and total > 10, (code, total)
    assert files_under(raw) == {"a_root.tar", "a.txt", "b.txt", "in.tar.gz", "c.txt", "deeper.txt.gz", "deeper.txt"}

    for k in range(total):
        reset(tmp_path, {"a_root.tar": old})
        code, _, _ = killed.run(k)
        note = f"kill before mutation {k} of {total}"
        assert code == -signal.SIGKILL, f"{note}: exit code {code}"
        stamp = (raw / "a_root.tar").stat().st_mtime_ns
        (raw / "a_root.tar").write_bytes(new)  # a newer version of the root, without b, c and deeper
        os.utime(raw / "a_root.tar", ns=(stamp + 10**9, stamp + 10**9))
        report = extract_dataset(catalog.dataset("t"), catalog)
        assert report.manifest is not None and report.manifest.drops == {}, note
        assert [r["text"] for r in read_jsonl(tmp_path / "out" / "t.jsonl")] == ["v2 a"], note
        assert files_under(raw) == {"a_root.tar", "a.txt"}, note
        assert not [p for p in raw.rglob("*") if TEMP_MARK in p.name], note



def test_an_archive_unpacked_again_as_the_same_version_starts_from_nothing_of_its_tree(tmp_path, monkeypatch):
    """Without a kill too: an output lost (here the inner archive) makes the unchanged root unpack
    again; its recorded tree is withdrawn first, so the inner archive's old text never stands
    beside its new copy (on h39a before this rule: the tree held both, 1.6x the budget)."""
    inner = gzip.compress(INNER_TEXT, mtime=0)
    raw_files = {"root.tar": tar_of({"part0.txt.gz": inner})}
    limit = len(inner) + len(INNER_TEXT) * 6 // 5  # the tree once, not the text twice
    raw, state = tmp_path / "raw" / "t", tmp_path / "state" / "archives.json"
    write_files(raw, raw_files)
    limits = load_catalog(write_config(tmp_path, {"t": {"extractor": "text", "domain": "test"}},
                                       archives={"max_bytes": limit})).archives
    unpack_archives(raw, state, limits)
    (raw / "part0.txt.gz").unlink()
    peak = Peak(raw, frozenset(raw_files))
    with monkeypatch.context() as patched:
        peak.patch(patched)
        report = unpack_archives(raw, state, limits)
    assert report.unpacked == ["root.tar", "part0.txt.gz"] and not report.skipped, report
    assert files_under(raw) == {"root.tar", "part0.txt.gz", "part0.txt"}
    assert (raw / "part0.txt").read_bytes() == INNER_TEXT
    assert peak.bytes <= limit, f"the raw tree held {peak.bytes:,} bytes, budget {limit:,}"


def test_an_edited_output_of_a_withdrawn_tree_is_replaced_as_before_not_refused(tmp_path):
    """The withdrawal leaves a file changed by hand in place and still claimed by its archive, so
    unpacking again replaces it, as it always did, instead of refusing the root as if the file were
    somebody's own (issue 39, case 1)."""
    raw, state = tmp_path / "raw" / "t", tmp_path / "state" / "archives.json"
    write_files(raw, {"root.tar": tar_of({"in.tar": tar_of({"a.txt": b"iz arhiva\n"})})})
    unpack_archives(raw, state)
    (raw / "a.txt").write_bytes(b"popravljeno na roke\n")
    (raw / "in.tar").unlink()  # the root unpacks again as the same version; in.tar's record goes with it
    report = unpack_archives(raw, state)
    assert not report.skipped and report.unpacked == ["root.tar", "in.tar"], report
    assert (raw / "a.txt").read_bytes() == b"iz arhiva\n"
    assert files_under(raw) == {"root.tar", "in.tar", "a.txt"}
