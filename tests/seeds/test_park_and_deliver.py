"""Parking with archmax_wait and resuming by deliver, on the real dev server: the seed's
"Parking a session", "Delivering the event" and "Waiting for a time" sections."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.devserver import find_temporal_cli
from archmax_temporal.client.host import Agent
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.errors import (
    InvalidVariableNameError,
    MissingDeliveryTriggerError,
    SessionNotAwaitingInputError,
)
from archmax_temporal.workflows.models import (
    Outcome,
    PendingInput,
    SessionSummary,
    is_runtime_note,
)
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as tool
from tests.support.paths import EXAMPLES
from tests.support.scenarios import VAGUE

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"

WAITER = """
title: Bank check
states:
  check-bank:
    triggers: { manual: }
    instructions: Look for the transaction; wait a day and retry if it has not posted.
    budget: { maxParks: 2 }
    transitions:
      - { to: reconcile, description: The transaction was found. }
  reconcile:
    instructions: Confirm the reconciliation.
"""


async def _park(agent: Agent, session_id: str) -> Outcome:
    return await agent.workflow.send(
        None, VAGUE, trigger="email_received", variables={"conversation_id": session_id}
    )


async def _event_count(agent: Agent, session_id: str) -> int:
    return len((await agent.handle(session_id).fetch_history()).events)


class TestParkAndDeliver:
    async def test_session_parks_in_clarify_then_answers_after_delivery(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A vague email parks the session awaiting input; the delivered reply resumes it."""
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            parked = await _park(agent, "AAQk-test-1")
            summary = await agent.sessions.get("AAQk-test-1")
            resumed = await agent.workflow.deliver(
                "AAQk-test-1", trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
            )
            view = await agent.sessions.view("AAQk-test-1")
        assert parked.session_id == "AAQk-test-1"
        assert (parked.kind, parked.status, parked.parked_channel) == (
            "parked",
            "awaiting_input",
            "input",
        )
        assert parked.exit is None
        assert isinstance(parked.pending, PendingInput)
        assert parked.pending.state == "clarify"
        assert parked.pending.reason == "the customer's reply naming the order"
        assert parked.pending.resume_at is None
        assert "Which order" in parked.reply
        assert [s.kind for s in parked.trail] == ["trigger"]  # parking commits no transition
        assert (summary.status, summary.classification) == ("awaiting_input", "open")
        assert summary.wait_reason == parked.pending.reason
        assert (resumed.kind, resumed.disposition, resumed.state) == (
            "completed",
            "deliver",
            "answer",
        )
        assert "ORD-1001" in resumed.reply
        assert resumed.variables["reply_body"].value == "It's ORD-1001."
        assert resumed.variables["reply_body"].locked
        assert resumed.variables["trigger"].value == "email_reply"
        assert [(s.kind, s.to, s.reason) for s in resumed.trail] == [
            ("trigger", "clarify", "email_reply"),
            ("agent", "answer", "the reply names ORD-1001"),
        ]  # the delivery's own steps; the view holds the whole trail
        assert [(s.kind, s.to, s.reason) for s in view.trail] == [
            ("trigger", "clarify", "email_received"),
            ("trigger", "clarify", "email_reply"),
            ("agent", "answer", "the reply names ORD-1001"),
        ]
        notes = [m for m in view.transcript if is_runtime_note(m)]
        assert [m.note for m in notes] == ["event", "event"]  # the call and its result
        assert notes[0].tool_calls[0].name == "archmax_note"
        assert "[event]" in (notes[1].content or "")
        assert "ORD-1001" in (notes[1].content or "")
        # the park spent no handoff call: the question already was the message
        assert len(server.requests) == 3

    async def test_artifacts_are_rewritten_on_park_and_after_resume(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """variables.json and trail.json exist after the park and change after the delivery."""
        server = scripted(PLAYBOOK)
        store = tmp_path / "store"
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=store
        ) as agent:
            await _park(agent, "art-1")
            artifacts = store / "art-1" / "artifacts"
            parked_vars = json.loads((artifacts / "variables.json").read_text())
            await agent.workflow.deliver(
                "art-1", trigger="email_reply", variables={"reply_body": "ORD-5"}
            )
        final_vars = json.loads((artifacts / "variables.json").read_text())
        trail = json.loads((artifacts / "trail.json").read_text())
        assert parked_vars["sessionId"] == "art-1"
        assert parked_vars["variables"]["conversation_id"] == {"value": "art-1", "locked": True}
        assert "reply_body" not in parked_vars["variables"]
        assert final_vars["variables"]["reply_body"] == {"value": "ORD-5", "locked": True}
        assert [s["kind"] for s in trail["steps"]] == ["trigger", "trigger", "agent"]
        assert list((store / "_specs").glob("*.json"))
        assert (store / "art-1" / "scratchpad").is_dir()
        trajectory = json.loads((artifacts / "trajectory.json").read_text())
        assert trajectory["sessionId"] == "art-1"
        notes = [m for m in trajectory["messages"] if m.get("note") == "event"]
        assert len(notes) == 2  # the delivery's archmax_note call and its result
        graph = json.loads((artifacts / "graph.json").read_text())
        assert {"trigger": "email_reply", "to": "clarify"} in graph["starts"]


class TestRefusedDeliveries:
    @pytest.mark.parametrize(
        ("trigger", "variables", "error"),
        [
            (None, {}, MissingDeliveryTriggerError),
            ("", {}, MissingDeliveryTriggerError),
            ("email_reply", {"Not A Name": 1}, InvalidVariableNameError),
            ("email_reply", {"trigger": "forged"}, InvalidVariableNameError),
        ],
    )
    async def test_a_refused_delivery_leaves_the_session_parked_and_the_history_unchanged(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        trigger: str | None,
        variables: dict[str, object],
        error: type[Exception],
    ) -> None:
        """Validators reject before the session is touched: no event is written."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            sid = f"refused-{uuid.uuid4().hex[:8]}"
            await _park(agent, sid)
            before = await _event_count(agent, sid)
            with pytest.raises(error):
                await agent.workflow.deliver(sid, trigger=trigger, variables=variables)
            after = await _event_count(agent, sid)
            summary = await agent.sessions.get(sid)
        assert after == before
        assert summary.status == "awaiting_input"
        assert summary.pending_input is not None

    async def test_a_double_fired_delivery_runs_the_session_once(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """The second delivery after the session resumed: SessionNotAwaitingInputError."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, "double-1")
            await agent.workflow.deliver(
                "double-1", trigger="email_reply", variables={"reply_body": "ORD-1"}
            )
            calls = len(server.requests)
            events = await _event_count(agent, "double-1")
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(
                    "double-1", trigger="email_reply", variables={"reply_body": "ORD-1"}
                )
            assert await _event_count(agent, "double-1") == events
        assert len(server.requests) == calls

    async def test_concurrent_deliveries_resume_once(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """Two deliveries racing for one park: exactly one is accepted."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, "race-1")
            results = await asyncio.gather(
                *(
                    agent.workflow.deliver(
                        "race-1", trigger="email_reply", variables={"reply_body": "ORD-9"}
                    )
                    for _ in range(3)
                ),
                return_exceptions=True,
            )
            view = await agent.sessions.view("race-1")
        completed = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, SessionNotAwaitingInputError)]
        assert len(completed) == 1 and len(refused) == 2
        assert [s.reason for s in view.trail].count("email_reply") == 1


class TestSignalDelivery:
    async def test_temporal_cli_signal_resumes_the_session(
        self, client: Client, task_queue: str, scripted: Scripted, env: WorkflowEnvironment
    ) -> None:
        """`temporal workflow signal --name deliver` is a delivery external systems can send."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, "sig-1")
            address = client.service_client.config.target_host
            payload = json.dumps({"trigger": "email_reply", "variables": {"reply_body": "ORD-77"}})
            subprocess.run(
                [
                    str(find_temporal_cli()),
                    "workflow",
                    "signal",
                    "--address",
                    address,
                    "--workflow-id",
                    "sig-1",
                    "--name",
                    "deliver",
                    "--input",
                    payload,
                ],
                check=True,
                capture_output=True,
                timeout=30,
            )
            summary = await _wait_for(agent, "sig-1", lambda s: s.status == "completed")
        assert summary.state == "answer"
        assert summary.variables["reply_body"].value == "ORD-77"

    async def test_an_invalid_signal_is_dropped_and_the_session_stays_parked(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """A signal cannot be refused, so a trigger-less one is logged and ignored."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, "sig-2")
            await agent.workflow.signal_deliver("sig-2", trigger="")
            await asyncio.sleep(0.5)
            summary = await agent.sessions.get("sig-2")
            resumed = await agent.workflow.deliver(
                "sig-2", trigger="email_reply", variables={"reply_body": "ORD-3"}
            )
        assert summary.status == "awaiting_input"
        assert resumed.kind == "completed"


class TestTimedWaits:
    async def test_until_is_normalised_to_an_absolute_resume_at(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """`until: 2h` becomes resume_at two hours after the park, in the summary and the
        ArchmaxResumeAt search attribute."""
        write_workflow(tmp_path, "bank", WAITER)
        server = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {"state": "check-bank"},
                            "reply": {
                                "content": "Not posted yet; checking again later.",
                                "tool_calls": [tool("archmax_wait", reason="posting", until="2h")],
                            },
                        }
                    ]
                }
            )
        )
        async with running_agent(client, task_queue, tmp_path, "bank", server) as agent:
            before = datetime.now(UTC)
            parked = await agent.workflow.send("wait-1", "check it")
            described = await agent.handle("wait-1").describe()
        assert isinstance(parked.pending, PendingInput) and parked.pending.resume_at is not None
        delta = parked.pending.resume_at - parked.pending.parked_at
        assert delta == timedelta(hours=2)
        assert parked.pending.parked_at >= before - timedelta(seconds=5)
        resume_at = described.typed_search_attributes.get(sa.RESUME_AT)
        assert resume_at is not None and abs(resume_at - parked.pending.resume_at) < timedelta(
            seconds=1
        )
        assert described.typed_search_attributes.get(sa.PARKED_CHANNEL) == "input"

    async def test_an_unreadable_until_refuses_the_park(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A garbage `until` is a tool error: the session does not park, the model reads why."""
        write_workflow(tmp_path, "bank", WAITER)
        server = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {
                                "state": "check-bank",
                                "last_tool_result": "/cannot read until/",
                            },
                            "reply": {"content": "I could not schedule the check."},
                        },
                        {
                            "when": {"state": "check-bank"},
                            "reply": {
                                "tool_calls": [
                                    tool("archmax_wait", reason="x", until="tomorrowish")
                                ]
                            },
                        },
                    ]
                }
            )
        )
        async with running_agent(client, task_queue, tmp_path, "bank", server) as agent:
            outcome = await agent.workflow.send("wait-2", "check it")
        assert outcome.kind == "completed"
        assert outcome.pending is None
        assert outcome.reply == "I could not schedule the check."

    async def test_the_park_beyond_max_parks_is_a_turn_failure(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """budget.maxParks counts parks per state per turn; the one beyond it rejects."""
        write_workflow(tmp_path, "bank", WAITER)
        server = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {"state": "check-bank"},
                            "reply": {
                                "content": "Not yet.",
                                "tool_calls": [tool("archmax_wait", reason="posting")],
                            },
                        }
                    ]
                }
            )
        )
        async with running_agent(client, task_queue, tmp_path, "bank", server) as agent:
            await agent.workflow.send("wait-3", "check it")
            second = await agent.workflow.deliver("wait-3", trigger="poll")
            third = await agent.workflow.deliver("wait-3", trigger="poll")
        assert second.kind == "parked"
        assert third.kind == "rejected"
        assert third.rejected is not None and "maxParks (2)" in third.rejected

    async def test_a_park_with_nothing_said_spends_one_handoff_call(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """When the agent has said nothing since the person's message, the park spends one
        tool-less model call whose text lands in the transcript."""
        write_workflow(tmp_path, "bank", WAITER)
        server = scripted(
            json.dumps(
                {
                    "rules": [
                        {
                            "when": {"handoff": True},
                            "reply": {"content": "I'll check the bank tomorrow."},
                        },
                        {
                            "when": {"state": "check-bank"},
                            "reply": {
                                "tool_calls": [tool("archmax_wait", reason="posting", until="1d")]
                            },
                        },
                    ]
                }
            )
        )
        async with running_agent(client, task_queue, tmp_path, "bank", server) as agent:
            parked = await agent.workflow.send("wait-4", "check it")
        assert parked.kind == "parked"
        assert parked.reply == "I'll check the bank tomorrow."
        assert [r.handoff for r in server.requests] == [False, True]
        assert server.requests[1].body["tool_choice"] == "none"


async def _wait_for(
    agent: Agent,
    session_id: str,
    predicate: Callable[[SessionSummary], bool],
    timeout: float = 20.0,
) -> SessionSummary:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        summary = await agent.sessions.get(session_id)
        if predicate(summary) or asyncio.get_running_loop().time() > deadline:
            return summary
        await asyncio.sleep(0.1)


def _timer_events(history: WorkflowHistory) -> int:
    return sum(1 for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED)
