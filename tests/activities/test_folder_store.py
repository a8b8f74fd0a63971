"""activities/folder_store.py: the session store in a folder on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from archmax_temporal.activities.folder_store import FilesystemSessionStore, session_folder
from archmax_temporal.activities.session_store import sweep_temporaries
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    NameTooLongError,
    PathEscapeError,
    StoreIOError,
    SymlinkPathError,
)
from archmax_temporal.workflows.identity import folder_name, legacy_folder_name

SID = "chat-42"


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
