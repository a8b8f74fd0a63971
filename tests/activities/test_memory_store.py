"""activities/memory_store.py: the session store in memory."""

from __future__ import annotations

import pytest

from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import Entry
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError

SID = "chat-42"


def test_folders_are_implied_by_the_files_below_them() -> None:
    store = MemorySessionStore()
    store.write_text(SID, "scratchpad/a/b.txt", "x")
    assert store.list_dir(SID, "scratchpad") == [Entry("a", True, 0)]
    assert store.exists(SID, "scratchpad/a")
    store.delete(SID, "scratchpad/a/b.txt")
    assert not store.exists(SID, "scratchpad/a")
    with pytest.raises(FileNotFoundInWorkspaceError):
        store.list_dir(SID, "scratchpad/a")


def test_each_write_is_a_new_version_and_uploads_are_checked() -> None:
    store = MemorySessionStore()
    store.write_bytes(SID, "artifacts/doc.json", b"1")
    first = store.version_of(SID, "artifacts/doc.json")
    store.write_bytes(SID, "artifacts/doc.json", b"1")
    assert first is not None and store.version_of(SID, "artifacts/doc.json") != first
    digest = store.write_upload(b"bytes")
    assert store.read_upload(digest) == b"bytes"
    with pytest.raises(FileNotFoundInWorkspaceError, match="not stored"):
        store.read_upload("0" * 64)
