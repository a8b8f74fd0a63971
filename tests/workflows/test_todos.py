"""``write_todos``: the agent's plan, kept in the session's state, replaced whole by each call;
always disclosed, removable with a forbid."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.workflows import todos
from archmax_temporal.workflows.models import Todo
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

PLAN = [
    {"content": "Read the order", "status": "completed"},
    {"content": "Draft the reply", "status": "in_progress"},
]

DESK = """
title: Planner
states:
  plan:
    triggers: { manual: }
  quiet:
    triggers: { quiet: }
    tools: { forbid: [write_todos] }
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "write_todos"}, "reply": {"content": "Planned."}},
            {"reply": {"tool_calls": [call("write_todos", todos=PLAN)]}},
        ]
    }
)


def test_a_call_replaces_the_plan_and_answers_it() -> None:
    plan, answer = todos.write({"todos": PLAN})
    assert plan == [Todo(**item) for item in PLAN]
    assert answer == f"Updated todo list to {json.dumps(PLAN)}"


def test_a_malformed_plan_is_refused_naming_the_problem() -> None:
    plan, answer = todos.write({"todos": [{"content": "x", "status": "done"}]})
    assert plan is None and answer.startswith("write_todos refused: todos.0.status")
    blank, why = todos.write({"todos": [{"content": "  ", "status": "pending"}]})
    assert blank is None and why == "write_todos refused: todos.0.content is empty"


async def test_the_plan_lives_in_the_session_and_a_forbid_removes_the_tool(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "planner", DESK)
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "planner", server) as agent:
        outcome = await agent.workflow.send("plan-1", "Answer the customer.")
        view = await agent.sessions.view("plan-1")
        await agent.workflow.send("plan-2", "Quietly.", trigger="quiet")
        quiet = await agent.sessions.view("plan-2")
    assert outcome.reply == "Planned."
    assert view.todos == [Todo(**item) for item in PLAN]
    assert quiet.todos == []
    [answer] = [m for m in view.transcript if m.role == "tool" and m.name == "write_todos"]
    assert answer.status == "ok" and answer.content == f"Updated todo list to {json.dumps(PLAN)}"
    first, second = (
        {t["function"]["name"] for t in request.body["tools"]} for request in server.requests[::2]
    )
    assert "write_todos" in first and "write_todos" not in second
    [refused] = [m for m in quiet.transcript if m.role == "tool" and m.name == "write_todos"]
    assert refused.status == "blocked"
