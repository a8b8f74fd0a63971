"""Firings under pressure, on the real dev server: an idempotency key applies once, racing
callers get typed errors (never Temporal's raw ones), and a caller whose session's run is
terminated under it gets a typed error at once."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    SessionBusyError,
    SessionNotAwaitingInputError,
    SessionTerminatedError,
)
from archmax_temporal.workflows.models import Outcome
from tests.support.agents import Scripted, running_agent
from tests.support.paths import EXAMPLES
from tests.support.scenarios import VAGUE

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"


def _sid() -> str:
    return f"firing-{uuid.uuid4().hex[:8]}"


async def _park(agent: Agent, session_id: str, key: str | None = None) -> Outcome:
    return await agent.workflow.send(
        None,
        VAGUE,
        trigger="email_received",
        variables={"conversation_id": session_id},
        idempotency_key=key,
    )


class TestIdempotencyKeys:
    async def test_a_retried_send_with_its_key_returns_the_first_outcome(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """The same key twice is one firing: one turn, the same Outcome both times."""
        server = scripted(PLAYBOOK)
        sid = _sid()
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            first = await _park(agent, sid, key="mail-1")
            calls = len(server.requests)
            again = await _park(agent, sid, key="mail-1")
            view = await agent.sessions.view(sid)
        assert first == again
        assert len(server.requests) == calls
        assert view.summary.turns == 1

    async def test_racing_retries_with_one_key_apply_once(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """Twenty concurrent deliveries carrying one key: one resumed turn, one outcome for
        every caller."""
        server = scripted(PLAYBOOK)
        sid = _sid()
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, sid)
            results = await asyncio.gather(
                *(
                    agent.workflow.deliver(
                        sid,
                        trigger="email_reply",
                        variables={"reply_body": "It's ORD-1001."},
                        idempotency_key="webhook-7",
                    )
                    for _ in range(20)
                ),
                return_exceptions=True,
            )
            view = await agent.sessions.view(sid)
        outcomes = [r for r in results if isinstance(r, Outcome)]
        assert len(outcomes) == 20, [r for r in results if not isinstance(r, Outcome)]
        assert all(o == outcomes[0] for o in outcomes)
        assert [s.reason for s in view.trail].count("email_reply") == 1


class TestPressure:
    async def test_every_loser_of_a_delivery_race_gets_a_typed_error(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """Forty distinct deliveries race for one park: one resumes it; each other caller
        gets the session's refusal or SessionBusyError (Temporal's in-flight update limit),
        never a raw RPC error."""
        server = scripted(PLAYBOOK)
        sid = _sid()
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, sid)
            results = await asyncio.gather(
                *(
                    agent.workflow.deliver(
                        sid, trigger="email_reply", variables={"reply_body": f"ORD-{n}"}
                    )
                    for n in range(40)
                ),
                return_exceptions=True,
            )
            view = await agent.sessions.view(sid)
        won = [r for r in results if isinstance(r, Outcome)]
        lost = [r for r in results if not isinstance(r, Outcome)]
        assert len(won) == 1
        assert all(isinstance(r, SessionNotAwaitingInputError | SessionBusyError) for r in lost), {
            type(r).__name__ for r in lost
        }
        busy = [r for r in lost if isinstance(r, SessionBusyError)]
        assert all(r.retryable for r in busy)
        assert [s.reason for s in view.trail].count("email_reply") == 1

    async def test_a_caller_waiting_on_a_terminated_run_gets_a_typed_error(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """An operator terminates the session's run mid-turn: the waiting ``send`` ends at once
        with SessionTerminatedError."""
        slow = "rules:\n  - when: {}\n    delay_ms: 30000\n    reply: {content: too late}\n"
        server = scripted(slow)
        sid = _sid()
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            waiting = asyncio.ensure_future(_park(agent, sid))
            for _ in range(100):
                if server.requests:
                    break
                await asyncio.sleep(0.05)
            await client.get_workflow_handle(sid).terminate("operator")
            with pytest.raises(ArchmaxError) as raised:
                await asyncio.wait_for(waiting, timeout=10)
        assert isinstance(raised.value, SessionTerminatedError)
        assert "terminated" in str(raised.value)


class TestAcrossRuns:
    async def test_a_key_is_remembered_across_continue_as_new(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """The session continues as new after every firing; a retry with the first key still
        gets the first outcome, and nothing runs twice."""
        server = scripted(PLAYBOOK)
        sid = _sid()
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, requests_per_run=1
        ) as agent:
            first = await _park(agent, sid, key="mail-across-1")
            runs_before: list[object] = []
            for _ in range(100):  # visibility lags the continue-as-new a little
                runs_before = [w async for w in client.list_workflows(f"WorkflowId = '{sid}'")]
                if len(runs_before) >= 2:
                    break
                await asyncio.sleep(0.1)
            calls = len(server.requests)
            again = await _park(agent, sid, key="mail-across-1")
            view = await agent.sessions.view(sid)
        assert len(runs_before) >= 2  # the retry lands on a new run
        assert again == first
        assert len(server.requests) == calls
        assert view.summary.turns == 1


class TestRefusedSignals:
    async def test_a_refused_deliver_signal_is_recorded_in_the_memo(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """A deliver signal to a session that is not parked is dropped and recorded (its
        number, error type and reason), so the events can call it refused."""
        server = scripted(PLAYBOOK)
        sid = _sid()
        async with running_agent(client, task_queue, ROOT, "support-inbox", server) as agent:
            await _park(agent, sid)
            await agent.workflow.deliver(
                sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
            )
            await agent.workflow.signal_deliver(sid, trigger="email_reply")
            for _ in range(100):
                described = await agent.handle(sid).describe()
                memo = await described.memo()
                if "archmax.refused_signal" in memo:
                    break
                await asyncio.sleep(0.1)
        refused = memo["archmax.refused_signal"]
        assert refused["signal"] == 1
        assert refused["type"] == "SessionNotAwaitingInputError"
        assert "not parked awaiting input" in refused["reason"]
