"""activities/workspace.py: the workspace activities (contracts, names, how a call fails)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.workspace_tools import (
    PLACE_FILES_ACTIVITY,
    TOOL_ACTIVITIES,
    TOOL_ARGUMENTS,
    WORKSPACE_TOOLS,
    WorkspaceToolInput,
    workspace_tool_schemas,
)
from tests.support.workspace import SID, make_authoring


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
