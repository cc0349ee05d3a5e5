"""Part files copied into a version, in the kernel where it can: appended, or at a known offset.

copy_file_range copies without a trip through user space (a reflink on file systems that share
extents); where the file system has none, pread/pwrite do it in chunks. The staging thread and an
unstaged publish append each part after the bytes before it (`append_file`). When the last part is
written, the version's text is usually short of many parts: the stager appends in shard order, so
with W chains of ranges (docs/splitting.md) most chains' parts wait for the first chain's last one,
and then (W-1)/W of the output used to be copied by one thread. Under the exclusive lock every size
is known, so each part has its offset, and the copies run in threads (`copy_all_at`), which the
kernel copies in parallel: the GIL is released for each call.
"""
import errno
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, NamedTuple

_HAS_COPY_RANGE = hasattr(os, "copy_file_range")
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}
_CHUNK = 1 << 22
MAX_THREADS = 8  # beyond this a copy is bound by memory bandwidth and the disk, not by threads


class CopyJob(NamedTuple):
    src: Path
    offset: int  # where its bytes go in the output
    size: int  # its bytes, from the stamp taken before


def copy_at(job: CopyJob, out_fd: int) -> None:
    """Copy `job.size` bytes of `job.src` to `out_fd` at `job.offset`; a source shorter than its
    stamp said is an error (a part must not change under the exclusive lock)."""
    with open(job.src, "rb", buffering=0) as fh:
        _copy_range(fh.fileno(), out_fd, job)


def append_file(src: Path, out: BinaryIO) -> None:
    """Append the whole of `src` to `out`, after what was written through `out`, and leave `out`
    positioned after it."""
    out.flush()  # what was written through `out` goes first
    offset = out.tell()
    with open(src, "rb", buffering=0) as fh:
        job = CopyJob(src, offset, os.fstat(fh.fileno()).st_size)
        _copy_range(fh.fileno(), out.fileno(), job)
    out.seek(offset + job.size)


def _copy_range(in_fd: int, out_fd: int, job: CopyJob) -> None:
    """The first `job.size` bytes of `in_fd` (the open `job.src`) written at `job.offset` of `out_fd`;
    neither file's position moves."""
    done = 0
    while done < job.size:
        n = 0
        if _HAS_COPY_RANGE:
            try:
                n = os.copy_file_range(in_fd, out_fd, job.size - done, done, job.offset + done)
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
        if n == 0:  # not supported here (or the source ended early: pread says which)
            data = os.pread(in_fd, min(_CHUNK, job.size - done), done)
            if not data:
                raise OSError(errno.EIO, f"{job.src} ended at byte {done} of {job.size} while it was copied")
            n = 0
            while n < len(data):
                n += os.pwrite(out_fd, data[n:], job.offset + done + n)
        done += n


def copy_all_at(jobs: list[CopyJob], out_fd: int) -> None:
    """Every job, in parallel where there are several; the first error is raised."""
    threads = min(MAX_THREADS, os.cpu_count() or 1, len(jobs))
    if threads <= 1:
        for job in jobs:
            copy_at(job, out_fd)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="slm4ie-copy") as pool:
        for future in [pool.submit(copy_at, job, out_fd) for job in jobs]:
            future.result()
