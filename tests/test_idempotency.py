"""``idempotency_key`` on the host API, beyond tests/test_firing.py: a keyed firing that
names no session mints the same session on every retry (so Temporal can dedupe it there)."""

from __future__ import annotations

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
    async def test_a_keyed_firing_that_mints_mints_the_same_session(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            first = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
            retry = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
            accepted = await _accepted(agent, first.session_id)
            other = await agent.workflow.send(None, VAGUE, idempotency_key="evt-10")
        assert first.session_id == retry.session_id != other.session_id
        assert first.session_id.startswith("session-")
        assert retry == first
        assert accepted == 1
