"""A real S3 API on 127.0.0.1 for the tests: moto in server mode, in a process of its own.

:class:`S3Server` starts it on a free port, waits until it answers (polling, no fixed sleep),
creates buckets over HTTP, gives the environment a client needs to reach it
(:meth:`S3Server.environment`: ``AWS_ENDPOINT_URL``, test credentials, no instance metadata, no
proxy), and stops the process by its pid. Nothing leaves the machine.

The server itself is :mod:`tests.support.moto_server`, run as a script: moto's own application with
its requests handled one at a time (why: its docstring).

The conftest fixtures over it: ``s3_server`` (one per test session) and ``s3_url`` (a fresh
``s3://<bucket>/<prefix>`` per test, the environment set for that test).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

from tests.support.child_server import ChildServer, free_port

__all__ = ["ACCESS_KEY_ID", "BUCKET", "REGION", "SECRET_ACCESS_KEY", "S3Server", "free_port"]

BUCKET: Final = "archmax-sessions"
"""The bucket the ``s3_server`` fixture creates."""

ACCESS_KEY_ID: Final = "archmax-test-key"
SECRET_ACCESS_KEY: Final = "archmax-test-secret-not-a-secret"
REGION: Final = "us-east-1"

START_TIMEOUT: Final = 90.0
"""Seconds the server may take to answer its first request (moto imports a lot; the machine
is shared)."""


class S3Server(ChildServer):
    """moto's S3 in server mode, in a child process on 127.0.0.1. ``log`` receives its
    output: after its start-up lines, one line per request served (werkzeug's access log,
    written before the response leaves)."""

    name = "S3 server"
    start_timeout = START_TIMEOUT

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: what ``AWS_ENDPOINT_URL`` is set to."""
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            sys.executable,
            str(Path(__file__).with_name("moto_server.py")),
            "--port",
            str(self.port),
        ]

    def child_environment(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}

    def answers(self) -> bool:
        import httpx

        try:
            return httpx.get(self.endpoint, timeout=2.0, trust_env=False).status_code == 200
        except httpx.TransportError:
            return False

    def create_bucket(self, name: str) -> None:
        """Create the bucket ``name`` (moto takes the unsigned ``PUT /<name>``)."""
        import httpx

        answer = httpx.put(f"{self.endpoint}/{name}", timeout=10.0, trust_env=False)
        if answer.status_code != 200:
            raise RuntimeError(f"creating bucket {name!r}: HTTP {answer.status_code}")

    def environment(self) -> dict[str, str]:
        """The variables a client (obstore, boto3) needs to reach this server: an endpoint,
        test credentials and region, plain HTTP allowed, no instance metadata, no proxy."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_EC2_METADATA_DISABLED": "true",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
