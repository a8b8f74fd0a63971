"""activities/session_paths.py: session-relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from archmax_temporal.activities.session_paths import normalize_path, os_errors, shared_key
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    WorkspaceError,
)

SID = "chat-42"


def test_normalize_path() -> None:
    assert normalize_path("") == ""
    assert normalize_path("./a//b/") == "a/b"
    with pytest.raises(WorkspaceError):
        normalize_path("a\x00b")
    with pytest.raises(PathEscapeError, match="absolute"):
        normalize_path("/etc/passwd")
    with pytest.raises(PathEscapeError, match="escapes"):
        normalize_path("scratchpad/../../x")


def test_shared_keys_start_with_an_underscore_and_stay_in_the_store() -> None:
    assert shared_key("_specs//abc.json") == "_specs/abc.json"
    for bad in ("chat-42/x", "../_specs/x", "/_specs/x", ""):
        with pytest.raises(PathEscapeError):
            shared_key(bad)


def test_os_errors_names_the_session_path_not_the_host_path(tmp_path: Path) -> None:
    with (
        pytest.raises(FileNotFoundInWorkspaceError) as caught,
        os_errors("./scratchpad//gone.txt"),
    ):
        (tmp_path / "gone.txt").read_bytes()
    assert caught.value.path == "scratchpad/gone.txt"
    assert str(tmp_path) not in str(caught.value)
