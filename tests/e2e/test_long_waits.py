"""Long waits in seconds: a seven-day ``until`` and a ``maxParks: 5`` daily loop, on the
time-skipping test server (:mod:`tests.support.timeskip`), with the real worker, activities and
scripted model. Each test also bounds its own wall-clock time: the point is that days cost
seconds."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.models import PendingInput
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.timeskip import advance

BANK = """
title: Bank check
states:
  check-bank:
    triggers: { manual: }
    instructions: Look for the transaction; wait a day and look again while it has not posted.
    budget: { maxParks: 5 }
    on_error: escalate
    transitions:
      - { to: reconcile, description: The transaction was found. }
  reconcile:
    instructions: Confirm the reconciliation.
  escalate:
    instructions: Hand the unposted transaction to a person.
"""

WALL_CLOCK_BUDGET = 60.0
"""Seconds a many-day test may take in real time (it takes a few on two shared cores)."""


def _waiting(until: str, *, found_on_wake: bool) -> str:
    """The bank model: waits ``until``; woken by its timer, it finds the transaction (or
    not, and waits again)."""
    woken = {
        "name": "woken",
        "when": {
            "state": "check-bank",
            "last_tool": "archmax_note",
            "last_tool_result": "/'timer'/",
        },
        "reply": {"tool_calls": [call("archmax_advance", to="reconcile")]}
        if found_on_wake
        else {
            "content": "Still not posted.",
            "tool_calls": [call("archmax_wait", reason="not posted yet", until=until)],
        },
    }
    rules = [
        woken,
        {
            "name": "wait",
            "when": {"state": "check-bank"},
            "reply": {
                "content": "Not posted yet.",
                "tool_calls": [call("archmax_wait", reason="not posted yet", until=until)],
            },
        },
        {"name": "reconciled", "when": {"state": "reconcile"}, "reply": {"content": "Done."}},
        {"name": "escalated", "when": {"state": "escalate"}, "reply": {"content": "Escalated."}},
    ]
    return json.dumps({"rules": rules})


async def _status(agent: Agent, sid: str) -> str:
    return (await agent.sessions.get(sid)).status


async def test_a_seven_day_wait_wakes_itself_in_seconds(
    skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """``archmax_wait({until: "7d"})`` parks on a 7-day durable timer; six days on it still
    waits, a day later it has woken itself with trigger ``timer`` and reconciled."""
    started = time.monotonic()
    write_workflow(tmp_path, "bank", BANK)
    server = scripted(_waiting("7d", found_on_wake=True))
    async with running_agent(
        skipping_env.client, task_queue, tmp_path, "bank", server, search_attributes=False
    ) as agent:
        parked = await agent.workflow.send("week-1", "Has the transfer posted?")
        assert isinstance(parked.pending, PendingInput) and parked.pending.resume_at is not None
        assert parked.pending.resume_at - parked.pending.parked_at == timedelta(days=7)
        await advance(skipping_env, timedelta(days=6))
        assert await _status(agent, "week-1") == "awaiting_input"
        await advance(
            skipping_env,
            timedelta(days=1, minutes=1),
            lambda: _completed(agent, "week-1"),
        )
        summary = await agent.sessions.get("week-1")
        history = await agent.handle("week-1").fetch_history()
    assert (summary.state, summary.variables["trigger"].value) == ("reconcile", "timer")
    assert str(summary.variables["now"].value) >= parked.pending.resume_at.isoformat()[:16]
    fired = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert len(fired) == 1
    assert [r.rule for r in server.requests] == ["wait", "woken", "reconciled"]
    assert time.monotonic() - started < WALL_CLOCK_BUDGET


async def _completed(agent: Agent, sid: str) -> bool:
    return await _status(agent, sid) == "completed"


async def test_a_daily_loop_bounded_by_max_parks_escalates_on_the_sixth_day(
    skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """ "Check daily, up to five days, then escalate": five one-day parks each wake the next
    morning; the sixth park is refused (maxParks: 5) and on_error routes to escalate, five
    simulated days after the first check."""
    started = time.monotonic()
    write_workflow(tmp_path, "bank", BANK)
    server = scripted(_waiting("1d", found_on_wake=False))
    sid = "daily-1"
    async with running_agent(
        skipping_env.client, task_queue, tmp_path, "bank", server, search_attributes=False
    ) as agent:
        first = await agent.workflow.send(sid, "Has the transfer posted?")
        assert first.kind == "parked"
        wakes: list[str] = []
        for day in range(1, 6):
            before = len(server.requests)

            async def woke(before: int = before) -> bool:
                status = await _status(agent, sid)
                return len(server.requests) > before and status != "running"

            await advance(skipping_env, timedelta(days=1, minutes=1), woke)
            summary = await agent.sessions.get(sid)
            wakes.append(summary.status)
            if day < 5:
                assert summary.status == "awaiting_input", day
                assert summary.resume_at is not None
        summary = await agent.sessions.get(sid)
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    assert wakes == ["awaiting_input"] * 4 + ["completed"]
    assert (summary.state, summary.status) == ("escalate", "completed")
    routed = [s for s in view.trail if s.kind == "on_error"]
    assert len(routed) == 1 and "maxParks (5)" in (routed[0].reason or "")
    assert routed[0].ts - first.pending.parked_at >= timedelta(days=5)  # type: ignore[union-attr]
    fired = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert len(fired) == 5
    assert [r.rule for r in server.requests] == ["wait", *["woken"] * 5, "escalated"]
    assert time.monotonic() - started < WALL_CLOCK_BUDGET
