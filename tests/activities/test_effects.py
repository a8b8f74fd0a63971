"""activities/effects.py: every side effect at most once in effect, however often the
activity that makes it is attempted.

A retry is simulated the way Temporal makes one: the same activity input run again under
the same ``workflow_run_id`` and ``activity_id`` (so the same idempotency key), attempt 2.
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.testing import ActivityEnvironment

from archmax_temporal.activities import effects
from archmax_temporal.activities.effects import EFFECTS, Change, Effect, EffectJournal
from archmax_temporal.activities.folder_store import TEMPORARIES, FilesystemSessionStore
from archmax_temporal.activities.hook_executors import HookExecutorActivities
from archmax_temporal.activities.host_tools import (
    HostToolActivities,
    ToolContext,
    host_tool,
)
from archmax_temporal.activities.memory_store import MemorySessionStore
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.store import StoreActivities
from archmax_temporal.activities.store_errors import hide_host_paths
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows.contracts.host_tools import HostToolCall
from archmax_temporal.workflows.contracts.sandbox import CustomHookInput
from archmax_temporal.workflows.models import PersistTurnInput, Usage
from archmax_temporal.workflows.sandbox import SandboxLimits, SandboxRunInput
from archmax_temporal.workflows.spec import parse_spec
from archmax_temporal.workflows.workspace_tools import (
    FilePlacementInput,
    PlacedFile,
    WorkspaceToolInput,
)

SID = "effects-1"
SPEC = parse_spec({"states": {"s": {"triggers": {"manual": None}}}})


def attempt(number: int, *, activity_id: str = "7", run_id: str = "run-a") -> ActivityEnvironment:
    """An activity environment as Temporal runs attempt ``number`` of one scheduled call."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        workflow_run_id=run_id,
        activity_id=activity_id,
        attempt=number,
        current_attempt_scheduled_time=datetime.now(UTC),
    )
    return env


@pytest.fixture
def store(tmp_path: Path) -> FilesystemSessionStore:
    return FilesystemSessionStore(tmp_path / "sessions")


@pytest.fixture
def ws(store: FilesystemSessionStore, tmp_path: Path) -> WorkspaceActivities:
    (tmp_path / "authoring").mkdir()
    return WorkspaceActivities(store, tmp_path / "authoring")


def tool_input(tool: str, **arguments: Any) -> WorkspaceToolInput:
    return WorkspaceToolInput(session_id=SID, tool=tool, arguments=arguments)


class WorkerKilled(BaseException):
    """Stands in for a SIGKILL: nothing after the point it is raised runs (no ``except
    Exception`` catches it)."""


def crash_after_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker dies once the change is applied, before the activity completes."""

    def killed(tool: str, key: str) -> None:
        raise WorkerKilled(f"SIGKILL after {tool} {key}")

    monkeypatch.setattr(effects, "pause_after_effect", killed)


class TestWorkspaceTools:
    async def test_an_edit_retried_after_its_effect_is_applied_once(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``START END``, edit ``START`` → ``START X``, crash, retry: ``START X END`` (not
        ``START X X END``), and the retry answers what the first attempt would have."""
        store.write_text(SID, "scratchpad/doc.txt", "START END")
        call = tool_input(
            "edit_file", file_path="scratchpad/doc.txt", old_string="START", new_string="START X"
        )
        crash_after_effect(monkeypatch)
        with pytest.raises(WorkerKilled):
            await attempt(1).run(ws.edit_file, call)
        monkeypatch.undo()
        assert store.read_text(SID, "scratchpad/doc.txt") == "START X END"
        retried = await attempt(2).run(ws.edit_file, call)
        assert store.read_text(SID, "scratchpad/doc.txt") == "START X END"
        assert (retried.status, retried.content) == (
            "ok",
            "Replaced 1 occurrence in 'scratchpad/doc.txt'.",
        )

    async def test_a_crash_between_recording_and_applying_applies_on_the_retry(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The record comes first: a worker killed before it changed anything leaves the
        change recorded, and the retry applies exactly that change."""
        store.write_text(SID, "scratchpad/doc.txt", "START END")
        call = tool_input(
            "edit_file", file_path="scratchpad/doc.txt", old_string="START", new_string="START X"
        )

        def killed(self: EffectJournal, session_id: str, change: Change) -> None:
            raise WorkerKilled("SIGKILL before the rename")

        monkeypatch.setattr(EffectJournal, "apply", killed)
        with pytest.raises(WorkerKilled):
            await attempt(1).run(ws.edit_file, call)
        monkeypatch.undo()
        assert store.read_text(SID, "scratchpad/doc.txt") == "START END"
        entry = json.loads(store.read_text(SID, f"{EFFECTS}/run-a.7.json"))
        assert entry["writes"][0]["path"] == "scratchpad/doc.txt"
        assert entry["writes"][0]["content"] == "START X END"
        await attempt(2).run(ws.edit_file, call)
        assert store.read_text(SID, "scratchpad/doc.txt") == "START X END"

    @pytest.mark.parametrize(
        ("tool", "arguments", "answer", "files"),
        [
            (
                "move_file",
                {"source": "scratchpad/a.txt", "destination": "scratchpad/b.txt"},
                "Moved 'scratchpad/a.txt' to 'scratchpad/b.txt' (1 bytes).",
                {"b.txt": "A"},
            ),
            (
                "remove_file",
                {"file_path": "scratchpad/a.txt"},
                "Removed 'scratchpad/a.txt'.",
                {},
            ),
            (
                "copy_file",
                {
                    "source": "scratchpad/a.txt",
                    "destination": "scratchpad/c.txt",
                    "overwrite": True,
                },
                "Copied 'scratchpad/a.txt' to 'scratchpad/c.txt' (1 bytes).",
                {"a.txt": "A", "c.txt": "A"},
            ),
            (
                "write_file",
                {"file_path": "scratchpad/a.txt", "content": "new"},
                "Updated 'scratchpad/a.txt' (3 chars).",
                {"a.txt": "new", "c.txt": "old"},
            ),
        ],
    )
    async def test_every_side_effect_retried_after_a_crash_answers_as_the_first_time(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
        tool: str,
        arguments: dict[str, Any],
        answer: str,
        files: dict[str, str],
    ) -> None:
        """A retried move does not find its source gone; a retried removal does not find its
        file missing; each answers as the first attempt would, the files as after one call."""
        store.write_text(SID, "scratchpad/a.txt", "A")
        store.write_text(SID, "scratchpad/c.txt", "old")
        call = tool_input(tool, **arguments)
        crash_after_effect(monkeypatch)
        with pytest.raises(WorkerKilled):
            await attempt(1).run(getattr(ws, tool), call)
        monkeypatch.undo()
        retried = await attempt(2).run(getattr(ws, tool), call)
        assert (retried.status, retried.content) == ("ok", answer)
        pad = store.root / SID / "scratchpad"
        assert {p.name: p.read_text() for p in pad.iterdir()} == {"c.txt": "old", **files}

    async def test_another_call_is_another_effect(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """Two scheduled calls (two activity ids) are two edits: the journal never merges
        calls, it only makes one call's attempts one."""
        store.write_text(SID, "scratchpad/doc.txt", "START END")
        call = tool_input(
            "edit_file", file_path="scratchpad/doc.txt", old_string="START", new_string="START X"
        )
        await attempt(1, activity_id="7").run(ws.edit_file, call)
        await attempt(1, activity_id="8").run(ws.edit_file, call)
        assert store.read_text(SID, "scratchpad/doc.txt") == "START X X END"

    async def test_a_refused_call_records_nothing(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        result = await attempt(1).run(
            ws.remove_file, tool_input("remove_file", file_path="scratchpad/none.txt")
        )
        assert result.status == "error"
        assert not store.exists(SID, EFFECTS)

    async def test_the_journal_and_temporaries_are_invisible_to_the_agent(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        await attempt(1).run(
            ws.write_file, tool_input("write_file", file_path="scratchpad/a.txt", content="x")
        )
        (store.root / SID / TEMPORARIES / "w-stale.tmp").write_text("half")
        assert store.exists(SID, f"{EFFECTS}/run-a.7.json")
        listing = await ws.ls(tool_input("ls"))
        assert listing.content.splitlines() == ["scratchpad/"]
        found = await ws.glob(tool_input("glob", pattern="**"))
        assert found.content == "scratchpad/a.txt"
        searched = await ws.grep(tool_input("grep", pattern="x|half|run-a"))
        assert searched.content == "scratchpad/a.txt:1:x"
        refused = await ws.read_file(tool_input("read_file", file_path=f"{EFFECTS}/run-a.7.json"))
        assert refused.status == "error" and "runtime-internal" in refused.content

    async def test_a_retry_sweeps_the_temporaries_of_the_attempt_that_died(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """A worker killed inside an atomic write leaves a temporary file; the next attempt
        removes every one older than itself, and no listing ever showed it."""
        store.write_text(SID, "scratchpad/a.txt", "A")
        stale = store.root / SID / TEMPORARIES / "w-killed.tmp"
        stale.write_text("half-written")
        call = tool_input("write_file", file_path="scratchpad/a.txt", content="B")
        await attempt(1).run(ws.write_file, call)
        assert stale.exists()  # a first attempt leaves young temporaries alone
        time.sleep(0.01)
        await attempt(2, activity_id="8").run(ws.write_file, call)
        assert not stale.exists()
        assert [p.name for p in (store.root / SID / TEMPORARIES).iterdir()] == []

    async def test_a_placement_retried_places_under_the_same_names(
        self,
        ws: WorkspaceActivities,
        store: FilesystemSessionStore,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A retried placement writes ``report.pdf`` again, not ``report-1.pdf`` beside it."""
        placement = FilePlacementInput(
            session_id=SID, files={"doc": PlacedFile(name="report.txt", content="R")}
        )
        crash_after_effect(monkeypatch)
        with pytest.raises(WorkerKilled):
            await attempt(1).run(ws.place_files, placement)
        monkeypatch.undo()
        placed = await attempt(2).run(ws.place_files, placement)
        assert placed.paths == {"doc": "scratchpad/attachments/report.txt"}
        assert [p.name for p in (store.root / SID / "scratchpad" / "attachments").iterdir()] == [
            "report.txt"
        ]

    def test_a_memory_store_journals_too(self) -> None:
        """The journal goes through the store protocol: any store can keep it."""
        store = MemorySessionStore()
        journal = EffectJournal(store)
        change = Change(writes=(("scratchpad/a.bin", b"\x00\xff"),), removes=("scratchpad/b",))
        store.write_text(SID, "scratchpad/b", "gone soon")
        assert journal.once(SID, "k.1", "t", "req", lambda: Effect("done", change)) == "done"

        def never() -> Effect:
            raise AssertionError("a recorded call is not planned again")

        assert journal.once(SID, "k.1", "t", "req", never) == "done"
        assert store.read_bytes(SID, "scratchpad/a.bin") == b"\x00\xff"
        assert not store.exists(SID, "scratchpad/b")


class TestPruning:
    def test_a_turns_prune_reads_only_entries_it_has_not_seen(self) -> None:
        """Another run's young entries stay for a day; each turn's prune reads them once per
        process, not every turn (requests per turn stay flat)."""
        reads: list[str] = []

        class Counting(MemorySessionStore):
            def read_text(self, session_id: str, path: str) -> str:
                reads.append(path)
                return super().read_text(session_id, path)

        journal = EffectJournal(Counting())
        for n in range(3):
            journal.record(SID, f"old-run.{n}", "write_file", "r", Effect("ok"))
        assert journal.prune(SID, "run-1") == 0 and len(reads) == 3
        for turn in range(5):
            journal.record(SID, f"run-1.{turn}", "write_file", "r", Effect("ok"))
            assert journal.prune(SID, "run-1") == 1
        assert len(reads) == 3
        assert journal.prune(SID, "run-1", now=time.time() + 2 * 86400) == 3

    async def test_a_turns_end_prunes_its_runs_entries_and_old_ones(
        self, store: FilesystemSessionStore, tmp_path: Path
    ) -> None:
        """``persist_turn`` removes the entries of its own run (all its calls completed) and
        any older than a day; a young entry of another run (a caller's placement) stays."""
        journal = EffectJournal(store)
        journal.record(SID, "run-a.3", "write_file", "r", Effect("ok"))
        journal.record(SID, "run-b.5", "place_files", "r", Effect("ok"))
        old = journal.record(SID, "run-c.1", "write_file", "r", Effect("ok"))
        store.write_text(
            SID,
            f"{EFFECTS}/run-c.1.json",
            old.model_copy(update={"recorded_at": time.time() - 2 * 86400}).model_dump_json(),
        )
        persist = StoreActivities(store)
        turn = PersistTurnInput(
            session_id=SID,
            workflow="w",
            spec_hash="h",
            spec=SPEC,
            state="s",
            status="completed",
            trail=[],
            variables={},
            usage=Usage(),
        )
        await attempt(1, run_id="run-a").run(persist.persist_turn, turn)
        left = sorted(e.name for e in store.list_dir(SID, EFFECTS))
        assert left == ["run-b.5.json"]


class Refund(BaseModel):
    order_id: str


class TestHostCode:
    async def test_a_host_tool_is_told_a_key_stable_across_retries(
        self, store: FilesystemSessionStore
    ) -> None:
        """The second parameter is the call's context: the same key on every attempt; once
        the tool returned, a retry answers from the journal without calling it again."""
        seen: list[ToolContext] = []

        def refund(query: Refund, context: ToolContext) -> str:
            seen.append(context)
            return f"refunded {query.order_id}"

        def legacy(query: Refund) -> str:
            return f"looked up {query.order_id}"

        tools = HostToolActivities([host_tool(refund), host_tool(legacy)], store)
        call = HostToolCall(session_id=SID, tool="refund", arguments={"order_id": "ORD-1"})
        first = await attempt(1).run(tools.run, call)
        second = await attempt(2).run(tools.run, call)
        assert first.content == second.content == "refunded ORD-1"
        assert [(c.idempotency_key, c.attempt) for c in seen] == [("run-a.7", 1)]
        again = await attempt(1, activity_id="9").run(tools.run, call)
        assert again.content == "refunded ORD-1" and seen[-1].idempotency_key == "run-a.9"
        old = HostToolCall(session_id=SID, tool="legacy", arguments={"order_id": "ORD-2"})
        assert (await attempt(1, activity_id="10").run(tools.run, old)).content == (
            "looked up ORD-2"
        )

    async def test_a_host_tool_retried_while_it_ran_gets_the_same_key(
        self, store: FilesystemSessionStore
    ) -> None:
        """A crash before the tool returned records nothing: the retry calls it again, with
        the same key, so the tool itself can make the second call harmless."""
        keys: list[str] = []

        def charge(query: Refund, context: ToolContext) -> str:
            keys.append(context.idempotency_key)
            if len(keys) == 1:
                raise WorkerKilled("SIGKILL mid-call")
            return "charged"

        tools = HostToolActivities([host_tool(charge)], store)
        call = HostToolCall(session_id=SID, tool="charge", arguments={"order_id": "ORD-1"})
        with pytest.raises(WorkerKilled):
            await attempt(1).run(tools.run, call)
        assert (await attempt(2).run(tools.run, call)).content == "charged"
        assert keys == ["run-a.7", "run-a.7"]

    async def test_a_host_tools_error_hides_host_paths(
        self, store: FilesystemSessionStore, tmp_path: Path
    ) -> None:
        def lookup(query: Refund) -> str:
            raise FileNotFoundError(2, "No such file", str(tmp_path / "secrets" / "orders.db"))

        tools = HostToolActivities([host_tool(lookup)], store, [tmp_path])
        call = HostToolCall(session_id=SID, tool="lookup", arguments={"order_id": "ORD-1"})
        result = await tools.run(call)
        assert result.status == "error"
        assert str(tmp_path) not in result.content
        assert "orders.db" in result.content

    async def test_a_hook_executor_may_take_the_context_as_a_third_parameter(
        self, store: FilesystemSessionStore
    ) -> None:
        calls: list[tuple[Any, ...]] = []

        def webhook(config: Any, args: dict[str, Any], context: ToolContext) -> dict[str, str]:
            calls.append((config, context.idempotency_key))
            return {"verdict": "ok"}

        def plain(config: Any, args: dict[str, Any]) -> dict[str, str]:
            return {"verdict": "ok"}

        hooks = HookExecutorActivities({"webhook": webhook, "plain": plain}, store)
        call = CustomHookInput(session_id=SID, kind="webhook", config="https://h.example/x")
        assert (await attempt(1).run(hooks.run, call)).value == {"verdict": "ok"}
        assert (await attempt(2).run(hooks.run, call)).value == {"verdict": "ok"}
        assert calls == [("https://h.example/x", "run-a.7")]
        other = CustomHookInput(session_id=SID, kind="plain")
        assert (await attempt(1, activity_id="8").run(hooks.run, other)).error is None

    @pytest.mark.parametrize(
        ("text", "shown"),
        [
            ("open '/srv/store/s-1/x.txt' failed", "open '…/x.txt' failed"),
            ('File "/usr/lib/python3/x.py", line 3', 'File "…/x.py", line 3'),
            ("see https://hooks.example/a/b for more", "see https://hooks.example/a/b for more"),
            ("C:\\Users\\me\\a.txt is locked", "…/a.txt is locked"),
            ("ratio 3/4 and a/b/c", "ratio 3/4 and a/b/c"),
        ],
    )
    def test_hide_host_paths(self, text: str, shown: str) -> None:
        assert hide_host_paths(text) == shown

    def test_hide_host_paths_labels_known_roots(self, tmp_path: Path) -> None:
        store = tmp_path / "store"
        assert hide_host_paths(f"{store}/s-1 is full", [store]) == "<store>/s-1 is full"


class TestSandboxBridge:
    async def test_a_retried_run_replays_its_writes_instead_of_applying_them_again(
        self, ws: WorkspaceActivities, store: FilesystemSessionStore
    ) -> None:
        """A hook's ``tools.editFile`` made by a run whose worker died is journaled under the
        run's key and the call's position: the retried run edits nothing twice."""
        store.write_text(SID, "scratchpad/doc.txt", "START END")
        script = (
            "export default async () => {"
            " await tools.editFile({file_path: 'scratchpad/doc.txt',"
            "   old_string: 'START', new_string: 'START X'});"
            " return ok(); }"
        )
        run = SandboxRunInput(
            session_id=SID,
            label="hooks/edit.js",
            kind="hook",
            source=script,
            spec=SPEC,
            state="s",
            limits=SandboxLimits(timeout_ms=5000),
        )
        sandbox = SandboxActivities(ws)
        first = await attempt(1).run(sandbox.run, run)
        second = await attempt(2).run(sandbox.run, run)
        assert [c.status for c in first.calls] == [c.status for c in second.calls] == ["ok"]
        assert store.read_text(SID, "scratchpad/doc.txt") == "START X END"
        assert store.exists(SID, f"{EFFECTS}/run-a.7.0.json")


def test_the_pause_hook_is_inert_unless_it_names_the_tool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    monkeypatch.setenv(effects.PAUSE_AFTER_EFFECT_ENV, f"move_file={marker}")
    effects.pause_after_effect("edit_file", "k")
    monkeypatch.delenv(effects.PAUSE_AFTER_EFFECT_ENV)
    effects.pause_after_effect("move_file", "k")
    assert not marker.exists()
