"""Which S3 library, measured: boto3 (what storage/bucket.py uses) against obstore, on moto's server.

    python -m bench.s3_library [--mb 200] [--runs 3] [--obstore-python PATH | --install-obstore]

Starts its own S3 API server with deploy/s3/local-s3.sh (moto's, from .venv) on a free port, writes
a blob of MB MiB of random bytes, and times each route the same way: wall seconds around the whole
transfer, medians of RUNS runs; boto3's and our routes interleaved in this process (A B C A B C ...),
obstore's before them in a child process. Rows:

- upload: boto3's own `upload_file` (8 MiB parts, 4 threads), `BucketStore.write` (ours: 8 MiB
  parts, 4 in flight, streamed from the file) and obstore's `put` (8 MiB chunks, 4 at once);
- read: sequential ranged GETs of 8 MiB (boto3, obstore) and of 1 MiB (boto3, over the first 32 MiB
  only: it is slow), `BucketStore.open_read` (8 MiB chunks read ahead on one thread), and the same
  file read from the local disk (the POSIX route, for scale);
- conditional writes: which conditions each library can send and whether the server refused the
  second writer (If-None-Match: * on PutObject and on CompleteMultipartUpload, If-Match on
  PutObject and DeleteObject; obstore's `mode="create"`).

obstore is not a dependency of the project: its rows run in a child process of another interpreter
that has it, `--obstore-python PATH`, or one made for this run with `--install-obstore` (a
throwaway venv under the temporary folder, `uv pip install obstore==0.12.1`); without either they
are skipped, and the table says so. The host's load average is printed beside the table: a loaded
host slows every row alike, so compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "deploy" / "s3" / "local-s3.sh"
BUCKET = "bench-s3-library"
PART = 8 << 20
OBSTORE_VERSION = "0.12.1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


# ---------------------------------------------------------------- obstore, in a child process


def obstore_child(endpoint: str, blob: str, size: int, runs: int) -> None:
    """Runs in an interpreter with obstore: prints {"upload": [...], "read_8": [...], "create": ...}."""
    import obstore
    from obstore.exceptions import AlreadyExistsError
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=endpoint, client_options={"allow_http": True}, region="us-east-1",
                    access_key_id="bench", secret_access_key="bench")

    def upload() -> None:
        with open(blob, "rb") as source:
            obstore.put(store, "obstore.bin", source, chunk_size=PART, max_concurrency=4)

    def read() -> None:
        for offset in range(0, size, PART):
            bytes(obstore.get_range(store, "obstore.bin", start=offset, length=min(PART, size - offset)))

    result: dict[str, object] = {"upload": [], "read_8": []}
    for _ in range(runs):
        result["upload"].append(timed(upload))  # type: ignore[attr-defined]
        result["read_8"].append(timed(read))  # type: ignore[attr-defined]
    obstore.put(store, "obstore-create", b"1", mode="create")
    try:
        obstore.put(store, "obstore-create", b"2", mode="create")
        result["create"] = "not refused"
    except AlreadyExistsError:
        result["create"] = "refused (AlreadyExistsError)"
    print(json.dumps(result))


def obstore_python(args: argparse.Namespace) -> str | None:
    if args.obstore_python:
        return str(args.obstore_python)
    if not args.install_obstore:
        return None
    venv = Path(tempfile.gettempdir()) / "slm4ie-bench-obstore"
    uv = REPO / ".uv" / "bin" / "uv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([str(uv), "venv", "-q", str(venv), "--python", sys.executable], check=True)
    subprocess.run([str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    f"obstore=={OBSTORE_VERSION}"], check=True)
    return str(venv / "bin" / "python")


# ---------------------------------------------------------------- boto3 and ours, in this process


def conditional_writes(client) -> dict[str, str]:
    """Each condition sent to the server a second time, where it must refuse: what it answered."""
    from botocore.exceptions import ClientError

    def refused(call) -> str:
        try:
            call()
            return "not refused"
        except ClientError as exc:
            return f"refused ({exc.response['Error']['Code']})"

    client.put_object(Bucket=BUCKET, Key="c1", Body=b"1", IfNoneMatch="*")
    upload = client.create_multipart_upload(Bucket=BUCKET, Key="c1")["UploadId"]
    part = client.upload_part(Bucket=BUCKET, Key="c1", UploadId=upload, PartNumber=1, Body=b"2")["ETag"]
    stale = '"' + "0" * 32 + '"'
    answers = {
        "PutObject If-None-Match: *": refused(lambda: client.put_object(Bucket=BUCKET, Key="c1", Body=b"2",
                                                                         IfNoneMatch="*")),
        "CompleteMultipartUpload If-None-Match: *": refused(lambda: client.complete_multipart_upload(
            Bucket=BUCKET, Key="c1", UploadId=upload, IfNoneMatch="*",
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]})),
        "PutObject If-Match (stale)": refused(lambda: client.put_object(Bucket=BUCKET, Key="c1", Body=b"3",
                                                                         IfMatch=stale)),
        "DeleteObject If-Match (stale)": refused(lambda: client.delete_object(Bucket=BUCKET, Key="c1",
                                                                               IfMatch=stale)),
    }
    upload = client.create_multipart_upload(Bucket=BUCKET, Key="c1")["UploadId"]
    part = client.upload_part(Bucket=BUCKET, Key="c1", UploadId=upload, PartNumber=1, Body=b"2")["ETag"]
    answers["CompleteMultipartUpload If-Match (stale)"] = refused(lambda: client.complete_multipart_upload(
        Bucket=BUCKET, Key="c1", UploadId=upload, IfMatch=stale,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]}))
    return answers


def measure_boto3(endpoint: str, blob: Path, size: int, runs: int) -> dict[str, list[float]]:
    import boto3
    from boto3.s3.transfer import TransferConfig

    from slm4ie_assets.storage.bucket import BucketStore, ClientOptions

    client = boto3.client("s3", endpoint_url=endpoint)
    ours = BucketStore(BUCKET, "", ClientOptions(endpoint_url=endpoint))
    config = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4)
    one_mib_span = min(size, 32 << 20)

    def ranged(key: str, step: int, span: int) -> None:
        for offset in range(0, span, step):
            body = client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={offset}-{offset + step - 1}")["Body"]
            while body.read(1 << 20):
                pass

    def store_write() -> None:
        with blob.open("rb") as source:
            ours.write("ours.bin", source)

    def store_read() -> None:
        with ours.open_read("ours.bin") as stream:
            while stream.read(1 << 20):
                pass

    def posix_read() -> None:
        with blob.open("rb") as source:
            while source.read(1 << 20):
                pass

    rows: dict[str, list[float]] = {name: [] for name in (
        "upload boto3", "upload ours", "read_8 boto3", "read_1 boto3", "read ours", "read posix")}
    for _ in range(runs):
        rows["upload boto3"].append(timed(lambda: client.upload_file(str(blob), BUCKET, "boto3.bin", Config=config)))
        rows["upload ours"].append(timed(store_write))
        rows["read_8 boto3"].append(timed(lambda: ranged("boto3.bin", PART, size)))
        rows["read_1 boto3"].append(timed(lambda: ranged("boto3.bin", 1 << 20, one_mib_span)) * size / one_mib_span)
        rows["read ours"].append(timed(store_read))
        rows["read posix"].append(timed(posix_read))
    return rows


def table(size: int, runs: int, boto: dict[str, list[float]], obstore: dict | None, why_not: str,
          conditions: dict[str, str]) -> str:
    def row(what: str, seconds: list[float] | None) -> str:
        if not seconds:
            return f"| {what} | - | - ({why_not}) |"
        median = statistics.median(seconds)
        return f"| {what} | {median:.2f} | {size / median / 1e6:.0f} |"

    lines = [f"{size >> 20} MiB object, medians of {runs} runs (load average {os.getloadavg()[0]:.1f}, "
             f"{os.cpu_count()} cores)", "", "| route | seconds | MB/s |", "|---|---|---|",
             row("upload: boto3 upload_file (8 MiB parts, 4 threads)", boto["upload boto3"]),
             row("upload: BucketStore.write (8 MiB parts, 4 in flight)", boto["upload ours"]),
             row("upload: obstore put (8 MiB chunks, 4 at once)", obstore and obstore["upload"]),
             row("read: boto3, sequential 8 MiB ranged GETs", boto["read_8 boto3"]),
             row("read: obstore, sequential 8 MiB get_range", obstore and obstore["read_8"]),
             row("read: boto3, sequential 1 MiB ranged GETs (first 32 MiB)", boto["read_1 boto3"]),
             row("read: BucketStore.open_read (8 MiB read ahead, 1 thread)", boto["read ours"]),
             row("read: the same file on the local disk (POSIX)", boto["read posix"]),
             "", "| condition (second writer) | moto's server answered |", "|---|---|"]
    lines += [f"| boto3 {what} | {answer} |" for what, answer in conditions.items()]
    lines.append(f"| obstore put(mode=\"create\") | {obstore['create'] if obstore else '- (' + why_not + ')'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--obstore-python", type=Path)
    parser.add_argument("--install-obstore", action="store_true")
    parser.add_argument("--obstore-child", nargs=4, help=argparse.SUPPRESS)  # endpoint, blob, size, runs
    args = parser.parse_args()
    if args.obstore_child:
        endpoint, blob, size, runs = args.obstore_child
        obstore_child(endpoint, blob, int(size), int(runs))
        return
    size = args.mb << 20
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                      AWS_EC2_METADATA_DISABLED="true")
    with tempfile.TemporaryDirectory(prefix="slm4ie-s3-bench-") as scratch:
        port = free_port()
        env = dict(os.environ, S3_PORT=str(port), SLM4IE_S3_HOME=scratch)
        subprocess.run([str(SCRIPT), "start"], env=env, check=True)
        try:
            endpoint = f"http://127.0.0.1:{port}"
            import boto3

            client = boto3.client("s3", endpoint_url=endpoint)
            client.create_bucket(Bucket=BUCKET)
            blob = Path(scratch) / "blob"
            with blob.open("wb") as out:
                for _ in range(args.mb):
                    out.write(os.urandom(1 << 20))
            python = obstore_python(args)
            obstore, why_not = None, "obstore not installed: --install-obstore or --obstore-python PATH"
            if python:
                child = subprocess.run([python, __file__, "--obstore-child", endpoint, str(blob), str(size),
                                        str(args.runs)], capture_output=True, text=True, env=env)
                if child.returncode == 0:
                    obstore = json.loads(child.stdout.strip().splitlines()[-1])
                else:
                    why_not = f"obstore run failed: {child.stderr.strip().splitlines()[-1:]}"
            boto = measure_boto3(endpoint, blob, size, args.runs)
            print(table(size, args.runs, boto, obstore, why_not, conditional_writes(client)))
        finally:
            subprocess.run([str(SCRIPT), "stop"], env=env, check=False)


if __name__ == "__main__":
    main()
