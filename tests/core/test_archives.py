"""Unpacking of raw archives (D16, S14, D17; fixes the ADDENDUM 8.3 / Q16 gaps).

Every archive here is a real file built with the stdlib or zstandard in tmp_path.
"""

import bz2
import dataclasses
import errno
import gzip
import io
import json
import lzma
import os
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import zstandard

from slm4ie_assets.archives import ArchiveError, ArchiveReport, SkippedArchive, is_temp_name, unpack_archives
from slm4ie_assets.archives.decoders import CHUNK, MAX_ZIP_LZMA_DICT
from slm4ie_assets.archives.formats import MAX_TAR_METADATA, MAX_TAR_TRAILER, zip_member_chunks
from slm4ie_assets.archives.names import TEMP_MARK, archive_kind, temp_name
from slm4ie_assets.archives.run import MAX_ROUNDS
from slm4ie_assets.archives.staging import Budget, Staging
from slm4ie_assets.catalog import ArchiveLimits
from slm4ie_assets.extractors.discovery import discover

EXTRACTOR_SUFFIXES = (".txt", ".jsonl", ".json", ".xml", ".conllu", ".conll")
TEXT = b"Dober dan, svet.\nTo je vrstica.\n" * 50


# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    d = tmp_path / "raw" / "ds"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "out" / ".slm4ie" / "ds" / "archives.json"  # parent does not exist yet


def run(raw: Path, state: Path, limits: ArchiveLimits | None = None, log=None) -> ArchiveReport:
    return unpack_archives(raw, state, limits or ArchiveLimits(), log=log)


def files_under(root: Path) -> dict[str, bytes]:
    """Every regular file below root (hidden included, links not followed) -> content."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def temps_under(root: Path) -> list[str]:
    return [name for _, _, names in os.walk(root) for name in names if TEMP_MARK in name]


def zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


CODECS = {"gzip": gzip.compress, "xz": lzma.compress, "bz2": bz2.compress, "zstd": zst, None: lambda b: b}


def tar_bytes(members: list, fmt=tarfile.PAX_FORMAT) -> bytes:
    """members: (name, bytes) for files, (name, None) for folders, or ready TarInfo objects."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
                continue
            name, data = m
            ti = tarfile.TarInfo(name)
            if data is None:
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            else:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def write_tar(path: Path, members: list, codec: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(CODECS[codec](tar_bytes(members)))
    return path


def write_zip(path: Path, members: list, compression=zipfile.ZIP_DEFLATED) -> Path:
    """members: (name, bytes) or (ZipInfo, bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def link_info(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = target
    return ti


def bump_mtime(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 10**9))


# ----------------------------------------------------------------------------- formats (D16)


@pytest.mark.parametrize("suffix,codec", [(".gz", "gzip"), (".xz", "xz"), (".bz2", "bz2"), (".zst", "zstd")])
def test_single_file_compressor_writes_name_without_suffix_next_to_archive_D16(raw, state, suffix, codec):
    (raw / "sub").mkdir()
    (raw / "sub" / f"doc.txt{suffix}").write_bytes(CODECS[codec](TEXT))
    report = run(raw, state)
    assert (raw / "sub" / "doc.txt").read_bytes() == TEXT
    assert report.unpacked == [f"sub/doc.txt{suffix}"]
    assert report.outputs == {f"sub/doc.txt{suffix}": ["sub/doc.txt"]}
    assert (raw / "sub" / f"doc.txt{suffix}").exists(), "archives are never deleted"
    assert temps_under(raw) == []


@pytest.mark.parametrize("suffix,codec", [(".tar", None), (".tgz", "gzip"), (".tar.gz", "gzip"), (".tar.xz", "xz"),
                                          (".tar.bz2", "bz2"), (".tar.zst", "zstd"), (".tar.zstd", "zstd")])
def test_tar_members_unpack_in_place_next_to_archive_D16(raw, state, suffix, codec):
    write_tar(raw / "deep" / f"data{suffix}", [("./a.txt", b"A"), ("d", None), ("d/e/b.jsonl", b'{"text": "b"}\n'),
                                               ("empty/", None)], codec)
    report = run(raw, state)
    assert (raw / "deep" / "a.txt").read_bytes() == b"A"
    assert (raw / "deep" / "d" / "e" / "b.jsonl").read_bytes() == b'{"text": "b"}\n'
    assert (raw / "deep" / "empty").is_dir()
    assert sorted(files_under(raw / "deep")) == ["a.txt", "d/e/b.jsonl", f"data{suffix}"], \
        "Q16: a .tar.xz is unpacked, not just decompressed to data.tar"
    assert report.unpacked == [f"deep/data{suffix}"]
    assert sorted(report.outputs[f"deep/data{suffix}"]) == ["deep/a.txt", "deep/d/e/b.jsonl"]


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_zip_members_unpack_in_place_for_every_method_D16(raw, state, compression):
    big = os.urandom(3 * CHUNK // 2) + TEXT * 2000  # more than one chunk, part incompressible
    write_zip(raw / "z" / "c.zip", [("a.txt", TEXT), ("dir/", b""), ("dir/big.xml", big)], compression)
    report = run(raw, state)
    assert (raw / "z" / "a.txt").read_bytes() == TEXT
    assert (raw / "z" / "dir" / "big.xml").read_bytes() == big
    assert report.outputs == {"z/c.zip": ["z/a.txt", "z/dir/big.xml"]}


def windows_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 0  # made on MS-DOS / Windows
    return info


def test_zip_backslash_separates_folders_only_in_zips_not_made_on_unix_D16(raw, state):
    write_zip(raw / "w.zip", [(windows_info("dir\\file.txt"), b"x"), ("unix\\name.txt", b"y")])
    run(raw, state)
    assert (raw / "dir" / "file.txt").read_bytes() == b"x"
    assert (raw / "unix\\name.txt").read_bytes() == b"y", "on unix a backslash is part of the name"


def test_multi_member_gzip_and_multi_frame_zstd_are_read_whole_D16(raw, state):
    (raw / "a.txt.gz").write_bytes(gzip.compress(b"one\n") + bytes(7) + gzip.compress(b"two\n") + bytes(512))
    (raw / "b.txt.zst").write_bytes(zst(b"three\n") + zst(b"four\n"))
    run(raw, state)
    assert (raw / "a.txt").read_bytes() == b"one\ntwo\n"
    assert (raw / "b.txt").read_bytes() == b"three\nfour\n"


def shape_and_codec(name: str) -> tuple:
    kind = archive_kind(name)
    assert kind is not None, name
    return kind.shape, kind.codec


def test_archive_kind_matches_the_D16_suffix_list():
    assert shape_and_codec("x.tar.gz") == ("tar", "gzip")
    assert shape_and_codec("x.tgz") == ("tar", "gzip")
    assert shape_and_codec("x.tar.zstd") == ("tar", "zstd")
    assert shape_and_codec("x.tar") == ("tar", None)
    assert shape_and_codec("x.zip") == ("zip", None)
    assert shape_and_codec("x.txt.zst") == ("single", "zstd")
    assert shape_and_codec("x.txt.bz2") == ("single", "bz2")
    for name in ("x.txt", "x.7z", "x.zstd", "x.gz.txt", "x.tar.gz.partial"):
        assert archive_kind(name) is None, name


# ----------------------------------------------------------------------------- depth and nesting (D16, S14)


def test_nested_archives_all_unpack_in_one_run_S14(raw, state):
    inner_tar = CODECS["xz"](tar_bytes([("x.conllu", b"# text = x\n"), ("y.txt.bz2", bz2.compress(b"why"))]))
    write_zip(raw / ".hidden" / "outer.zip", [("inner.txt.gz", gzip.compress(b"inner")),
                                               ("deep/data.tar.xz", inner_tar)])
    report = run(raw, state)
    assert (raw / ".hidden" / "inner.txt").read_bytes() == b"inner", "Q16: not only on the second run"
    assert (raw / ".hidden" / "deep" / "x.conllu").read_bytes() == b"# text = x\n"
    assert (raw / ".hidden" / "deep" / "y.txt").read_bytes() == b"why"
    assert sorted(report.unpacked) == [".hidden/deep/data.tar.xz", ".hidden/deep/y.txt.bz2",
                                          ".hidden/inner.txt.gz", ".hidden/outer.zip"]
    second = run(raw, state)
    assert second.unpacked == []
    assert sorted(second.up_to_date) == sorted(report.unpacked)


def test_chain_deeper_than_max_rounds_skips_its_root_and_leaves_nothing_of_it(raw, state):
    """Issue 39: the root of a chain deeper than the limit is one counted skip, rolled back, on
    every run alike (it failed the dataset, then a second run unpacked the rest)."""
    data = write_zip(raw / "tmp.zip", [("end.txt", b"end")]).read_bytes()
    for level in range(MAX_ROUNDS + 1):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr(f"level{level}.zip", data)
        data = buf.getvalue()
    (raw / "tmp.zip").write_bytes(data)
    for _ in range(2):
        report = run(raw, state)
        assert [s.path for s in report.skipped] == ["tmp.zip"]
        assert f"nested more than {MAX_ROUNDS} deep" in report.skipped[0].reason
        assert set(files_under(raw)) == {"tmp.zip"} and not report.unpacked


def test_symlinked_folder_is_not_entered_D16(raw, state, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "a.txt.gz").write_bytes(gzip.compress(b"a"))
    (raw / "linked").symlink_to(outside, target_is_directory=True)
    report = run(raw, state)
    assert sorted(p.name for p in outside.iterdir()) == ["a.txt.gz"]
    assert report.unpacked == []


def test_symlinked_archive_is_not_followed_and_named_in_a_warning_D16(raw, state, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "real.txt.gz").write_bytes(gzip.compress(b"a"))
    (raw / "link.txt.gz").symlink_to(outside / "real.txt.gz")
    report = run(raw, state)
    assert not (raw / "link.txt").exists()
    assert report.unpacked == []
    assert any("ds/link.txt.gz" in w and "not followed" in w for w in report.warnings)


# ----------------------------------------------------------------------------- idempotence (D16)


def test_second_run_does_nothing_and_leaves_outputs_untouched_D16(raw, state):
    (raw / "a.txt.gz").write_bytes(gzip.compress(TEXT))
    write_zip(raw / "b.zip", [("b1.txt", b"b1"), ("sub/b2.txt", b"b2")])
    first = run(raw, state)
    assert sorted(first.unpacked) == ["a.txt.gz", "b.zip"]
    before = {rel: (raw / rel).stat().st_mtime_ns for rel in ("a.txt", "b1.txt", "sub/b2.txt")}
    time.sleep(0.01)
    second = run(raw, state)
    assert second.unpacked == []
    assert sorted(second.up_to_date) == ["a.txt.gz", "b.zip"]
    assert second.outputs == first.outputs
    assert {rel: (raw / rel).stat().st_mtime_ns for rel in before} == before


def test_changed_archive_is_unpacked_again_D16(raw, state):
    arc = raw / "a.txt.gz"
    arc.write_bytes(gzip.compress(b"old"))
    run(raw, state)
    arc.write_bytes(gzip.compress(b"new content"))
    bump_mtime(arc)
    report = run(raw, state)
    assert report.unpacked == ["a.txt.gz"]
    assert (raw / "a.txt").read_bytes() == b"new content"


def test_missing_or_altered_output_is_restored_D16(raw, state):
    write_zip(raw / "b.zip", [("b1.txt", b"b1"), ("b2.txt", b"b2")])
    run(raw, state)
    (raw / "b1.txt").unlink()
    assert run(raw, state).unpacked == ["b.zip"]
    assert (raw / "b1.txt").read_bytes() == b"b1"
    (raw / "b2.txt").write_bytes(b"truncat")  # Q16: a damaged output no longer blocks a retry
    assert run(raw, state).unpacked == ["b.zip"]
    assert (raw / "b2.txt").read_bytes() == b"b2"


def test_files_dropped_from_a_new_version_are_removed_cascading_D16(raw, state):
    arc = write_zip(raw / "v.zip", [("keep.txt", b"k"), ("gone.txt", b"g"), ("inner.txt.gz", gzip.compress(b"i"))])
    run(raw, state)
    assert (raw / "inner.txt").exists()
    write_zip(arc, [("keep.txt", b"k2")])
    bump_mtime(arc)
    report = run(raw, state)
    assert (raw / "keep.txt").read_bytes() == b"k2"
    assert not (raw / "gone.txt").exists()
    assert not (raw / "inner.txt.gz").exists() and not (raw / "inner.txt").exists()
    assert any("removed 3 file(s)" in w for w in report.warnings)
    assert set(json.loads(state.read_text())["archives"]) == {"v.zip"}


def test_dropped_file_changed_by_hand_is_kept_D16(raw, state):
    arc = write_zip(raw / "v.zip", [("keep.txt", b"k"), ("edited.txt", b"e")])
    run(raw, state)
    (raw / "edited.txt").write_bytes(b"my edit")
    write_zip(arc, [("keep.txt", b"k")])
    bump_mtime(arc)
    report = run(raw, state)
    assert (raw / "edited.txt").read_bytes() == b"my edit"
    assert any("left in place" in w and "edited.txt" in w for w in report.warnings)


def test_deleted_archive_keeps_its_outputs_and_leaves_the_state(raw, state):
    arc = write_zip(raw / "v.zip", [("a.txt", b"a")])
    run(raw, state)
    arc.unlink()
    run(raw, state)
    assert (raw / "a.txt").read_bytes() == b"a"
    assert json.loads(state.read_text())["archives"] == {}


def test_overlapping_archives_are_named_in_a_warning(raw, state):
    write_zip(raw / "a.zip", [("same.txt", b"a")])
    write_zip(raw / "b.zip", [("same.txt", b"b")])
    report = run(raw, state)
    assert (raw / "same.txt").read_bytes() == b"b"
    assert any("same.txt" in w and "a.zip" in w for w in report.warnings)


# ----------------------------------------------------------------------------- state file


def test_state_file_is_written_atomically_outside_the_raw_tree(raw, state):
    (raw / "a.txt.gz").write_bytes(gzip.compress(b"a"))
    run(raw, state)
    doc = json.loads(state.read_text())
    entry = doc["archives"]["a.txt.gz"]
    assert entry["size"] == (raw / "a.txt.gz").stat().st_size
    assert list(entry["outputs"]) == ["a.txt"]
    assert sorted(p.name for p in state.parent.iterdir()) == ["archives.json"], "no temporary left beside it"
    assert sorted(files_under(raw)) == ["a.txt", "a.txt.gz"]


def test_unreadable_state_file_means_everything_is_unpacked_again(raw, state):
    (raw / "a.txt.gz").write_bytes(gzip.compress(b"a"))
    run(raw, state)
    state.write_text("{not json")
    report = run(raw, state)
    assert report.unpacked == ["a.txt.gz"]
    assert any("archives.json" in w for w in report.warnings)
    assert json.loads(state.read_text())["format"] == 1


# ----------------------------------------------------------------------------- unsafe members (D16, S14)


def assert_untouched(raw: Path, tmp_path: Path, expected_raw: set[str]) -> None:
    """raw/ds holds exactly `expected_raw`; outside it only the state folder and a test's own
    `elsewhere/` hold files."""
    assert set(files_under(raw)) == expected_raw
    outside = {rel for rel in files_under(tmp_path) if not rel.startswith(("raw/ds/", "out/"))}
    assert outside == {rel for rel in outside if rel.startswith("elsewhere/")}


@pytest.mark.parametrize("name", ["../x.txt", "sub/../../x.txt", windows_info("..\\x.txt"), windows_info("C:\\x.txt")])
def test_zip_slip_member_is_an_error_and_nothing_is_written_D16(raw, state, tmp_path, name):
    write_zip(raw / "evil.zip", [("good.txt", b"g"), (name, b"x")])
    name = getattr(name, "filename", name)
    with pytest.raises(ArchiveError) as err:
        run(raw, state)
    assert "ds/evil.zip" in str(err.value) and repr(name) in str(err.value)
    assert_untouched(raw, tmp_path, {"evil.zip"})
    assert not (tmp_path / "raw" / "x.txt").exists()


def test_absolute_member_is_an_error_in_zip_and_tar_D16(raw, state, tmp_path):
    target = tmp_path / "elsewhere" / "abs.txt"
    write_zip(raw / "a.zip", [(str(target), b"x")])
    with pytest.raises(ArchiveError, match="absolute"):
        run(raw, state)
    (raw / "a.zip").unlink()
    write_tar(raw / "a.tar.gz", [("ok.txt", b"ok"), (str(target), b"x")], "gzip")
    with pytest.raises(ArchiveError, match="absolute"):
        run(raw, state)
    assert not target.exists()
    assert_untouched(raw, tmp_path, {"a.tar.gz"})


@pytest.mark.parametrize("member", [
    link_info("link", "/etc/passwd"),
    link_info("link", "../../../elsewhere"),
    link_info("hard", "../../elsewhere/secret.txt", tarfile.LNKTYPE),
    link_info("inside", "a.txt"),  # refused too: simpler and safer
    link_info("hardinside", "a.txt", tarfile.LNKTYPE),
])
def test_tar_links_are_an_error_and_nothing_is_written_D16(raw, state, tmp_path, member):
    write_tar(raw / "l.tar", [("a.txt", b"a"), member, ("link/evil.txt", b"x")])
    with pytest.raises(ArchiveError, match="link") as err:
        run(raw, state)
    assert "ds/l.tar" in str(err.value) and repr(member.name) in str(err.value)
    assert_untouched(raw, tmp_path, {"l.tar"})


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_tar_device_and_fifo_members_are_an_error_D16(raw, state, tmp_path, kind):
    dev = tarfile.TarInfo("dev/null")
    dev.type = kind
    write_tar(raw / "d.tar.gz", [("a.txt", b"a"), dev], "gzip")
    with pytest.raises(ArchiveError, match="device|fifo"):
        run(raw, state)
    assert_untouched(raw, tmp_path, {"d.tar.gz"})


def test_zip_symlink_member_is_an_error_D16(raw, state, tmp_path):
    info = zipfile.ZipInfo("link")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    write_zip(raw / "s.zip", [("a.txt", b"a"), (info, "/etc/passwd")])
    with pytest.raises(ArchiveError, match="symbolic link"):
        run(raw, state)
    assert_untouched(raw, tmp_path, {"s.zip"})


def test_member_through_an_existing_symlinked_folder_is_an_error_D16(raw, state, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (raw / "sub").symlink_to(outside, target_is_directory=True)
    write_tar(raw / "t.tar", [("sub/evil.txt", b"x")])
    with pytest.raises(ArchiveError, match="symbolic link"):
        run(raw, state)
    assert list(outside.iterdir()) == []


def test_oversized_tar_metadata_header_is_an_error(raw, state, tmp_path):
    ti = tarfile.TarInfo("a.txt")
    ti.size = 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        ti.pax_headers = {"comment": "x" * (MAX_TAR_METADATA + 1)}
        tf.addfile(ti, io.BytesIO(b"a"))
    (raw / "p.tar.gz").write_bytes(gzip.compress(buf.getvalue(), 1))
    with pytest.raises(ArchiveError, match="metadata header"):
        run(raw, state)
    assert_untouched(raw, tmp_path, {"p.tar.gz"})


# ----------------------------------------------------------------------------- expansion limits (D16)


def only_skip(report: ArchiveReport, rel: str) -> str:
    """The one skip of `report`, a bomb's (D16, issue 34: a counted `bad_archive`): its reason."""
    assert [s.path for s in report.skipped] == [rel] and not report.unpacked
    assert report.drops == [f"ds/{rel}: archive skipped, {report.skipped[0].reason} [bad_archive]"]
    return report.skipped[0].reason


def test_gzip_bomb_exceeds_ratio_and_leaves_nothing_D16(raw, state, tmp_path):
    (raw / "zeros.txt.gz").write_bytes(gzip.compress(bytes(50_000_000)))
    report = run(raw, state, ArchiveLimits(max_ratio=10))
    assert "max_ratio" in only_skip(report, "zeros.txt.gz")
    assert any(w.startswith("ds/zeros.txt.gz: skipped, unpacks to more than") for w in report.warnings)
    assert_untouched(raw, tmp_path, {"zeros.txt.gz"})


def test_gzip_bomb_exceeds_the_default_limit_of_50x_D16(raw, state, tmp_path):
    (raw / "zeros.txt.gz").write_bytes(gzip.compress(bytes(50_000_000)))
    assert "max_ratio 50" in only_skip(run(raw, state), "zeros.txt.gz")
    assert_untouched(raw, tmp_path, {"zeros.txt.gz"})


def test_max_bytes_is_enforced_across_members_D16(raw, state, tmp_path):
    write_zip(raw / "m.zip", [("a.txt", bytes(600_000)), ("b.txt", bytes(600_000))])
    reason = only_skip(run(raw, state, ArchiveLimits(max_ratio=1e9, max_bytes=1_000_000)), "m.zip")
    assert "max_bytes" in reason and "'b.txt'" in reason
    assert_untouched(raw, tmp_path, {"m.zip"})


def test_tar_bomb_is_counted_while_streaming_not_from_headers_D16(raw, state, tmp_path):
    write_tar(raw / "b.tar.xz", [("ok.txt", b"ok"), ("zeros.txt", bytes(20_000_000))], "xz")
    only_skip(run(raw, state, ArchiveLimits(max_ratio=1e9, max_bytes=5_000_000)), "b.tar.xz")
    assert_untouched(raw, tmp_path, {"b.tar.xz"})


@pytest.mark.parametrize("compression", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_DEFLATED])
def test_zip_members_decompress_at_most_one_chunk_at_a_time(tmp_path, compression):
    """zipfile's own reader inflates a whole bzip2/lzma read at once; ours stays bounded."""
    path = write_zip(tmp_path / "z.zip", [("zeros", bytes(40 * CHUNK))], compression)
    assert path.stat().st_size < CHUNK
    with open(path, "rb") as raw, zipfile.ZipFile(path) as zf:
        sizes = [len(c) for c in zip_member_chunks(raw, zf.infolist()[0])]
    assert sum(sizes) == 40 * CHUNK and max(sizes) <= CHUNK


def test_zip_lzma_member_asking_for_a_huge_dictionary_is_skipped(raw, state):
    arc = write_zip(raw / "l.zip", [("a.txt", TEXT)], zipfile.ZIP_LZMA)
    data = bytearray(arc.read_bytes())
    props = 30 + len("a.txt") + 4  # local header, name, LZMA version and properties size
    data[props + 1:props + 5] = (MAX_ZIP_LZMA_DICT + 1).to_bytes(4, "little")
    arc.write_bytes(bytes(data))
    report = run(raw, state)
    assert "dictionary" in report.skipped[0].reason
    assert not (raw / "a.txt").exists()


# ----------------------------------------------------------------------------- corrupt archives (S14)


def test_truncated_gzip_is_skipped_and_the_run_goes_on_S14(raw, state):
    payload = os.urandom(3 * CHUNK)  # several chunks reach the temporary file before the error
    (raw / "cut.txt.gz").write_bytes(gzip.compress(payload)[: 2 * CHUNK])
    (raw / "fine.txt.gz").write_bytes(gzip.compress(b"fine"))
    write_zip(raw / "z.zip", [("z.txt", b"z")])
    report = run(raw, state)
    assert report.skipped[0].path == "cut.txt.gz"
    assert "truncated" in report.skipped[0].reason
    assert any("ds/cut.txt.gz" in w and "skipped" in w for w in report.warnings)
    assert sorted(report.unpacked) == ["fine.txt.gz", "z.zip"]
    assert sorted(files_under(raw)) == ["cut.txt.gz", "fine.txt", "fine.txt.gz", "z.txt", "z.zip"]


CORRUPT_ARCHIVES = [
    ("plain.txt.gz", b"hello, not gzip at all", "not gzip"),
    ("junk.txt.gz", gzip.compress(b"ok") + b"junk", "not gzip"),
    ("bad.zip", b"PK\x03\x04 this is not a zip", "BadZipFile"),
    ("bad.tar.gz", gzip.compress(b"not a tar " * 100), "tar"),
    ("cut.tar.gz", gzip.compress(tar_bytes([("a.txt", os.urandom(100_000))]))[:-5000], "truncated"),
    ("cut.txt.zst", zst(os.urandom(300_000))[:-10], "truncated"),
    ("cut.tar.zst", zst(tar_bytes([("a.txt", os.urandom(100_000))]))[:-10], "truncated"),
    ("junk.txt.zst", zst(b"ok") + b"junk", "zstd"),
    ("cut.txt.xz", lzma.compress(os.urandom(100_000))[:-20], "EOFError"),
    ("cut.txt.bz2", bz2.compress(os.urandom(100_000))[:-20], "EOFError"),
    ("cuthead.tar", tar_bytes([("a.txt", b"a"), ("b.txt", b"b")])[:1024 + 100], "damaged"),
    ("badhead.tar", tar_bytes([("a.txt", b"a")])[:1024] + b"\x01" * 1024, "damaged"),
    ("empty.gz", b"", "empty"),
    (".gz", gzip.compress(b"x"), "cannot be a file name"),
    ("..gz", gzip.compress(b"x"), "cannot be a file name"),
]


# Ids are the names: the gzip header carries the time of compression, so an id made of the bytes differs
# between pytest-xdist workers that collect in different seconds, and xdist refuses to run.
@pytest.mark.parametrize("name,content,reason", CORRUPT_ARCHIVES, ids=[case[0] for case in CORRUPT_ARCHIVES])
def test_corrupt_archive_is_skipped_with_a_warning_and_leaves_nothing_S14(raw, state, tmp_path, name, content, reason):
    (raw / name).write_bytes(content)
    (raw / "fine.txt.gz").write_bytes(gzip.compress(b"fine"))
    report = run(raw, state)
    assert [s.path for s in report.skipped] == [name]
    assert reason in report.skipped[0].reason
    assert any(f"ds/{name}" in w for w in report.warnings)
    assert report.unpacked == ["fine.txt.gz"]
    assert set(files_under(raw)) == {name, "fine.txt.gz", "fine.txt"}
    assert temps_under(tmp_path) == []


def test_tar_without_end_blocks_is_accepted(raw, state):
    (raw / "noend.tar").write_bytes(tar_bytes([("a.txt", b"a")])[:1024])
    report = run(raw, state)
    assert report.unpacked == ["noend.tar"] and (raw / "a.txt").read_bytes() == b"a"


def test_data_far_beyond_the_tar_end_is_skipped(raw, state):
    body = tar_bytes([("a.txt", b"a")]) + bytes(MAX_TAR_TRAILER + CHUNK)
    (raw / "long.tar.gz").write_bytes(gzip.compress(body, 1))
    report = run(raw, state)
    assert report.skipped[0].path == "long.tar.gz"
    assert not (raw / "a.txt").exists()


def test_zip_crc_mismatch_is_skipped_and_earlier_members_are_rolled_back_S14(raw, state, tmp_path):
    arc = write_zip(raw / "crc.zip", [("first.txt", b"first"), ("second.txt", b"SECOND-DATA")], zipfile.ZIP_STORED)
    data = arc.read_bytes()
    arc.write_bytes(data.replace(b"SECOND-DATA", b"SECOND-DATB"))
    report = run(raw, state)
    assert "CRC" in report.skipped[0].reason
    assert set(files_under(raw)) == {"crc.zip"}
    assert temps_under(tmp_path) == []


def test_corrupt_archive_is_reported_every_run_and_read_again_only_once_changed_S14(raw, state):
    arc = raw / "a.txt.gz"
    arc.write_bytes(b"garbage")
    first = run(raw, state)
    assert first.skipped and not any("unchanged" in w for w in first.warnings)
    second = run(raw, state)
    assert second.skipped == first.skipped, "a skipped archive is not recorded as done"
    assert any("ds/a.txt.gz" in w and "unchanged since the last try" in w for w in second.warnings)
    os.chmod(arc, 0o644)  # a new ctime: read again
    assert not any("unchanged" in w for w in run(raw, state).warnings)
    arc.write_bytes(gzip.compress(b"fixed"))
    bump_mtime(arc)
    assert run(raw, state).unpacked == ["a.txt.gz"]
    assert (raw / "a.txt").read_bytes() == b"fixed"
    assert json.loads(state.read_text())["failed"] == {}


def test_refused_archive_is_refused_again_without_reading_until_it_or_the_limits_change_D16(raw, state):
    (raw / "zeros.txt.gz").write_bytes(gzip.compress(bytes(5_000_000)))
    small = ArchiveLimits(max_ratio=10)
    first = only_skip(run(raw, state, small), "zeros.txt.gz")
    second = run(raw, state, small)
    assert only_skip(second, "zeros.txt.gz") == first
    assert any("unchanged since the last try" in w for w in second.warnings)
    assert run(raw, state, ArchiveLimits(max_ratio=1e6)).unpacked == ["zeros.txt.gz"]


def test_refusal_caused_by_the_tree_is_not_remembered_D16(raw, state, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (raw / "sub").symlink_to(outside, target_is_directory=True)
    write_tar(raw / "t.tar", [("sub/a.txt", b"a")])
    with pytest.raises(ArchiveError, match="symbolic link"):
        run(raw, state)
    (raw / "sub").unlink()
    assert run(raw, state).unpacked == ["t.tar"]
    assert (raw / "sub" / "a.txt").read_bytes() == b"a" and list(outside.iterdir()) == []


def test_corrupt_new_version_leaves_the_previous_outputs_whole_S14(raw, state):
    arc = write_zip(raw / "v.zip", [("a.txt", b"v1 a"), ("b.txt", b"v1 b")], zipfile.ZIP_STORED)
    run(raw, state)
    write_zip(arc, [("a.txt", b"v2 a"), ("b.txt", b"v2 b")], zipfile.ZIP_STORED)
    arc.write_bytes(arc.read_bytes().replace(b"v2 b", b"v2 X"))
    bump_mtime(arc)
    report = run(raw, state)
    assert report.skipped[0].path == "v.zip"
    assert (raw / "a.txt").read_bytes() == b"v1 a" and (raw / "b.txt").read_bytes() == b"v1 b"


@pytest.mark.parametrize("members,reason", [
    ([("a.txt", b"file"), ("a.txt/b.txt", b"under a file")], "folder"),
    ([("self.zip", b"me")], "overwrite the archive itself"),
    ([("taken", b"x")], "replace the folder"),
])
def test_members_that_clash_with_the_tree_skip_the_archive(raw, state, tmp_path, members, reason):
    (raw / "taken").mkdir()
    write_zip(raw / "self.zip", members)
    report = run(raw, state)
    assert reason in report.skipped[0].reason
    assert set(files_under(raw)) == {"self.zip"}
    assert temps_under(tmp_path) == []


def test_clash_with_the_tree_is_not_remembered(raw, state):
    (raw / "taken").mkdir()
    write_zip(raw / "c.zip", [("taken", b"x")])
    assert run(raw, state).skipped
    (raw / "taken").rmdir()
    assert run(raw, state).unpacked == ["c.zip"]
    assert (raw / "taken").read_bytes() == b"x"


def test_duplicate_member_keeps_the_last_copy_with_a_warning(raw, state):
    with pytest.warns(UserWarning):  # zipfile itself warns when writing a duplicate name
        write_zip(raw / "d.zip", [("a.txt", b"first"), ("a.txt", b"second")])
    report = run(raw, state)
    assert (raw / "a.txt").read_bytes() == b"second"
    assert any("more than once" in w for w in report.warnings)
    assert temps_under(raw) == []


# ----------------------------------------------------------------------------- temporary names, crashes (D16, D17)


@pytest.mark.parametrize("final", ["doc.txt", "x.jsonl", "a.json", "b.xml", "c.conllu", "d.conll", "e.tar.gz",
                                   "é" * 200 + ".txt", ".hidden.txt"])
def test_temp_names_match_no_extractor_and_no_archive(tmp_path, final):
    name = temp_name(final)
    assert not name.endswith(EXTRACTOR_SUFFIXES)
    assert archive_kind(name) is None
    assert is_temp_name(name) and name.startswith(".")
    assert len(os.fsencode(name)) <= 255
    (tmp_path / name).write_bytes(b"")
    assert discover(tmp_path, EXTRACTOR_SUFFIXES) == []


def test_interrupt_mid_archive_leaves_no_output_and_no_temp_D17(raw, state):
    """The log callback is called while a member is being staged (duplicate-name warning): what a
    reader sees at that moment, and what is left after an interrupt there."""
    with pytest.warns(UserWarning):
        write_zip(raw / "d.zip", [("a.txt", b"first"), ("a.txt", b"second"), ("b.txt", b"b")])
    seen = {}

    def log(message):
        if "more than once" in message:
            seen["files"] = files_under(raw)
            seen["found"] = discover(raw, EXTRACTOR_SUFFIXES)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(raw, state, log=log)
    staged = [rel for rel in seen["files"] if TEMP_MARK in rel]
    assert len(staged) == 1 and "a.txt" in staged[0]
    assert seen["found"] == [], "no extractor can pick up a file being written"
    assert set(files_under(raw)) == {"d.zip"}


def test_source_raising_mid_write_leaves_no_output_and_no_temp_D16(raw):
    arc = raw / "a.txt.gz"
    arc.write_bytes(b"")

    def chunks():
        yield b"x" * CHUNK
        yield b"y" * CHUNK
        raise RuntimeError("source failed")

    staging = Staging(arc, "", "ds/a.txt.gz", Budget(10**9, "test"), warn=lambda m: None)
    with pytest.raises(RuntimeError):
        try:
            staging.file(["sub", "a.txt"], "sub/a.txt", chunks())
        except BaseException:
            staging.rollback()
            raise
    assert set(files_under(raw)) == {"a.txt.gz"}
    assert not (raw / "sub").exists(), "folders made for the archive are removed too"


def test_killed_run_leaves_no_output_and_the_next_run_cleans_up_D17(raw, state, tmp_path):
    payload = TEXT * 100_000  # 165 MB, compresses to well under 1 MB: seconds of writing to interrupt
    (raw / "big.txt.gz").write_bytes(gzip.compress(payload, 1))
    script = ("import sys; from pathlib import Path; from slm4ie_assets.archives import unpack_archives;"
              "from slm4ie_assets.catalog import ArchiveLimits;"
              "unpack_archives(Path(sys.argv[1]), Path(sys.argv[2]), ArchiveLimits(max_ratio=1e6))")
    proc = subprocess.Popen([sys.executable, "-c", script, str(raw), str(state)])
    try:
        deadline = time.monotonic() + 60
        while not temps_under(raw):
            assert proc.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.001)
        proc.kill()
    finally:
        proc.wait()
    assert not (raw / "big.txt").exists(), "no output appears before the archive is complete"
    report = run(raw, state, ArchiveLimits(max_ratio=1e6))
    assert any("interrupted run" in w for w in report.warnings)
    assert temps_under(raw) == []
    assert (raw / "big.txt").stat().st_size == len(payload)


def test_write_failure_fails_the_run_instead_of_skipping_the_archive(raw, state):
    """A full disk is not a corrupt archive: the run fails (OSError), and nothing is left behind.
    The file-size limit of a child process stands in for the full disk (EFBIG)."""
    (raw / "big.txt.gz").write_bytes(gzip.compress(bytes(3 * CHUNK)))
    script = """
import resource, signal, sys
from pathlib import Path
from slm4ie_assets.archives import unpack_archives
from slm4ie_assets.catalog import ArchiveLimits
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
try:
    report = unpack_archives(Path(sys.argv[1]), Path(sys.argv[2]), ArchiveLimits(max_ratio=1e6))
    print("returned", report.skipped)
except OSError as exc:
    print("OSError", exc.errno, exc)
"""
    out = subprocess.run([sys.executable, "-c", script, str(raw), str(state)], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith(f"OSError {errno.EFBIG} ") and "ds/big.txt.gz" in out, out
    assert temps_under(raw) == [] and not (raw / "big.txt").exists()


def test_report_has_the_documented_shape(raw, state):
    (raw / "a.txt.gz").write_bytes(gzip.compress(b"a"))
    (raw / "b.txt.gz").write_bytes(b"bad")
    report = run(raw, state)
    assert {f.name for f in dataclasses.fields(report)} == {"unpacked", "up_to_date", "skipped", "outputs", "warnings",
                                                            "drops"}
    assert report.unpacked == ["a.txt.gz"] and report.up_to_date == []
    assert report.skipped == [SkippedArchive(path="b.txt.gz", reason=report.skipped[0].reason)]
    assert report.outputs == {"a.txt.gz": ["a.txt"]}
    assert all(isinstance(w, str) for w in report.warnings)
    assert report.drops == [f"{raw.name}/b.txt.gz: archive skipped, {report.skipped[0].reason} [bad_archive]"]
