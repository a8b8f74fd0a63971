"""Finding a workflow's cases: the ``*.test.yaml`` files under its ``tests/``, each with its id.

A case's id is its tests-relative path without the extension (``refund/approved``); anything
else under ``tests/`` is ignored without a diagnostic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

CASE_SUFFIXES: Final = (".test.yaml", ".test.yml")
"""The file names discovery picks up; anything else under ``tests/`` is ignored silently."""


@dataclass(frozen=True)
class DiscoveredCase:
    """A case file found under a workflow's ``tests/``.

    ``id`` is its tests-relative path without the extension (``refund/approved``); ``path``
    is where it lives on disk.
    """

    id: str
    path: Path

    @property
    def file(self) -> str:
        """The tests-relative file name, extension included (``refund/approved.test.yaml``)."""
        suffix = next(s for s in CASE_SUFFIXES if self.path.name.endswith(s))
        return self.id + suffix


def case_id(relative: str) -> str | None:
    """The id of the tests-relative posix path ``relative``, or None if it is no case file."""
    for suffix in CASE_SUFFIXES:
        if relative.endswith(suffix) and len(relative) > len(suffix):
            return relative[: -len(suffix)]
    return None


def discover_cases(workflow_dir: Path, filter: str | None = None) -> list[DiscoveredCase]:
    """The cases under ``workflow_dir/tests/``, recursively, sorted by path.

    Only ``*.test.yaml`` / ``*.test.yml`` files are cases; anything else is ignored without a
    diagnostic. ``filter`` keeps the cases whose tests-relative path contains it. A missing
    tests directory is an empty suite.
    """
    tests_dir = workflow_dir / "tests"
    if not tests_dir.is_dir():
        return []
    found: list[tuple[str, DiscoveredCase]] = []
    for path in tests_dir.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(tests_dir).as_posix()
        identifier = case_id(relative)
        if identifier is None or (filter is not None and filter not in relative):
            continue
        found.append((relative, DiscoveredCase(id=identifier, path=path)))
    found.sort(key=lambda pair: pair[0])
    return [case for _, case in found]
