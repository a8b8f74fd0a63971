"""activities/workspace.py: the workspace activities (contracts, names, how a call fails).

Under untrusted input too: a symlink inside the session is never followed, an error never
names a host path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput
from archmax_temporal.workflows.spec import parse_spec
from archmax_temporal.workflows.workspace_tools import (
    PLACE_FILES_ACTIVITY,
    TOOL_ACTIVITIES,
    TOOL_ARGUMENTS,
    WORKSPACE_TOOLS,
    WorkspaceToolInput,
    workspace_tool_schemas,
)
from tests.support.workspace import SID, call, err, make_authoring


@pytest.fixture
def authoring(tmp_path: Path) -> Path:
    return make_authoring(tmp_path)


@pytest.fixture
def fs_store(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def ws(fs_store: FilesystemSessionStore, authoring: Path) -> WorkspaceActivities:
    return WorkspaceActivities(fs_store, authoring)


class TestContracts:
    def test_schemas_match_argument_models(self) -> None:
        schemas = {s.name: s for s in workspace_tool_schemas()}
        assert tuple(schemas) == WORKSPACE_TOOLS
        for name, schema in schemas.items():
            model = TOOL_ARGUMENTS[name]
            assert set(schema.parameters["properties"]) == set(model.model_fields)
            required = {n for n, f in model.model_fields.items() if f.is_required()}
            assert set(schema.parameters.get("required", [])) == required
            assert schema.description

    def test_activity_names(self, ws: WorkspaceActivities) -> None:
        assert {t: f"archmax.workspace.{t}" for t in WORKSPACE_TOOLS} == TOOL_ACTIVITIES
        names = {getattr(fn, "__temporal_activity_definition").name for fn in ws.activities()}
        assert names == set(TOOL_ACTIVITIES.values()) | {
            PLACE_FILES_ACTIVITY,
            "archmax.workspace.seed_files",
        }


class TestInfrastructure:
    async def test_tool_mismatch_is_an_error_result(self, ws: WorkspaceActivities) -> None:
        result = await ws.ls(WorkspaceToolInput(session_id=SID, tool="grep"))
        assert result.status == "error"

    async def test_invalid_session_id_fails_the_activity(self, ws: WorkspaceActivities) -> None:
        with pytest.raises(ApplicationError) as caught:
            await ws.ls(WorkspaceToolInput(session_id="a\x00b", tool="ls"))
        assert caught.value.type == "InvalidSessionIdError"
        assert caught.value.non_retryable

    async def test_runs_in_activity_environment(self, ws: WorkspaceActivities) -> None:
        env = ActivityEnvironment()
        result = await env.run(ws.ls, WorkspaceToolInput(session_id=SID, tool="ls"))
        assert result.status == "ok"


class TestSymlinks:
    """A symlink inside the session (here to ``../artifacts``, the runtime's own files) is
    refused by every tool that names it, and skipped by every listing."""

    @pytest.fixture
    def linked(self, fs_store: FilesystemSessionStore) -> Path:
        fs_store.write_text(SID, "scratchpad/real.txt", "START END\n")
        fs_store.write_text(SID, "artifacts/trail.json", '{"secret": "trail"}\n')
        base = fs_store.root / SID
        (base / "scratchpad" / "inside").symlink_to("../artifacts", target_is_directory=True)
        (base / "scratchpad" / "alias.txt").symlink_to("../artifacts/trail.json")
        return base

    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("read_file", {"file_path": "scratchpad/alias.txt"}),
            ("read_file", {"file_path": "scratchpad/inside/trail.json"}),
            ("write_file", {"file_path": "scratchpad/inside/new.txt", "content": "x"}),
            ("write_file", {"file_path": "scratchpad/alias.txt", "content": "x"}),
            (
                "edit_file",
                {"file_path": "scratchpad/alias.txt", "old_string": "s", "new_string": "t"},
            ),
            ("copy_file", {"source": "scratchpad/alias.txt", "destination": "scratchpad/c.txt"}),
            ("copy_file", {"source": "scratchpad/real.txt", "destination": "scratchpad/inside/c"}),
            (
                "move_file",
                {"source": "scratchpad/inside/trail.json", "destination": "scratchpad/m"},
            ),
            ("move_file", {"source": "scratchpad/real.txt", "destination": "scratchpad/inside/m"}),
            ("remove_file", {"file_path": "scratchpad/inside/trail.json"}),
            ("remove_file", {"file_path": "scratchpad/alias.txt"}),
            ("ls", {"path": "scratchpad/inside"}),
            ("grep", {"pattern": "secret", "path": "scratchpad/inside"}),
        ],
    )
    async def test_every_tool_refuses_a_path_through_a_symlink(
        self, ws: WorkspaceActivities, linked: Path, tool: str, arguments: dict[str, Any]
    ) -> None:
        message = err(await call(ws, tool, **arguments))
        assert "symlink" in message or "does not exist" in message
        assert "trail" not in message.replace("trail.json", "")  # no content leaks
        assert (linked / "artifacts" / "trail.json").read_text() == '{"secret": "trail"}\n'
        assert sorted(p.name for p in (linked / "artifacts").iterdir()) == ["trail.json"]
        assert (linked / "scratchpad" / "real.txt").read_text() == "START END\n"

    async def test_listings_and_searches_skip_symlinks(
        self, ws: WorkspaceActivities, linked: Path
    ) -> None:
        assert (await call(ws, "ls", path="scratchpad")).content == "scratchpad/real.txt"
        assert (await call(ws, "glob", pattern="**", path="scratchpad")).content == (
            "scratchpad/real.txt"
        )
        assert (await call(ws, "grep", pattern="secret")).content.startswith("No matches")

    async def test_the_sandbox_bridge_refuses_them_too(
        self, ws: WorkspaceActivities, linked: Path
    ) -> None:
        """``tools.readFile`` and ``tools.writeFile`` in a hook run the same refusal."""
        sandbox = SandboxActivities(ws)
        script = (
            "export default async () => {"
            " const r = await tools.readFile({file_path: 'scratchpad/inside/trail.json'})"
            "   .then(t => 'read: ' + t, e => 'refused: ' + e);"
            " const w = await tools.writeFile({file_path: 'scratchpad/alias.txt', content: 'x'})"
            "   .then(t => 'wrote: ' + t, e => 'refused: ' + e);"
            " return ok(r + ' | ' + w); }"
        )
        run = SandboxRunInput(
            session_id=SID,
            label="hooks/probe.js",
            kind="hook",
            source=script,
            spec=parse_spec({"states": {"s": {"triggers": {"manual": None}}}}),
            state="s",
            limits=SandboxLimits(timeout_ms=5000),
        )
        result = await ActivityEnvironment().run(sandbox.run, run)
        assert [c.status for c in result.calls] == ["error", "error"]
        assert all("symlink" in c.content for c in result.calls)
        assert (linked / "artifacts" / "trail.json").read_text() == '{"secret": "trail"}\n'


class TestHostPaths:
    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("write_file", {"file_path": f"scratchpad/{'n' * 300}.txt", "content": "x"}),
            ("read_file", {"file_path": f"scratchpad/{'n' * 300}.txt"}),
            ("edit_file", {"file_path": f"scratchpad/{'n' * 300}", "old_string": "a"}),
            ("copy_file", {"source": "scratchpad/a.txt", "destination": f"scratchpad/{'n' * 300}"}),
            ("ls", {"path": f"scratchpad/{'n' * 300}"}),
        ],
    )
    async def test_a_name_over_the_file_systems_limit_is_a_clear_tool_error(
        self,
        ws: WorkspaceActivities,
        fs_store: FilesystemSessionStore,
        tool: str,
        arguments: dict[str, Any],
    ) -> None:
        """A 300-character name is an error result (not an infrastructure failure retried
        five times) in the agent's own paths, never the store's host path."""
        fs_store.write_text(SID, "scratchpad/a.txt", "a")
        arguments.setdefault("new_string", "b") if tool == "edit_file" else None
        result = await ActivityEnvironment().run(
            getattr(ws, tool), WorkspaceToolInput(session_id=SID, tool=tool, arguments=arguments)
        )
        message = err(result)
        assert "longer than the file system allows" in message
        assert "scratchpad/nnn" in message
        assert str(fs_store.root) not in message and str(fs_store.root.resolve()) not in message
        assert not list((fs_store.root / SID / "scratchpad").glob("n*"))

    async def test_a_store_fault_fails_the_activity_retryably_without_host_paths(
        self,
        ws: WorkspaceActivities,
        fs_store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A full disk is retried by Temporal; what the history and the model get names the
        session path and the errno, not the host path."""

        def full(*_args: object) -> None:
            raise OSError(28, "No space left on device", str(fs_store.root / SID / "x"))

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(ApplicationError) as caught:
            await call(ws, "write_file", file_path="scratchpad/a.txt", content="x")
        assert caught.value.type == "StoreIOError" and not caught.value.non_retryable
        assert "scratchpad/a.txt" in caught.value.message and "ENOSPC" in caught.value.message
        assert str(fs_store.root) not in caught.value.message
        assert caught.value.__cause__ is None

    async def test_an_unexpected_error_names_no_host_path(
        self,
        ws: WorkspaceActivities,
        fs_store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """An error no boundary expected (a backend's own) still fails the activity without
        the store's folder in its message."""

        def broken(*_args: object) -> bytes:
            raise RuntimeError(f"backend lost {fs_store.root / SID / 'scratchpad' / 'a.txt'}")

        monkeypatch.setattr(FilesystemSessionStore, "read_bytes", broken)
        with pytest.raises(ApplicationError) as caught:
            await call(ws, "read_file", file_path="scratchpad/a.txt")
        assert caught.value.type == "RuntimeError"
        assert str(fs_store.root) not in caught.value.message
        assert "a.txt" in caught.value.message
