"""The seed's session rules on the real dev server: continue-as-new keeps the session, on_error
routing, archmax_reset and the follow-up prompt, dispositions, mid-turn firings, host-side
polling of timed parks, and session path precedence."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.client.session_ids import ResolvedSession
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.errors import (
    InvalidSessionIdError,
    SessionNotAwaitingInputError,
    SessionNotResumableError,
)
from archmax_temporal.workflows.models import Outcome, PendingInput, SessionSummary, SessionView
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as tool
from tests.support.paths import EXAMPLES

RULES = """
title: Session rules
instructions: Exercise the session rules.
states:
  intake:
    triggers:
      manual:
      chat: { session: chat.id }
    instructions: Triage; ask and wait when something is missing.
    budget: { maxParks: 1 }
    transitions:
      - { to: answer, description: Ready to answer. }
  answer:
    instructions: Answer the customer.
"""

LOOPING = """
title: Looping
states:
  lookup:
    triggers: { manual: }
    instructions: Look the order up.
    budget: { maxTurns: 2, maxParks: 1 }
ON_ERROR
    transitions:
      - { to: done, description: Found. }
  escalate:
    instructions: Hand the case to a person.
  done:
    instructions: Answer.
"""

REFUND = EXAMPLES / "refund-review"
REFUND_PLAYBOOK = REFUND / "workflows" / "refund-review" / "playbook.yaml"
NOTE, RESET, WAIT = "archmax_note", "archmax_reset", "archmax_wait"


def rule(content: str | None, *calls: dict[str, object], **when: object) -> dict[str, object]:
    reply: dict[str, object] = {"content": content} if content else {}
    return {"when": when, "reply": {**reply, "tool_calls": list(calls)} if calls else reply}


def playbook(*rules: dict[str, object], delay_ms: int = 0) -> str:
    return json.dumps({"rules": [{**r, "delay_ms": delay_ms} for r in rules]})


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "rules", RULES)
    write_workflow(tmp_path, "guarded", LOOPING.replace("ON_ERROR", "    on_error: escalate"))
    write_workflow(tmp_path, "unguarded", LOOPING.replace("ON_ERROR\n", ""))
    return tmp_path


T = TypeVar("T")


async def _poll(probe: Callable[[], Awaitable[T]], timeout: float = 20.0) -> T:
    """Await ``probe()`` until it returns something truthy (or the timeout passes)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.1)


def _users(view: SessionView) -> list[str | None]:
    return [m.content for m in view.transcript if m.role == "user"]


class TestContinueAsNew:
    async def test_a_parked_session_survives_continue_as_new_and_resumes(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """Across continue-as-new the session keeps transcript, variables, trail and its park,
        and park counts reset at each turn boundary while maxParks still bounds a turn."""
        ask = tool(WAIT, reason="the order id")
        server = scripted(
            playbook(
                rule(None, tool(WAIT, reason="again"), last_tool=NOTE, last_user="third"),
                rule("Got {order}.", last_tool=NOTE, last_tool_result="/(?P<order>ORD-\\d+)/"),
                rule("Noted.", last_tool="archmax_set_variables"),
                rule(None, tool("archmax_set_variables", variables={"tier": 1}), last_user="first"),
                rule("Which order?", ask, last_user="/second|third/"),
            )
        )
        sid = new_id("can")
        async with running_agent(
            client, task_queue, root, "rules", server, requests_per_run=2
        ) as agent:
            handle = agent.handle(sid)
            await agent.workflow.send(sid, "first", variables={"customer": "Acme"})
            first_run = (await handle.describe()).run_id
            parked = await agent.workflow.send(sid, "second")

            async def moved_on() -> bool:
                return (await handle.describe()).run_id != first_run

            assert await _poll(moved_on), "the session never continued as new"
            old = await client.get_workflow_handle(sid, run_id=first_run).fetch_history()
            summary = await agent.sessions.get(sid)
            view = await agent.sessions.view(sid)
            resumed = await agent.workflow.deliver(
                sid, trigger="reply", variables={"order": "ORD-7"}
            )
            reparked = await agent.workflow.send(sid, "third")
            over_budget = await agent.workflow.deliver(sid, trigger="reply")
        assert old.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        assert parked.kind == "parked"
        assert (summary.status, summary.turns) == ("awaiting_input", 2)
        pending = summary.pending_input
        assert pending is not None and (pending.state, pending.reason) == ("intake", "the order id")
        customer, tier = summary.variables["customer"], summary.variables["tier"]
        assert (customer.value, customer.locked, tier.value, tier.locked) == (
            "Acme",
            True,
            1,
            False,
        )
        assert _users(view) == ["first", "second"]
        assert [s.kind for s in view.trail] == ["trigger", "trigger"]
        assert (resumed.kind, resumed.disposition) == ("completed", "deliver")
        assert resumed.reply == "Got ORD-7."
        assert resumed.variables["tier"].value == 1 and resumed.variables["customer"].locked
        assert resumed.variables["order"].locked
        # turn 3 parks in intake again: the count carried from turn 2 was reset...
        assert reparked.kind == "parked"
        # ...but a second park within that turn exceeds maxParks (1)
        assert over_budget.kind == "rejected"
        assert over_budget.rejected is not None and "maxParks (1)" in over_budget.rejected


class TestOnError:
    async def test_exhausted_max_turns_routes_to_on_error(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """A looping model exhausts maxTurns; the turn routes to on_error with an [error] note."""
        server = scripted(
            playbook(
                rule(None, tool("archmax_get_variables"), state="lookup"),
                rule("A person will take over.", state="escalate"),
            )
        )
        sid = new_id("onerr")
        async with running_agent(client, task_queue, root, "guarded", server) as agent:
            outcome = await agent.workflow.send(sid, "Where is ORD-1?")
            view = await agent.sessions.view(sid)
        assert (outcome.kind, outcome.state) == ("completed", "escalate")
        assert outcome.exit is not None and outcome.exit.success
        assert outcome.reply == "A person will take over."
        steps = [(s.kind, s.to) for s in outcome.trail]
        assert steps == [("trigger", "lookup"), ("on_error", "escalate")]
        assert "maxTurns (2)" in (outcome.trail[1].reason or "")
        notes = [m for m in view.transcript if m.note == "error"]
        assert [m.role for m in notes] == ["assistant", "tool"]
        assert (notes[1].content or "").startswith("[error]")
        assert "maxTurns (2)" in (notes[1].content or "")
        assert [r.state for r in server.requests] == ["lookup", "lookup", "escalate"]

    async def test_without_on_error_the_turn_is_rejected(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """With no on_error the exhausted budget rejects the turn: no exit, no route."""
        server = scripted(playbook(rule(None, tool("archmax_get_variables"))))
        sid = new_id("noerr")
        async with running_agent(client, task_queue, root, "unguarded", server) as agent:
            outcome = await agent.workflow.send(sid, "Where is ORD-1?")
        assert (outcome.kind, outcome.state, outcome.exit) == ("rejected", "lookup", None)
        assert outcome.rejected is not None and "budget.maxTurns (2)" in outcome.rejected
        assert [s.kind for s in outcome.trail] == ["trigger"]
        assert len(server.requests) == 2

    @pytest.mark.parametrize(
        "siblings",
        [
            pytest.param(0, id="wait-alone"),
            pytest.param(1, id="wait-beside-another-call"),
        ],
    )
    async def test_the_park_beyond_max_parks_routes_to_on_error(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, siblings: int
    ) -> None:
        """The refused park routes to on_error, and every tool call still gets its result."""
        calls = [tool(WAIT, reason="posting")] + [tool("archmax_get_variables")] * siblings
        server = scripted(
            playbook(rule("Escalated.", state="escalate"), rule("Not yet.", *calls, state="lookup"))
        )
        sid = new_id("parks")
        async with running_agent(client, task_queue, root, "guarded", server) as agent:
            parked = await agent.workflow.send(sid, "check it")
            routed = await agent.workflow.deliver(sid, trigger="poll")
            view = await agent.sessions.view(sid)
        assert (parked.kind, routed.kind, routed.state) == ("parked", "completed", "escalate")
        reason = routed.trail[-1].reason
        assert routed.trail[-1].kind == "on_error" and reason is not None
        assert "maxParks (1)" in reason
        asked = [c.id for m in view.transcript for c in m.tool_calls]
        # a tool message without an id ("") answers no call
        answered = [m.tool_call_id or "" for m in view.transcript if m.role == "tool"]
        assert sorted(asked) == sorted(answered)


class TestReset:
    async def test_reset_returns_to_the_entry_state_and_is_refused_there(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """A follow-up in a terminal state resets to the entry state; in the entry state the
        reset is refused; only the follow-up turn's prompt carries the Follow-up block."""
        server = scripted(
            playbook(
                rule(None, tool(RESET, reason="needs triage"), state="answer", last_user="second"),
                rule("Staying in intake.", last_tool=RESET, last_tool_result="already"),
                rule("Back at intake.", last_tool=RESET),
                rule(None, tool(RESET), state="intake", last_user="third"),
                rule(None, tool("archmax_advance", to="answer"), state="intake", last_user="first"),
                rule("Answered.", state="answer"),
            )
        )
        sid = new_id("reset")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            first = await agent.workflow.send(sid, "first", variables={"customer": "Acme"})
            second = await agent.workflow.send(sid, "second")
            third = await agent.workflow.send(sid, "third")
            view = await agent.sessions.view(sid)
        assert first.state == "answer"
        assert (second.kind, second.state, second.reply) == (
            "completed",
            "intake",
            "Back at intake.",
        )
        assert [(s.kind, s.to) for s in second.trail] == [
            ("trigger", "answer"),
            ("reset", "intake"),
        ]  # an outcome carries the steps its firing committed; the view, the whole trail
        assert second.trail_offset == 2
        assert [(s.kind, s.to) for s in view.trail][:4] == [
            ("trigger", "intake"),
            ("agent", "answer"),
            ("trigger", "answer"),
            ("reset", "intake"),
        ]
        assert second.trail[-1].reason == "needs triage"
        assert second.variables["customer"].value == "Acme"
        assert _users(view) == ["first", "second", "third"]
        assert (third.state, third.reply) == ("intake", "Staying in intake.")
        assert [s.kind for s in third.trail] == ["trigger"]
        assert [s.kind for s in view.trail].count("reset") == 1
        refusal = [m for m in view.transcript if m.role == "tool" and m.name == RESET][-1]
        assert refusal.status == "error"
        assert "already in the state" in (refusal.content or "")
        follow_up = ["### Follow-up" in r.body["messages"][0]["content"] for r in server.requests]
        # turn 1: intake, answer; turn 2: answer (reset), intake; turn 3: intake, intake
        assert follow_up == [False, False, True, False, False, False]


class TestDispositions:
    async def test_resolve_session_follows_the_seed_table(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """None yet and finished: turn; parked for input: resume, and send delivers into it."""
        server = scripted(
            playbook(
                rule("Which order?", tool(WAIT, reason="the order id"), last_user="wait"),
                rule("Done."),
            )
        )
        finished, parked = new_id("disp-done"), new_id("disp-wait")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            none_yet = await agent.workflow.resolve_session(session_id=finished)
            await agent.workflow.send(finished, "hello")
            after_turn = await agent.workflow.resolve_session(session_id=finished)
            await agent.workflow.send(parked, "please wait")
            by_path = await agent.workflow.resolve_session(
                trigger="chat", variables={"chat": {"id": parked}}
            )
            delivered = await agent.workflow.send(parked, "ORD-1", trigger="chat")
        assert none_yet == after_turn == ResolvedSession(finished, "turn", False)
        assert by_path == ResolvedSession(parked, "resume", False)
        assert (delivered.disposition, delivered.kind) == ("deliver", "completed")
        assert [(s.kind, s.reason) for s in delivered.trail] == [("trigger", "chat")]
        assert delivered.trail_offset == 1  # the park's own trigger step came before

    async def test_a_session_parked_at_a_human_state_resolves_to_reply(
        self, client: Client, task_queue: str, scripted: Scripted
    ) -> None:
        """A session held at refund-review resolves to the reply disposition."""
        server = scripted(REFUND_PLAYBOOK)
        sid = new_id("disp-human")
        async with running_agent(client, task_queue, REFUND, "refund-review", server) as agent:
            parked = await agent.workflow.send(sid, "Hi, refund for ORD-1001.")
            resolved = await agent.workflow.resolve_session(session_id=sid)
        assert (parked.status, parked.state) == ("awaiting_decision", "refund-review")
        assert resolved == ResolvedSession(sid, "reply", False)


class TestMidTurn:
    @staticmethod
    async def _mid_turn(
        agent: Agent, server: ScriptedModelServer, sid: str
    ) -> asyncio.Task[Outcome]:
        """Start a slow turn and return once its model call is in flight."""
        first = asyncio.create_task(agent.workflow.send(sid, "first"))

        async def model_called() -> bool:
            return bool(server.requests)

        assert await _poll(model_called, timeout=10), "the first turn never called the model"
        await asyncio.sleep(0.2)
        return first

    async def test_firings_during_a_turn_are_refused_and_the_turn_completes(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """Mid-turn, send raises SessionNotResumableError and deliver SessionNotAwaitingInput."""
        server = scripted(playbook(rule("Slow answer."), delay_ms=1500))
        sid = new_id("midturn")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            first = await self._mid_turn(agent, server, sid)
            with pytest.raises(SessionNotResumableError):
                await agent.workflow.send(sid, "second")
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(sid, trigger="reply")
            outcome = await first
            view = await agent.sessions.view(sid)
        assert (outcome.kind, outcome.reply) == ("completed", "Slow answer.")
        assert _users(view) == ["first"]
        assert len(server.requests) == 1

    async def test_resolving_a_mid_turn_session_fails_closed(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """resolve_session on a session mid-turn raises SessionNotResumableError."""
        server = scripted(playbook(rule("Slow answer."), delay_ms=1500))
        sid = new_id("midresolve")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            first = await self._mid_turn(agent, server, sid)
            try:
                with pytest.raises(SessionNotResumableError):
                    await agent.workflow.resolve_session(session_id=sid)
            finally:
                await first


class TestHostPolling:
    async def test_host_polling_wakes_a_timed_park_once(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """The seed's host loop delivers `timer` when resume_at passes; a second firing is
        refused, so the session ran once."""
        server = scripted(
            playbook(
                rule("It has posted.", last_tool=NOTE, last_tool_result="'timer'"),
                rule("Not posted yet.", tool(WAIT, reason="posting", until="1d")),
            )
        )
        sid = new_id("poll")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            parked = await agent.workflow.send(sid, "check the bank")

            async def listed() -> list[SessionSummary]:
                return [s for s in await agent.sessions.list() if s.session_id == sid]

            async def host_loop(now: datetime) -> list[Outcome]:
                outcomes = []
                for t in await listed():
                    if t.status == "awaiting_input" and t.resume_at and t.resume_at <= now:
                        now_var = {"now": now.isoformat()}
                        outcomes.append(
                            await agent.workflow.deliver(sid, trigger="timer", variables=now_var)
                        )
                return outcomes

            async def listed_parked() -> list[SessionSummary]:
                # Visibility is eventually consistent: a listing read off it (no worker
                # answered in time) may still say running for a moment after the park.
                found = await listed()
                return found if found and found[0].status == "awaiting_input" else []

            found = await _poll(listed_parked)
            early = await host_loop(datetime.now(UTC))
            tomorrow = datetime.now(UTC) + timedelta(days=1, minutes=5)
            woken = await host_loop(tomorrow)
            calls = len(server.requests)
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(
                    sid, trigger="timer", variables={"now": tomorrow.isoformat()}
                )
        assert isinstance(parked.pending, PendingInput) and parked.pending.resume_at is not None
        assert len(found) == 1 and found[0].resume_at == parked.pending.resume_at
        assert found[0].status == "awaiting_input"
        assert (early, len(woken)) == ([], 1)
        assert (woken[0].kind, woken[0].disposition) == ("completed", "deliver")
        assert woken[0].reply == "It has posted."
        assert woken[0].variables["now"].value == tomorrow.isoformat()
        assert woken[0].variables["trigger"].value == "timer"
        assert calls == 2 and len(server.requests) == 2


class TestSessionPaths:
    async def test_precedence_of_session_sources(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """Explicit id > per-firing path > agent path > trigger declaration > minted id."""
        server = scripted(playbook(rule("Hello.")))
        tag = uuid.uuid4().hex[:8]
        seeds = {name: {"id": f"{name}-{tag}"} for name in ("chat", "agentpath", "firing")}
        firing: dict[str, Any] = {"trigger": "chat", "variables": seeds}
        async with (
            running_agent(
                client, task_queue, root, "rules", server, session_path="agentpath.id"
            ) as agent,
            running_agent(client, task_queue, root, "rules", server, worker=False) as plain,
        ):
            resolve = agent.workflow.resolve_session
            explicit = await resolve(**firing, session_id=f"x-{tag}", session_path="firing.id")
            per_firing = await resolve(**firing, session_path="firing.id")
            assembly = await resolve(**firing)
            declared = await plain.workflow.resolve_session(**firing)
            unresolved = await plain.workflow.resolve_session(trigger="chat", variables={})
            sent = await agent.workflow.send(None, "hi", **firing, session_path="firing.id")
        assert (explicit.session_id, explicit.minted) == (f"x-{tag}", False)
        assert per_firing.session_id == f"firing-{tag}"
        assert assembly.session_id == f"agentpath-{tag}"
        assert declared.session_id == f"chat-{tag}"
        assert unresolved.minted and unresolved.disposition == "turn"
        uuid_text = r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
        assert re.fullmatch(f"session-{uuid_text}", unresolved.session_id)
        assert sent.session_id == f"firing-{tag}"

    async def test_a_malformed_path_is_refused_wherever_it_is_written(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path
    ) -> None:
        """A malformed per-firing or assembly path raises InvalidSessionIdError."""
        server = scripted(playbook(rule("Hello.")))
        async with running_agent(client, task_queue, root, "rules", server, worker=False) as agent:
            with pytest.raises(InvalidSessionIdError):
                await agent.workflow.resolve_session(session_path="chat..id")
            with pytest.raises(InvalidSessionIdError):
                await agent.workflow.send(None, "hi", session_path="${{chat.id}}")
        with pytest.raises(InvalidSessionIdError):
            async with running_agent(
                client, task_queue, root, "rules", server, worker=False, session_path="1.id"
            ):
                pass
        assert server.requests == []
