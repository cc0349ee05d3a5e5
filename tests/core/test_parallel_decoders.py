"""One big archive decoded on several threads (issue 41; D16, S14).

Multi-frame zstd and multi-block xz files are decoded piece by piece on threads, gzip through
rapidgzip, each from its PARALLEL_FROM threads. Whatever the file, the bytes and the error (its type and
wording) are those of the one-thread decoder, which judges whatever the parallel one cannot vouch
for; a well-formed file must never need that judge. Every archive is a real file in tmp_path, and
the threads are real: the tests ask for a thread count, so they run the same on any host.
"""

import functools
import gc
import gzip
import hashlib
import lzma
import os
import random
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from bench.unpack import join_xz_blocks
from slm4ie_assets.archives import decoding_threads, unpack_archives
from slm4ie_assets.archives.decoders import PARALLEL_FROM, open_codec
from slm4ie_assets.archives.parallel_decode import PIECE_READ_AHEAD, SerialBackstop, decode_threads, usable_cpus
from slm4ie_assets.archives.streams import open_serial
from support.archive_files import tar_of
from support.single_archive import unpack_one

REPO = Path(__file__).resolve().parents[2]
PIECE = 500_000  # input bytes per frame / block: above pieces.MIN_PIECE once compressed
THREADS = PARALLEL_FROM  # the fewest threads each codec is split on


def payload(n: int, seed: int = 1) -> bytes:
    """Half random bytes, half text, so each piece stays about as big compressed as plain."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopr") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    out, size = [], 0
    while size < n:
        part = rng.randbytes(4096) + b" ".join(rng.choice(words) for _ in range(700)) + b"\n"
        out.append(part)
        size += len(part)
    return b"".join(out)[:n]


@functools.cache
def multi_frame_zst(data: bytes) -> bytes:
    c = zstandard.ZstdCompressor(level=3)
    return b"".join(c.compress(data[i:i + PIECE]) for i in range(0, len(data), PIECE))


@functools.cache
def multi_block_xz(data: bytes) -> bytes:
    """Compressed once per test module: xz is slow on random bytes."""
    return join_xz_blocks([lzma.compress(data[i:i + PIECE], preset=0) for i in range(0, len(data), PIECE)])


@functools.cache
def one_member_gzip(data: bytes) -> bytes:
    return gzip.compress(data, 6, mtime=0)


DATA = payload(3 * PIECE)
GOOD = {"zstd": multi_frame_zst, "xz": multi_block_xz, "gzip": one_member_gzip}
SUFFIX = {"zstd": ".txt.zst", "xz": ".txt.xz", "gzip": ".txt.gz"}


def decode(codec: str, path: Path, threads: int | None) -> tuple:
    """("ok", sha256 of the bytes, whether the parallel decoder needed the judge) or ("error",
    type, message); threads None: the one-thread decoder of 55def41's route."""
    with open(path, "rb") as raw:
        stream = open_serial(codec, raw) if threads is None else open_codec(codec, raw, threads)
        digest = hashlib.sha256()
        try:
            while data := stream.read(1 << 20):
                digest.update(data)
        except Exception as exc:  # noqa: BLE001  the error is what is compared
            return ("error", type(exc).__name__, str(exc))
        return ("ok", digest.hexdigest(), getattr(stream, "fell_back", None))


def write(tmp_path: Path, codec: str, content: bytes, name: str = "a") -> Path:
    path = tmp_path / (name + SUFFIX[codec])
    path.write_bytes(content)
    return path


# ----------------------------------------------------------------------------- the same bytes


@pytest.mark.parametrize("codec", ["zstd", "xz", "gzip"])
def test_a_multi_piece_file_is_decoded_on_threads_into_the_same_bytes(tmp_path, codec):
    path = write(tmp_path, codec, GOOD[codec](DATA))
    with open(path, "rb") as raw:
        assert isinstance(open_codec(codec, raw, THREADS[codec]), SerialBackstop), "the parallel decoder is used"
    serial = decode(codec, path, None)
    assert serial == ("ok", hashlib.sha256(DATA).hexdigest(), None)
    assert decode(codec, path, THREADS[codec]) == serial[:2] + (False,), "and never needs the judge"


def test_a_file_of_one_frame_or_block_and_one_thread_decode_on_one_thread(tmp_path):
    one_frame = write(tmp_path, "zstd", zstandard.ZstdCompressor().compress(DATA), "frame")
    one_block = write(tmp_path, "xz", lzma.compress(DATA, preset=0), "block")
    pieces = write(tmp_path, "zstd", multi_frame_zst(DATA), "pieces")
    gz = write(tmp_path, "gzip", GOOD["gzip"](DATA))
    for codec, path, threads in [("zstd", one_frame, 8), ("xz", one_block, 8),
                                 ("zstd", pieces, PARALLEL_FROM["zstd"] - 1), ("gzip", gz, PARALLEL_FROM["gzip"] - 1)]:
        with open(path, "rb") as raw:
            assert not isinstance(open_codec(codec, raw, threads), SerialBackstop), (codec, path.name, threads)


def test_joined_streams_and_skippable_frames_are_split_too(tmp_path):
    half = len(DATA) // 2
    xz = write(tmp_path, "xz", multi_block_xz(DATA[:half]) + multi_block_xz(DATA[half:]))
    skippable = b"\x50\x2a\x4d\x18" + (8).to_bytes(4, "little") + b"seektabl"  # as the seekable format ends
    zst = write(tmp_path, "zstd", skippable + multi_frame_zst(DATA) + skippable)
    members = write(tmp_path, "gzip", gzip.compress(DATA[:half], mtime=0) + gzip.compress(DATA[half:], mtime=0))
    for codec, path in [("xz", xz), ("zstd", zst), ("gzip", members)]:
        assert decode(codec, path, THREADS[codec]) == ("ok", hashlib.sha256(DATA).hexdigest(), False), codec


def test_a_multi_block_tar_xz_unpacks_in_place_through_the_unpacker(tmp_path):
    """tarfile reads the stream in its own sizes, and reads on after the tar's end."""
    raw = tmp_path / "raw"
    raw.mkdir()
    members = {f"m{i}.txt": DATA[i * 300_000:(i + 1) * 300_000] for i in range(5)}
    (raw / "all.tar.xz").write_bytes(multi_block_xz(tar_of(members)))
    with open(raw / "all.tar.xz", "rb") as fh:
        assert isinstance(open_codec("xz", fh, 2), SerialBackstop), "decoded in parallel"
    with decoding_threads(2):
        report = unpack_archives(raw, tmp_path / "state.json")
    assert report.unpacked == ["all.tar.xz"] and not report.skipped
    assert {name: (raw / name).read_bytes() for name in members} == members


# ----------------------------------------------------------------------------- damaged files fail as before


def _flip(content: bytes, at: float) -> bytes:
    i = int(len(content) * at)
    return content[:i] + bytes([content[i] ^ 0x55]) + content[i + 1:]


def _sync_flushed_gzip_cut() -> bytes:
    """A gzip member cut right after a sync flush (as pigz writes every 128 KiB): the data ends on
    a whole deflate block, so rapidgzip alone takes it for a short but complete file."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = c.compress(DATA[:PIECE]) + c.flush(zlib.Z_SYNC_FLUSH) + c.compress(DATA[PIECE:2 * PIECE])
    return out + c.flush(zlib.Z_SYNC_FLUSH)


DAMAGE: list[tuple[str, str, Callable[[bytes], bytes]]] = [
    (codec, name, damage) for codec in ("zstd", "xz", "gzip") for name, damage in [
        ("cut by 1 byte", lambda b: b[:-1]),
        ("cut by 9 bytes", lambda b: b[:-9]),
        ("cut in the middle", lambda b: b[:len(b) // 2]),
        ("a byte flipped in the second piece", lambda b: _flip(b, 0.5)),
        ("a byte flipped near the end", lambda b: _flip(b, 0.97)),
        ("a byte flipped in the last 12 bytes", lambda b: _flip(b, 1 - 6 / len(b))),
        ("junk after it", lambda b: b + b"junk"),
        ("zero padding after it", lambda b: b + bytes(8)),
        ("zero padding inside it", lambda b: b[:len(b) // 2] + bytes(4) + b[len(b) // 2:]),
        ("the same file twice, cut", lambda b: b + b[:-5]),
    ]
] + [
    ("xz", "padding between two streams", lambda b: b + bytes(4) + b),
    ("xz", "a byte flipped in the index", lambda b: _flip(b, 1 - 20 / len(b))),
    ("zstd", "a skippable frame cut off", lambda b: b + b"\x50\x2a\x4d\x18" + (100).to_bytes(4, "little")),
    ("gzip", "a member cut after a sync flush", lambda b: _sync_flushed_gzip_cut()),
    ("gzip", "a second member cut after a sync flush", lambda b: b + _sync_flushed_gzip_cut()),
    ("gzip", "a zlib stream", lambda b: zlib.compress(DATA)),
    ("gzip", "a raw deflate stream", lambda b: zlib.compress(DATA, wbits=-15)),
]


@pytest.mark.parametrize("codec,name,damage", DAMAGE, ids=[f"{c}: {n}" for c, n, _ in DAMAGE])
def test_a_damaged_file_gives_what_the_one_thread_decoder_gives(tmp_path, codec, name, damage):
    path = write(tmp_path, codec, damage(GOOD[codec](DATA)))
    serial = decode(codec, path, None)
    assert decode(codec, path, THREADS[codec])[:3 if serial[0] == "error" else 2] == serial[:3 if serial[0] == "error"
                                                                                         else 2]


def test_damaged_archives_are_skipped_through_the_unpacker_with_the_words_of_before_S14(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write(raw, "zstd", multi_frame_zst(DATA)[:-10], "cut")
    write(raw, "xz", multi_block_xz(DATA)[:-20], "cut")
    write(raw, "xz", _flip(multi_block_xz(DATA), 0.5), "flipped")
    with decoding_threads(2):
        report = unpack_archives(raw, tmp_path / "state.json")
    reasons = {s.path: s.reason for s in report.skipped}
    assert "truncated" in reasons["cut.txt.zst"]
    assert "EOFError" in reasons["cut.txt.xz"]
    assert "LZMAError" in reasons["flipped.txt.xz"]
    assert sorted(p.name for p in raw.iterdir()) == ["cut.txt.xz", "cut.txt.zst", "flipped.txt.xz"]


# ----------------------------------------------------------------------------- the budget, threads, memory


@functools.cache
def bomb_frame(zeros_mib: int) -> bytes:
    """One zstd frame of 300 KB of random bytes then `zeros_mib` MiB of zeros: big enough
    compressed to be a piece of its own, a bomb decoded."""
    c = zstandard.ZstdCompressor().compressobj()
    parts = [c.compress(random.Random(2).randbytes(300_000))]
    parts += [c.compress(bytes(1 << 20)) for _ in range(zeros_mib)]
    return b"".join(parts) + c.flush()


def bomb(folder: Path, zeros_mib: int, frames: int) -> Path:
    path = folder / "zeros.txt.zst"
    path.write_bytes(bomb_frame(zeros_mib) * frames)
    with open(path, "rb") as fh:
        assert isinstance(open_codec("zstd", fh, BOMB_THREADS), SerialBackstop), "decoded in parallel"
    return path


BOMB_THREADS = 4
def test_a_multi_frame_bomb_stops_at_the_root_budget_D16(tmp_path):
    path = bomb(tmp_path, 64, 8)  # 512 MiB in 8 frames of 64 MiB
    breach = unpack_one(path, "zstd", 20 << 20, BOMB_THREADS)
    assert "unpacks to more than 20,971,520 bytes" in str(breach)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zeros.txt.zst"]


MEMORY_CHILD = """
import sys
from pathlib import Path
from support.single_archive import unpack_one
assert unpack_one(Path(sys.argv[1]), "zstd", 400 << 20, int(sys.argv[2])) is not None
# VmHWM, the child's own peak: ru_maxrss would start at the forking pytest worker's peak, which Linux
# keeps across exec (530 MB once in a full run, whatever this child held)
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) // 1024)
"""


def test_a_bomb_is_not_decoded_into_memory_beyond_a_bounded_read_ahead_D16(tmp_path):
    """4 GiB in 8 frames of 512 MiB, a 400 MiB budget: the frames decoded ahead of the writer
    hold at most PIECE_READ_AHEAD each, never a whole frame, whatever the file. The child's
    imports peak near 40 MB: 175-250 MB here, and 877 MB with no bound on the read-ahead."""
    path = bomb(tmp_path, 512, 8)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}")
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(path), str(BOMB_THREADS)], capture_output=True,
                         text=True, env=env, check=True)
    peak_mb = int(out.stdout.split()[-1])
    # twice the read-ahead: room for the chunk each piece may hold past it and the reader's own
    assert peak_mb < 60 + 2 * BOMB_THREADS * (PIECE_READ_AHEAD >> 20), f"peak RSS {peak_mb} MB"


def test_threads_stop_when_the_reader_is_dropped_early(tmp_path):
    path = write(tmp_path, "zstd", multi_frame_zst(DATA))
    with open(path, "rb") as raw:
        stream = open_codec("zstd", raw, 4)
        assert stream.read(1000)
    del stream
    gc.collect()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("slm4ie-decode")]


RAPIDGZIP_EXIT_CHILD = """
import sys
from slm4ie_assets.archives.decoders import open_codec
stream = open_codec("gzip", open(sys.argv[1], "rb"), 4)
assert stream.read(1000)
print("left unread")
"""


def test_a_gzip_reader_left_open_does_not_abort_the_interpreter_at_exit(tmp_path):
    """rapidgzip aborts the process when its threads still run as Python shuts down."""
    path = write(tmp_path, "gzip", GOOD["gzip"](DATA))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", RAPIDGZIP_EXIT_CHILD, str(path)], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0 and "left unread" in out.stdout, out.stderr


def test_the_thread_count_is_bounded_by_the_limit_and_the_cpus():
    assert decode_threads() == usable_cpus()
    with decoding_threads(1):
        assert decode_threads() == 1
    with decoding_threads(10_000):
        assert decode_threads() == usable_cpus()
    assert decode_threads() == usable_cpus()


AFFINITY_CHILD = """
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from slm4ie_assets.archives.decoders import open_codec
from slm4ie_assets.archives.parallel_decode import decode_threads
print(decode_threads(), type(open_codec("zstd", open(sys.argv[1], "rb"))).__name__)
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_process_pinned_to_one_cpu_decodes_on_one_thread(tmp_path):
    path = write(tmp_path, "zstd", multi_frame_zst(DATA))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", AFFINITY_CHILD, str(path)], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.split() == ["1", "ZstdStream"]


def test_the_pipeline_decodes_on_at_most_max_workers_threads(tmp_path):
    """`pipeline.unpack` sets the limit from the run's workers: with one, no decoding thread starts
    (xz, which is split from 2 threads)."""
    from slm4ie_assets.catalog import load_catalog
    from slm4ie_assets.pipeline import unpack

    raw = tmp_path / "raw" / "ds"
    raw.mkdir(parents=True)
    write(raw, "xz", multi_block_xz(DATA))
    (tmp_path / "extract.yaml").write_text(
        f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\nmax_workers: 1\n"
        f"datasets:\n  ds:\n    extractor: text\n    domain: web\n")
    catalog = load_catalog(tmp_path / "extract.yaml")
    started: set[str] = set()
    threading.setprofile(lambda *_: started.add(threading.current_thread().name))
    try:
        unpack(catalog.dataset("ds"), catalog)
        assert not [name for name in started if name.startswith("slm4ie-decode")]
        (raw / "a.txt").unlink()
        unpack(catalog.dataset("ds"), catalog, workers=2)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    assert (raw / "a.txt").read_bytes() == DATA
    assert [name for name in started if name.startswith("slm4ie-decode")] or usable_cpus() < 2
