"""activities/workspace_writes.py: ``write_file``, ``edit_file``, ``copy_file``, ``move_file`` and
``remove_file``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archmax_temporal.activities import workspace_writes
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import WorkspaceError
from archmax_temporal.activities.text_only_store import TextOnlyStore
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.activities.workspace_view import WorkspaceView
from archmax_temporal.workflows.workspace_tools import EditFileArgs, WriteFileArgs
from tests.support.workspace import PNG, SID, call, err, ok


class TestWriteAndEdit:
    async def test_write_then_read(self, ws: WorkspaceActivities) -> None:
        first = ok(await call(ws, "write_file", file_path="scratchpad/n/a.md", content="hi\n"))
        assert first.startswith("Wrote 'scratchpad/n/a.md'")
        second = ok(await call(ws, "write_file", file_path="scratchpad/n/a.md", content="yo\n"))
        assert second.startswith("Updated")
        assert ok(await call(ws, "read_file", file_path="scratchpad/n/a.md")) == "     1\tyo"

    @pytest.mark.parametrize(
        "path", ["skills/pricing/SKILL.md", "AGENTS.md", "trigger.json", "notes.md", ""]
    )
    async def test_write_outside_scratchpad_refused(
        self, ws: WorkspaceActivities, authoring: Path, path: str
    ) -> None:
        assert "read-only" in err(await call(ws, "write_file", file_path=path, content="x"))
        assert "Price it." in (authoring / "skills" / "pricing" / "SKILL.md").read_text()

    async def test_write_escape_refused(self, ws: WorkspaceActivities, tmp_path: Path) -> None:
        err(await call(ws, "write_file", file_path="scratchpad/../../../x.txt", content="x"))
        assert not (tmp_path / "x.txt").exists()
        err(await call(ws, "write_file", file_path="skills/secret/x", content="x"))

    async def test_edit_unique(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="alpha beta gamma")
        done = ok(
            await call(
                ws, "edit_file", file_path="scratchpad/a.txt", old_string="beta", new_string="B"
            )
        )
        assert done == "Replaced 1 occurrence in 'scratchpad/a.txt'."
        assert "alpha B gamma" in ok(await call(ws, "read_file", file_path="scratchpad/a.txt"))

    async def test_edit_ambiguity_and_replace_all(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="x x x")
        message = err(
            await call(
                ws, "edit_file", file_path="scratchpad/a.txt", old_string="x", new_string="y"
            )
        )
        assert "occurs 3 times" in message and "replace_all" in message
        assert ok(await call(ws, "read_file", file_path="scratchpad/a.txt")).endswith("x x x")
        done = ok(
            await call(
                ws,
                "edit_file",
                file_path="scratchpad/a.txt",
                old_string="x",
                new_string="y",
                replace_all=True,
            )
        )
        assert "3 occurrences" in done
        assert ok(await call(ws, "read_file", file_path="scratchpad/a.txt")).endswith("y y y")

    async def test_edit_refusals(self, ws: WorkspaceActivities) -> None:
        await call(ws, "write_file", file_path="scratchpad/a.txt", content="abc")
        assert "not found" in err(
            await call(ws, "edit_file", file_path="scratchpad/a.txt", old_string="z", new_string="")
        )
        assert "empty" in err(
            await call(ws, "edit_file", file_path="scratchpad/a.txt", old_string="", new_string="")
        )
        assert "read-only" in err(
            await call(ws, "edit_file", file_path="AGENTS.md", old_string="Be", new_string="Do")
        )


async def test_copy_is_byte_exact_and_creates_the_destinations_folders(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_bytes(SID, "scratchpad/in/logo.png", PNG)
    result = await call(
        ws, "copy_file", source="scratchpad/in/logo.png", destination="scratchpad/out/a/logo.png"
    )
    assert result.status == "ok"
    assert result.content.startswith("Copied 'scratchpad/in/logo.png' to 'scratchpad/out/a/")
    assert fs_store.read_bytes(SID, "scratchpad/out/a/logo.png") == PNG
    assert fs_store.read_bytes(SID, "scratchpad/in/logo.png") == PNG


async def test_copy_reads_a_skill_asset_into_the_scratchpad(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    result = await call(
        ws, "copy_file", source="skills/pricing/scripts/calc.js", destination="scratchpad/calc.js"
    )
    assert result.status == "ok"
    assert fs_store.read_text(SID, "scratchpad/calc.js") == "return 1;\n"


async def test_an_existing_destination_needs_overwrite(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/a.txt", "new")
    fs_store.write_text(SID, "scratchpad/b.txt", "old")
    refused = await call(ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/b.txt")
    assert refused.status == "error"
    assert "'scratchpad/b.txt' exists; pass overwrite: true" in refused.content
    assert fs_store.read_text(SID, "scratchpad/b.txt") == "old"
    done = await call(
        ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/b.txt", overwrite=True
    )
    assert done.status == "ok" and fs_store.read_text(SID, "scratchpad/b.txt") == "new"


async def test_a_copy_onto_itself_and_into_a_read_only_area_are_refused(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/a.txt", "x")
    same = await call(ws, "copy_file", source="scratchpad/a.txt", destination="scratchpad/a.txt")
    assert same.status == "error" and "both source and destination" in same.content
    mount = await call(ws, "copy_file", source="scratchpad/a.txt", destination="skills/pricing/a")
    assert mount.status == "error" and "read-only" in mount.content


async def test_move_writes_the_destination_then_removes_the_source(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/draft.md", "# Draft")
    result = await call(
        ws, "move_file", source="scratchpad/draft.md", destination="scratchpad/final/report.md"
    )
    assert result.status == "ok"
    assert result.content.startswith("Moved 'scratchpad/draft.md' to 'scratchpad/final/report.md'")
    assert fs_store.read_text(SID, "scratchpad/final/report.md") == "# Draft"
    assert not fs_store.exists(SID, "scratchpad/draft.md")


async def test_a_move_out_of_a_read_only_area_is_refused_and_moves_nothing(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    result = await call(
        ws, "move_file", source="skills/pricing/SKILL.md", destination="scratchpad/SKILL.md"
    )
    assert result.status == "error" and "read-only" in result.content
    assert not fs_store.exists(SID, "scratchpad/SKILL.md")


async def test_remove_deletes_one_file_and_refuses_folders_and_mounts(
    ws: WorkspaceActivities, fs_store: FilesystemSessionStore
) -> None:
    fs_store.write_text(SID, "scratchpad/tmp/a.txt", "x")
    assert (await call(ws, "remove_file", file_path="scratchpad/tmp/a.txt")).status == "ok"
    assert not fs_store.exists(SID, "scratchpad/tmp/a.txt")
    fs_store.write_text(SID, "scratchpad/tmp/b.txt", "y")
    folder = await call(ws, "remove_file", file_path="scratchpad/tmp")
    assert folder.status == "error" and "is a folder" in folder.content
    missing = await call(ws, "remove_file", file_path="scratchpad/none.txt")
    assert missing.status == "error" and "does not exist" in missing.content
    mount = await call(ws, "remove_file", file_path="AGENTS.md")
    assert mount.status == "error" and "read-only" in mount.content


@pytest.mark.parametrize("make", [MemorySessionStore, lambda: TextOnlyStore(MemorySessionStore())])
async def test_every_bundled_store_can_delete(
    authoring: Path, make: Callable[[], SessionStore]
) -> None:
    store = make()
    store.write_text(SID, "scratchpad/a.txt", "x")
    tools = WorkspaceActivities(store, authoring)
    assert (await call(tools, "remove_file", file_path="scratchpad/a.txt")).status == "ok"
    assert not store.exists(SID, "scratchpad/a.txt")


async def test_a_store_without_delete_refuses_a_removal_by_name(authoring: Path) -> None:
    class NoDelete:
        """A store that implements the minimal protocol only."""

        def __init__(self) -> None:
            self._inner = MemorySessionStore()

        def __getattr__(self, name: str) -> Any:
            if name == "delete":
                raise AttributeError(name)
            return getattr(self._inner, name)

    store = NoDelete()
    store.write_text(SID, "scratchpad/a.txt", "x")
    tools = WorkspaceActivities(store, authoring)
    result = await call(tools, "remove_file", file_path="scratchpad/a.txt")
    assert result.status == "error"
    assert "this session store cannot delete files ('scratchpad/a.txt')" in result.content
    assert store.exists(SID, "scratchpad/a.txt")


async def test_a_text_only_store_refuses_a_binary_copy(authoring: Path) -> None:
    store = TextOnlyStore(MemorySessionStore())
    MemorySessionStore.write_bytes(store._inner, SID, "scratchpad/logo.png", PNG)  # type: ignore[arg-type]
    tools = WorkspaceActivities(store, authoring)
    result = await call(
        tools, "copy_file", source="scratchpad/logo.png", destination="scratchpad/b.png"
    )
    assert result.status == "error" and "takes text only" in result.content


def test_content_that_is_no_unicode_is_refused_naming_the_path(
    fs_store: FilesystemSessionStore, authoring: Path
) -> None:
    """``write_file`` and ``edit_file`` encode with the stores' one encoder: a lone surrogate
    (the workflow cleans them from a model's arguments; a script's may still carry one) is
    refused naming the path and the character, and nothing is planned."""
    view = WorkspaceView(fs_store, authoring, SID, [])
    with pytest.raises(WorkspaceError) as caught:
        workspace_writes.write_file(
            view, WriteFileArgs(file_path="scratchpad/a.md", content="x \ud800")
        )
    assert str(caught.value).startswith("content for 'scratchpad/a.md' is not valid Unicode: ")
    assert "surrogate" in str(caught.value) and caught.value.path == "scratchpad/a.md"
    fs_store.write_text(SID, "scratchpad/b.md", "old")
    with pytest.raises(WorkspaceError, match=r"^content for 'scratchpad/b\.md' is not valid"):
        workspace_writes.edit_file(
            view, EditFileArgs(file_path="scratchpad/b.md", old_string="old", new_string="\udfff")
        )
    assert not fs_store.exists(SID, "scratchpad/a.md")
