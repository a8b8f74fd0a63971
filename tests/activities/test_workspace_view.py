"""activities/workspace_view.py: where an agent path lives, and what a call may see of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    ReadOnlyPathError,
    WorkspaceError,
)
from archmax_temporal.activities.workspace_view import WorkspaceView, split_agent_path
from tests.support.workspace import SID, make_authoring


@pytest.fixture
def view(tmp_path: Path) -> WorkspaceView:
    store = MemorySessionStore()
    store.write_text(SID, "scratchpad/notes.md", "hi")
    store.write_text(SID, "trigger.json", "{}")
    store.write_text(SID, "artifacts/trail.json", "[]")
    return WorkspaceView(store, make_authoring(tmp_path), SID, ["pricing", "missing", "../x"])


def test_agent_paths_are_split_and_never_climb_out() -> None:
    assert split_agent_path(None) == []
    assert split_agent_path(" ./scratchpad//a.md ") == ["scratchpad", "a.md"]
    for bad in ("/etc/passwd", "C:\\x", "scratchpad/../../x"):
        with pytest.raises(PathEscapeError):
            split_agent_path(bad)
    with pytest.raises(WorkspaceError, match="NUL"):
        split_agent_path("a\x00b")


def test_each_path_lives_in_its_zone(view: WorkspaceView) -> None:
    assert view.visible == ["pricing"]  # a slug with no folder, or not a slug, is never shown
    assert view.locate("").kind == "root"
    assert view.locate("skills").kind == "skills"
    assert view.locate("skills/pricing/SKILL.md").kind == "mount"
    assert view.locate("AGENTS.md").kind == "mount"
    assert view.locate("scratchpad/notes.md").writable
    assert not view.locate("trigger.json").writable
    with pytest.raises(FileNotFoundInWorkspaceError, match="runtime-internal"):
        view.locate("artifacts/trail.json")
    with pytest.raises(FileNotFoundInWorkspaceError, match="not enabled"):
        view.locate("skills/secret/SKILL.md")


def test_the_root_lists_what_the_agent_may_see_and_files_walk_it(view: WorkspaceView) -> None:
    names = [(path, e.is_dir) for path, e in view.entries(view.locate(""))]
    assert names == [
        ("AGENTS.md", False),
        ("scratchpad", True),
        ("skills", True),
        ("trigger.json", False),
    ]
    assert view.files(view.locate("")) == [
        "AGENTS.md",
        "scratchpad/notes.md",
        "skills/pricing/SKILL.md",
        "skills/pricing/scripts/calc.js",
        "trigger.json",
    ]
    assert view.read_text(view.locate("AGENTS.md")).startswith("# Agents")


def test_only_the_scratchpad_is_writable(view: WorkspaceView) -> None:
    assert view.writable("scratchpad/new.md").agent == "scratchpad/new.md"
    for read_only in ("trigger.json", "AGENTS.md", "skills/pricing/SKILL.md"):
        with pytest.raises(ReadOnlyPathError):
            view.writable(read_only)
    with pytest.raises(WorkspaceError, match="is a file, not a folder"):
        view.check_write(view.writable("scratchpad/notes.md/inner.md"), b"x")
