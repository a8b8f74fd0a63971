"""A real Redis on 127.0.0.1 for the tests of the live-text channel: Debian's ``redis-server``
(``.ci/run`` installs it), started on a free port with nothing persisted, ready once it
answers ``PING`` (polled, no fixed sleep), stopped by its pid.

The conftest fixture over it: ``redis_url`` (one server per test session)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Final

from tests.s3server import free_port

START_TIMEOUT: Final = 30.0
"""Seconds the server may take to answer its first ``PING``."""

POLL_INTERVAL: Final = 0.05


def redis_binary() -> str | None:
    """The ``redis-server`` executable, if installed."""
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )


class RedisServer:
    """``redis-server`` in a child process on 127.0.0.1, its output in ``log``."""

    def __init__(self, log: Path) -> None:
        self._log_path = log
        self._log: IO[bytes] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self._log = self._log_path.open("ab")
        self._process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self._log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not answer PING")
            time.sleep(POLL_INTERVAL)
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
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


__all__ = ["RedisServer", "redis_binary"]
