"""The sidecar's gzip framing (D2; docs/performance.md, "Sidecar compression"): a standard, reproducible,
multi-member gzip file."""

import gzip
import shutil
import subprocess
import zlib

import pytest

from slm4ie_assets.utils.gzipio import GzipMemberWriter, gzip_bytes

LINES = [f'{{"doc_id":"d{i}","forms":["Žaba","čez","šum"]}}\n'.encode() for i in range(30000)]


def _write(path, threaded: bool, members: int = 2) -> bytes:
    per = len(LINES) // members
    with open(path, "wb") as fh:
        for m in range(members):
            w = GzipMemberWriter(fh, threaded=threaded)
            for line in LINES[m * per:(m + 1) * per]:
                w.write(line)
            w.close()
    return b"".join(LINES[:per * members])


@pytest.mark.parametrize("threaded", [True, False])
def test_d2_members_concatenate_to_one_readable_gzip(tmp_path, threaded):
    """D2: parts are gzip members appended to one file; Python's gzip reads them as one stream."""
    path = tmp_path / "a.gz"
    expected = _write(path, threaded)
    assert gzip.decompress(path.read_bytes()) == expected


@pytest.mark.skipif(shutil.which("zcat") is None, reason="zcat not installed")
def test_d2_zcat_reads_every_member(tmp_path):
    """Standard gzip: the system zcat reads all members, not only the first."""
    path = tmp_path / "a.gz"
    expected = _write(path, True, members=3)
    assert subprocess.run(["zcat", str(path)], capture_output=True, check=True).stdout == expected


def test_d2_header_has_mtime_zero_and_no_name(tmp_path):
    """D2: mtime 0 and no FNAME flag in every member's header, so equal input gives equal bytes."""
    path = tmp_path / "a.gz"
    _write(path, True, members=2)
    data = path.read_bytes()
    offsets = [0]
    d = zlib.decompressobj(31)
    d.decompress(data)
    offsets.append(len(data) - len(d.unused_data))
    for off in offsets:
        header = data[off:off + 10]
        assert header[:3] == b"\x1f\x8b\x08"
        assert header[3] & 0x08 == 0  # FNAME not set
        assert header[4:8] == b"\0\0\0\0"  # MTIME 0


def test_d2_bytes_are_deterministic_threaded_or_not(tmp_path):
    """Equal input gives byte-identical output, whether compressed on the helper thread or not."""
    a, b = tmp_path / "a.gz", tmp_path / "b.gz"
    _write(a, True)
    _write(b, False)
    assert a.read_bytes() == b.read_bytes()


def test_issue7_size_within_ten_percent_of_gzip9():
    """docs/performance.md, "Sidecar compression": the sidecar is at most 10% larger than gzip -9 of the same bytes."""
    data = b"".join(LINES)
    assert len(gzip_bytes(data)) <= 1.10 * len(gzip.compress(data, 9, mtime=0))
