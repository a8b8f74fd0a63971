"""Human states: parking awaiting a decision, ``decide`` routing along a declared edge, and
``reply`` answering while the session stays parked (the seed's human-state rows)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.errors import (
    EmptyMessageError,
    InvalidDecisionTargetError,
    SessionNotAwaitingInputError,
    SessionNotParkedError,
)
from archmax_temporal.workflows.models import PendingDecision, is_runtime_note
from tests.support.agents import Scripted, running_agent
from tests.support.paths import EXAMPLES

ROOT = EXAMPLES / "refund-review"
PLAYBOOK = ROOT / "workflows" / "refund-review" / "playbook.yaml"
REQUEST = "Hi, I'd like a refund for order ORD-1001."


@pytest.fixture
def sid() -> str:
    return f"refund-{uuid.uuid4().hex[:8]}"


async def _events(agent: Agent, session_id: str) -> int:
    return len((await agent.handle(session_id).fetch_history()).events)


class TestParkAtHumanState:
    async def test_advancing_into_a_human_state_parks_awaiting_decision(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """The pending decision names the state, its title and its edges; one handoff call
        tells the person what happened."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            outcome = await agent.workflow.send(sid, REQUEST)
            described = await agent.handle(sid).describe()
            summary = await agent.sessions.get(sid)
        assert (outcome.kind, outcome.status, outcome.parked_channel) == (
            "parked",
            "awaiting_decision",
            "decision",
        )
        pending = outcome.pending
        assert isinstance(pending, PendingDecision)
        assert (pending.state, pending.title, pending.seq) == ("refund-review", "Finance review", 1)
        assert [(e.to, e.type) for e in pending.transitions] == [
            ("refund-closed", "approve"),
            ("refund-request", "refine"),
        ]
        assert [(s.kind, s.to) for s in outcome.trail] == [
            ("trigger", "refund-request"),
            ("agent", "refund-review"),
        ]
        assert (
            outcome.reply
            == "Your refund request for ORD-1001 is now with a person in finance for review."
        )
        assert [r.handoff for r in server.requests] == [False, True]
        assert summary.pending_decision == pending
        assert summary.classification == "open"
        attributes = described.typed_search_attributes
        assert attributes.get(sa.STATUS) == "awaiting_decision"
        assert attributes.get(sa.PARKED_CHANNEL) == "decision"

    async def test_visibility_finds_parked_reviews_by_status(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """`ArchmaxStatus='awaiting_decision'` lists the session (as `temporal workflow list
        --query` does)."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            query = (
                "ArchmaxStatus = 'awaiting_decision' AND ArchmaxParkedChannel = 'decision' "
                f"AND TaskQueue = '{task_queue}'"
            )
            found: list[str] = []
            for _ in range(50):  # visibility is eventually consistent
                found = [w.id async for w in client.list_workflows(query)]
                if found:
                    break
                await asyncio.sleep(0.1)
        assert found == [sid]


class TestDecide:
    async def test_a_decision_routes_along_its_edge_and_completes(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """decide commits a human trail step with the comment and a [decision] note; the
        session continues in the target, a terminal state, and completes there."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            outcome = await agent.workflow.decide(
                sid, to="refund-closed", comment="Verified against refund policy."
            )
            view = await agent.sessions.view(sid)
        assert (outcome.kind, outcome.disposition, outcome.state) == (
            "completed",
            "decide",
            "refund-closed",
        )
        assert outcome.trail[-1].kind == "human"
        assert outcome.trail[-1].to == "refund-closed"
        assert outcome.trail[-1].reason == "Verified against refund policy."
        assert outcome.reply == "Good news: your refund for ORD-1001 is approved."
        notes = [m for m in view.transcript if is_runtime_note(m) and m.role == "tool"]
        assert notes and notes[-1].note == "decision"
        assert "Verified against refund policy." in (notes[-1].content or "")

    async def test_a_refine_loop_reenters_review_and_counts_it_twice(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """Sent back for refinement, the agent resubmits: refund-review is entered twice."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            again = await agent.workflow.decide(
                sid, to="refund-request", comment="Please confirm the amount."
            )
            closed = await agent.workflow.decide(sid, to="refund-closed")
            whole = (await agent.sessions.view(sid)).trail
        assert again.kind == "parked"
        assert isinstance(again.pending, PendingDecision) and again.pending.seq == 2
        assert sum(1 for s in whole if s.to == "refund-review") == 2
        assert [(s.kind, s.to) for s in closed.trail] == [("human", "refund-closed")]
        assert closed.kind == "completed"

    async def test_an_undeclared_target_is_refused_listing_the_valid_ones(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """A decision naming no edge writes nothing to the history."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            before = await _events(agent, sid)
            with pytest.raises(InvalidDecisionTargetError, match="refund-closed, refund-request"):
                await agent.workflow.decide(sid, to="somewhere")
            assert await _events(agent, sid) == before

    async def test_decide_on_a_session_not_at_a_human_state_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """After the decision the session is finished: a second decide is SessionNotParked."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            await agent.workflow.decide(sid, to="refund-closed")
            with pytest.raises(SessionNotParkedError):
                await agent.workflow.decide(sid, to="refund-closed")

    async def test_a_delivery_to_a_human_park_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """A human park awaits a decision, not input."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(sid, trigger="email_reply")


class TestReply:
    async def test_a_reply_is_answered_and_the_session_stays_parked_unchanged(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """The same pending record (seq, created_at), the same trail; one tool-less call."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            parked = await agent.workflow.send(sid, REQUEST)
            calls = len(server.requests)
            answered = await agent.workflow.reply(sid, "Any news on my refund?")
            via_send = await agent.workflow.send(sid, "Fine — just approve it then.")
            whole = (await agent.sessions.view(sid)).trail
        assert (answered.kind, answered.disposition) == ("parked", "reply")
        assert (
            answered.reply == "Your request is still with finance; a person will decide it shortly."
        )
        assert answered.pending == parked.pending
        assert answered.trail == []  # a reply commits no step: the trail is the park's
        assert answered.trail_offset == len(parked.trail) and whole == parked.trail
        assert via_send.disposition == "reply"
        assert via_send.pending == parked.pending
        assert [r.handoff for r in server.requests[calls:]] == [True, True]

    async def test_an_empty_reply_is_refused(
        self, client: Client, task_queue: str, scripted: Scripted, sid: str
    ) -> None:
        """EmptyMessageError, before the session is touched."""
        server = scripted(PLAYBOOK)
        async with running_agent(client, task_queue, ROOT, "refund-review", server) as agent:
            await agent.workflow.send(sid, REQUEST)
            before = await _events(agent, sid)
            with pytest.raises(EmptyMessageError):
                await agent.workflow.reply(sid, "   ")
            assert await _events(agent, sid) == before
