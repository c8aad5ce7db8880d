"""An S3-compatible endpoint on loopback for tests and benchmarks: moto's server mode.

`s3_server()` starts `python -m moto.server` on a free 127.0.0.1 port in its own process group,
waits until it answers, creates a bucket, and yields the standard AWS environment variables that
point every client at it (s3a:// in Spark, s3fs, delta-rs, boto3): endpoint, region, generated
credentials, and `AWS_ALLOW_HTTP` (delta-rs refuses plain HTTP without it). The server is stopped
by its process group when the block ends, also on failure.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

# What a client of the server is given (docker/compose.yaml passes the same through).
S3_CLIENT_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ALLOW_HTTP",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    env: dict[str, str]  # the AWS_* variables of a client of this server

    def uri(self, prefix: str) -> str:
        return f"s3a://{self.bucket}/{prefix.strip('/')}"


@contextmanager
def s3_server(log: Path, bucket: str = "lake") -> Iterator[S3Server]:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": f"key{secrets.token_hex(8)}",
        "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
        "AWS_ALLOW_HTTP": "true",
    }
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's S3 server did not start: see {log}") from None
                time.sleep(0.2)
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        client.create_bucket(Bucket=bucket)
        assert set(env) == set(S3_CLIENT_VARIABLES)
        # fsspec keeps one filesystem per constructor arguments, and the endpoint comes from the
        # environment: an earlier server's (gone) would otherwise be reused by this process.
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        yield S3Server(endpoint, bucket, env)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
