"""A real Redis on 127.0.0.1 for the tests of the live-text channel: Debian's ``redis-server``
(``.ci/run`` installs it), started on a free port with nothing persisted, ready once it
answers ``PING`` (polled, no fixed sleep), stopped by its pid.

The conftest fixture over it: ``redis_url`` (one server per test session)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Final

from tests.support.child_server import ChildServer

START_TIMEOUT: Final = 30.0
"""Seconds the server may take to answer its first ``PING``."""


def redis_binary() -> str | None:
    """The ``redis-server`` executable, if installed."""
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )


class RedisServer(ChildServer):
    """``redis-server`` in a child process on 127.0.0.1, its output in ``log``."""

    name = "redis-server"
    start_timeout = START_TIMEOUT

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, attempts: int = 3) -> RedisServer:
        if redis_binary() is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        return super().start(attempts)

    def command(self) -> list[str]:
        binary = redis_binary()
        assert binary is not None
        return [
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
        ]

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False


__all__ = ["RedisServer", "redis_binary"]
