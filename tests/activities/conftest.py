"""Fixtures of the workspace activities' tests: an authoring root, a folder store, and the
workspace activities over both (a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.workspace import WorkspaceActivities
from tests.support.workspace import make_authoring


@pytest.fixture
def authoring(tmp_path: Path) -> Path:
    return make_authoring(tmp_path)


@pytest.fixture
def fs_store(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def ws(fs_store: FilesystemSessionStore, authoring: Path) -> WorkspaceActivities:
    return WorkspaceActivities(fs_store, authoring)
