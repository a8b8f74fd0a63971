"""activities/session_store.py: what every session store answers alike, and the text it holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from obstore.store import MemoryStore

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.object_store import ObjectSessionStore, open_store
from archmax_temporal.activities.session_store import (
    Entry,
    SessionStore,
    decode_text,
    encode_text,
    is_text,
)
from archmax_temporal.activities.store_errors import (
    BinaryFileError,
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    StoreCapabilityError,
    StoreConflictError,
    WorkspaceError,
)
from archmax_temporal.activities.text_only_store import TextOnlyStore
from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.zones import RUNTIME_INTERNAL

SID = "chat-42"


@pytest.fixture(params=["fs", "memory", "text-fs", "s3", "object-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    """Each store: on disk, in a dict, text only, on a real S3 API (moto in server mode, a
    fresh prefix), and on obstore's in-memory object store."""
    if request.param == "fs":
        return FilesystemSessionStore(tmp_path / "sessions")
    if request.param == "memory":
        return MemorySessionStore()
    if request.param == "s3":
        return open_store(request.getfixturevalue("s3_url"))
    if request.param == "object-memory":
        return open_store("memory://")
    return TextOnlyStore(FilesystemSessionStore(tmp_path / "sessions"))


def test_protocol_conformance(tmp_path: Path) -> None:
    for s in (
        FilesystemSessionStore(tmp_path),
        MemorySessionStore(),
        TextOnlyStore(MemorySessionStore()),
        ObjectSessionStore(MemoryStore()),
    ):
        assert isinstance(s, SessionStore)
    assert FilesystemSessionStore(tmp_path).supports_bytes
    assert MemorySessionStore().supports_bytes
    assert ObjectSessionStore(MemoryStore()).supports_bytes
    assert not TextOnlyStore(MemorySessionStore()).supports_bytes


class TestParity:
    """Every store answers the same operations the same way."""

    def test_conditional_writes(self, store: SessionStore) -> None:
        first = store.write_if(SID, "artifacts/doc.json", b"one", version=None)
        with pytest.raises(StoreConflictError):  # put-if-absent: it exists now
            store.write_if(SID, "artifacts/doc.json", b"other", version=None)
        data, version = store.read_versioned(SID, "artifacts/doc.json")
        assert (data, version) == (b"one", first)
        assert store.version_of(SID, "artifacts/doc.json") == first
        assert store.version_of(SID, "artifacts/none.json") is None
        second = store.write_if(SID, "artifacts/doc.json", b"two", version=version)
        assert second != first
        with pytest.raises(StoreConflictError):  # a zombie holding the old version
            store.write_if(SID, "artifacts/doc.json", b"stale", version=first)
        assert store.read_bytes(SID, "artifacts/doc.json") == b"two"
        with pytest.raises(FileNotFoundInWorkspaceError):
            store.read_versioned(SID, "artifacts/none.json")

    def test_shared_objects_are_written_once(self, store: SessionStore) -> None:
        assert store.write_shared_once("_specs/abc.json", b"{}")
        assert not store.write_shared_once("_specs/abc.json", b"[]")
        assert store.read_shared("_specs/abc.json") == b"{}"
        with pytest.raises(FileNotFoundInWorkspaceError):
            store.read_shared("_specs/none.json")
        for bad in ("chat-42/x", "../_specs/x", "/_specs/x", ""):
            with pytest.raises(PathEscapeError):
                store.write_shared_once(bad, b"x")

    def test_round_trip_and_listing(self, store: SessionStore) -> None:
        assert store.list_dir(SID, "") == []
        assert not store.exists(SID, "scratchpad")
        store.write_text(SID, "scratchpad/notes.md", "héllo\n")
        store.write_text(SID, "scratchpad/sub/deep.txt", "x")
        store.write_text(SID, "trigger.json", "{}")
        assert store.read_text(SID, "scratchpad/notes.md") == "héllo\n"
        assert store.read_bytes(SID, "./scratchpad//notes.md") == "héllo\n".encode()
        assert store.exists(SID, "scratchpad")
        assert store.exists(SID, "scratchpad/sub/deep.txt")
        assert not store.exists(SID, "scratchpad/missing")
        assert store.list_dir(SID, "scratchpad") == [
            Entry("notes.md", False, len("héllo\n".encode())),
            Entry("sub", True, 0),
        ]
        listed = [e.name for e in store.list_dir(SID, "") if e.name not in RUNTIME_INTERNAL]
        assert listed == ["scratchpad", "trigger.json"]  # a disk store keeps checkpoints/tmp
        assert store.walk(SID, "scratchpad") == ["notes.md", "sub/deep.txt"]
        assert store.walk(SID, "") == [
            "scratchpad/notes.md",
            "scratchpad/sub/deep.txt",
            "trigger.json",
        ]
        assert store.walk(SID, "missing") == []
        assert store.walk(SID, "trigger.json") == []

    def test_overwrite(self, store: SessionStore) -> None:
        store.write_text(SID, "scratchpad/a.txt", "one")
        store.write_text(SID, "scratchpad/a.txt", "two")
        assert store.read_text(SID, "scratchpad/a.txt") == "two"

    def test_sessions_are_separate(self, store: SessionStore) -> None:
        store.write_text(SID, "scratchpad/a.txt", "mine")
        assert not store.exists("other", "scratchpad/a.txt")
        with pytest.raises(FileNotFoundInWorkspaceError):
            store.read_text("other", "scratchpad/a.txt")

    def test_missing_and_shape_errors(self, store: SessionStore) -> None:
        with pytest.raises(FileNotFoundInWorkspaceError, match=r"nope\.txt"):
            store.read_bytes(SID, "scratchpad/nope.txt")
        with pytest.raises(FileNotFoundInWorkspaceError):
            store.list_dir(SID, "scratchpad")
        store.write_text(SID, "scratchpad/a.txt", "x")
        with pytest.raises(WorkspaceError, match="folder"):
            store.read_bytes(SID, "scratchpad")
        with pytest.raises(WorkspaceError, match="not a folder"):
            store.list_dir(SID, "scratchpad/a.txt")
        with pytest.raises(WorkspaceError, match="parent is a file"):
            store.write_text(SID, "scratchpad/a.txt/b.txt", "x")
        with pytest.raises(WorkspaceError, match="folder"):
            store.write_text(SID, "scratchpad", "x")

    @pytest.mark.parametrize("path", ["../other/x", "scratchpad/../../x", "/etc/passwd", ".."])
    def test_escape_refused(self, store: SessionStore, path: str) -> None:
        with pytest.raises(PathEscapeError):
            store.read_bytes(SID, path)
        with pytest.raises(PathEscapeError):
            store.write_text(SID, path, "x")
        assert not store.exists(SID, path)

    def test_dot_dot_inside_is_applied(self, store: SessionStore) -> None:
        store.write_text(SID, "scratchpad/sub/../a.txt", "x")
        assert store.read_text(SID, "scratchpad/a.txt") == "x"

    def test_invalid_session_id(self, store: SessionStore) -> None:
        for bad in ("", "a\nb", "x" * 256, "nul\x00"):
            with pytest.raises(InvalidSessionIdError):
                store.read_bytes(bad, "x")

    def test_opaque_ids_stay_inside_their_own_folder(self, store: SessionStore) -> None:
        """Ids that look like paths are only ids: each keeps its own files, apart."""
        for opaque in ("../x", "_specs", "a/b", "<CAF@mail>", "CASE #12", "."):
            store.write_text(opaque, "scratchpad/own.txt", opaque)
        for opaque in ("../x", "_specs", "a/b", "<CAF@mail>", "CASE #12", "."):
            assert store.read_text(opaque, "scratchpad/own.txt") == opaque

    def test_read_text_of_binary(self, store: SessionStore) -> None:
        if not store.supports_bytes:
            with pytest.raises(StoreCapabilityError):
                store.write_bytes(SID, "scratchpad/img.bin", b"\x89PNG\x00\xff")
            assert not store.exists(SID, "scratchpad/img.bin")
            return
        store.write_bytes(SID, "scratchpad/img.bin", b"\x89PNG\x00\xff")
        assert store.read_bytes(SID, "scratchpad/img.bin") == b"\x89PNG\x00\xff"
        with pytest.raises(BinaryFileError, match=r"scratchpad/img\.bin"):
            store.read_text(SID, "scratchpad/img.bin")


def test_is_text() -> None:
    assert is_text(b"plain")
    assert not is_text(b"\xff")
    assert not is_text(b"a\x00")


def test_text_that_cannot_be_encoded_is_refused_naming_its_path_and_character() -> None:
    """The one encoder every store and the workspace's writes share: a lone surrogate (which
    JSON can carry) is a refusal naming the path and what could not be encoded."""
    with pytest.raises(WorkspaceError) as caught:
        encode_text("ok \ud800", "scratchpad/a.md")
    assert caught.value.path == "scratchpad/a.md"
    message = str(caught.value)
    assert message.startswith("content for 'scratchpad/a.md' is not valid Unicode: ")
    assert "surrogate" in message
    assert encode_text("héllo", "scratchpad/a.md") == "héllo".encode()
    with pytest.raises(BinaryFileError, match=r"'scratchpad/a\.bin' is a binary file"):
        decode_text(b"\x89PNG\x00", "scratchpad/a.bin")
