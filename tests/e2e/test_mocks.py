"""Declared tool mocks in the session workflow: the first matching mock answers a governed
call instead of the tool, a non-matching call runs the real tool, a governance refusal is
never masked by a mock, and a mock with an ``error`` fails the call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.models import ToolMock
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.scenarios import ORDERS, write_order_skill

SPEC = """
title: Orders
states:
  lookup:
    triggers: { manual: }
    skills: { allow: [order-data] }
    instructions: Read the orders and answer.
"""

OTHER = "skills/order-data/assets/other.json"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "orders", SPEC)
    skill = write_order_skill(tmp_path, [{"id": "ORD-1001"}])
    (skill / "assets" / "other.json").write_text(json.dumps([{"id": "ORD-2002"}]))
    return tmp_path


def _reads_then_answer(*paths: str) -> str:
    """Read each path in one message, then say done."""
    return json.dumps(
        {
            "rules": [
                {"when": {"last_tool": "read_file"}, "reply": {"content": "done"}},
                {"reply": {"tool_calls": [call("read_file", file_path=p) for p in paths]}},
            ]
        }
    )


async def _tool_results(agent: Agent, session_id: str) -> list[tuple[str | None, str | None]]:
    view = await agent.sessions.view(session_id)
    return [(m.status, m.content) for m in view.transcript if m.role == "tool"]


async def test_a_matching_mock_answers_and_others_run_the_tool(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    server = scripted(_reads_then_answer(ORDERS, OTHER))
    mocks = [
        ToolMock(tool="read_file", when_input={"file_path": "/orders\\.json$/"}, result="[]"),
        ToolMock(tool="read_file", when_input={"file_path": ORDERS}, result="never: second"),
    ]
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        await agent.workflow.send("mock-1", "Orders?", mocks=mocks)
        results = await _tool_results(agent, "mock-1")
    assert results[0] == ("ok", "[]")  # first match in declaration order wins
    assert results[1][0] == "ok" and "ORD-2002" in (results[1][1] or "")


async def test_a_structured_result_is_json_and_an_error_result_fails_the_call(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    server = scripted(_reads_then_answer(ORDERS, OTHER))
    mocks = [
        ToolMock(tool="read_file", when_input={"file_path": ORDERS}, result={"total": 3}),
        ToolMock(tool="read_file", result={"error": "disk on fire"}),
    ]
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        await agent.workflow.send("mock-2", "Orders?", mocks=mocks)
        results = await _tool_results(agent, "mock-2")
    assert results == [("ok", '{"total": 3}'), ("error", "disk on fire")]


async def test_a_mock_never_masks_a_governance_refusal(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    server = scripted(_reads_then_answer("../escape.json"))
    mocks = [ToolMock(tool="read_file", result="x")]
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        await agent.workflow.send("mock-3", "Orders?", mocks=mocks)
        results = await _tool_results(agent, "mock-3")
    assert results[0][0] == "blocked"
