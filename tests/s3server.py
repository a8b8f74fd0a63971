"""A real S3 API on 127.0.0.1 for the tests: moto in server mode, in a process of its own.

:class:`S3Server` starts it on a free port, waits until it answers (polling, no fixed sleep),
creates buckets over HTTP, gives the environment a client needs to reach it
(:meth:`S3Server.environment`: ``AWS_ENDPOINT_URL``, test credentials, no instance metadata, no
proxy), and stops the process by its pid. Nothing leaves the machine.

Run as a script (``python tests/s3server.py --port N``), this file is the server: moto's own
application (what ``python -m moto.server`` serves) with its requests handled one at a time.
S3 checks a conditional put (``If-Match``, ``If-None-Match``) and writes in one step; moto
checks, then writes, so two concurrent puts could both pass its check. One request at a time
gives S3's answer, and a test of racing writers sees exactly one win, every run.

The conftest fixtures over it: ``s3_server`` (one per test session) and ``s3_url`` (a fresh
``s3://<bucket>/<prefix>`` per test, the environment set for that test).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

BUCKET: Final = "archmax-sessions"
"""The bucket the ``s3_server`` fixture creates."""

ACCESS_KEY_ID: Final = "archmax-test-key"
SECRET_ACCESS_KEY: Final = "archmax-test-secret-not-a-secret"
REGION: Final = "us-east-1"

START_TIMEOUT: Final = 90.0
"""Seconds the server may take to answer its first request (moto imports a lot; the machine
is shared)."""

POLL_INTERVAL: Final = 0.05
"""Seconds between two readiness polls."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class S3Server:
    """moto's S3 in server mode, in a child process on 127.0.0.1. ``log`` receives its
    output."""

    def __init__(self, log: Path) -> None:
        self._log_path = log
        self._log: IO[bytes] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``: what ``AWS_ENDPOINT_URL`` is set to."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """The file the server's output goes to: after its start-up lines, one line per
        request served (werkzeug's access log, written before the response leaves)."""
        return self._log_path

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    def start(self, attempts: int = 3) -> S3Server:
        """Start the server and return once it answers; a port taken between choosing and
        binding it is retried on another."""
        for _ in range(attempts):
            self.port = free_port()
            self._log = self._log_path.open("ab")
            environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
            self._process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=environment,
            )
            if self._wait_until_answering():
                return self
            self.stop()
        log = self._log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the S3 server did not start; its log ends:\n{log}")

    def _wait_until_answering(self) -> bool:
        import httpx

        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                if httpx.get(self.endpoint, timeout=2.0, trust_env=False).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(POLL_INTERVAL)
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

    def stop(self) -> None:
        """Stop the process by its pid (terminate, then kill if it lingers)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def serve(host: str, port: int) -> None:
    """moto's application, its requests handled one at a time (see the module docstring)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    application = DomainDispatcherApplication(create_backend_app)
    one_at_a_time = threading.Lock()

    def serialised(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        with one_at_a_time:
            return list(application(environ, start_response))

    run_simple(host, port, serialised, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    serve(arguments.host, arguments.port)
