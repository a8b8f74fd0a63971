"""Drift tests: each list the runtime keeps (built-in tools, workspace zones) is defined once,
and every copy elsewhere agrees with it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from archmax_temporal.activities import workspace as workspace_activities
from archmax_temporal.activities.session_store import MemorySessionStore, ReadOnlyPathError
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.client.testing import cases
from archmax_temporal.workflows import (
    governance,
    zones,
)
from archmax_temporal.workflows.spec import parse_spec
from archmax_temporal.workflows.workspace_tools import FileContent, SeedFilesInput

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("workflows", "activities", "client")


def _string_collections(skip: str) -> list[tuple[str, int, set[str]]]:
    """Every set, list, tuple or dict literal of the package's modules (but ``skip``) with the
    string constants it holds."""
    found: list[tuple[str, int, set[str]]] = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if relative == skip:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Dict):
                    elements = [key for key in node.keys if key is not None]
                elif isinstance(node, ast.Set | ast.List | ast.Tuple):
                    elements = list(node.elts)
                else:
                    continue
                strings = {
                    e.value
                    for e in elements
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
                if strings:
                    found.append((relative, node.lineno, strings))
    return found


def _spec(terminal: bool = False):
    """A one- or two-state spec; ``terminal`` stands the session in the terminal state."""
    return parse_spec(
        {
            "states": {
                "start": {
                    "triggers": {"manual": None},
                    "transitions": [{"to": "done", "description": "finished"}],
                },
                "done": {},
            }
        }
    ).state("done" if terminal else "start")


class TestZones:
    """``workflows/zones.py`` defines the workspace zones once; the rest derive from it."""

    def test_governance_places_paths_by_the_zones(self) -> None:
        """Governance's zones are the registry's areas."""
        assert governance._zone(zones.SCRATCHPAD + "/x")[0] == "scratchpad"
        assert governance._zone(zones.ATTACHMENTS + "/a.pdf")[0] == "scratchpad"
        assert governance._zone(zones.SKILLS) == ("skills", None)
        assert governance._zone(zones.SKILLS + "/s/x.md") == ("skill", "s")
        assert governance._zone(zones.AGENTS_MD)[0] == "agents"
        for area in zones.RUNTIME_INTERNAL:
            assert governance._zone(area + "/x")[0] == "internal"

    def test_the_case_schema_reads_the_zones(self) -> None:
        """A case seeds what ``agent.sessions.seed`` seeds: the same mounts and areas."""
        assert cases.MOUNT_AREAS == zones.MOUNTS
        assert cases.RUNTIME_AREAS == zones.RUNTIME_AREAS
        assert cases.WRITABLE_AREA == zones.SCRATCHPAD
        for area in zones.RUNTIME_AREAS:
            assert "runtime area" in (cases.workspace_path_problem(f"{area}/x.json") or "")
        for mount in zones.MOUNTS:
            assert "mount" in (cases.workspace_path_problem(f"{mount}/x") or "")

    @pytest.mark.parametrize("area", sorted(zones.RUNTIME_AREAS | zones.MOUNTS))
    async def test_sessions_seed_refuses_what_a_case_refuses(self, area: str) -> None:
        """``agent.sessions.seed`` refuses every mount and runtime area a case may not seed."""
        ws = WorkspaceActivities(MemorySessionStore(), REPO)
        seed = SeedFilesInput(
            session_id="zones-1", files={f"{area}/x.json": FileContent(content="{}")}
        )
        with pytest.raises(Exception) as refused:
            await ws.seed_files(seed)
        assert getattr(refused.value, "type", None) == ReadOnlyPathError.__name__

    def test_the_workspace_hides_the_internal_areas(self) -> None:
        """The workspace activities refuse and hide every runtime-internal area."""
        ws = workspace_activities._Workspace(MemorySessionStore(), REPO, "zones-1", [])
        for area in zones.RUNTIME_INTERNAL:
            with pytest.raises(workspace_activities.FileNotFoundInWorkspaceError):
                ws.locate(f"{area}/x")
            assert not ws._visible_top(area)
        for mount in zones.MOUNTS:
            assert not ws._visible_top(mount)
        assert ws._visible_top("trigger.json")

    def test_no_module_keeps_its_own_zone_list(self) -> None:
        """No literal collection outside ``zones.py`` lists a runtime area or ``AGENTS.md``."""
        distinctive = zones.RUNTIME_AREAS - {"workflows"} | {zones.AGENTS_MD}
        copies = [
            (path, line, sorted(strings & distinctive))
            for path, line, strings in _string_collections(skip="workflows/zones.py")
            if strings & distinctive
        ]
        assert copies == []
