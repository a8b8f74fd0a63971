"""A server the tests start in a child process on 127.0.0.1 (moto's S3, Debian's Redis): a
free port, ready once it answers (polled, no fixed sleep), its output in a log file, stopped
by its pid. A port taken between choosing and binding it is retried on another.

Subclasses say what to run (:meth:`ChildServer.command`) and how to ask whether it answers
(:meth:`ChildServer.answers`)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import IO, ClassVar, Self

POLL_INTERVAL = 0.05
"""Seconds between two readiness polls."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ChildServer:
    """A server in a child process on 127.0.0.1; ``log`` receives its output."""

    name: ClassVar[str] = "server"
    """How errors name it."""

    start_timeout: ClassVar[float] = 30.0
    """Seconds it may take to answer first."""

    def __init__(self, log: Path) -> None:
        self._log_path = log
        self._log: IO[bytes] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def log(self) -> Path:
        """The file the server's output goes to."""
        return self._log_path

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    def command(self) -> list[str]:
        """The command line that serves on :attr:`port`."""
        raise NotImplementedError

    def answers(self) -> bool:
        """Whether the server on :attr:`port` answers now."""
        raise NotImplementedError

    def start(self, attempts: int = 3) -> Self:
        """Start the server and return once it answers."""
        for _ in range(attempts):
            self.port = free_port()
            self._log = self._log_path.open("ab")
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=self.child_environment(),
            )
            if self._wait_until_answering():
                return self
            self.stop()
        log = self._log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the {self.name} did not start; its log ends:\n{log}")

    def child_environment(self) -> dict[str, str] | None:
        """The environment the child starts with (None: this process's)."""
        return None

    def _wait_until_answering(self) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if self.answers():
                return True
            time.sleep(POLL_INTERVAL)
        return False

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


__all__ = ["ChildServer", "free_port"]
