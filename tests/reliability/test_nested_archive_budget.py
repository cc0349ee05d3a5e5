"""One budget per root archive (issue 34, case 1; D16).

Before: each archive was budgeted against its own size, so a tar.xz of 45 identical .txt.gz members
unpacked to 387x its size although `max_ratio` was 50. Now everything unpacked from a raw archive,
at any depth, is charged to that root's `max_ratio`, `max_bytes` and `max_members`; a breach skips
the root as a counted `bad_archive` naming the root and the member where it tripped, and nothing of
the root's tree is left. Real archives in tmp_path, unpacked by the real pipeline."""

import gzip
import json
import lzma

from slm4ie_assets.archives import unpack_archives
from slm4ie_assets.archives.names import TEMP_MARK
from slm4ie_assets.catalog import ArchiveLimits, load_catalog
from slm4ie_assets.pipeline import extract_dataset
from support.archive_files import files_under, tar_of
from support.files import read_jsonl, write_config, write_files

INNER_TEXT = b"".join(f"Dober dan, to je vrstica {i:05d} besedila.\n".encode() for i in range(1000))  # 41,000 B
MEMBERS = 45
RATIO = 500  # the limit scaled to the test: each archive alone is far under it, the root's tree is not


def tar_xz(members: dict[str, bytes]) -> bytes:
    return lzma.compress(tar_of(members))


def nested_bomb() -> bytes:
    """45 identical .txt.gz members (xz stores them about once): each archive alone unpacks to far
    less than RATIO times its size, the root's tree to several times more."""
    inner = gzip.compress(INNER_TEXT, mtime=0)
    assert len(INNER_TEXT) < RATIO * len(inner) / 10
    return tar_xz({f"part{i:02d}.txt.gz": inner for i in range(MEMBERS)})


def test_a_nested_archive_is_charged_to_its_root_and_a_breach_skips_only_the_root(tmp_path):
    raw = tmp_path / "raw" / "ds"
    root = nested_bomb()
    # the tree is 45 x 41 KB = 1.8 MB, over 2,000x the root; the gz members at depth 1 (45 x 2.6 KB)
    # are within RATIO x the root, so the limit trips at depth 2
    assert MEMBERS * len(INNER_TEXT) > 4 * RATIO * len(root) > 2 * MEMBERS * len(gzip.compress(INNER_TEXT))
    write_files(raw, {"outer.tar.xz": root, "plain.txt": "navadna datoteka\n",
                      "small.txt.gz": gzip.compress(b"majhen arhiv\n")})
    catalog = load_catalog(write_config(tmp_path, {"ds": {"extractor": "text", "domain": "t"}},
                                        archives={"max_ratio": RATIO}))
    lines: list[str] = []
    report = extract_dataset(catalog.dataset("ds"), catalog, log=lines.append)

    assert report.manifest is not None and report.manifest.drops == {"bad_archive": 1}
    warning = next(line for line in lines if line.startswith("WARNING ds/outer.tar.xz: skipped"))
    assert f"unpacks to more than {RATIO * len(root):,} bytes at any depth" in warning
    assert f"max_ratio {RATIO} x {len(root):,} root archive bytes" in warning
    assert "reached in member 'part" in warning and ".txt' of ds/part" in warning  # the member, its archive
    # rolled back: the root's members and what came out of them are gone, no temporary file is left
    assert files_under(raw) == {"outer.tar.xz", "plain.txt", "small.txt.gz", "small.txt"}
    assert not [p for p in raw.rglob("*") if TEMP_MARK in p.name]
    # the dataset's other raw files, archived or not, are extracted
    texts = sorted(r["text"] for r in read_jsonl(tmp_path / "out" / "ds.jsonl"))
    assert texts == ["majhen arhiv", "navadna datoteka"]

    # unchanged, the root is skipped again without being read; with a budget that fits, all unpacks
    again: list[str] = []
    assert extract_dataset(catalog.dataset("ds"), catalog, log=again.append).manifest.drops == {"bad_archive": 1}
    assert any("ds/outer.tar.xz: skipped" in line and "unchanged since the last try" in line for line in again)
    roomy = load_catalog(write_config(tmp_path, {"ds": {"extractor": "text", "domain": "t"}},
                                      archives={"max_ratio": 10 * RATIO}))
    done = extract_dataset(roomy.dataset("ds"), roomy)
    assert done.manifest is not None and done.manifest.drops == {} and done.manifest.files == MEMBERS + 2


def test_max_bytes_and_max_members_count_every_depth(tmp_path):
    raw = tmp_path / "ds"
    inners = [tar_xz({f"d{j}/f{i}.txt": b"x" * 100 for i in range(4)}) for j in range(3)]
    inner = max(inners, key=len)
    write_files(raw, {"root.tar.xz": tar_xz({f"in{j}.tar.xz": data for j, data in enumerate(inners)})})
    state = tmp_path / "state.json"
    # per archive 3 or 4 members, the root's tree 15
    members = unpack_archives(raw, state, ArchiveLimits(max_ratio=1e6, max_members=10))
    assert [s.path for s in members.skipped] == ["root.tar.xz"]
    assert "holds more than 10 members at any depth" in members.skipped[0].reason
    assert "reached at member 'd1/f3.txt' of ds/in1.tar.xz" in members.skipped[0].reason  # 3 + 4 + 4th
    assert files_under(raw) == {"root.tar.xz"}
    # bytes: the inner archives fit in max_bytes, not together with the text in them
    limit = 3 * len(inner) + 500
    by_bytes = unpack_archives(raw, state, ArchiveLimits(max_ratio=1e6, max_bytes=limit))
    assert [s.path for s in by_bytes.skipped] == ["root.tar.xz"]
    assert f"more than {limit:,} bytes at any depth (limit max_bytes {limit:,}" in by_bytes.skipped[0].reason
    assert files_under(raw) == {"root.tar.xz"}
    fits = unpack_archives(raw, state, ArchiveLimits(max_ratio=1e6, max_bytes=3 * len(inner) + 1200,
                                                     max_members=15))
    assert not fits.skipped and len(files_under(raw)) == 1 + 3 + 12


def test_an_inner_archive_unpacked_again_later_is_charged_with_the_rest_of_its_root(tmp_path):
    """The root is current from an earlier run; only an inner archive's output was removed, so only
    it is unpacked again: the root's budget still counts what the rest of the tree holds."""
    raw = tmp_path / "ds"
    inner = gzip.compress(INNER_TEXT, mtime=0)
    write_files(raw, {"root.tar.xz": tar_xz({"a.txt.gz": inner, "b.txt.gz": inner})})
    state = tmp_path / "state.json"
    assert unpack_archives(raw, state, ArchiveLimits(max_ratio=1e6)).unpacked == ["root.tar.xz", "a.txt.gz",
                                                                                  "b.txt.gz"]
    (raw / "a.txt").unlink()
    # the tree holds 2 x 41,000 bytes of text and two small gz: a.txt alone fits 60,000 bytes, not
    # on top of b.txt
    tight = ArchiveLimits(max_ratio=1e6, max_bytes=60_000)
    report = unpack_archives(raw, state, tight)
    assert [s.path for s in report.skipped] == ["root.tar.xz"]
    assert "reached in member 'a.txt' of ds/a.txt.gz" in report.skipped[0].reason
    assert files_under(raw) == {"root.tar.xz"}  # nothing of the root's tree is left
    assert not report.unpacked and not report.up_to_date


def test_a_bomb_refused_by_an_older_version_is_reported_as_a_skip_now(tmp_path):
    """State files written before the per-root budget recorded a bomb as a refusal (the dataset
    failed); replayed unchanged, it is the counted skip a bomb is today."""
    raw = tmp_path / "ds"
    write_files(raw, {"zeros.txt.gz": gzip.compress(bytes(1_000_000))})
    st = (raw / "zeros.txt.gz").stat()
    limits = ArchiveLimits(max_ratio=10)
    old = ("ds/zeros.txt.gz: unpacks to more than 10,000 bytes (limit max_ratio 10 x 1,000 archive bytes; reached "
           "in member 'zeros.txt'); raise archives.max_ratio / archives.max_bytes in the config if the archive is "
           "trusted")
    key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, limits.max_ratio, limits.max_bytes, limits.max_members]
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"format": 1, "archives": {},
                                 "failed": {"zeros.txt.gz": {"key": key, "refused": True, "reason": old}}}))
    report = unpack_archives(raw, state, limits)
    assert [(s.path, s.reason) for s in report.skipped] == [("zeros.txt.gz", old)]
    assert files_under(raw) == {"zeros.txt.gz"}
