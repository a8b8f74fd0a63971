"""The seed's session rules on the real dev server: continue-as-new keeps the session, on_error
routing, archmax_reset and the follow-up prompt, dispositions, mid-turn firings, host-side
polling of timed parks, and session path precedence."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from tests.conftest import EXAMPLES, running_agent, write_workflow
from workflows.errors import (
    InvalidSessionIdError,
    SessionNotAwaitingInputError,
    SessionNotResumableError,
)

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
    budget: { maxTurns: 2 }
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


def tool(tool_name: str, /, **arguments: object) -> dict[str, object]:
    return {"name": tool_name, "arguments": arguments}


def playbook(*rules: dict[str, object]) -> str:
    return json.dumps({"rules": list(rules)})


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "rules", RULES)
    write_workflow(tmp_path, "guarded", LOOPING.replace("ON_ERROR", "    on_error: escalate"))
    write_workflow(tmp_path, "unguarded", LOOPING.replace("ON_ERROR\n", ""))
    return tmp_path


async def _poll(probe, timeout: float = 20.0):
    """Await ``probe()`` until it returns something truthy (or the timeout passes)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await probe()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.1)


class TestContinueAsNew:
    async def test_a_parked_session_survives_continue_as_new_and_resumes(
        self, client, task_queue, scripted, root
    ):
        """Across continue-as-new the session keeps transcript, variables, trail and its park,
        and park counts reset at each turn boundary while maxParks still bounds a turn."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "intake", "last_tool": "archmax_note", "last_user": "third"},
                    "reply": {"tool_calls": [tool("archmax_wait", reason="another reply")]},
                },
                {
                    "when": {
                        "state": "intake",
                        "last_tool": "archmax_note",
                        "last_tool_result": "/(?P<order>ORD-\\d+)/",
                    },
                    "reply": {"content": "Got {order}."},
                },
                {
                    "when": {"state": "intake", "last_tool": "archmax_set_variables"},
                    "reply": {"content": "Noted."},
                },
                {
                    "when": {"state": "intake", "last_user": "first"},
                    "reply": {"tool_calls": [tool("archmax_set_variables", variables={"tier": 1})]},
                },
                {
                    "when": {"state": "intake", "last_user": "/second|third/"},
                    "reply": {
                        "content": "Which order?",
                        "tool_calls": [tool("archmax_wait", reason="the order id")],
                    },
                },
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

            async def moved_on():
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
        assert summary.pending_input is not None
        assert (summary.pending_input.state, summary.pending_input.reason) == (
            "intake",
            "the order id",
        )
        assert (
            summary.variables["customer"].value == "Acme" and summary.variables["customer"].locked
        )
        assert summary.variables["tier"].value == 1 and not summary.variables["tier"].locked
        assert [m.content for m in view.transcript if m.role == "user"] == ["first", "second"]
        assert [s.kind for s in view.trail] == ["trigger", "trigger"]
        assert (resumed.kind, resumed.disposition, resumed.reply) == (
            "completed",
            "deliver",
            "Got ORD-7.",
        )
        assert resumed.variables["tier"].value == 1 and resumed.variables["customer"].locked
        assert resumed.variables["order"].locked
        # turn 3 parks in intake again: the count carried from turn 2 was reset
        assert reparked.kind == "parked"
        # ...but a second park within that turn exceeds maxParks (1)
        assert over_budget.kind == "rejected"
        assert over_budget.rejected is not None and "maxParks (1)" in over_budget.rejected


class TestOnError:
    async def test_exhausted_max_turns_routes_to_on_error(self, client, task_queue, scripted, root):
        """A looping model exhausts maxTurns; the turn routes to on_error with an [error] note."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "lookup"},
                    "reply": {"tool_calls": [tool("archmax_get_variables")]},
                },
                {"when": {"state": "escalate"}, "reply": {"content": "A person will take over."}},
            )
        )
        sid = new_id("onerr")
        async with running_agent(client, task_queue, root, "guarded", server) as agent:
            outcome = await agent.workflow.send(sid, "Where is ORD-1?")
            view = await agent.sessions.view(sid)
        assert (outcome.kind, outcome.state) == ("completed", "escalate")
        assert outcome.exit is not None and outcome.exit.success
        assert outcome.reply == "A person will take over."
        assert [(s.kind, s.to) for s in outcome.trail] == [
            ("trigger", "lookup"),
            ("on_error", "escalate"),
        ]
        assert "maxTurns (2)" in (outcome.trail[1].reason or "")
        notes = [m for m in view.transcript if m.note == "error"]
        assert [m.role for m in notes] == ["assistant", "tool"]
        assert (notes[1].content or "").startswith("[error]")
        assert "maxTurns (2)" in (notes[1].content or "")
        assert [r.state for r in server.requests] == ["lookup", "lookup", "escalate"]

    async def test_without_on_error_the_turn_is_rejected(self, client, task_queue, scripted, root):
        """With no on_error the exhausted budget rejects the turn: no exit, no route."""
        server = scripted(
            playbook({"when": {}, "reply": {"tool_calls": [tool("archmax_get_variables")]}})
        )
        sid = new_id("noerr")
        async with running_agent(client, task_queue, root, "unguarded", server) as agent:
            outcome = await agent.workflow.send(sid, "Where is ORD-1?")
        assert (outcome.kind, outcome.state, outcome.exit) == ("rejected", "lookup", None)
        assert outcome.rejected is not None and "budget.maxTurns (2)" in outcome.rejected
        assert [s.kind for s in outcome.trail] == ["trigger"]
        assert len(server.requests) == 2


class TestReset:
    async def test_reset_returns_to_the_entry_state_and_is_refused_there(
        self, client, task_queue, scripted, root
    ):
        """A follow-up in a terminal state resets to the entry state; in the entry state the
        reset is refused; only the follow-up turn's prompt carries the Follow-up block."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "answer", "last_user": "second"},
                    "reply": {"tool_calls": [tool("archmax_reset", reason="needs triage")]},
                },
                {
                    "when": {
                        "state": "intake",
                        "last_tool": "archmax_reset",
                        "last_tool_result": "already",
                    },
                    "reply": {"content": "Staying in intake."},
                },
                {
                    "when": {"state": "intake", "last_tool": "archmax_reset"},
                    "reply": {"content": "Back at intake."},
                },
                {
                    "when": {"state": "intake", "last_user": "third"},
                    "reply": {"tool_calls": [tool("archmax_reset")]},
                },
                {
                    "when": {"state": "intake", "last_user": "first"},
                    "reply": {"tool_calls": [tool("archmax_advance", to="answer")]},
                },
                {"when": {"state": "answer"}, "reply": {"content": "Answered."}},
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
            ("trigger", "intake"),
            ("agent", "answer"),
            ("trigger", "answer"),
            ("reset", "intake"),
        ]
        assert second.trail[-1].reason == "needs triage"
        assert second.variables["customer"].value == "Acme"
        assert [m.content for m in view.transcript if m.role == "user"] == [
            "first",
            "second",
            "third",
        ]
        assert (third.state, third.reply) == ("intake", "Staying in intake.")
        assert [s.kind for s in third.trail].count("reset") == 1
        refusal = [m for m in view.transcript if m.role == "tool" and m.name == "archmax_reset"][-1]
        assert refusal.status == "error"
        assert "already in the state" in (refusal.content or "")
        follow_up = ["### Follow-up" in r.body["messages"][0]["content"] for r in server.requests]
        # turn 1: intake, answer; turn 2: answer (reset), intake; turn 3: intake, intake
        assert follow_up == [False, False, True, False, False, False]


class TestDispositions:
    async def test_resolve_session_follows_the_seed_table(self, client, task_queue, scripted, root):
        """None yet and finished: turn; parked for input: resume, and send delivers into it."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "intake", "last_user": "wait"},
                    "reply": {
                        "content": "Which order?",
                        "tool_calls": [tool("archmax_wait", reason="the order id")],
                    },
                },
                {"when": {}, "reply": {"content": "Done."}},
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
        assert (none_yet.session_id, none_yet.disposition, none_yet.minted) == (
            finished,
            "turn",
            False,
        )
        assert (after_turn.disposition, after_turn.minted) == ("turn", False)
        assert (by_path.session_id, by_path.disposition) == (parked, "resume")
        assert (delivered.disposition, delivered.kind) == ("deliver", "completed")
        assert [(s.kind, s.reason) for s in delivered.trail] == [
            ("trigger", "manual"),
            ("trigger", "chat"),
        ]

    async def test_a_session_parked_at_a_human_state_resolves_to_reply(
        self, client, task_queue, scripted
    ):
        """A session held at refund-review resolves to the reply disposition."""
        server = scripted(REFUND_PLAYBOOK)
        sid = new_id("disp-human")
        async with running_agent(client, task_queue, REFUND, "refund-review", server) as agent:
            parked = await agent.workflow.send(sid, "Hi, refund for ORD-1001.")
            resolved = await agent.workflow.resolve_session(session_id=sid)
        assert (parked.status, parked.state) == ("awaiting_decision", "refund-review")
        assert (resolved.session_id, resolved.disposition, resolved.minted) == (sid, "reply", False)


class TestMidTurn:
    async def test_firings_during_a_turn_are_refused_and_the_turn_completes(
        self, client, task_queue, scripted, root
    ):
        """Mid-turn, send raises SessionNotResumableError and deliver SessionNotAwaitingInput."""
        server = scripted(
            playbook({"when": {}, "delay_ms": 1500, "reply": {"content": "Slow answer."}})
        )
        sid = new_id("midturn")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            first = asyncio.create_task(agent.workflow.send(sid, "first"))

            async def model_called():
                return bool(server.requests)

            assert await _poll(model_called, timeout=10), "the first turn never called the model"
            await asyncio.sleep(0.2)
            with pytest.raises(SessionNotResumableError):
                await agent.workflow.send(sid, "second")
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(sid, trigger="reply")
            outcome = await first
            view = await agent.sessions.view(sid)
        assert (outcome.kind, outcome.reply) == ("completed", "Slow answer.")
        assert [m.content for m in view.transcript if m.role == "user"] == ["first"]
        assert len(server.requests) == 1


class TestHostPolling:
    async def test_host_polling_wakes_a_timed_park_once(self, client, task_queue, scripted, root):
        """The seed's host loop delivers `timer` when resume_at passes; a second firing is
        refused, so the session ran once."""
        server = scripted(
            playbook(
                {
                    "when": {"state": "intake", "last_tool_result": "/'timer'/"},
                    "reply": {"content": "It has posted."},
                },
                {
                    "when": {"state": "intake"},
                    "reply": {
                        "content": "Not posted yet.",
                        "tool_calls": [tool("archmax_wait", reason="posting", until="1d")],
                    },
                },
            )
        )
        sid = new_id("poll")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            parked = await agent.workflow.send(sid, "check the bank")

            async def listed():
                return [s for s in await agent.sessions.list() if s.session_id == sid]

            found = await _poll(listed)

            async def host_loop(now: datetime) -> list:
                outcomes = []
                for t in await agent.sessions.list():
                    if t.session_id != sid:
                        continue
                    if t.status == "awaiting_input" and t.resume_at and t.resume_at <= now:
                        outcomes.append(
                            await agent.workflow.deliver(
                                t.session_id, trigger="timer", variables={"now": now.isoformat()}
                            )
                        )
                return outcomes

            early = await host_loop(datetime.now(UTC))
            tomorrow = datetime.now(UTC) + timedelta(days=1, minutes=5)
            woken = await host_loop(tomorrow)
            calls = len(server.requests)
            with pytest.raises(SessionNotAwaitingInputError):
                await agent.workflow.deliver(
                    sid, trigger="timer", variables={"now": tomorrow.isoformat()}
                )
        assert parked.pending is not None and parked.pending.resume_at is not None
        assert len(found) == 1 and found[0].resume_at == parked.pending.resume_at
        assert found[0].status == "awaiting_input"
        assert early == []
        assert len(woken) == 1
        assert (woken[0].kind, woken[0].disposition, woken[0].reply) == (
            "completed",
            "deliver",
            "It has posted.",
        )
        assert woken[0].variables["now"].value == tomorrow.isoformat()
        assert woken[0].variables["trigger"].value == "timer"
        assert calls == 2 and len(server.requests) == 2


class TestSessionPaths:
    async def test_precedence_of_session_sources(self, client, task_queue, scripted, root):
        """Explicit id > per-firing path > agent path > trigger declaration > minted id."""
        server = scripted(playbook({"when": {}, "reply": {"content": "Hello."}}))
        tag = uuid.uuid4().hex[:8]
        seeds = {
            "chat": {"id": f"trig-{tag}"},
            "agentpath": {"id": f"agent-{tag}"},
            "firing": {"id": f"fire-{tag}"},
        }
        async with (
            running_agent(
                client, task_queue, root, "rules", server, session_path="agentpath.id"
            ) as agent,
            running_agent(client, task_queue, root, "rules", server, worker=False) as plain,
        ):
            surface = agent.workflow
            explicit = await surface.resolve_session(
                trigger="chat", variables=seeds, session_id=f"x-{tag}", session_path="firing.id"
            )
            per_firing = await surface.resolve_session(
                trigger="chat", variables=seeds, session_path="firing.id"
            )
            assembly = await surface.resolve_session(trigger="chat", variables=seeds)
            declared = await plain.workflow.resolve_session(trigger="chat", variables=seeds)
            unresolved = await plain.workflow.resolve_session(trigger="chat", variables={})
            sent = await surface.send(
                None, "hi", trigger="chat", variables=seeds, session_path="firing.id"
            )
        assert (explicit.session_id, explicit.minted) == (f"x-{tag}", False)
        assert per_firing.session_id == f"fire-{tag}"
        assert assembly.session_id == f"agent-{tag}"
        assert declared.session_id == f"trig-{tag}"
        assert unresolved.minted and unresolved.disposition == "turn"
        assert re.fullmatch(
            r"session-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", unresolved.session_id
        )
        assert sent.session_id == f"fire-{tag}"

    async def test_a_malformed_path_is_refused_wherever_it_is_written(
        self, client, task_queue, scripted, root
    ):
        """A malformed per-firing or assembly path raises InvalidSessionIdError."""
        server = scripted(playbook({"when": {}, "reply": {"content": "Hello."}}))
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


PARKER = """
title: Parker
states:
  check:
    triggers: { manual: }
    instructions: Check.
    budget: { maxParks: 1 }
    on_error: escalate
    transitions:
      - { to: done, description: Found. }
  escalate:
    instructions: Escalate.
  done:
    instructions: Answer.
"""


class TestProbe:
    async def test_probe_resolve_mid_turn(self, client, task_queue, scripted, root):
        """probe"""
        server = scripted(
            playbook({"when": {}, "delay_ms": 1500, "reply": {"content": "Slow answer."}})
        )
        sid = new_id("probe")
        async with running_agent(client, task_queue, root, "rules", server) as agent:
            first = asyncio.create_task(agent.workflow.send(sid, "first"))

            async def model_called():
                return bool(server.requests)

            assert await _poll(model_called, timeout=10)
            try:
                r = await agent.workflow.resolve_session(session_id=sid)
                print("RESOLVED", r)
            except Exception as e:
                print("RAISED", type(e))
            await first

    async def test_probe_maxparks_on_error(self, client, task_queue, scripted, tmp_path):
        """probe"""
        write_workflow(tmp_path, "parker", PARKER)
        server = scripted(
            playbook(
                {"when": {"state": "escalate"}, "reply": {"content": "Escalated."}},
                {
                    "when": {"state": "check"},
                    "reply": {
                        "content": "Not yet.",
                        "tool_calls": [
                            tool("archmax_wait", reason="x"),
                            tool("archmax_get_variables"),
                        ],
                    },
                },
            )
        )
        sid = new_id("probe")
        async with running_agent(client, task_queue, tmp_path, "parker", server) as agent:
            a = await agent.workflow.send(sid, "first")
            b = await agent.workflow.deliver(sid, trigger="poll")
            view = await agent.sessions.view(sid)
        print(a.kind, b.kind, b.state, [(s.kind, s.to) for s in b.trail])
        for m in view.transcript:
            print(
                m.role,
                m.note,
                m.name,
                m.tool_call_id,
                [c.id + ":" + c.name for c in m.tool_calls],
                (m.content or "")[:80],
            )
        print(server.requests[-1].body["messages"][-6:])
