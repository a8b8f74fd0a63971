"""activities/session_store.py: the per-session file stores."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from obstore.store import MemoryStore

from archmax_temporal.activities.object_store import ObjectSessionStore, open_store
from archmax_temporal.activities.session_store import (
    BinaryFileError,
    Entry,
    FileNotFoundInWorkspaceError,
    FilesystemSessionStore,
    MemorySessionStore,
    NameTooLongError,
    PathEscapeError,
    SessionStore,
    StoreCapabilityError,
    StoreConflictError,
    StoreIOError,
    SymlinkPathError,
    TextOnlyStore,
    WorkspaceError,
    is_text,
    normalize_path,
    session_folder,
    sweep_temporaries,
)
from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.identity import folder_name, legacy_folder_name
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


class TestFilesystem:
    def test_layout(self, tmp_path: Path) -> None:
        store = FilesystemSessionStore(tmp_path)
        store.write_bytes(SID, "scratchpad/a.bin", b"\x00\x01")
        assert (tmp_path / SID / "scratchpad" / "a.bin").read_bytes() == b"\x00\x01"

    def test_atomic_write_leaves_no_temp_files(self, tmp_path: Path) -> None:
        store = FilesystemSessionStore(tmp_path)
        for i in range(5):
            store.write_text(SID, "scratchpad/a.txt", f"v{i}")
        assert sorted(p.name for p in (tmp_path / SID / "scratchpad").iterdir()) == ["a.txt"]

    def test_failed_write_keeps_old_content(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = FilesystemSessionStore(tmp_path)
        store.write_text(SID, "scratchpad/a.txt", "old")

        def crash(*_args: object) -> None:
            raise OSError("disk yanked mid-write")

        monkeypatch.setattr(os, "fsync", crash)
        with pytest.raises(StoreIOError, match="yanked") as caught:
            store.write_text(SID, "scratchpad/a.txt", "new content")
        assert str(tmp_path) not in str(caught.value)
        monkeypatch.undo()
        assert store.read_text(SID, "scratchpad/a.txt") == "old"
        assert sorted(p.name for p in (tmp_path / SID / "scratchpad").iterdir()) == ["a.txt"]

    def test_failed_rename_keeps_old_content(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = FilesystemSessionStore(tmp_path)
        store.write_text(SID, "scratchpad/a.txt", "old")

        def crash(*_args: object) -> None:
            raise OSError("rename failed")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(StoreIOError, match="rename failed"):
            store.write_text(SID, "scratchpad/a.txt", "new")
        monkeypatch.undo()
        assert store.read_text(SID, "scratchpad/a.txt") == "old"
        assert sorted(p.name for p in (tmp_path / SID / "scratchpad").iterdir()) == ["a.txt"]

    def test_symlink_out_refused(self, tmp_path: Path) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("secret")
        store = FilesystemSessionStore(tmp_path / "sessions")
        store.write_text(SID, "scratchpad/ok.txt", "ok")
        pad = tmp_path / "sessions" / SID / "scratchpad"
        (pad / "link.txt").symlink_to(outside / "secret.txt")
        (pad / "linkdir").symlink_to(outside, target_is_directory=True)
        with pytest.raises(PathEscapeError):
            store.read_bytes(SID, "scratchpad/link.txt")
        with pytest.raises(PathEscapeError):
            store.read_bytes(SID, "scratchpad/linkdir/secret.txt")
        with pytest.raises(PathEscapeError):
            store.write_text(SID, "scratchpad/linkdir/new.txt", "x")
        assert not (outside / "new.txt").exists()
        assert not store.exists(SID, "scratchpad/link.txt")
        assert [e.name for e in store.list_dir(SID, "scratchpad")] == ["ok.txt"]
        assert store.walk(SID, "") == ["scratchpad/ok.txt"]

    def test_a_symlink_within_the_session_is_not_followed_either(self, tmp_path: Path) -> None:
        """A symlink that stays inside the session is refused too: one to ``../artifacts``
        would open the runtime's own files to the agent."""
        store = FilesystemSessionStore(tmp_path)
        store.write_text(SID, "scratchpad/real.txt", "real")
        store.write_text(SID, "artifacts/trail.json", "{}")
        pad = tmp_path / SID / "scratchpad"
        (pad / "alias.txt").symlink_to("real.txt")
        (pad / "inside").symlink_to("../artifacts", target_is_directory=True)
        with pytest.raises(SymlinkPathError, match=r"'scratchpad/alias\.txt' is a symlink"):
            store.read_text(SID, "scratchpad/alias.txt")
        with pytest.raises(SymlinkPathError, match=r"passes through a symlink \('scratchpad/in"):
            store.read_text(SID, "scratchpad/inside/trail.json")
        with pytest.raises(SymlinkPathError):
            store.delete(SID, "scratchpad/inside/trail.json")
        assert (tmp_path / SID / "artifacts" / "trail.json").exists()
        assert [e.name for e in store.list_dir(SID, "scratchpad")] == ["real.txt"]
        assert store.walk(SID, "scratchpad") == ["real.txt"]

    def test_temporaries_are_written_in_the_runtime_area(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A write killed before its rename leaves its temporary in ``checkpoints/tmp/``, never
        beside the file, and the sweep removes it."""
        store = FilesystemSessionStore(tmp_path)
        store.write_text(SID, "scratchpad/a.txt", "old")

        def killed(*_args: object) -> None:
            raise KeyboardInterrupt  # stands in for SIGKILL: the cleanup never runs

        monkeypatch.setattr(os, "replace", killed)
        monkeypatch.setattr(Path, "unlink", lambda *_a, **_k: None)
        with pytest.raises(KeyboardInterrupt):
            store.write_text(SID, "scratchpad/a.txt", "new")
        monkeypatch.undo()
        assert [p.name for p in (tmp_path / SID / "scratchpad").iterdir()] == ["a.txt"]
        left = list((tmp_path / SID / "checkpoints" / "tmp").iterdir())
        assert len(left) == 1 and left[0].read_text() == "new"
        assert len(left[0].name) < 20  # a long file name never makes a longer temporary
        assert sweep_temporaries(store, SID, before=0) == 0  # not older than "before"
        assert sweep_temporaries(store, SID, before=left[0].stat().st_mtime + 1) == 1
        assert not left[0].exists()

    def test_a_name_too_long_is_a_refusal_in_the_sessions_terms(self, tmp_path: Path) -> None:
        """A 300-byte name is a typed refusal naming the session path, not an OSError with
        the store's host path."""
        store = FilesystemSessionStore(tmp_path)
        name = "n" * 300
        for attempt in (
            lambda: store.write_text(SID, f"scratchpad/{name}", "x"),
            lambda: store.read_bytes(SID, f"scratchpad/{name}"),
            lambda: store.list_dir(SID, f"scratchpad/{name}"),
            lambda: store.exists(SID, f"scratchpad/{name}/x"),
        ):
            with pytest.raises(NameTooLongError) as caught:
                attempt()
            message = str(caught.value)
            assert str(tmp_path) not in message
            assert "longer than the file system allows" in message
            assert "300 bytes" in message
            assert caught.value.path == f"scratchpad/{name}" or caught.value.path.startswith(
                f"scratchpad/{name}"
            )
        assert caught.value.to_application_error().non_retryable

    def test_a_store_fault_is_retryable_and_names_no_host_path(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A full disk is the store's fault, not the path's: retried, in session terms."""
        store = FilesystemSessionStore(tmp_path)

        def full(*_args: object, **_kwargs: object) -> None:
            raise OSError(28, "No space left on device", str(tmp_path / SID / "x"))

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(StoreIOError) as caught:
            store.write_text(SID, "scratchpad/a.txt", "x")
        assert "ENOSPC" in str(caught.value) and "scratchpad/a.txt" in str(caught.value)
        assert str(tmp_path) not in str(caught.value)
        assert not caught.value.to_application_error().non_retryable

    def test_session_folder_symlinked_out_refused(self, tmp_path: Path) -> None:
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "sessions").mkdir()
        (tmp_path / "sessions" / SID).symlink_to(tmp_path / "elsewhere")
        store = FilesystemSessionStore(tmp_path / "sessions")
        with pytest.raises(PathEscapeError):
            store.write_text(SID, "scratchpad/a.txt", "x")


class TestOnlyRegularFiles:
    async def test_a_named_pipe_is_refused_at_once_never_waited_on(self, tmp_path: Path) -> None:
        """A FIFO in a session folder (no writer) would block a plain read forever: it is
        refused as not a regular file, by read and by grep's reads alike."""
        store = FilesystemSessionStore(tmp_path / "sessions")
        store.write_text(SID, "scratchpad/ok.txt", "fine")
        os.mkfifo(tmp_path / "sessions" / SID / "scratchpad" / "pipe")
        with pytest.raises(WorkspaceError, match="not a regular file") as raised:
            await asyncio.wait_for(
                asyncio.to_thread(store.read_text, SID, "scratchpad/pipe"), timeout=20
            )
        assert raised.value.path == "scratchpad/pipe"
        assert store.read_text(SID, "scratchpad/ok.txt") == "fine"


class TestLongIds:
    LONG = "thread-" + "m" * 240

    def test_a_plain_id_spelling_a_long_ids_old_folder_reads_nothing_of_it(
        self, tmp_path: Path
    ) -> None:
        """Two ids never share a folder: a session whose id spells another's shortened folder
        name (as webhook variables and the HTTP ``session`` field can) reads none of its files."""
        store = FilesystemSessionStore(tmp_path / "sessions")
        spelled = legacy_folder_name(self.LONG)
        assert spelled is not None
        store.write_text(self.LONG, "scratchpad/private.txt", "the long id's secret")
        with pytest.raises(FileNotFoundInWorkspaceError):
            store.read_text(spelled, "scratchpad/private.txt")
        store.write_text(spelled, "scratchpad/private.txt", "its own")
        assert store.read_text(self.LONG, "scratchpad/private.txt") == "the long id's secret"

    def test_a_folder_from_before_0_2_moves_to_its_new_name_once_it_proves_its_owner(
        self, tmp_path: Path
    ) -> None:
        """A long id's folder under its old name is this session's when its metadata says so:
        it is moved on first use, files and all; a folder of another session is left alone."""
        root = tmp_path / "sessions"
        old_name = legacy_folder_name(self.LONG)
        assert old_name is not None
        old = root / old_name
        (old / "artifacts").mkdir(parents=True)
        (old / "scratchpad").mkdir()
        (old / "scratchpad" / "notes.md").write_text("kept", encoding="utf-8")
        (old / "artifacts" / "metadata.json").write_text(
            json.dumps({"sessionId": "someone-else"}), encoding="utf-8"
        )
        assert session_folder(root, self.LONG) == root / folder_name(self.LONG)
        assert old.exists() and not (root / folder_name(self.LONG)).exists()

        (old / "artifacts" / "metadata.json").write_text(
            json.dumps({"sessionId": self.LONG}), encoding="utf-8"
        )
        store = FilesystemSessionStore(root)
        assert store.read_text(self.LONG, "scratchpad/notes.md") == "kept"
        assert not old.exists() and (root / folder_name(self.LONG) / "scratchpad").is_dir()


class TestTextOnly:
    def test_refuses_binary_and_writes_nothing(self) -> None:
        inner = MemorySessionStore()
        store = TextOnlyStore(inner)
        with pytest.raises(StoreCapabilityError, match=r"scratchpad/a\.pdf") as caught:
            store.write_bytes(SID, "scratchpad/a.pdf", b"%PDF\xff\xfe")
        assert caught.value.path == "scratchpad/a.pdf"
        with pytest.raises(StoreCapabilityError):
            store.write_bytes(SID, "scratchpad/nul.txt", b"a\x00b")
        assert inner.walk(SID, "") == []

    def test_takes_utf8_bytes(self) -> None:
        store = TextOnlyStore(MemorySessionStore())
        store.write_bytes(SID, "scratchpad/a.txt", "ünïcode".encode())
        assert store.read_text(SID, "scratchpad/a.txt") == "ünïcode"

    def test_error_travels_typed(self) -> None:
        err = StoreCapabilityError("nope", "scratchpad/a.pdf")
        app = err.to_application_error()
        assert app.type == "StoreCapabilityError"
        assert app.non_retryable


def test_helpers() -> None:
    assert is_text(b"plain")
    assert not is_text(b"\xff")
    assert not is_text(b"a\x00")
    assert normalize_path("") == ""
    assert normalize_path("./a//b/") == "a/b"
    with pytest.raises(WorkspaceError):
        normalize_path("a\x00b")
