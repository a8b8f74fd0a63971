"""Sessions are listed from Temporal's visibility alone: the listing each session publishes
in its memo at every settled turn, and its search attributes. No query per session, so the
same answers with a worker running and with none, filters, and pages."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.models import SessionSummary
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

DESK = """
title: Desk
states:
  ask:
    triggers: { manual: {} }
    instructions: Ask for the order when told to wait, else answer.
"""

BOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_user": "/wait/"},
                "reply": {
                    "content": "Which order?",
                    "tool_calls": [call("archmax_wait", reason="the order id " + "x" * 300)],
                },
            }
        ],
        "default": {"content": "Answered."},
    }
)


async def _listed(
    agent: Agent, expected: dict[str, str], **filters: object
) -> list[SessionSummary]:
    """The listing narrowed to ``expected``'s ids, read until each shows its expected status:
    visibility lags, and a session's listing memo is published when its turn settles, so its
    id can show up before the status it settles in."""
    found: list[SessionSummary] = []
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        listed = await agent.sessions.list(**filters)  # type: ignore[arg-type]
        found = [s for s in listed if s.session_id in expected]
        if {s.session_id: s.status for s in found} == expected:
            return found
        if asyncio.get_running_loop().time() > deadline:
            seen = {s.session_id: s.status for s in found}
            raise AssertionError(f"the listing shows {seen}, not {expected}")
        await asyncio.sleep(0.1)


async def test_the_listing_is_the_same_with_no_worker_and_pages_and_filters(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "desk", DESK)
    server = scripted(BOOK)
    run = uuid.uuid4().hex[:8]
    parked, answered = f"list-parked-{run}", f"list-answered-{run}"
    ids = {parked, answered}
    settled = {parked: "awaiting_input", answered: "completed"}
    async with running_agent(client, task_queue, tmp_path, "desk", server) as agent:
        await agent.workflow.send(parked, "please wait", variables={"customer": "Acme"})
        await agent.workflow.send(answered, "hello")
        served = await _listed(agent, settled)
        queried = await agent.sessions.get(parked)
    requests = len(server.requests)
    async with running_agent(client, task_queue, tmp_path, "desk", server, worker=False) as agent:
        unserved = await _listed(agent, settled)
        waiting = await _listed(agent, {parked: "awaiting_input"}, status="awaiting_input")
        finished = await _listed(agent, {answered: "completed"}, status="completed")
        due = [s for s in await agent.sessions.list(due=True) if s.session_id in ids]
        one, token = await agent.sessions.page(limit=1)
        described = await agent.sessions.describe(parked)
    assert len(server.requests) == requests  # nothing ran: no worker, no query answered

    def shape(s: SessionSummary) -> tuple[object, ...]:
        return (s.session_id, s.workflow, s.status, s.classification, s.state, s.turns)

    assert sorted(map(shape, served)) == sorted(map(shape, unserved))
    assert all(s.source == "visibility" for s in served + unserved)
    by_id = {s.session_id: s for s in unserved}
    listed = by_id[parked]
    assert (listed.status, listed.classification, listed.state) == ("awaiting_input", "open", "ask")
    assert listed.pending_input is not None and queried.pending_input is not None
    assert listed.pending_input.parked_at == queried.pending_input.parked_at
    assert listed.wait_reason is not None and len(listed.wait_reason) == 200  # cut, not copied
    assert queried.wait_reason is not None and queried.wait_reason.startswith(
        listed.wait_reason[:-1]
    )
    assert sorted(listed.variables) == ["customer"]  # names, never values
    assert listed.variables["customer"].value is None
    # the host seeded it, so it is locked: the listing says so, as the query does
    assert queried.variables["customer"].locked and listed.variables["customer"].locked
    assert described.variables["customer"].locked
    assert by_id[answered].status == "completed" and by_id[answered].exit is not None
    assert [s.session_id for s in waiting] == [parked]
    assert [s.session_id for s in finished] == [answered]
    assert due == []
    assert len(one) <= 1 and token  # a page, and the token to the next
    assert (described.session_id, described.status) == (parked, "awaiting_input")
    # (this test's own in-process worker still counts as polling for a while: that a
    # session no worker serves says so is tests/client/cli/test_app.py's)
