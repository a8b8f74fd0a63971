"""bench/children.py: a subprocess a benchmark starts ends when the benchmark dies, even one
killed before it could stop its children by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO

PARENT = """
import subprocess, sys, time
from bench.children import die_with_parent
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(120)"],
    preexec_fn=die_with_parent if sys.argv[1] == "bound" else None,
)
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


def _child_of_a_killed_parent(mode: str) -> int:
    """Start a parent that starts a sleeping child (bound to it or not), SIGKILL the parent,
    and return the child's pid."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, mode],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    return child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_child_bound_to_its_bench_ends_when_the_bench_is_killed() -> None:
    bound = _child_of_a_killed_parent("bound")
    loose = _child_of_a_killed_parent("loose")
    try:
        deadline = time.monotonic() + 30
        while _alive(bound) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(bound)
        assert _alive(loose)  # the control: without the binding, the child outlives it
    finally:
        for pid in (bound, loose):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
