"""offset_copy: the parts left at a publish are copied side by side, each at its offset, into the
same bytes as appending them one after another; appended one by one, between bytes written through
the same file object, they land in order too."""

import os

import pytest

from slm4ie_assets.store import offset_copy
from slm4ie_assets.store.offset_copy import CopyJob, append_file, copy_all_at


def _parts(tmp_path, sizes):
    paths = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"p{i}"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    return paths


@pytest.mark.parametrize("kernel_copy", [True, False])  # False: the pread/pwrite path of file systems without it
def test_parts_copied_at_their_offsets_equal_their_concatenation(tmp_path, monkeypatch, kernel_copy):
    monkeypatch.setattr(offset_copy, "_HAS_COPY_RANGE", kernel_copy and offset_copy._HAS_COPY_RANGE)
    paths = _parts(tmp_path, [0, 1, 5_000_000, 123, 9 << 20, 4096])
    head = b"staged before\n"
    out = tmp_path / "out"
    out.write_bytes(head)
    jobs, offset = [], len(head)
    for p in paths:
        jobs.append(CopyJob(p, offset, p.stat().st_size))
        offset += p.stat().st_size
    fd = os.open(out, os.O_WRONLY)
    try:
        copy_all_at(jobs[::-1], fd)  # any order, any thread: each lands at its own offset
    finally:
        os.close(fd)
    assert out.read_bytes() == head + b"".join(p.read_bytes() for p in paths)


def test_a_part_shorter_than_its_stamp_is_an_error_naming_it(tmp_path):
    (path,) = _parts(tmp_path, [100])
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="p0 ended at byte 100 of 200"):
            copy_all_at([CopyJob(path, 0, 200)], fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_appended_files_land_between_what_is_written_around_them(tmp_path, monkeypatch, kernel_copy):
    monkeypatch.setattr(offset_copy, "_HAS_COPY_RANGE", kernel_copy and offset_copy._HAS_COPY_RANGE)
    paths = _parts(tmp_path, [3, 0, 5_000_000, 4096])
    with open(tmp_path / "out", "xb") as out:
        out.write(b"head\n")  # still in the writer's buffer when the first file is appended
        for p in paths:
            append_file(p, out)
            out.write(b"|")
        assert out.tell() == 5 + sum(p.stat().st_size + 1 for p in paths)
    assert (tmp_path / "out").read_bytes() == b"head\n" + b"".join(p.read_bytes() + b"|" for p in paths)
