"""activities/workspace.py under untrusted input: a model's regex or glob never freezes the
worker, a symlink inside the session is never followed, an error never names a host path."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities import workspace_reads
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput
from archmax_temporal.workflows.spec import parse_spec
from archmax_temporal.workflows.workspace_tools import WorkspaceToolInput, WorkspaceToolResult

SID = "untrusted-1"


@pytest.fixture
def store(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def ws(store: FilesystemSessionStore, tmp_path: Path) -> WorkspaceActivities:
    authoring = tmp_path / "authoring"
    authoring.mkdir()
    (authoring / "AGENTS.md").write_text("# Agents\n")
    return WorkspaceActivities(store, authoring)


async def call(ws: WorkspaceActivities, tool: str, **arguments: Any) -> WorkspaceToolResult:
    result: WorkspaceToolResult = await getattr(ws, tool)(
        WorkspaceToolInput(session_id=SID, tool=tool, arguments=arguments)
    )
    return result


def error(result: WorkspaceToolResult) -> str:
    assert result.status == "error", result.content
    return result.content


class TestPatterns:
    async def test_a_catastrophic_pattern_returns_at_once_and_the_loop_keeps_running(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """``^(a+)+$`` over ``a…a!`` (minutes of backtracking in Python's ``re``) finds
        nothing, while a trivial asyncio task on the same loop goes on ticking."""
        store.write_text(SID, "scratchpad/evil.txt", ("a" * 30 + "!\n") * 60_000)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        before = ticks
        started = time.monotonic()
        result = await call(ws, "grep", pattern="^(a+)+$")
        elapsed = time.monotonic() - started
        task.cancel()
        assert result.status == "ok"
        assert result.content == "No matches for '^(a+)+$' under '.'."
        assert ticks - before >= 2  # the loop ran while the grep did
        assert elapsed < 30

    async def test_a_pattern_re2_refuses_is_a_readable_tool_error(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """A backreference or lookaround is an error result saying why, not a failure."""
        store.write_text(SID, "scratchpad/a.txt", "abab\n")
        back = error(await call(ws, "grep", pattern=r"(ab)\1"))
        assert "backreference" in back and "linear time" in back
        look = error(await call(ws, "grep", pattern=r"a(?=b)"))
        assert "lookahead" in look

    async def test_a_models_glob_never_backtracks(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """A glob of many stars over a long name answers at once, in ``glob`` and as a
        ``grep`` filter."""
        store.write_text(SID, f"scratchpad/{'a' * 200}", "x\n")
        star = "a*" * 40 + "b"
        started = time.monotonic()
        assert "No files match" in (await call(ws, "glob", pattern=f"**/{star}")).content
        assert "No matches" in (await call(ws, "grep", pattern="x", glob=star)).content
        assert time.monotonic() - started < 5

    async def test_grep_stops_at_its_byte_budget_and_says_so(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Past ``GREP_MAX_BYTES`` a grep stops at a line boundary and tells the model."""
        monkeypatch.setattr(workspace_reads, "GREP_MAX_BYTES", 64)
        store.write_text(SID, "scratchpad/a.txt", "hit\n" * 10)
        store.write_text(SID, "scratchpad/b.txt", "hit\n" * 10)
        lines = (await call(ws, "grep", pattern="hit", path="scratchpad")).content.splitlines()
        assert lines[:10] == [f"scratchpad/a.txt:{n}:hit" for n in range(1, 11)]
        assert len([line for line in lines if line.endswith(":hit")]) == 16  # 64 bytes
        assert lines[-1].startswith("(stopped after searching 64 bytes")


class TestSymlinks:
    """A symlink inside the session (here to ``../artifacts``, the runtime's own files) is
    refused by every tool that names it, and skipped by every listing."""

    @pytest.fixture
    def linked(self, store: FilesystemSessionStore) -> Path:
        store.write_text(SID, "scratchpad/real.txt", "START END\n")
        store.write_text(SID, "artifacts/trail.json", '{"secret": "trail"}\n')
        base = store.root / SID
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
        message = error(await call(ws, tool, **arguments))
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
        store: FilesystemSessionStore,
        tool: str,
        arguments: dict[str, Any],
    ) -> None:
        """A 300-character name is an error result (not an infrastructure failure retried
        five times) in the agent's own paths, never the store's host path."""
        store.write_text(SID, "scratchpad/a.txt", "a")
        arguments.setdefault("new_string", "b") if tool == "edit_file" else None
        result = await ActivityEnvironment().run(
            getattr(ws, tool), WorkspaceToolInput(session_id=SID, tool=tool, arguments=arguments)
        )
        message = error(result)
        assert "longer than the file system allows" in message
        assert "scratchpad/nnn" in message
        assert str(store.root) not in message and str(store.root.resolve()) not in message
        assert not list((store.root / SID / "scratchpad").glob("n*"))

    async def test_a_store_fault_fails_the_activity_retryably_without_host_paths(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A full disk is retried by Temporal; what the history and the model get names the
        session path and the errno, not the host path."""

        def full(*_args: object) -> None:
            raise OSError(28, "No space left on device", str(store.root / SID / "x"))

        monkeypatch.setattr(os, "fsync", full)
        with pytest.raises(ApplicationError) as caught:
            await call(ws, "write_file", file_path="scratchpad/a.txt", content="x")
        assert caught.value.type == "StoreIOError" and not caught.value.non_retryable
        assert "scratchpad/a.txt" in caught.value.message and "ENOSPC" in caught.value.message
        assert str(store.root) not in caught.value.message
        assert caught.value.__cause__ is None

    async def test_an_unexpected_error_names_no_host_path(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """An error no boundary expected (a backend's own) still fails the activity without
        the store's folder in its message."""

        def broken(*_args: object) -> bytes:
            raise RuntimeError(f"backend lost {store.root / SID / 'scratchpad' / 'a.txt'}")

        monkeypatch.setattr(FilesystemSessionStore, "read_bytes", broken)
        with pytest.raises(ApplicationError) as caught:
            await call(ws, "read_file", file_path="scratchpad/a.txt")
        assert caught.value.type == "RuntimeError"
        assert str(store.root) not in caught.value.message
        assert "a.txt" in caught.value.message
