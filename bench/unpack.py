"""Unpacking one big archive: the one-thread routes of before against the decoders of now (issue 41).

    python -m bench.unpack [--mb 400] [--runs 3] [--data DIR] [--out FILE] [--only gz,zst,xz]

Inputs are generated once under DIR (reused while their stamp is there): MB megabytes of text
(bench.generate's text writer, seed 1), then compressed as a real corpus would ship it:
`.txt.gz` (one member, level 6), `.txt.zst` (one frame, level 3, what `zstd` writes),
`.frames.txt.zst` (8 MiB frames, as pzstd or the seekable format write) and `.blocks.txt.xz`
(24 MiB blocks of preset 6 in one stream, as `xz -T0` writes; compressed here on every core and
joined by `join_xz_blocks`). The same seed and size give the same bytes.

Each measured run is a fresh child process that reads the whole decoded stream (1 MiB reads, as
the unpacker does) and reports its CRC32, so every route is checked to give the same bytes; the
parent takes wall time, CPU time (user + sys, every thread) and peak RSS of the child (os.wait4).
Runs of a format are interleaved (A B C A B C ...), and the table gives medians. The `unpack`
rows run `unpack_archives` on a folder holding the archive (decoding, budget and writing the file
in place), with one thread and with the threads the decoder chooses here.

Routes: `gzip module` is `gzip.open`; `before` is the one-thread decoder of 55def41
(`GzipStream` on the standard library's zlib, `ZstdStream`, `lzma.LZMAFile`); `after` is
`open_codec` with the thread count it chooses on this host (`decode_threads()`, then
`decoders.PARALLEL_FROM`); the forced rows and the 4-thread rows show what the choice turned
down on a host of 2 cores (the parallel decoders below the count they are used from). `unpack,
1 thread` is 55def41's unpacking for .zst and .xz (one thread is its ZstdStream and LZMAFile);
for .gz that is `before: unpack on zlib`.
"""

import argparse
import gzip
import json
import lzma
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(tempfile.gettempdir()) / "slm4ie-unpack"
ZSTD_FRAME = 8 << 20  # input bytes per frame of the multi-frame .zst
XZ_BLOCK = 24 << 20  # input bytes per block of the multi-block .xz (xz -T0's default at preset 6)

# (format, label, input file, child route)
ROUTES = [
    ("gz", "gzip module", "text.txt.gz", "gzip-module"),
    ("gz", "before: GzipStream on zlib", "text.txt.gz", "gzip-stdlib"),
    ("gz", "after: open_codec", "text.txt.gz", "gzip:auto"),
    ("gz", "rapidgzip, 2 threads (forced)", "text.txt.gz", "gzip-parallel:2"),
    ("gz", "rapidgzip, 4 threads", "text.txt.gz", "gzip:4"),
    ("gz", "before: unpack on zlib", "text.txt.gz", "unpack-stdlib:1"),
    ("gz", "unpack, 1 thread", "text.txt.gz", "unpack:1"),
    ("gz", "unpack, auto", "text.txt.gz", "unpack:auto"),
    ("zst", "before: ZstdStream", "text.frames.txt.zst", "zstd-serial"),
    ("zst", "after: open_codec", "text.frames.txt.zst", "zstd:auto"),
    ("zst", "frames on 2 threads (forced)", "text.frames.txt.zst", "zstd-parallel:2"),
    ("zst", "frames on 4 threads", "text.frames.txt.zst", "zstd:4"),
    ("zst", "after: open_codec, one frame", "text.txt.zst", "zstd:auto"),
    ("zst", "unpack, 1 thread", "text.frames.txt.zst", "unpack:1"),
    ("zst", "unpack, auto", "text.frames.txt.zst", "unpack:auto"),
    ("xz", "before: LZMAFile", "text.blocks.txt.xz", "xz-serial"),
    ("xz", "after: open_codec", "text.blocks.txt.xz", "xz:auto"),
    ("xz", "unpack, 1 thread", "text.blocks.txt.xz", "unpack:1"),
    ("xz", "unpack, auto", "text.blocks.txt.xz", "unpack:auto"),
]


# ----------------------------------------------------------------------------- inputs


def join_xz_blocks(streams: list[bytes]) -> bytes:
    """One xz stream holding the blocks of `streams` (each a one-block stream with the same check,
    as lzma.compress writes them), in order: a multi-block file like `xz -T0` writes. The index is
    read and written by the decoder's own code (`archives.pieces`), which builds such streams too."""
    from slm4ie_assets.archives.pieces import _index_and_footer, _index_records

    header, blocks, records = streams[0][:12], [], []
    for stream in streams:
        if stream[:12] != header:
            raise ValueError("the streams differ in their check")
        index_size = (struct.unpack_from("<I", stream, len(stream) - 8)[0] + 1) * 4
        found = _index_records(stream[len(stream) - 12 - index_size:len(stream) - 12])
        if found is None or len(found) != 1:
            raise ValueError("not a stream of one block")
        blocks.append(stream[12:len(stream) - 12 - index_size])
        records += found
    return header + b"".join(blocks) + _index_and_footer(tuple(records), header[6:8])


def _xz_block(args: tuple[str, int, int]) -> bytes:
    path, start, size = args
    with open(path, "rb") as fh:
        fh.seek(start)
        return lzma.compress(fh.read(size), preset=6)


def make_inputs(root: Path, mb: int) -> Path:
    """The text and its four archives under root/<mb>mb (made once)."""
    folder = root / f"{mb}mb"
    stamp = folder / ".complete"
    if stamp.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    text = folder / "text.txt"
    sys.path.insert(0, str(REPO))
    from bench.gen_tei import Words
    from bench.generate import gen_text

    rng = random.Random(1)
    gen_text(text, mb * 1_000_000, Words(rng), rng, "unpack")
    _compress(text, folder)
    stamp.write_text("")
    return folder


def _compress(text: Path, folder: Path) -> None:
    import zstandard

    size = text.stat().st_size
    with open(text, "rb") as src, open(folder / "text.txt.gz", "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6, mtime=0, filename="") as gz:
            while data := src.read(4 << 20):
                gz.write(data)
    compressor = zstandard.ZstdCompressor(level=3)
    with open(text, "rb") as src, open(folder / "text.txt.zst", "wb") as out:
        compressor.copy_stream(src, out)
    with open(text, "rb") as src, open(folder / "text.frames.txt.zst", "wb") as out:
        while data := src.read(ZSTD_FRAME):
            out.write(compressor.compress(data))
    jobs = [(str(text), start, min(XZ_BLOCK, size - start)) for start in range(0, size, XZ_BLOCK)]
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        (folder / "text.blocks.txt.xz").write_bytes(join_xz_blocks(list(pool.map(_xz_block, jobs))))


# ----------------------------------------------------------------------------- child


def child(route: str, path: str) -> None:
    """One measured run: decode `path` by `route` to the end; print its bytes and CRC32."""
    sys.path.insert(0, str(REPO))
    from zlib_ng import zlib_ng

    if route.startswith("unpack"):
        print(json.dumps(_unpack(route, path)))
        return
    stream, threads = _open(route, path)
    total = crc = 0
    read = stream.read
    while data := read(1 << 20):
        total += len(data)
        crc = zlib_ng.crc32(data, crc)
    print(json.dumps({"bytes": total, "crc": crc, "threads": threads,
                      "fell_back": bool(getattr(stream, "fell_back", False))}))


def _open(route: str, path: str):
    from slm4ie_assets.archives import decoders, streams
    from slm4ie_assets.archives.parallel_decode import decode_threads

    raw = open(path, "rb")
    if route == "gzip-module":
        return gzip.GzipFile(fileobj=raw), 1
    if route == "gzip-stdlib":
        streams.zlib_ng = zlib  # type: ignore[assignment]  # the zlib of 55def41's GzipStream
        return streams.GzipStream(raw), 1
    if route == "zstd-serial":
        return streams.ZstdStream(raw), 1
    if route == "xz-serial":
        return lzma.LZMAFile(raw), 1
    codec, _, how = route.partition(":")
    threads = decode_threads() if how == "auto" else int(how)
    if codec.endswith("-parallel"):  # forced: below the thread count decoders.PARALLEL_FROM splits from
        return _forced(codec.removesuffix("-parallel"), raw, threads), threads
    return decoders.open_codec(codec, raw, threads), threads


def _forced(codec: str, raw, threads: int):
    from slm4ie_assets.archives import streams
    from slm4ie_assets.archives.gzip_parallel import ParallelGzip
    from slm4ie_assets.archives.parallel_decode import OrderedPieces, SerialBackstop
    from slm4ie_assets.archives.pieces import decode_zstd_piece, piece_target, zstd_pieces

    if codec == "gzip":
        return SerialBackstop(ParallelGzip(raw, threads), raw, streams.GzipStream)
    size = os.fstat(raw.fileno()).st_size
    pieces = zstd_pieces(raw.fileno(), size, piece_target(size, threads))
    assert pieces is not None
    return SerialBackstop(OrderedPieces(raw, pieces, decode_zstd_piece, threads), raw, streams.ZstdStream)


def _unpack(route: str, path: str) -> dict:
    """unpack_archives on a folder holding (a link to) the archive; the output's bytes and CRC32."""
    from zlib_ng import zlib_ng

    from slm4ie_assets.archives import unpack_archives
    from slm4ie_assets.archives.parallel_decode import decode_threads, decoding_threads

    kind, _, how = route.partition(":")
    limit = 0 if how == "auto" else int(how)
    if kind == "unpack-stdlib":  # 55def41's unpacking of a .gz: GzipStream on the standard library's zlib
        from slm4ie_assets.archives import streams

        streams.zlib_ng = zlib  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(dir=Path(path).parent) as tmp:
        raw = Path(tmp) / "raw"
        raw.mkdir()
        os.link(path, raw / Path(path).name)
        with decoding_threads(limit):
            threads = decode_threads()
            report = unpack_archives(raw, Path(tmp) / "archives.json")
        (output,) = [out for outs in report.outputs.values() for out in outs]
        total = crc = 0
        with open(raw / output, "rb") as fh:
            while data := fh.read(1 << 22):
                total += len(data)
                crc = zlib_ng.crc32(data, crc)
    return {"bytes": total, "crc": crc, "threads": threads, "fell_back": False}


# ----------------------------------------------------------------------------- parent


def measure(route: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "bench.unpack", "--child", route, str(path)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{route} {path.name} failed:\n{err.read().decode(errors='replace')[-3000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result.update(wall=wall, cpu=ru.ru_utime + ru.ru_stime, maxrss_mb=ru.ru_maxrss / 1024)
    return result


def run(folder: Path, formats: list[str], runs: int) -> list[dict]:
    rows = [{"fmt": f, "label": label, "file": name, "route": route, "runs": []}
            for f, label, name, route in ROUTES if f in formats]
    for i in range(runs):
        for row in rows:
            result = measure(row["route"], folder / row["file"])
            row["runs"].append(result)
            print(f"  run {i + 1}: {row['fmt']:3} {row['label']:34} wall {result['wall']:6.2f}s  "
                  f"cpu {result['cpu']:6.2f}s  peak {result['maxrss_mb']:5.0f} MB", file=sys.stderr)
    for row in rows:
        results = row["runs"]
        crcs = {(r["bytes"], r["crc"]) for r in results}
        others = {(r["bytes"], r["crc"]) for o in rows if o["fmt"] == row["fmt"] for r in o["runs"]}
        if len(crcs) != 1 or len(others) != 1:
            raise RuntimeError(f"{row['fmt']}: the routes disagree about the bytes: {sorted(others)}")
        row.update(mb=results[0]["bytes"] / 1e6, threads=results[0]["threads"],
                   fell_back=any(r["fell_back"] for r in results),
                   wall=statistics.median(r["wall"] for r in results),
                   cpu=statistics.median(r["cpu"] for r in results),
                   peak=statistics.median(r["maxrss_mb"] for r in results),
                   wall_range=(min(r["wall"] for r in results), max(r["wall"] for r in results)))
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| format | route | threads | wall s (median, range) | CPU s | peak RSS MB | wall vs before |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        before = next(r for r in rows if r["fmt"] == row["fmt"] and r["label"].startswith("before"))
        lo, hi = row["wall_range"]
        lines.append(f"| {row['fmt']} | {row['label']}{' (fell back!)' if row['fell_back'] else ''} | "
                     f"{row['threads']} | {row['wall']:.2f} ({lo:.2f}-{hi:.2f}) | {row['cpu']:.2f} | "
                     f"{row['peak']:.0f} | {before['wall'] / row['wall']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        child(args[1], args[2])
        return 0
    p = argparse.ArgumentParser(prog="python -m bench.unpack", description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=400, help="megabytes of text (default 400)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--out", type=Path, help="also write the rows as JSON")
    p.add_argument("--only", default="gz,zst,xz", help="formats, comma-separated")
    a = p.parse_args(args)
    folder = make_inputs(a.data, a.mb)
    load = os.getloadavg()[0]
    rows = run(folder, a.only.split(","), a.runs)
    print(f"{a.mb} MB of text, {a.runs} runs each, interleaved; {len(os.sched_getaffinity(0))} usable CPUs; "
          f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print(table(rows))
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
