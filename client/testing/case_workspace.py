"""A case's workspace seeds: the session paths a case may seed, where a ``from:`` may point,
and the bytes each seed writes.

Seeds go to agent-visible session paths only: a root-level file (``trigger.json``) or a file
under ``scratchpad/``; mounts (``skills/…``, ``AGENTS.md``) and runtime areas (``artifacts/``,
``checkpoints/``…) are refused, and a ``from:`` reference stays inside the workflow's
``tests/``.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path
from typing import Any, Final

from archmax_temporal.client.testing.case_model import CaseDocument, WorkspaceFrom
from archmax_temporal.workflows.zones import MOUNTS, SCRATCHPAD
from archmax_temporal.workflows.zones import RUNTIME_AREAS as RUNTIME_AREAS

MOUNT_AREAS: Final = MOUNTS
"""Workspace names the runtime mounts from the authoring tree (read only, never seeded)."""

WRITABLE_AREA: Final = SCRATCHPAD
"""The one directory a case may seed files below (besides root-level files)."""


def workspace_path_problem(path: Any) -> str | None:
    """Why ``path`` cannot be seeded into a session workspace, or None.

    Seeds go to agent-visible session paths only: a root-level file (``trigger.json``) or a
    file under ``scratchpad/``. Mounts (``skills/…``, ``AGENTS.md``) and runtime areas
    (``artifacts/``, ``checkpoints/``…) are refused.
    """
    if not isinstance(path, str) or not path:
        return "a workspace key must be a non-empty session path"
    if path.startswith("/") or "\\" in path or re.match(r"^[A-Za-z]:", path):
        return "must be a workspace-relative path (no leading '/', no '\\')"
    if re.search(r"[\x00-\x1f\x7f]", path):
        return "must not contain control characters"
    segments = path.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return "must be a canonical relative path (no empty, '.' or '..' segments)"
    head = segments[0]
    if head in MOUNT_AREAS:
        return f"{head}{'/' if len(segments) > 1 else ''} is a mount, not a seedable session path"
    if head in RUNTIME_AREAS:
        return f"{head}/ is a runtime area, not a seedable session path"
    if head == WRITABLE_AREA:
        return None if len(segments) > 1 else "scratchpad is a directory; seed a file below it"
    if len(segments) > 1:
        return (
            f"{head}/ is not an agent-visible session area; seed a root-level file "
            "(trigger.json) or a file under scratchpad/"
        )
    return None


def workspace_seeds(document: CaseDocument, tests_dir: Path) -> dict[str, bytes]:
    """The workspace files a case seeds, as bytes: strings verbatim, other values as pretty
    JSON, ``from:`` references copied byte for byte from under ``tests_dir``."""
    seeds: dict[str, bytes] = {}
    for path, content in document.workspace.items():
        if isinstance(content, WorkspaceFrom):
            seeds[path] = (tests_dir / content.from_).read_bytes()
        elif isinstance(content, str):
            seeds[path] = content.encode("utf-8")
        else:
            seeds[path] = json.dumps(content, indent=2, ensure_ascii=False).encode("utf-8")
    return seeds


def from_problem(source: str, tests_dir: Path | None) -> str | None:
    """Why the ``from:`` reference ``source`` names no file under ``tests_dir``, or None.
    Without ``tests_dir`` only its form is checked: it must not escape."""
    normalized = posixpath.normpath(source.replace("\\", "/"))
    if (
        posixpath.isabs(normalized)
        or normalized == ".."
        or normalized.startswith("../")
        or re.match(r"^[A-Za-z]:", normalized)
    ):
        return f"{source!r} escapes the tests/ directory"
    if tests_dir is None:
        return None
    base = tests_dir.resolve()
    target = (base / normalized).resolve()
    if not target.is_relative_to(base):
        return f"{source!r} escapes the tests/ directory"
    if not target.is_file():
        return f"{source!r} names no file under tests/"
    return None
