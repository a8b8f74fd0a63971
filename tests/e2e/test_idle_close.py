"""Idle finished sessions release their run (``ARCHMAX_IDLE_CLOSE``): the state is
checkpointed in the store, the run completes, and the next firing starts a new run from the
checkpoint, indistinguishable to the host from a session that stayed open. Parked sessions
stay open."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import (
    Client,
    DescribeWorkflowInput,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateWithStartInput,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateHandle,
)

from archmax_temporal.activities.folder_store import FilesystemSessionStore, session_folder
from archmax_temporal.activities.store import CHECKPOINT_FILE, read_checkpoint
from archmax_temporal.client.config import RuntimeConfig, idle_close_from
from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.errors import (
    ConfigurationError,
    SessionNotAwaitingInputError,
    SessionNotParkedError,
)
from archmax_temporal.workflows.models import Outcome
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.golden import replayer

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Answer; wait for the customer when asked to.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "name": "park",
                "when": {"last_user": "/hold on/"},
                "reply": {
                    "content": "Waiting.",
                    "tool_calls": [call("archmax_wait", reason="the customer")],
                },
            },
            {
                "name": "noted",
                "when": {"last_tool": "archmax_set_variables"},
                "reply": {"content": "Kept."},
            },
            {
                "name": "note",
                "when": {"last_user": "/remember/"},
                "reply": {
                    "content": "Noted.",
                    "tool_calls": [call("archmax_set_variables", variables={"topic": "refund"})],
                },
            },
            {"name": "answer", "when": {}, "reply": {"content": "Answered."}},
        ]
    }
)

IDLE = timedelta(seconds=2)


async def _closed(agent: Agent, sid: str, *, within: float = 20.0) -> str:
    """Wait until the session's latest run has completed; its run id."""
    deadline = time.monotonic() + within
    while True:
        described = await agent.handle(sid).describe()
        if described.status == WorkflowExecutionStatus.COMPLETED:
            return described.run_id
        assert time.monotonic() < deadline, f"{sid} still {described.status}"
        await asyncio.sleep(0.2)


def _shape(outcome: Outcome) -> tuple[object, ...]:
    """What a host reads of an outcome, session id aside."""
    return (
        outcome.kind,
        outcome.disposition,
        outcome.state,
        outcome.reply,
        {k: v.value for k, v in outcome.variables.items()},
        [(t.to, t.kind, t.reason) for t in outcome.trail],
        outcome.trail_offset,
        outcome.usage,
    )


class TestIdleClose:
    async def test_a_closed_session_reopens_indistinguishably(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Two sessions take the same firings; one closes idle between each, one stays
        open: outcomes, summaries, transcripts, trails, variables, files and usage match, the
        closed one's runs are Completed in between, and each history replays."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        store = tmp_path / "sessions"
        firings = [
            ("Hello", {"customer": "c-1"}),
            ("Please remember this", {}),
            ("And one more question", {}),
        ]
        async with (
            running_agent(
                client, task_queue, tmp_path, "desk", server, store=store, idle_close=IDLE
            ) as closing,
            running_agent(
                client,
                task_queue,
                tmp_path,
                "desk",
                server,
                store=store,
                worker=False,
                idle_close=None,
            ) as staying,
        ):
            closing_outcomes: list[Outcome] = []
            staying_outcomes: list[Outcome] = []
            runs: list[str] = []
            for index, (message, variables) in enumerate(firings):
                files = {"invoice": ("invoice.txt", "total 12")} if index == 0 else None
                closing_outcomes.append(
                    await closing.workflow.send("idle-a", message, variables=variables, files=files)
                )
                staying_outcomes.append(
                    await staying.workflow.send("open-a", message, variables=variables, files=files)
                )
                runs.append(await _closed(closing, "idle-a"))
                closed_summary = await closing.sessions.get("idle-a")
                assert closed_summary.status == "completed"
            open_described = await staying.handle("open-a").describe()
            closed_view = await closing.sessions.view("idle-a")
            open_view = await staying.sessions.view("open-a")
            closed_summary = await closing.sessions.get("idle-a")
            open_summary = await staying.sessions.get("open-a")
            listed = {s.session_id: s for s in await closing.sessions.list()}
            resolved = await closing.workflow.resolve_session(session_id="idle-a")
            histories = [
                await closing.client.get_workflow_handle("idle-a", run_id=r).fetch_history()
                for r in runs
            ]
        assert [_shape(o) for o in closing_outcomes] == [_shape(o) for o in staying_outcomes]
        assert len(set(runs)) == 3  # one run per turn, each closed idle
        assert open_described.status == WorkflowExecutionStatus.RUNNING
        strip = {"session_id"}
        assert closed_summary.model_dump(exclude=strip) == open_summary.model_dump(exclude=strip)
        assert closed_summary.variables["topic"].value == "refund"
        assert closed_summary.variables["invoice"].value == open_summary.variables["invoice"].value
        assert (store / "idle-a" / "scratchpad" / "attachments" / "invoice.txt").is_file()
        assert [(m.role, m.content) for m in closed_view.transcript] == [
            (m.role, m.content) for m in open_view.transcript
        ]
        assert [(t.to, t.kind, t.reason) for t in closed_view.trail] == [
            (t.to, t.kind, t.reason) for t in open_view.trail
        ]
        assert closed_summary.usage.calls == 4 and closed_summary.turns == 3
        assert listed["idle-a"].status == "completed" and "open-a" in listed
        assert resolved.disposition == "turn"
        checkpoint = read_checkpoint(FilesystemSessionStore(store), "idle-a")
        assert checkpoint is not None and checkpoint.run_id == runs[-1]
        assert (session_folder(store, "idle-a") / CHECKPOINT_FILE).is_file()
        for history in histories:
            replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
            assert replayed.replay_failure is None

    async def test_a_parked_session_stays_open_and_a_closed_one_refuses_deliveries(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A park keeps its run open past the idle time; a delivery, decision or reply to a
        session whose run closed is refused with the open session's typed errors."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, tmp_path, "desk", server, idle_close=IDLE
        ) as agent:
            parked = await agent.workflow.send("idle-parked", "hold on please")
            done = await agent.workflow.send("idle-done", "Hello")
            await _closed(agent, "idle-done")
            still = await agent.handle("idle-parked").describe()
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver("idle-done", trigger="email")
            with pytest.raises(SessionNotParkedError):
                await agent.workflow.decide("idle-done", to="intake")
            with pytest.raises(SessionNotParkedError):
                await agent.workflow.reply("idle-done", "hi")
            delivered = await agent.workflow.deliver("idle-parked", trigger="email")
        assert (parked.kind, done.kind) == ("parked", "completed")
        assert still.status == WorkflowExecutionStatus.RUNNING
        assert delivered.disposition == "deliver"

    async def test_a_retried_firing_after_the_close_gets_its_first_outcome(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The idempotency key of a firing answered before the run closed still names it in
        the next run: the retry returns the first outcome and runs nothing."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, tmp_path, "desk", server, idle_close=IDLE
        ) as agent:
            first = await agent.workflow.send("idle-key", "Hello", idempotency_key="k-1")
            await _closed(agent, "idle-key")
            calls = len(server.requests)
            again = await agent.workflow.send("idle-key", "Hello", idempotency_key="k-1")
        assert again == first
        assert len(server.requests) == calls

    async def test_a_watched_firing_on_a_closed_session_hears_its_new_runs_events(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``on_event`` on a firing that reopens a session follows the run it starts: the
        turn's events arrive, through its end."""
        write_workflow(tmp_path, "desk", DESK)
        server = scripted(PLAYBOOK)
        heard: list[SessionEvent] = []
        async with running_agent(
            client, task_queue, tmp_path, "desk", server, idle_close=IDLE
        ) as agent:
            await agent.workflow.send("idle-watch", "Hello")
            await _closed(agent, "idle-watch")
            reopened = await agent.workflow.send("idle-watch", "Again", on_event=heard.append)
        assert reopened.kind == "completed"
        kinds = [e.type for e in heard]
        assert "turn-start" in kinds and kinds[-1] == "turn-end"


class CountingCalls(Interceptor):
    """Counts the client's describe and update-with-start calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Counting(next, self.calls)


class _Counting(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, calls: Counter[str]) -> None:
        super().__init__(next)
        self.calls = calls

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        self.calls["describe"] += 1
        return await super().describe_workflow(input)

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle[Any]:
        self.calls["update-with-start"] += 1
        return await super().start_update_with_start_workflow(input)


async def test_a_firing_asks_temporal_first_only_when_the_run_closed(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A firing on a new or a running session is one update-with-start, with no describe
    before it; on a session whose run closed idle the start is refused (nothing applied), and
    the firing reopens the session from its checkpoint, its variables kept."""
    write_workflow(tmp_path, "desk", DESK)
    server = scripted(PLAYBOOK)
    counting = CountingCalls()
    config = client.config()
    config["interceptors"] = [counting]
    counted = Client(**config)
    async with running_agent(
        counted, task_queue, tmp_path, "desk", server, idle_close=IDLE
    ) as agent:
        seen: list[Counter[str]] = []
        for message in ("Hello", "Please remember this"):
            counting.calls.clear()
            await agent.workflow.send("idle-count", message)
            seen.append(Counter(counting.calls))
        await _closed(agent, "idle-count")
        counting.calls.clear()
        reopened = await agent.workflow.send("idle-count", "And one more question")
        seen.append(Counter(counting.calls))
        summary = await agent.sessions.get("idle-count")
    assert seen[0] == seen[1] == Counter({"update-with-start": 1})
    assert seen[2] == Counter({"update-with-start": 2, "describe": 1})
    assert reopened.kind == "completed" and summary.turns == 3
    assert summary.variables["topic"].value == "refund"


class TestIdleCloseSetting:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (None, timedelta(hours=1)),
            ("90s", timedelta(seconds=90)),
            ("30m", timedelta(minutes=30)),
            ("1h", timedelta(hours=1)),
            ("2d", timedelta(days=2)),
            ("0", None),
        ],
    )
    def test_relative_durations_and_never(self, text: str | None, expected: timedelta) -> None:
        """ARCHMAX_IDLE_CLOSE reads until's relative syntax; unset is 1h, 0 is never."""
        assert idle_close_from(text) == expected
        env = {} if text is None else {"ARCHMAX_IDLE_CLOSE": text}
        assert RuntimeConfig.from_env(env, root=Path.cwd()).idle_close == expected

    @pytest.mark.parametrize("text", ["soon", "1w", "-5m", "1.5h"])
    def test_anything_else_is_a_configuration_error(self, text: str) -> None:
        """A value it cannot read names the variable."""
        with pytest.raises(ConfigurationError, match="ARCHMAX_IDLE_CLOSE"):
            idle_close_from(text)
