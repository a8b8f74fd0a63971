"""``archmax repair`` / ``agent.sessions.repair``: a damaged conversation log is rebuilt from
the workflow history, where every message is once, and the session goes on.

A session takes a few turns; the newest segment of its log (``checkpoints/transcript/``) is
then truncated mid-line or has a line's content corrupted, or every segment is deleted. The
next turn on a worker new to the session (nothing cached, as after a failover) is rejected
with ``TranscriptLogDiverged`` naming the command; after the repair the log reads back, byte
for byte, as the log from before the damage, and the next turn works. One session also
continues as new and closes idle between turns (the history of several runs and two
executions of one id), and is repaired by the command as a process. The rules the rebuild
applies (a reset rewinding the log, a history that cannot vouch for it) are held to the
store's own writer below.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Literal

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType, ResetReapplyType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus

from archmax_temporal.activities.folder_store import FilesystemSessionStore, session_folder
from archmax_temporal.activities.transcript_log import (
    PROMPTS_DIR,
    SEGMENTS_DIR,
    TranscriptLogs,
    log_bytes,
)
from archmax_temporal.client.host import Agent
from archmax_temporal.client.repair import RecordedCall, RunStarted, rebuild, runs_query
from archmax_temporal.workflows.errors import (
    SessionNotResumableError,
    TranscriptLogUnrecoverableError,
)
from archmax_temporal.workflows.models import Message, ModelCallInput, TranscriptLog
from archmax_temporal.workflows.transcript import LOG_DIVERGED, PROMPT_MISSING
from tests.support.activity_events import failed_activities
from tests.support.agents import Scripted, running_agent, write_workflow

READER = """
title: Reader
states:
  read:
    triggers: { manual: {} }
    instructions: Read the file when asked, then say what it holds.
    tools:
      allow: [read_file]
"""

BOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "read_file"}, "reply": {"content": "It holds x."}},
            {"when": {"last_user": "/slowly/"}, "reply": {"content": "..."}, "delay_ms": 4000},
        ],
        "default": {
            "tool_calls": [{"name": "read_file", "arguments": {"file_path": "scratchpad/data.txt"}}]
        },
    }
)

Damage = Literal["truncated", "corrupted", "deleted"]


def _segments(store: Path, sid: str) -> list[Path]:
    folder = session_folder(store, sid) / SEGMENTS_DIR
    return sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime_ns) if folder.exists() else []


def _tip(store: Path, sid: str) -> Path:
    """The segment written last: the end of the session's current branch."""
    return _segments(store, sid)[-1]


def _log(store: Path, sid: str) -> bytes:
    """The conversation the newest segment ends, read back as a worker new to the session
    reads it, in the one-line-a-message form (:func:`log_bytes`)."""
    lines = _tip(store, sid).read_bytes().splitlines()
    end = json.loads(lines[-1])
    where = TranscriptLog(base=end["n"] + 1, base_hash=end["h"])
    messages, digests = TranscriptLogs(FilesystemSessionStore(store)).chain(sid, where)
    return log_bytes(messages, digests)


def _damage(store: Path, sid: str, how: Damage) -> None:
    if how == "deleted":
        for segment in _segments(store, sid):
            segment.unlink()
        return
    path = _tip(store, sid)
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: data.index(b"\n", len(data) // 2) - 5])  # mid-line
    else:  # valid JSON, a message that is not the one its digest chains
        lines = data.splitlines(keepends=True)
        entry = json.loads(lines[1])
        entry["m"]["content"] = "edited"
        lines[1] = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        path.write_bytes(b"".join(lines))


async def _turns(agent: Agent, sid: str, first: int, count: int) -> None:
    for index in range(first, first + count):
        outcome = await agent.workflow.send(sid, f"read it, turn {index}")
        assert (outcome.kind, outcome.reply) == ("completed", "It holds x."), outcome.rejected


def _expect_rejected_naming_repair(reason: str | None, sid: str) -> None:
    assert reason is not None
    assert f"archmax repair {sid}" in reason and "agent.sessions.repair" in reason


class TestRepair:
    @pytest.mark.parametrize("how", ["truncated", "corrupted", "deleted"])
    async def test_a_damaged_log_is_rebuilt_byte_for_byte_and_the_session_goes_on(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path, how: Damage
    ) -> None:
        write_workflow(tmp_path, "reader", READER)
        store = tmp_path / "sessions"
        sid = f"repair-{how}" if how != "deleted" else 'repair-it\'s "deleted" \\'  # quoted
        async with running_agent(
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store
        ) as agent:
            await agent.sessions.seed(sid, {"scratchpad/data.txt": "x" * 300})
            await _turns(agent, sid, 0, 3)
            before = _log(store, sid)
            assert before.count(b"\n") == 12  # four messages a turn (each call logs its answer)
            segments = _segments(store, sid)
            healthy = await agent.sessions.repair(sid)
            assert (healthy.log, healthy.messages, healthy.messages_rebuilt) == ("fine", 12, 0)
            assert healthy.prompts_rebuilt == 0 and _segments(store, sid) == segments
            _damage(store, sid, how)

        async with running_agent(  # a worker new to the session: nothing cached
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store
        ) as agent:
            refused = await agent.workflow.send(sid, "read it, turn 3")
            assert refused.kind == "rejected"
            _expect_rejected_naming_repair(refused.rejected, sid)

            report = await agent.sessions.repair(sid)
            assert report.log == ("missing" if how == "deleted" else "damaged")
            assert (report.messages, report.messages_rebuilt) == (12, 12)
            assert _log(store, sid) == before

            await _turns(agent, sid, 4, 1)
            after = _log(store, sid)
            assert after.startswith(before) and after.count(b"\n") == 17  # the rejected too
            again = await agent.sessions.repair(sid)
            assert (again.log, again.messages) == ("fine", 17)
            view = await agent.sessions.view(sid)
        contents = [m.content for m in view.transcript if m.role == "user"]
        assert contents == [f"read it, turn {n}" for n in range(5)]

    async def test_lost_prompts_are_rebuilt_too(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The system prompt a run sent once and named after: deleted, rebuilt from the call
        that carried it (the tool list, which every call names by digest alone, is not in the
        history: the next call that needs it is sent it). Deleted again, the next call of the
        same run (on a worker new to the session, which has not kept them) fails as
        PromptMissing and is sent again with the texts: the session needs no repair for them,
        and keeps them again."""
        write_workflow(tmp_path, "reader", READER)
        store = tmp_path / "sessions"
        sid = "repair-prompts"
        async with running_agent(
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store, idle_close=None
        ) as agent:
            await agent.sessions.seed(sid, {"scratchpad/data.txt": "x"})
            await _turns(agent, sid, 0, 1)
            prompts = session_folder(store, sid) / PROMPTS_DIR
            kept = {p.name: p.read_bytes() for p in prompts.iterdir()}
            assert len(kept) == 2  # the system prompt and the tool list
            for prompt in prompts.iterdir():
                prompt.unlink()
        async with running_agent(  # a worker new to the session: nothing cached
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store, idle_close=None
        ) as agent:
            report = await agent.sessions.repair(sid)
            assert (report.log, report.prompts, report.prompts_rebuilt) == ("fine", 1, 1)
            (rebuilt,) = prompts.iterdir()
            assert kept[rebuilt.name] == rebuilt.read_bytes()
            assert not rebuilt.read_bytes().startswith(b"[")  # the system prompt, not the list
            for prompt in prompts.iterdir():
                prompt.unlink()
            await _turns(agent, sid, 1, 1)
            history = await agent.handle(sid).fetch_history()
        failures = failed_activities(history.events)
        assert [f.application_failure_info.type for f in failures] == [PROMPT_MISSING]
        assert {p.name: p.read_bytes() for p in prompts.iterdir()} == kept

    async def test_a_session_mid_turn_is_not_repaired(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A turn in flight writes the same log: the repair is refused, typed, until it
        settles, and then runs."""
        write_workflow(tmp_path, "reader", READER)
        sid = "repair-busy"
        async with running_agent(
            client, task_queue, tmp_path, "reader", scripted(BOOK), idle_close=None
        ) as agent:
            await agent.sessions.seed(sid, {"scratchpad/data.txt": "x"})
            await _turns(agent, sid, 0, 1)
            turn = asyncio.create_task(agent.workflow.send(sid, "answer slowly"))
            deadline = time.monotonic() + 20
            while not (await agent.handle(sid).describe()).raw_description.pending_activities:
                assert time.monotonic() < deadline and not turn.done()
                await asyncio.sleep(0.05)
            with pytest.raises(SessionNotResumableError, match="mid-turn"):
                await agent.sessions.repair(sid)
            assert (await turn).kind == "completed"
            assert (await agent.sessions.repair(sid)).log == "fine"

    async def test_the_command_repairs_a_session_of_several_runs_and_executions(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Two model calls a run (each turn continues as new) and an idle close between
        turns (the next turn is a new execution of the id, from the checkpoint): the log is
        read back from every run of both executions by ``archmax repair`` as a process."""
        write_workflow(tmp_path, "reader", READER)
        store = tmp_path / "sessions"
        sid = 'repair-chain "it\'s"'  # quotes: the runs are still found in visibility
        async with running_agent(
            client,
            task_queue,
            tmp_path,
            "reader",
            scripted(BOOK),
            store=store,
            idle_close=timedelta(seconds=2),
            model_calls_per_run=2,
        ) as agent:
            await agent.sessions.seed(sid, {"scratchpad/data.txt": "x" * 50})
            await _turns(agent, sid, 0, 2)
            deadline = time.monotonic() + 30
            while (await agent.handle(sid).describe()).status != WorkflowExecutionStatus.COMPLETED:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.2)
            await _turns(agent, sid, 2, 2)  # reopened from the checkpoint
            before = _log(store, sid)
            _damage(store, sid, "truncated")
        async with running_agent(  # a worker new to the session: nothing cached
            client,
            task_queue,
            tmp_path,
            "reader",
            scripted(BOOK),
            store=store,
            idle_close=timedelta(seconds=2),
            model_calls_per_run=2,
        ) as agent:
            refused = await agent.workflow.send(sid, "read it, turn 4")
            _expect_rejected_naming_repair(refused.rejected, sid)
            query = runs_query(sid)
            assert query is not None and "STARTS_WITH" in query
            runs = [w async for w in client.list_workflows(query) if w.id == sid]
            env = {
                **os.environ,
                "TEMPORAL_ADDRESS": client.service_client.config.target_host,
                "ARCHMAX_TASK_QUEUE": task_queue,
                "ARCHMAX_ROOT": str(tmp_path),
                "ARCHMAX_STORE": str(store),
            }
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "archmax_temporal",
                "repair",
                sid,
                "--json",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(process.communicate(), 120)
            assert process.returncode == 0, err.decode()
            report = json.loads(out)
            assert report["log"] == "damaged" and report["messages"] == 16
            assert report["runs"] == len(runs) >= 4
            assert _log(store, sid) == before
            await _turns(agent, sid, 5, 1)
            assert _log(store, sid).startswith(before)

    async def test_a_reset_session_is_rebuilt_as_the_reset_left_it(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """An operator resets the session to the end of its first turn (the later firings not
        reapplied): the log still holds the rewound turns, which is fine as it stands; the
        next turn cuts them off, and a repair after damage rebuilds that log (the reset run's
        copy of the first turn's calls is not applied twice)."""
        write_workflow(tmp_path, "reader", READER)
        store = tmp_path / "sessions"
        sid = "repair-reset"
        async with running_agent(
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store, idle_close=None
        ) as agent:
            await agent.sessions.seed(sid, {"scratchpad/data.txt": "x"})
            await _turns(agent, sid, 0, 3)
            whole = _log(store, sid)
            described = await agent.handle(sid).describe()
            events = (await agent.handle(sid).fetch_history()).events
            first_turn = next(
                e.event_id
                for e in events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
            )
            point = next(
                e.event_id
                for e in events
                if e.event_id > first_turn
                and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            )
            await client.workflow_service.reset_workflow_execution(
                ResetWorkflowExecutionRequest(
                    namespace=client.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=sid, run_id=described.run_id),
                    reason="rewind to the first turn",
                    workflow_task_finish_event_id=point,
                    request_id=str(uuid.uuid4()),
                    reset_reapply_type=ResetReapplyType.RESET_REAPPLY_TYPE_NONE,
                    reset_reapply_exclude_types=[
                        ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL,
                        ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
                    ],
                )
            )
            assert (await agent.handle(sid).describe()).run_id != described.run_id
            rewound = await agent.sessions.repair(sid)
            assert (rewound.log, rewound.messages) == ("fine", 12)
            assert _log(store, sid) == whole and rewound.runs == 2
            await _turns(agent, sid, 5, 1)
            before = _log(store, sid)
            assert before.count(b"\n") == 8 and before != whole  # the branch after turn 0
            assert before.splitlines()[:4] == whole.splitlines()[:4]
            _damage(store, sid, "truncated")
        async with running_agent(  # a worker new to the session: nothing cached
            client, task_queue, tmp_path, "reader", scripted(BOOK), store=store, idle_close=None
        ) as agent:
            refused = await agent.workflow.send(sid, "read it, turn 6")
            _expect_rejected_naming_repair(refused.rejected, sid)
            report = await agent.sessions.repair(sid)
            assert (report.log, report.messages) == ("damaged", 8)
            assert _log(store, sid) == before
            await _turns(agent, sid, 7, 1)
            view = await agent.sessions.view(sid)
        contents = [m.content for m in view.transcript if m.role == "user"]
        assert contents == [f"read it, turn {n}" for n in (0, 5, 6, 7)]


def _said(*texts: str) -> list[Message]:
    return [Message(role="user", content=text) for text in texts]


def _call(n: int, log: TranscriptLog, messages: list[Message]) -> RecordedCall:
    call = ModelCallInput(session_id="s", state="a", messages=messages, log=log)
    return RecordedCall("run", n, call)


class TestRebuild:
    """The rebuild applies a history's calls as the model activity applied them."""

    def test_a_reset_rewinds_the_log_as_the_activity_did(self, tmp_path: Path) -> None:
        """Calls, then a reset that took the session back to its first call's end and on
        along another branch: the rebuilt log is the one the activity wrote."""
        logs = TranscriptLogs(FilesystemSessionStore(tmp_path))
        recorded: list[RunStarted | RecordedCall] = [RunStarted("run", None)]
        base = TranscriptLog()
        for n, texts in enumerate([("one", "two"), ("three",), ("four", "five")]):
            recorded.append(_call(n, base, _said(*texts)))
            conversation, end = logs.extend("s", base, _said(*texts))
            base = TranscriptLog(base=len(conversation), base_hash=end)
            if n == 0:
                first = base
        rewound = _said("three, again", "six")
        recorded.append(_call(9, first, rewound))
        logs.extend("s", first, rewound)
        rebuilt = rebuild("s", recorded)
        assert [m.content for m in rebuilt.messages] == ["one", "two", "three, again", "six"]
        where = TranscriptLog(base=len(rebuilt.messages), base_hash=rebuilt.digests[-1])
        assert (rebuilt.messages, rebuilt.digests) == logs.chain("s", where)

    def test_a_call_that_found_the_log_diverged_wrote_nothing(self) -> None:
        first = _call(1, TranscriptLog(), _said("one"))
        rebuilt = rebuild("s", [first])
        base = TranscriptLog(base=1, base_hash=rebuilt.digests[0])
        failed = RecordedCall("run", 2, _call(2, base, _said("two")).call, failure=LOG_DIVERGED)
        again = rebuild("s", [first, failed, _call(3, base, _said("two", "three"))])
        assert [m.content for m in again.messages] == ["one", "two", "three"]
        assert rebuild("s", [first, failed]).messages == rebuilt.messages

    def test_a_history_that_cannot_vouch_for_the_log_writes_nothing(self) -> None:
        """A run starting past what earlier runs rebuild (they are gone), or a call whose
        base digest is not the rebuilt one's, is a typed refusal."""
        with pytest.raises(TranscriptLogUnrecoverableError, match="retention"):
            rebuild("s", [RunStarted("later", TranscriptLog(base=3, base_hash="f" * 64))])
        first = _call(1, TranscriptLog(), _said("one"))
        other = _call(2, TranscriptLog(base=1, base_hash="0" * 64), _said("two"))
        with pytest.raises(TranscriptLogUnrecoverableError, match="does not rebuild"):
            rebuild("s", [first, other])
