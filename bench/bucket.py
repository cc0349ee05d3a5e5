"""Bucket to bucket against folder to folder: `slm4ie extract KEY --workers N` on the bench inputs,
a fresh process each run, the bucket run split into its stages (docs/performance.md, "Object stores").

    python -m bench.bucket [--scale 0.1] [--runs 3] [--workers 2] [--only text,conllu,jsonl] [--out FILE]

Inputs: bench.generate's (scale 0.1: text 50 MB, conllu and jsonl 20 MB, 4 files each), reused when
present. A moto server of its own (deploy/s3/local-s3.sh, free port) gets the raw folders under
s3://bench-bucket/raw/<key>/ once; then per round and dataset: POSIX (folders, empty output), bucket
(`s3://` input_dir and output_dir, empty work_dir and output prefix: everything is downloaded and
uploaded) and the bucket run again with nothing changed (it should write no object). One unmeasured
round first writes the .pyc files (this host sets PYTHONDONTWRITEBYTECODE; the children do not).

Each run is `python -m bench.bucket --child ...`: the CLI imported, a mark printed, then
`slm4ie_assets.cli.main.main` as the `slm4ie` script calls it. Each line of its output is stamped on
arrival with the wall seconds and the process tree's CPU seconds so far (/proc: utime+stime+cutime+
cstime of every live process), and the server's CPU seconds, which splits the bucket run at the
lines the CLI prints: mark -> `mirrored s3://...` (read: boto3, listing, downloading raw/), ->
`run summary` (extract: plan, pool, parts, the local publish; mark -> `run summary` in the POSIX
run), -> `published to s3://...` (publish: upload, create-only commit, top-level copies, clean-up).
Whole-run wall and CPU: os.wait4; peak RSS: ru_maxrss (the largest process) and bench.run's 50 ms
sample of the tree's summed RSS. The server's log names every request: the up-to-date run's are
counted by kind. Medians; the bucket's published text and sidecar must equal the POSIX run's bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "deploy" / "s3" / "local-s3.sh"
BUCKET = "bench-bucket"
MARK = "bench.bucket: cli imported"
DEFAULT_KEYS = "text,conllu,jsonl"
DEFAULT_DATA = Path(tempfile.gettempdir()) / "slm4ie-bench"
TICK = os.sysconf("SC_CLK_TCK")
REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|PUT|POST|HEAD|DELETE) (\S+) HTTP')


# ----------------------------------------------------------------------------- one child, stamped


@dataclass(frozen=True)
class Stamp:
    wall: float  # seconds since the child was started
    cpu: float  # CPU seconds of the child's process tree so far
    server_cpu: float  # CPU seconds of the S3 server so far
    text: str


@dataclass
class Run:
    wall: float
    cpu: float
    maxrss: int
    tree_rss: int
    server_cpu: float  # during the whole run
    stamps: list[Stamp]
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) the server answered

    def at(self, needle: str) -> Stamp:
        found = next((s for s in self.stamps if needle in s.text), None)
        if found is None:
            raise RuntimeError(f"no line with {needle!r} in the run's output:\n"
                               + "\n".join(s.text for s in self.stamps))
        return found


def proc_cpu(pid: int, with_children: bool = True) -> float:
    """utime+stime (and the reaped children's) of one process, in seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(f) for f in fields[11:15 if with_children else 13])
    return ticks / TICK


def tree_cpu(root: int) -> float:
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += proc_cpu(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def run_child(args: list[str], env: dict[str, str], server_pid: int, server_log: Path) -> Run:
    """One `python -m bench.bucket --child ARGS`: stamped lines, wall, tree CPU and RSS, requests."""
    from bench.run import _tree_rss

    log_start = server_log.stat().st_size
    server_before = proc_cpu(server_pid, with_children=False)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench.bucket", "--child", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, err, done = [0], [""], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    def drain() -> None:
        err[0] = proc.stderr.read()  # type: ignore[union-attr]

    threads = [threading.Thread(target=sample, daemon=True), threading.Thread(target=drain, daemon=True)]
    for thread in threads:
        thread.start()
    stamps = [Stamp(time.perf_counter() - started, tree_cpu(proc.pid),
                    proc_cpu(server_pid, with_children=False) - server_before, line.rstrip("\n"))
              for line in proc.stdout]  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    for thread in threads:
        thread.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{args} failed:\n" + "\n".join(s.text for s in stamps) + err[0][-3000:])
    time.sleep(0.2)  # the server logs a request after answering it
    with open(server_log, "rb") as fh:
        fh.seek(log_start)
        requests = REQUEST.findall(fh.read().decode(errors="replace"))
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, peak[0],
               proc_cpu(server_pid, with_children=False) - server_before, stamps, requests)


def child_main(argv: list[str]) -> int:
    """What the `slm4ie` script runs, after a mark that ends the start-up stage (the CLI and the
    pipeline imported, as both routes need them); then the pool's forkserver is reaped, so the
    workers' CPU seconds reach os.wait4 (bench.children says why)."""
    import slm4ie_assets.cli.run  # noqa: F401  (what `extract` imports first, on both routes)
    from bench.children import reap_pool_workers
    from slm4ie_assets.cli.main import main

    print(MARK, flush=True)
    status = main(argv)
    reap_pool_workers()
    return status


# ----------------------------------------------------------------------------- stages


@dataclass(frozen=True)
class Stage:
    wall: float
    cpu: float
    server_cpu: float


def between(a: Stamp, b: Stamp) -> Stage:
    return Stage(b.wall - a.wall, b.cpu - a.cpu, b.server_cpu - a.server_cpu)


def bucket_stages(run: Run, key: str) -> dict[str, Stage]:
    mark, mirrored = run.at(MARK), run.at(f"{key}: mirrored s3://")
    summary, delivered = run.at(f"{key}: run summary"), run.at(f"{key}: published to s3://")
    return {"start": between(Stamp(0, 0, 0, ""), mark), "read": between(mark, mirrored),
            "extract": between(mirrored, summary), "publish": between(summary, delivered)}


def posix_stages(run: Run, key: str) -> dict[str, Stage]:
    mark = run.at(MARK)
    return {"start": between(Stamp(0, 0, 0, ""), mark), "extract": between(mark, run.at(f"{key}: run summary"))}


def request_kinds(requests: list[tuple[str, str]]) -> dict[str, int]:
    """LIST (a GET of the bucket itself), GET, HEAD, and writes (PUT, POST, DELETE)."""
    kinds: dict[str, int] = {}
    for method, path in requests:
        bucket_only = path.split("?", 1)[0].strip("/") == BUCKET
        kind = "LIST" if method == "GET" and bucket_only else method if method in ("GET", "HEAD") else "write"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


# ----------------------------------------------------------------------------- the set-up


@dataclass(frozen=True)
class Setup:
    root: Path  # the generated inputs: root/raw/<key>/
    scratch: Path  # catalogs, the POSIX output, the bucket's work_dir, the server's log
    env: dict[str, str]
    client: Any  # boto3 S3 client of this process
    server_pid: int

    @property
    def posix_out(self) -> Path:
        return self.scratch / "posix-out"

    @property
    def work_dir(self) -> Path:
        return self.scratch / "work"

    @property
    def server_log(self) -> Path:
        return self.scratch / "s3" / "moto.log"


def write_catalogs(setup: Setup, keys: list[str]) -> tuple[Path, Path]:
    from bench.generate import ALL_DATASETS

    datasets = "datasets:\n" + "".join(f"  {k}:\n    extractor: {ALL_DATASETS[k][0]}\n    domain: mixed\n"
                                       for k in keys)
    posix, bucket = setup.scratch / "posix.yaml", setup.scratch / "bucket.yaml"
    posix.write_text(f"input_dir: {setup.root / 'raw'}\noutput_dir: {setup.posix_out}\n{datasets}")
    bucket.write_text(f"input_dir: s3://{BUCKET}/raw\noutput_dir: s3://{BUCKET}/out\n"
                      f"work_dir: {setup.work_dir}\n{datasets}")
    return posix, bucket


def upload_raw(setup: Setup, keys: list[str]) -> None:
    for key in keys:
        folder = setup.root / "raw" / key
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            setup.client.upload_file(str(path), BUCKET, f"raw/{key}/{path.relative_to(folder)}")


def empty_output(setup: Setup) -> None:
    """A cold bucket run: no work_dir (no mirror, no parts) and nothing under out/."""
    shutil.rmtree(setup.work_dir, ignore_errors=True)
    client = setup.client
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=BUCKET, Prefix="out/"):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="out/"):
        keys = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})


def object_digest(client: Any, name: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        body = client.get_object(Bucket=BUCKET, Key=name)["Body"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchKey":
            return None
        raise
    digest = hashlib.sha256()
    while chunk := body.read(8 << 20):
        digest.update(chunk)
    return digest.digest()


def same_bytes(setup: Setup, key: str) -> bool:
    """The bucket's top-level text and sidecar are the POSIX run's files (or absent with them)."""
    for name in (f"{key}.jsonl", f"{key}.annotations.jsonl.gz"):
        local = setup.posix_out / name
        want = hashlib.sha256(local.read_bytes()).digest() if local.exists() else None
        if object_digest(setup.client, f"out/{name}") != want:
            return False
    return True


def output_bytes(setup: Setup, key: str) -> int:
    return sum(p.stat().st_size for p in setup.posix_out.glob(f"{key}.*") if p.is_file())


# ----------------------------------------------------------------------------- rounds


@dataclass
class Row:
    key: str
    input_mb: float
    output_mb: float = 0.0
    posix: list[Run] = field(default_factory=list)
    bucket: list[Run] = field(default_factory=list)
    again: list[Run] = field(default_factory=list)
    identical: bool = True


def one_round(setup: Setup, row: Row, catalogs: tuple[Path, Path], workers: int) -> None:
    """POSIX from an empty output folder, bucket from an empty work_dir and prefix, bucket again."""
    posix, bucket = catalogs
    args = ["extract", row.key, "--workers", str(workers)]
    shutil.rmtree(setup.posix_out, ignore_errors=True)
    row.posix.append(run_child(["--config", str(posix), *args], setup.env, setup.server_pid, setup.server_log))
    empty_output(setup)
    row.bucket.append(run_child(["--config", str(bucket), *args], setup.env, setup.server_pid, setup.server_log))
    row.again.append(run_child(["--config", str(bucket), *args], setup.env, setup.server_pid, setup.server_log))
    row.output_mb = output_bytes(setup, row.key) / 1e6
    row.identical = row.identical and same_bytes(setup, row.key)
    last = row.bucket[-1]
    print(f"{row.key}: POSIX {row.posix[-1].wall:.2f} s, bucket {last.wall:.2f} s, up to date "
          f"{row.again[-1].wall:.2f} s ({request_kinds(row.again[-1].requests)})", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the table


def median_stage(stages: list[dict[str, Stage]], name: str) -> Stage:
    return Stage(*(statistics.median(getattr(s[name], f) for s in stages) for f in ("wall", "cpu", "server_cpu")))


def med(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def per_mb(seconds: float, mb: float) -> str:
    return f"{1000 * seconds / mb:.0f}"


def table_row(row: Row) -> str:
    """Medians; `read CPU, client` is the cold read stage's CPU beyond the up-to-date run's (which
    lists and downloads nothing: boto3's import, the clients, the listing), per MB downloaded."""
    cold = [bucket_stages(r, row.key) for r in row.bucket]
    warm_read = median_stage([{"read": between(r.at(MARK), r.at(f"{row.key}: mirrored s3://"))} for r in row.again],
                             "read")
    pe = median_stage([posix_stages(r, row.key) for r in row.posix], "extract")
    be, read, pub = (median_stage(cold, name) for name in ("extract", "read", "publish"))
    pw, bw, pc, bc = med(row.posix, "wall"), med(row.bucket, "wall"), med(row.posix, "cpu"), med(row.bucket, "cpu")
    kinds = [request_kinds(r.requests) for r in row.again]
    requests = ", ".join(f"{k} {statistics.median(d.get(k, 0) for d in kinds):g}"
                         for k in ("LIST", "GET", "HEAD", "write") if any(k in d for d in kinds)) or "none"
    mib = 1 << 20
    return (f"| {row.key} | {row.input_mb:.0f} / {row.output_mb:.0f} | {pw:.2f} / {bw:.2f} ({bw / pw:.2f}x) "
            f"| {pc:.2f} / {bc:.2f} ({bc / pc:.2f}x) | {pe.wall:.2f} / {be.wall:.2f} ({be.wall / pe.wall:.2f}x) "
            f"| {read.wall:.2f} | {row.input_mb / read.wall:.0f} | {read.cpu:.2f} ({warm_read.cpu:.2f}) "
            f"| {per_mb(read.cpu - warm_read.cpu, row.input_mb)} / {per_mb(read.server_cpu, row.input_mb)} "
            f"| {pub.wall:.2f} | {row.output_mb / pub.wall:.0f} "
            f"| {per_mb(pub.cpu, row.output_mb)} / {per_mb(pub.server_cpu, row.output_mb)} "
            f"| {med(row.again, 'wall'):.2f} ({med(row.again, 'cpu'):.2f}) | {requests} "
            f"| {max(r.maxrss for r in row.posix) / mib:.0f} / {max(r.maxrss for r in row.bucket) / mib:.0f} "
            f"| {max(r.tree_rss for r in row.posix) / mib:.0f} / {max(r.tree_rss for r in row.bucket) / mib:.0f} "
            f"| {'yes' if row.identical else 'NO'} |")


def render(rows: list[Row], args: argparse.Namespace, load: tuple[float, float, float], seconds: float) -> str:
    head = ("| dataset | MB in / out | wall s POSIX / bucket | CPU s POSIX / bucket | extract s POSIX / bucket "
            "| read s | read MB/s | read CPU s (fixed) | read CPU ms/MB client / server | publish s | publish MB/s "
            "| publish CPU ms/MB client / server | up to date: wall s (CPU s) | up to date: requests "
            "| RSS MB POSIX / bucket | tree RSS MB POSIX / bucket | same bytes |")
    lines = [f"`python -m bench.bucket --scale {args.scale:g} --runs {args.runs} --workers {args.workers} "
             f"--only {','.join(r.key for r in rows)}`: medians of {args.runs} runs, {os.cpu_count()} CPUs, "
             f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end; {seconds:.0f} s in all", "",
             head, "|" + "---|" * (head.count("|") - 1)]
    lines += [table_row(row) for row in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_bench(args: argparse.Namespace, scratch: Path, keys: list[str]) -> list[Row]:
    import boto3

    from bench.generate import input_bytes

    root = args.data / f"scale-{args.scale:g}"
    subprocess.run([sys.executable, "-m", "bench.generate", str(root), "--scale", str(args.scale), "--only",
                    ",".join(keys)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    port = free_port()
    # PYTHONDONTWRITEBYTECODE dropped: an installed project imports from .pyc files after its first run
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "SLM4IE_", "DAGSTER_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(REPO), AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench",
               AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, S3_PORT=str(port),
               SLM4IE_S3_HOME=str(scratch / "s3"))
    subprocess.run([str(SCRIPT), "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        client = boto3.session.Session(aws_access_key_id="bench", aws_secret_access_key="bench",
                                       region_name="us-east-1").client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
        client.create_bucket(Bucket=BUCKET)
        setup = Setup(root, scratch, env, client, int((scratch / "s3" / "moto.pid").read_text()))
        upload_raw(setup, keys)
        catalogs = write_catalogs(setup, keys)
        rows = [Row(key, input_bytes(root, key) / 1e6) for key in keys]
        one_round(setup, Row(keys[0], 0.0), catalogs, args.workers)  # warm-up: .pyc files, page cache
        for _ in range(args.runs):
            for row in rows:
                one_round(setup, row, catalogs, args.workers)
        return rows
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, check=False)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.1, help="bench.generate's size factor (0.1: text 50 MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default=DEFAULT_KEYS, help=f"comma-separated dataset keys (default {DEFAULT_KEYS})")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"generated inputs (default {DEFAULT_DATA})")
    ap.add_argument("--out", type=Path, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)
    keys = [k for k in args.only.split(",") if k]
    load, started = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="slm4ie-bench-bucket-") as scratch:
        rows = run_bench(args, Path(scratch), keys)
    text = render(rows, args, load, time.perf_counter() - started)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if all(r.identical for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
