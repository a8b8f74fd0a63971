"""One name per module: the repository keeps ``workflows/``, ``activities/``, ``client/`` and
``worker.py`` at its top, linked into ``archmax_temporal``; a bare import of one of them from
the repository root would load a second copy of the same files, so it stops with a message
naming the package's import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO


@pytest.mark.parametrize(
    ("bare", "package"),
    [
        ("workflows.text", "archmax_temporal.workflows"),
        ("activities.regex", "archmax_temporal.activities"),
        ("client.times", "archmax_temporal.client"),
        ("worker", "archmax_temporal.worker"),
    ],
)
def test_a_bare_import_from_the_repository_root_fails_naming_the_package(
    bare: str, package: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {bare}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), done.stderr
    assert f"import {package}" in last


def test_the_package_names_import_and_are_one_module_each() -> None:
    code = (
        "import archmax_temporal.workflows.text as a, archmax_temporal.worker as w, sys;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('workflows', 'activities', 'client', 'worker')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"
