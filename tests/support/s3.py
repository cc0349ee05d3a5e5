"""A real S3 API server for the object-store tests, and a fresh bucket on it for each test.

`.ci/run` (and `make s3-up`) starts deploy/s3/local-s3.sh's server on $S3_PORT before the suite;
a session that finds it answering uses it. Otherwise (a workstation, one test file) the session
starts its own on a free port, with its pid file and log in a temporary folder, and stops it at the
end. No mocks: the store talks HTTP to moto's server as it would to a bucket.

tests/conftest.py loads this module as a plugin, so every test module has the fixtures
`s3_server` (session) and `s3_bucket` (per test: its own bucket, the AWS_* variables set for it
and for any subprocess, emptied and removed afterwards).
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.paths import REPO

SCRIPT = REPO / "deploy" / "s3" / "local-s3.sh"
# moto takes any credentials; these only have to be present, so boto3 never looks further (a
# profile, ~/.aws, the instance metadata endpoint) on a developer's machine
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "slm4ie-test", "AWS_SECRET_ACCESS_KEY": "slm4ie-test", "AWS_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    def env(self, home: Path) -> dict[str, str]:
        """The variables every AWS client reads, pointing at this server; `home` holds empty AWS config files."""
        return {"AWS_ENDPOINT_URL": self.endpoint, **CREDENTIALS, "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(home / "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-creds")}

    @functools.cached_property
    def client(self) -> Any:
        """One boto3 client for the session's own looks at its buckets (clients are thread-safe)."""
        import boto3  # here, not at the top: the root conftest loads this module in every test process

        return boto3.session.Session(aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                     aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                                     region_name=CREDENTIALS["AWS_REGION"]).client("s3", endpoint_url=self.endpoint)


@dataclass(frozen=True)
class ScratchBucket:
    name: str
    server: S3Server
    client: Any  # a boto3 S3 client of the test's own, to look at the bucket behind the store's back

    @property
    def url(self) -> str:
        return f"s3://{self.name}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def script(command: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout)


def answering_endpoint() -> str | None:
    """The endpoint of the server on $S3_PORT (the script's default port when unset), if one answers."""
    status = script("status", dict(os.environ), timeout=30)
    return status.stdout.strip() if status.returncode == 0 else None


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    endpoint = answering_endpoint()
    if endpoint:
        yield S3Server(endpoint)
        return
    port = free_port()
    env = dict(os.environ, S3_PORT=str(port), SLM4IE_S3_HOME=str(tmp_path_factory.mktemp("s3-server")))
    started = script("start", env)
    assert started.returncode == 0, f"deploy/s3/local-s3.sh start failed:\n{started.stdout}{started.stderr}"
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        script("stop", env)


@pytest.fixture
def s3_bucket(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScratchBucket]:
    for name, value in s3_server.env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = s3_server.client
    bucket = f"slm4ie-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=bucket)
    try:
        yield ScratchBucket(bucket, s3_server, client)
    finally:
        remove_bucket(client, bucket)


def remove_bucket(client: Any, bucket: str) -> None:
    """Abort its uploads, delete its objects, then the bucket: the shared server keeps only what runs."""
    for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket):
        for upload in page.get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": entry["Key"]} for entry in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})
    client.delete_bucket(Bucket=bucket)
