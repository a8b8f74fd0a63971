"""Drift tests: each list the runtime keeps (built-in tools, workspace zones, activity
contracts) is defined once, and every copy elsewhere agrees with it."""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import Client

from archmax_temporal import worker
from archmax_temporal.activities import workspace as workspace_activities
from archmax_temporal.activities import workspace_view
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.activities.store import PACKAGE_VERSION
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError, ReadOnlyPathError
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.client import events
from archmax_temporal.client.testing import case_workspace
from archmax_temporal.workflows import (
    contracts,
    governance,
    host_tools,
    runtime_tools,
    sandbox,
    todos,
    tools,
    workspace_tools,
    zones,
)
from archmax_temporal.workflows.spec import StateSpec, parse_spec
from archmax_temporal.workflows.workspace_tools import FileContent, SeedFilesInput
from tests.support.paths import REPO

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


def _spec(terminal: bool = False) -> StateSpec:
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


class TestToolRegistry:
    """``workflows/tools.py`` names every built-in tool once; the rest derive from it."""

    def test_every_name_is_registered_once(self) -> None:
        """No built-in tool appears twice in the registry."""
        names = [tool.name for tool in tools.BUILTINS]
        assert len(names) == len(set(names))

    def test_runtime_tool_schemas_name_the_registrys_runtime_tools(self) -> None:
        """The runtime schemas of a state with an edge are exactly the registry's runtime
        tools (``archmax_note`` is reserved and never offered)."""
        offered = [s.name for s in runtime_tools.runtime_tool_schemas(_spec())]
        assert sorted(offered) == sorted(tools.names("runtime"))
        assert set(offered) == runtime_tools.RUNTIME_TOOLS
        assert tools.NOTE not in offered
        assert tools.names("runtime", reserved=True)[-1] == tools.NOTE

    def test_a_terminal_state_offers_the_runtime_tools_but_advance(self) -> None:
        """Terminal states hide ``archmax_advance``; nothing outside the registry appears."""
        offered = {s.name for s in runtime_tools.runtime_tool_schemas(_spec(terminal=True))}
        assert offered == runtime_tools.RUNTIME_TOOLS - {tools.ADVANCE}

    def test_workspace_tool_schemas_name_the_registrys_workspace_tools(self) -> None:
        """The workspace schemas, their argument models and the registry agree, in order."""
        offered = tuple(s.name for s in workspace_tools.workspace_tool_schemas())
        assert offered == tools.names("workspace") == workspace_tools.WORKSPACE_TOOLS
        assert tuple(workspace_tools.TOOL_ARGUMENTS) == offered

    def test_every_workspace_tool_has_its_activity(self) -> None:
        """Each workspace tool maps to an activity, and the workspace activities implement
        exactly those (plus file placement and seeding)."""
        assert tuple(workspace_tools.TOOL_ACTIVITIES) == tools.WORKSPACE_TOOLS
        assert set(workspace_activities._TOOLS) == set(tools.WORKSPACE_TOOLS)
        ws = WorkspaceActivities(MemorySessionStore(), REPO)
        implemented = {getattr(fn, "__temporal_activity_definition").name for fn in ws.activities()}
        assert set(workspace_tools.TOOL_ACTIVITIES.values()) <= implemented

    def test_the_other_schemas_carry_the_registrys_names(self) -> None:
        """``write_todos``, ``archmax_eval`` and ``archmax_run`` are offered under their
        registered names and served by their registered handlers."""
        assert todos.write_todos_schema().name == tools.WRITE_TODOS
        assert sandbox.archmax_eval_schema().name == tools.ARCHMAX_EVAL
        assert sandbox.archmax_run_schema().name == tools.ARCHMAX_RUN
        assert tools.names("todos") == (tools.WRITE_TODOS,)
        assert tools.names("sandbox") == (tools.ARCHMAX_EVAL, tools.ARCHMAX_RUN)

    def test_governance_reads_the_registry(self) -> None:
        """Governance's always-on tools and path arguments are the registry's."""
        assert (
            frozenset(tools.WORKSPACE_TOOLS + tools.names("todos") + tools.names("sandbox"))
            == governance.ALWAYS_ON
        )
        assert set(governance.PATH_ARGS) <= {t.name for t in tools.BUILTINS}
        assert set(governance.PATH_ARGS) >= governance.OPTIONAL_PATH_ARGS
        assert {tools.TASK, tools.NOTE} == governance.WITHHELD

    def test_the_sandbox_bridge_serves_the_workspace_tools(self) -> None:
        """A sandboxed file calls exactly the workspace tools through ``tools.*``."""
        assert sandbox.BRIDGE_TOOLS == tools.WORKSPACE_TOOLS

    def test_no_host_tool_may_take_a_builtin_name(self) -> None:
        """Every built-in name (and ``task``, ``eval``) is reserved from host tools."""
        assert {t.name for t in tools.BUILTINS} | {"task", "eval"} <= host_tools.RESERVED_NAMES

    @pytest.mark.parametrize(
        ("tool", "handler"),
        [
            ("archmax_advance", "runtime"),
            ("archmax_note", "runtime"),
            ("grep", "workspace"),
            ("write_todos", "todos"),
            ("archmax_run", "sandbox"),
            ("archmax_workflow_enrich-order", "delegation"),
            ("lookup_order", "host"),
            ("archmax_workflow_", None),
            ("unknown", None),
        ],
    )
    def test_handler_of(self, tool: str, handler: str | None) -> None:
        """Each call is routed to the handler the registry names."""
        assert tools.handler_of(tool, ["lookup_order"]) == handler

    def test_no_module_keeps_its_own_tool_list(self) -> None:
        """No literal collection outside the registry lists two or more built-in tools."""
        builtins = {t.name for t in tools.BUILTINS}
        copies = [
            (path, line, sorted(strings & builtins))
            for path, line, strings in _string_collections(skip="workflows/tools.py")
            if len(strings & builtins) >= 2
        ]
        assert copies == []


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
        assert case_workspace.MOUNT_AREAS == zones.MOUNTS
        assert case_workspace.RUNTIME_AREAS == zones.RUNTIME_AREAS
        assert case_workspace.WRITABLE_AREA == zones.SCRATCHPAD
        for area in zones.RUNTIME_AREAS:
            assert "runtime area" in (case_workspace.workspace_path_problem(f"{area}/x.json") or "")
        for mount in zones.MOUNTS:
            assert "mount" in (case_workspace.workspace_path_problem(f"{mount}/x") or "")

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
        ws = workspace_view.WorkspaceView(MemorySessionStore(), REPO, "zones-1", [])
        for area in zones.RUNTIME_INTERNAL:
            with pytest.raises(FileNotFoundInWorkspaceError):
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


class TestActivityContracts:
    """``workflows/contracts/`` records every activity once; the worker serves exactly those."""

    RECORDED = frozenset(
        {
            "archmax.model.complete",
            "archmax.store.persist_turn",
            "archmax.store.checkpoint",
            "archmax.store.put_variables",
            "archmax.store.load_variables",
            "archmax.workspace.ls",
            "archmax.workspace.read_file",
            "archmax.workspace.write_file",
            "archmax.workspace.edit_file",
            "archmax.workspace.glob",
            "archmax.workspace.grep",
            "archmax.workspace.copy_file",
            "archmax.workspace.move_file",
            "archmax.workspace.remove_file",
            "archmax.workspace.place_files",
            "archmax.workspace.seed_files",
            "archmax.sandbox.run",
            "archmax.hook.custom",
            "archmax.tool.host",
            "archmax.notify.send",
        }
    )
    """The names every history records: they never change."""

    @staticmethod
    def _built(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
        """What ``build_worker`` hands ``Worker``, captured without a server."""
        captured: dict[str, Any] = {}

        def fake_worker(client: Any, **options: Any) -> object:
            captured.update(options)
            return object()

        monkeypatch.setattr(worker, "Worker", fake_worker)
        worker.build_worker(
            cast(Client, object()), task_queue="q", model=ModelConfig(), store_dir=tmp_path / "s"
        )
        return captured

    def test_names_are_the_recorded_ones(self) -> None:
        """No activity was renamed, added or dropped without this list changing too."""
        assert contracts.ACTIVITY_NAMES == self.RECORDED
        assert len(contracts.ACTIVITIES) == len(self.RECORDED)
        assert contracts.WORKFLOW_NAME == "ArchmaxSession"

    def test_build_worker_registers_exactly_the_contracts(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """The worker's activities are the contracts' set, each under its contract's name."""
        options = self._built(monkeypatch, tmp_path)
        names = [getattr(fn, "__temporal_activity_definition").name for fn in options["activities"]]
        assert len(names) == len(set(names))
        assert set(names) == contracts.ACTIVITY_NAMES

    def test_build_worker_names_its_build_without_hashing_every_module(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """A worker with no deployment reports archmax's code build id (its version and a
        digest of its own modules' source), not the SDK's digest of every loaded module;
        the id is stable within a process."""
        options = self._built(monkeypatch, tmp_path)
        assert options["build_id"] == worker.code_build_id()
        assert options["build_id"].startswith(f"archmax-{PACKAGE_VERSION}-")
        assert worker.code_build_id() == worker.code_build_id()

    def test_implementations_take_and_return_the_wire_types(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """Each registered implementation's parameter and result are its contract's types."""
        options = self._built(monkeypatch, tmp_path)
        by_name = {c.name: c for c in contracts.ACTIVITIES}
        for fn in options["activities"]:
            contract = by_name[getattr(fn, "__temporal_activity_definition").name]
            hints = typing.get_type_hints(fn)
            result = hints.pop("return")
            assert list(hints.values()) == [contract.input], contract.name
            assert result is (contract.result or type(None)), contract.name

    def test_check_registered_refuses_a_missing_or_extra_activity(self) -> None:
        """A worker missing a contract's activity, or serving one no contract records, or one
        twice, is refused before it polls."""
        names = sorted(contracts.ACTIVITY_NAMES)
        contracts.check_registered(names)
        for wrong in (names[1:], [*names, "archmax.unknown"], [*names, names[0]]):
            with pytest.raises(ValueError, match="differ from the contracts"):
                contracts.check_registered(wrong)

    def test_workspace_activity_names_follow_the_tools(self) -> None:
        """Each workspace tool runs as ``archmax.workspace.<tool>``."""
        assert {
            tool: f"archmax.workspace.{tool}" for tool in tools.WORKSPACE_TOOLS
        } == workspace_tools.TOOL_ACTIVITIES


class TestEventTypes:
    """The stream's event types are listed once (``archmax_temporal.client.events.EVENT_TYPES``):
    the reader emits exactly those, and the docs' Events page names each."""

    @staticmethod
    def _emitted() -> set[str]:
        """The types ``client/events.py`` passes to ``_event`` (constants anywhere in the
        argument, a conditional's branches included) and its update-to-event table."""
        found: set[str] = set(events._TURN_EVENTS.values())
        tree = ast.parse((REPO / "client" / "events.py").read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_event"
                and len(node.args) >= 2
            ):
                found |= {
                    c.value
                    for c in ast.walk(node.args[1])
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
        return found

    def test_the_reader_emits_exactly_the_registered_types(self) -> None:
        assert self._emitted() == set(events.EVENT_TYPES)
        assert len(set(events.EVENT_TYPES)) == len(events.EVENT_TYPES)

    def test_the_docs_name_every_type(self) -> None:
        section = (REPO / "docs" / "authoring" / "events.md").read_text(encoding="utf-8")
        every = (*events.EVENT_TYPES, *events.LIVE_EVENT_TYPES)
        missing = [kind for kind in every if f"`{kind}`" not in section]
        assert missing == []

    def test_live_types_are_none_of_the_historys(self) -> None:
        """The live channel's types never come from the history reader."""
        assert not set(events.LIVE_EVENT_TYPES) & set(events.EVENT_TYPES)
