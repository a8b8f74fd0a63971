"""``idempotency_key`` on the host API is the Temporal update id: checked on the real dev
server that a retry, racing or late, applies nothing twice and returns the first Outcome."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from tests.conftest import EXAMPLES, Scripted, running_agent

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"
VAGUE = "About the thing we discussed on the phone — can you sort it out?"


async def _accepted(agent: Agent, session_id: str) -> int:
    history = await agent.handle(session_id).fetch_history()
    kind = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == kind)


class TestIdempotencyKey:
    async def test_racing_sends_with_one_key_start_one_session_and_run_one_turn(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Twenty concurrent update-with-starts carrying the same key: one accepted update."""
        server = scripted(PLAYBOOK)
        sid = f"AAQk-{uuid.uuid4().hex[:8]}"
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            outcomes = await asyncio.gather(
                *(
                    agent.workflow.send(
                        sid, VAGUE, trigger="email_received", idempotency_key="mail-1"
                    )
                    for _ in range(20)
                )
            )
            accepted = await _accepted(agent, sid)
        assert len({o.model_dump_json() for o in outcomes}) == 1
        assert outcomes[0].kind == "parked"
        assert accepted == 1

    async def test_a_late_retry_returns_the_first_outcome_and_writes_nothing(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """After the update completed, the same key returns its result (Temporal does not
        reject the duplicate); a delivery retried the same way is not refused as unparked."""
        server = scripted(PLAYBOOK)
        sid = f"AAQk-{uuid.uuid4().hex[:8]}"
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            first = await agent.workflow.send(sid, VAGUE, idempotency_key="k")
            length = len((await agent.handle(sid).fetch_history()).events)
            again = await agent.workflow.send(sid, VAGUE, idempotency_key="k")
            unchanged = len((await agent.handle(sid).fetch_history()).events) == length
            delivered = await agent.workflow.deliver(
                sid,
                trigger="email_reply",
                variables={"reply_body": "ORD-1001"},
                idempotency_key="d",
            )
            redelivered = await agent.workflow.deliver(
                sid,
                trigger="email_reply",
                variables={"reply_body": "ORD-1001"},
                idempotency_key="d",
            )
        assert again == first
        assert unchanged
        assert delivered.kind == "completed"
        assert redelivered == delivered

    async def test_a_keyed_firing_that_mints_mints_the_same_session(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            first = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
            retry = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
        assert first.session_id == retry.session_id
        assert first.session_id.startswith("session-")
