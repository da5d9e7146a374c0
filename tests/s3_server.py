"""A real S3-compatible server on 127.0.0.1 for tests (moto's standalone server, the one DVC's and s3fs's own
test suites use): `start_s3_server()` returns a running server, its endpoint and the environment variables
that let DVC's S3 remote, s3fs, boto3 and Lance reach it; `stop()` shuts it down. The `s3_server` fixture in
tests/conftest.py wraps it for one test, `s3_store` for one test file."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from moto.server import ThreadedMotoServer

ACCESS_KEY, SECRET_KEY, REGION = "testing-key", "testing-secret", "us-east-1"
BUCKET = "drift-test"  # the bucket the `s3_store` fixture creates


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    """A running server: `endpoint` (http://127.0.0.1:PORT), `env` (the standard AWS variables),
    `bucket(name)` creates a bucket; `stop()` ends it (in-memory: nothing outlives it)."""

    server: ThreadedMotoServer
    endpoint: str
    env: dict = field(default_factory=dict)

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """Forget every bucket and user (moto keeps them per process, not per server) and shut down."""
        from moto.core.models import DEFAULT_ACCOUNT_ID  # noqa: F401  (moto is importable: reset is)
        from moto.moto_api._internal.models import moto_api_backend

        moto_api_backend.reset()
        self.server.stop()


def start_s3_server() -> S3Server:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    return S3Server(server, endpoint, env)
