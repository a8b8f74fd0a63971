"""activities/file_placement.py: files placed in ``scratchpad/attachments/`` and seeded."""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.text_only_store import TextOnlyStore
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.workspace_tools import (
    FilePlacementInput,
    PlacedFile,
    SeedFilesInput,
)
from tests.support.workspace import PNG, SID, call, ok


class SlowStore(MemorySessionStore):
    """A memory store whose writes take a while."""

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        time.sleep(0.05)
        super().write_bytes(session_id, path, data)


def placement(*files: tuple[str, str, bytes | str]) -> FilePlacementInput:
    out: dict[str, PlacedFile] = {}
    for var, name, content in files:
        if isinstance(content, bytes):
            out[var] = PlacedFile(
                name=name, content=base64.b64encode(content).decode(), encoding="base64"
            )
        else:
            out[var] = PlacedFile(name=name, content=content)
    return FilePlacementInput(session_id=SID, files=out)


class TestPlaceFiles:
    @pytest.fixture(params=["fs", "memory"])
    def store(self, request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
        if request.param == "fs":
            return FilesystemSessionStore(tmp_path / "sessions")
        return MemorySessionStore()

    async def test_collisions(self, store: SessionStore, authoring: Path) -> None:
        ws = WorkspaceActivities(store, authoring)
        first = await ws.place_files(placement(("invoice", "report.pdf", PNG)))
        assert first.paths == {"invoice": "scratchpad/attachments/report.pdf"}
        second = await ws.place_files(
            placement(
                ("a", "report.pdf", b"second"),
                ("b", "report.pdf", b"third"),
                ("c", "../../notes", "text"),
                ("d", "archive.tar.gz", b"gz"),
            )
        )
        assert second.paths == {
            "a": "scratchpad/attachments/report-1.pdf",
            "b": "scratchpad/attachments/report-2.pdf",
            "c": "scratchpad/attachments/notes",
            "d": "scratchpad/attachments/archive.tar.gz",
        }
        assert store.read_bytes(SID, "scratchpad/attachments/report.pdf") == PNG
        assert store.read_bytes(SID, "scratchpad/attachments/report-1.pdf") == b"second"
        assert store.read_bytes(SID, "scratchpad/attachments/report-2.pdf") == b"third"
        again = await ws.place_files(placement(("e", "archive.tar.gz", b"gz2")))
        assert again.paths == {"e": "scratchpad/attachments/archive.tar-1.gz"}

    async def test_concurrent_same_name_get_different_names(
        self, store: SessionStore, authoring: Path
    ) -> None:
        ws = WorkspaceActivities(store, authoring)
        results = await asyncio.gather(
            *(ws.place_files(placement(("f", "out.csv", f"run {i}"))) for i in range(8))
        )
        paths = [r.paths["f"] for r in results]
        assert len(set(paths)) == 8
        assert sorted(paths) == sorted(
            ["scratchpad/attachments/out.csv"]
            + [f"scratchpad/attachments/out-{n}.csv" for n in range(1, 8)]
        )
        contents = {store.read_text(SID, p) for p in paths}
        assert contents == {f"run {i}" for i in range(8)}

    async def test_concurrent_placements_are_serialised(self, authoring: Path) -> None:
        """A slow store widens the window between choosing a name and writing it: only the
        per-session lock keeps two placements from choosing the same name."""
        store = SlowStore()
        ws = WorkspaceActivities(store, authoring)
        results = await asyncio.gather(
            *(ws.place_files(placement(("f", "out.csv", f"run {i}"))) for i in range(4))
        )
        paths = {r.paths["f"] for r in results}
        assert len(paths) == 4
        assert {store.read_text(SID, p) for p in paths} == {f"run {i}" for i in range(4)}

    async def test_never_overwrites_a_file_written_elsewhere(
        self, store: SessionStore, authoring: Path
    ) -> None:
        store.write_text(SID, "scratchpad/attachments/a.txt", "agent's")
        ws = WorkspaceActivities(store, authoring)
        result = await ws.place_files(placement(("x", "a.txt", "host's")))
        assert result.paths["x"] == "scratchpad/attachments/a-1.txt"
        assert store.read_text(SID, "scratchpad/attachments/a.txt") == "agent's"

    async def test_placed_files_are_visible_to_tools(
        self, store: SessionStore, authoring: Path
    ) -> None:
        ws = WorkspaceActivities(store, authoring)
        await ws.place_files(placement(("x", "a.txt", "hello")))
        assert ok(await call(ws, "read_file", file_path="scratchpad/attachments/a.txt")) == (
            "     1\thello"
        )

    async def test_text_only_store_refuses_binary_writes_nothing(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        with pytest.raises(ApplicationError) as caught:
            await ws.place_files(
                placement(("note", "a.txt", "text first"), ("scan", "scan.pdf", PNG))
            )
        assert caught.value.type == "StoreCapabilityError"
        assert caught.value.non_retryable
        assert "scratchpad/attachments/scan.pdf" in str(caught.value)
        assert inner.walk(SID, "") == []

    async def test_text_only_store_places_text(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        result = await ws.place_files(placement(("a", "a.txt", "plain"), ("b", "b.csv", b"x,y\n")))
        assert inner.read_text(SID, result.paths["b"]) == "x,y\n"

    async def test_bad_base64_refused(self, authoring: Path) -> None:
        ws = WorkspaceActivities(MemorySessionStore(), authoring)
        bad = FilePlacementInput(
            session_id=SID,
            files={"x": PlacedFile(name="a.bin", content="***", encoding="base64")},
        )
        with pytest.raises(ApplicationError, match="base64"):
            await ws.place_files(bad)


class TestSeedFiles:
    async def test_seed_paths(self, authoring: Path) -> None:
        store = MemorySessionStore()
        ws = WorkspaceActivities(store, authoring)
        result = await ws.seed_files(
            SeedFilesInput.model_validate(
                {
                    "session_id": SID,
                    "files": {
                        "trigger.json": {"content": '{"a": 1}'},
                        "scratchpad/in/data.bin": {
                            "content": base64.b64encode(PNG).decode(),
                            "encoding": "base64",
                        },
                    },
                }
            )
        )
        assert result.paths == ["trigger.json", "scratchpad/in/data.bin"]
        assert store.read_bytes(SID, "scratchpad/in/data.bin") == PNG
        assert '{"a": 1}' in ok(await call(ws, "read_file", file_path="trigger.json"))

    @pytest.mark.parametrize(
        "path",
        ["skills/pricing/x.md", "AGENTS.md", "artifacts/trail.json", "../x", "/abs", "", "."],
    )
    async def test_seed_refusals_write_nothing(self, authoring: Path, path: str) -> None:
        store = MemorySessionStore()
        ws = WorkspaceActivities(store, authoring)
        seed = SeedFilesInput.model_validate(
            {
                "session_id": SID,
                "files": {"scratchpad/ok.txt": {"content": "ok"}, path: {"content": "x"}},
            }
        )
        with pytest.raises(ApplicationError):
            await ws.seed_files(seed)
        assert store.walk(SID, "") == []
        assert "Price it." in (authoring / "skills" / "pricing" / "SKILL.md").read_text()

    async def test_seed_binary_into_text_only_refused(self, authoring: Path) -> None:
        inner = MemorySessionStore()
        ws = WorkspaceActivities(TextOnlyStore(inner), authoring)
        seed = SeedFilesInput.model_validate(
            {
                "session_id": SID,
                "files": {
                    "scratchpad/ok.txt": {"content": "ok"},
                    "scratchpad/x.png": {
                        "content": base64.b64encode(PNG).decode(),
                        "encoding": "base64",
                    },
                },
            }
        )
        with pytest.raises(ApplicationError, match=r"scratchpad/x\.png") as caught:
            await ws.seed_files(seed)
        assert caught.value.type == "StoreCapabilityError"
        assert inner.walk(SID, "") == []
