"""activities/workspace.py: the workspace activities, every tool through them: their contracts
and names, how a call fails, what untrusted input meets (a symlink inside the session is never
followed, an error never names a host path), and the same answers and files over a folder and
over S3."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities.effects import EffectJournal
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.object_store import ObjectSessionStore, open_store
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.session_store import SessionStore, write_upload
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.contracts.workspace import (
    FilePlacementInput,
    PlacedFile,
    SeedFilesInput,
    SessionFileRef,
    WorkspaceToolInput,
    WorkspaceToolResult,
)
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput
from archmax_temporal.workflows.spec import parse_spec
from archmax_temporal.workflows.workspace_tools import (
    PLACE_FILES_ACTIVITY,
    TOOL_ACTIVITIES,
    TOOL_ARGUMENTS,
    WORKSPACE_TOOLS,
    workspace_tool_schemas,
)
from archmax_temporal.workflows.zones import RUNTIME_INTERNAL
from tests.support.workspace import PNG, SID, call, err


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


LONG = "n" * 300

Call = tuple[str, dict[str, Any]]

SCRIPT: list[Call] = [
    ("ls", {}),
    ("ls", {"path": "scratchpad"}),
    ("ls", {"path": "scratchpad/in"}),
    ("ls", {"path": "scratchpad/in/logo.png"}),
    ("ls", {"path": "scratchpad/none"}),
    ("ls", {"path": "artifacts"}),
    ("ls", {"path": "skills"}),
    ("ls", {"path": "skills/pricing"}),
    ("ls", {"path": "skills/secret"}),
    ("ls", {"path": "../x"}),
    ("read_file", {"file_path": "trigger.json"}),
    ("read_file", {"file_path": "scratchpad/in/logo.png"}),
    ("read_file", {"file_path": "scratchpad/in/data.bin"}),
    ("read_file", {"file_path": "scratchpad/none.txt"}),
    ("read_file", {"file_path": "scratchpad/in"}),
    ("read_file", {"file_path": "scratchpad"}),
    ("read_file", {"file_path": "scratchpad/in/logo.png/x"}),
    ("read_file", {"file_path": "artifacts/trail.json"}),
    ("read_file", {"file_path": "checkpoints/cp.json"}),
    ("read_file", {"file_path": "skills/pricing/SKILL.md"}),
    ("read_file", {"file_path": "AGENTS.md"}),
    ("read_file", {"file_path": "/etc/passwd"}),
    ("read_file", {"file_path": "scratchpad/../../x"}),
    ("read_file", {"file_path": f"scratchpad/{LONG}"}),
    ("write_file", {"file_path": "scratchpad/notes.md", "content": "one\ntwo needle\nthree\n"}),
    ("write_file", {"file_path": "scratchpad/notes.md", "content": "a needle\nb\nneedle c\nd\n"}),
    ("read_file", {"file_path": "scratchpad/notes.md", "offset": 1, "limit": 2}),
    ("read_file", {"file_path": "scratchpad/notes.md", "offset": 9}),
    ("write_file", {"file_path": "scratchpad/empty.txt", "content": ""}),
    ("read_file", {"file_path": "scratchpad/empty.txt"}),
    ("write_file", {"file_path": "scratchpad/deep/er/still.txt", "content": "deep needle"}),
    # a folder emptied by a move or a removal stays on disk and not on S3: each keeps a file
    ("write_file", {"file_path": "scratchpad/deep/er/keep.txt", "content": "kept"}),
    ("write_file", {"file_path": "scratchpad/copy/keep.txt", "content": "kept"}),
    ("write_file", {"file_path": "scratchpad/héllo wörld #1.md", "content": "ünïcode needle"}),
    ("write_file", {"file_path": "AGENTS.md", "content": "x"}),
    ("write_file", {"file_path": "trigger.json", "content": "x"}),
    ("write_file", {"file_path": "skills/pricing/x.md", "content": "x"}),
    ("write_file", {"file_path": "artifacts/x.json", "content": "x"}),
    ("write_file", {"file_path": "../../etc/x", "content": "x"}),
    ("write_file", {"file_path": "scratchpad", "content": "x"}),
    ("write_file", {"file_path": "scratchpad/in", "content": "x"}),
    ("write_file", {"file_path": "scratchpad/in/logo.png/child.txt", "content": "x"}),
    ("write_file", {"file_path": f"scratchpad/{LONG}", "content": "x"}),
    ("write_file", {"file_path": f"scratchpad/{LONG}/x.txt", "content": "x"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "b\n", "new_string": "B\n"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "needle", "new_string": "x"}),
    (
        "edit_file",
        {
            "file_path": "scratchpad/notes.md",
            "old_string": "needle",
            "new_string": "pin",
            "replace_all": True,
        },
    ),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "absent", "new_string": "x"}),
    ("edit_file", {"file_path": "scratchpad/notes.md", "old_string": "", "new_string": "x"}),
    ("edit_file", {"file_path": "scratchpad/in/logo.png", "old_string": "P", "new_string": "Q"}),
    ("edit_file", {"file_path": "scratchpad/none.md", "old_string": "a", "new_string": "b"}),
    ("read_file", {"file_path": "scratchpad/notes.md"}),
    ("glob", {"pattern": "**/*.md"}),
    ("glob", {"pattern": "*", "path": "scratchpad"}),
    ("glob", {"pattern": "**"}),
    ("glob", {"pattern": "**/*.png", "path": "scratchpad/in"}),
    ("glob", {"pattern": "*.nothing"}),
    ("glob", {"pattern": "/abs/*"}),
    ("grep", {"pattern": "needle"}),
    ("grep", {"pattern": "needle|pin", "path": "scratchpad"}),
    ("grep", {"pattern": "needle", "glob": "*.txt"}),
    ("grep", {"pattern": "e", "max_count": 2}),
    ("grep", {"pattern": "needle", "path": "scratchpad/none"}),
    ("grep", {"pattern": "needle", "path": "artifacts"}),
    ("grep", {"pattern": "("}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/copy/notes.md"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/copy/notes.md"}),
    (
        "copy_file",
        {
            "source": "scratchpad/in/logo.png",
            "destination": "scratchpad/copy/notes.md",
            "overwrite": True,
        },
    ),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/notes.md"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "scratchpad/in"}),
    ("copy_file", {"source": "scratchpad/notes.md", "destination": "AGENTS.md"}),
    ("copy_file", {"source": "scratchpad/none.md", "destination": "scratchpad/x.md"}),
    ("copy_file", {"source": "skills/pricing/scripts/calc.js", "destination": "scratchpad/c.js"}),
    ("copy_file", {"source": "trigger.json", "destination": "scratchpad/in/logo.png/t.json"}),
    ("move_file", {"source": "scratchpad/copy/notes.md", "destination": "scratchpad/moved.png"}),
    ("move_file", {"source": "skills/pricing/SKILL.md", "destination": "scratchpad/s.md"}),
    ("move_file", {"source": "scratchpad/none.md", "destination": "scratchpad/s.md"}),
    ("move_file", {"source": "scratchpad/c.js", "destination": "scratchpad/moved.png"}),
    ("remove_file", {"file_path": "scratchpad/deep/er/still.txt"}),
    ("remove_file", {"file_path": "scratchpad/in"}),
    ("remove_file", {"file_path": "scratchpad/none.txt"}),
    ("remove_file", {"file_path": "scratchpad/in/logo.png/x"}),
    ("remove_file", {"file_path": "AGENTS.md"}),
    ("remove_file", {"file_path": "trigger.json"}),
    ("remove_file", {"file_path": "scratchpad"}),
    ("ls", {"path": "scratchpad"}),
    ("ls", {}),
    ("glob", {"pattern": "**"}),
    ("read_file", {"file_path": "scratchpad/moved.png"}),
    ("read_file", {"file_path": "scratchpad/héllo wörld #1.md"}),
]
"""Every workspace tool, on files, folders, mounts, runtime areas, and every refusal: escape,
read-only, binary, missing, a folder as a file, a file as a folder, a name too long. No folder
is emptied (see ``test_an_emptied_folder_is_where_the_stores_differ``)."""


def tools_on(store: SessionStore, authoring: Path) -> WorkspaceActivities:
    return WorkspaceActivities(store, authoring)


@pytest.fixture
def sid() -> str:
    return f"contract-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def folder(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def s3(s3_url: str) -> ObjectSessionStore:
    store = open_store(s3_url)
    assert isinstance(store, ObjectSessionStore)
    return store


async def seed(tools: WorkspaceActivities, sid: str) -> None:
    """The same starting point in each store: a trigger, a PNG, bytes, runtime files."""
    await tools.seed_files(
        SeedFilesInput.model_validate(
            {
                "session_id": sid,
                "files": {
                    "trigger.json": {"content": '{"from": "ana@example.com"}'},
                    "scratchpad/in/logo.png": {
                        "content": base64.b64encode(PNG).decode(),
                        "encoding": "base64",
                    },
                    "scratchpad/in/data.bin": {
                        "content": base64.b64encode(b"\x00\x01\x02").decode(),
                        "encoding": "base64",
                    },
                },
            }
        )
    )
    tools.store.write_text(sid, "artifacts/trail.json", '{"needle": true}')
    tools.store.write_text(sid, "checkpoints/cp.json", "{}")


async def run_script(tools: WorkspaceActivities, sid: str) -> list[WorkspaceToolResult]:
    results = []
    for tool, arguments in SCRIPT:
        request = WorkspaceToolInput(
            session_id=sid, tool=tool, arguments=arguments, visible_skills=["pricing"]
        )
        results.append(await getattr(tools, tool)(request))
    return results


def files_of(store: SessionStore, sid: str) -> dict[str, bytes]:
    """Every file the session holds outside the runtime's own areas, with its bytes."""
    return {
        path: store.read_bytes(sid, path)
        for path in store.walk(sid, "")
        if path.split("/")[0] not in RUNTIME_INTERNAL
    }


def assert_same_answers(
    expected: list[WorkspaceToolResult], actual: list[WorkspaceToolResult]
) -> None:
    """Equal, call by call: a failure names the call and both answers."""
    assert len(actual) == len(expected)
    for (tool, arguments), want, got in zip(SCRIPT, expected, actual, strict=True):
        assert got == want, f"{tool} {arguments}:\n  folder: {want!r}\n  s3:     {got!r}"


class TestToolsAnswerAlike:
    """The store contract: one script of tool calls (every tool: reads, writes, refusals of
    every kind) answers byte for byte the same over a folder and over S3 (moto in server
    mode, ``s3_url``), and leaves the same files behind."""

    @pytest.fixture
    def authoring(self, tmp_path: Path) -> Path:
        root = tmp_path / "authoring"
        (root / "skills" / "pricing" / "scripts").mkdir(parents=True)
        (root / "skills" / "pricing" / "SKILL.md").write_text("---\nname: pricing\n---\nneedle\n")
        (root / "skills" / "pricing" / "scripts" / "calc.js").write_text("return 1;\n")
        (root / "skills" / "secret").mkdir()
        (root / "skills" / "secret" / "SKILL.md").write_text("---\nname: secret\n---\nHidden.\n")
        (root / "AGENTS.md").write_text("# Agents\nBe kind.\n")
        return root

    async def test_the_script_gives_the_same_answers_and_files(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """Every call answers byte for byte the same on a folder and on S3, refusals
        included, and leaves the same files behind."""
        answers = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            await seed(tools, sid)
            answers[name] = await run_script(tools, sid)
        assert_same_answers(answers["folder"], answers["s3"])
        errors = [r.content for r in answers["s3"] if r.status == "error"]
        for refusal in (
            "cannot climb out",
            "is an absolute path",
            "a parent folder is a file",
            "read-only",
            "binary file",
            "longer than the file system allows",
            "does not exist",
            "is a folder",
            "is a file, not a folder",
            "runtime-internal",
        ):
            assert any(refusal in e for e in errors), refusal
        assert files_of(s3, sid) == files_of(folder, sid)
        assert files_of(s3, sid)["scratchpad/moved.png"] == PNG

    async def test_an_emptied_folder_is_where_the_stores_differ(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """The one difference the agent can see: a folder whose last file was removed stays
        on disk (empty) and is gone from an object store, where folders are implied by keys."""
        listings = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            store.write_text(sid, "scratchpad/tmp/a.txt", "x")
            request = WorkspaceToolInput(
                session_id=sid, tool="remove_file", arguments={"file_path": "scratchpad/tmp/a.txt"}
            )
            assert (await tools.remove_file(request)).status == "ok"
            ls = WorkspaceToolInput(session_id=sid, tool="ls", arguments={"path": "scratchpad/tmp"})
            listings[name] = await tools.ls(ls)
        assert listings["folder"].content == "'scratchpad/tmp' is empty."
        assert listings["s3"].status == "error"
        assert listings["s3"].content == "Error: 'scratchpad/tmp' does not exist"

    async def test_journaled_calls_replay_alike(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """The sandbox's path (``run_tool`` with an idempotency key): the entry is recorded in
        the store, a retry with the same key answers the recorded answer, on both stores."""
        answers: dict[str, list[str]] = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            got = []
            for _attempt in range(2):
                for n, (tool, arguments) in enumerate(
                    [
                        ("write_file", {"file_path": "scratchpad/j.md", "content": "v1"}),
                        (
                            "edit_file",
                            {
                                "file_path": "scratchpad/j.md",
                                "old_string": "v1",
                                "new_string": "v2",
                            },
                        ),
                        (
                            "move_file",
                            {"source": "scratchpad/j.md", "destination": "scratchpad/k.md"},
                        ),
                    ]
                ):
                    request = WorkspaceToolInput(session_id=sid, tool=tool, arguments=arguments)
                    result = tools.run_tool(request, key=f"run-1.{n}")
                    got.append(f"{result.status}:{result.content}")
            answers[name] = got
            assert store.read_text(sid, "scratchpad/k.md") == "v2"
            assert not store.exists(sid, "scratchpad/j.md")
            effects = [e.name for e in store.list_dir(sid, "checkpoints/effects")]
            assert effects == ["run-1.0.json", "run-1.1.json", "run-1.2.json"]
            assert EffectJournal(store).prune(sid, "run-1") == 3
        assert answers["s3"] == answers["folder"]
        assert answers["s3"][:3] == answers["s3"][3:]  # the retry: the recorded answers

    async def test_placements_and_seeds_alike(
        self, folder: FilesystemSessionStore, s3: ObjectSessionStore, authoring: Path, sid: str
    ) -> None:
        """Files handed to a session (by content, by upload reference, copied from another
        session) land under the same names; refused seeds are refused alike."""
        outcomes: dict[str, list[object]] = {}
        for name, store in (("folder", folder), ("s3", s3)):
            tools = tools_on(store, authoring)
            store.write_text("parent-1", "scratchpad/report.json", '{"ok": true}')
            store.write_text(sid, "scratchpad/attachments/report.pdf", "written by the agent")
            ref = write_upload(store, PNG)
            got: list[object] = []
            for files, copies in (
                (
                    {
                        "a": PlacedFile(name="report.pdf", content="second"),
                        "b": PlacedFile(name="report.pdf", content="third"),
                        "c": PlacedFile(name="../../notes", content="text"),
                        "d": PlacedFile(name="scan.png", ref=ref),
                    },
                    {"e": SessionFileRef(session_id="parent-1", path="scratchpad/report.json")},
                ),
                ({"f": PlacedFile(name="scan.png", ref=ref)}, {}),
            ):
                placed = await tools.place_files(
                    FilePlacementInput(session_id=sid, files=files, copies=copies)
                )
                got.append(placed.paths)
            for seeded in (
                {"scratchpad/s/a.txt": {"content": "a"}},
                {"AGENTS.md": {"content": "x"}},
            ):
                seed_input = SeedFilesInput.model_validate({"session_id": sid, "files": seeded})
                try:
                    got.append((await tools.seed_files(seed_input)).paths)
                except ApplicationError as exc:
                    got.append((exc.type, str(exc), exc.non_retryable))
            missing = FilePlacementInput(
                session_id=sid,
                copies={"x": SessionFileRef(session_id="parent-1", path="scratchpad/none.json")},
            )
            with pytest.raises(ApplicationError) as refused:
                await tools.place_files(missing)
            got.append((refused.value.type, str(refused.value)))
            outcomes[name] = got
        assert outcomes["s3"] == outcomes["folder"]
        assert files_of(s3, sid) == files_of(folder, sid)
        assert files_of(s3, sid)["scratchpad/attachments/scan.png"] == PNG
