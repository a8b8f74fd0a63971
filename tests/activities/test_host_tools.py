"""Host tools: typed Python callables registered with create_agent(tools=[...]) run as an
activity on the worker, closed by default, governed like any tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.client import Client

from archmax_temporal.activities.host_tools import host_tool
from archmax_temporal.workflows.errors import ReservedToolNameError
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

SPEC = """
states:
  lookup:
    triggers: { manual: }
    tools:
      allow:
        - { tool: order_status, args: { order_id: "ORD-*" } }
    transitions:
      - { to: closed, description: Answered. }
  closed:
    instructions: Say goodbye.
"""


class OrderQuery(BaseModel):
    order_id: str


def order_status(query: OrderQuery) -> dict[str, str]:
    """Look up an order's shipping status."""
    if query.order_id == "ORD-0":
        raise LookupError("order system down")
    return {"order_id": query.order_id, "status": "shipped"}


PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"state": "lookup", "last_tool": "order_status", "last_user": "twice"},
                "reply": {"content": "checked"},
            },
            {
                "when": {"state": "lookup", "last_tool": "order_status"},
                "reply": {"tool_calls": [call("archmax_advance", to="closed")]},
            },
            {
                "when": {"state": "lookup", "last_user": "twice"},
                "reply": {
                    "tool_calls": [
                        call("order_status", order_id="XYZ-1"),
                        call("order_status", order_id="ORD-0"),
                    ]
                },
            },
            {
                "when": {"state": "lookup"},
                "reply": {"tool_calls": [call("order_status", order_id="ORD-5")]},
            },
            {"when": {"state": "closed"}, "reply": {"content": "Bye."}},
        ]
    }
)


async def test_a_granted_host_tool_runs_on_the_worker(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """The tool's schema reaches the model where it is granted; its result comes back as JSON;
    a terminal state without the grant does not disclose it."""
    write_workflow(tmp_path, "orders", SPEC)
    server = scripted(PLAYBOOK)
    async with running_agent(
        client, task_queue, tmp_path, "orders", server, tools=[order_status]
    ) as agent:
        outcome = await agent.workflow.send("host-1", "where is ORD-5")
        view = await agent.sessions.view("host-1")
    result = next(m for m in view.transcript if m.name == "order_status")
    assert result.status == "ok"
    assert json.loads(result.content or "") == {"order_id": "ORD-5", "status": "shipped"}
    surfaces = [{t["function"]["name"] for t in r.body["tools"]} for r in server.requests]
    assert "order_status" in surfaces[0]
    assert "order_status" not in surfaces[-1]
    schema = next(
        t for t in server.requests[0].body["tools"] if t["function"]["name"] == "order_status"
    )
    assert schema["function"]["parameters"]["required"] == ["order_id"]
    assert outcome.kind == "completed"


async def test_guards_block_and_a_raising_tool_is_an_error_result(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """An argument outside the guard is blocked by governance; a tool that raises answers
    an error the model reads, and the turn goes on."""
    write_workflow(tmp_path, "orders", SPEC)
    server = scripted(PLAYBOOK)
    async with running_agent(
        client, task_queue, tmp_path, "orders", server, tools=[order_status]
    ) as agent:
        outcome = await agent.workflow.send("host-2", "check twice")
        view = await agent.sessions.view("host-2")
    results = [m for m in view.transcript if m.name == "order_status"]
    assert [m.status for m in results] == ["blocked", "error"]
    assert results[0].rule == "tool.not-allowed"
    assert "LookupError: order system down" in (results[1].content or "")
    assert outcome.kind == "completed" and outcome.reply == "checked"


def test_runtime_names_are_reserved() -> None:
    """A host tool cannot take an archmax_* or built-in tool name."""

    def read_file(query: OrderQuery) -> str:
        return ""

    with pytest.raises(ReservedToolNameError):
        host_tool(read_file)
    with pytest.raises(ReservedToolNameError):
        host_tool(order_status, name="archmax_lookup")
    with pytest.raises(TypeError):
        host_tool(lambda x: x)
