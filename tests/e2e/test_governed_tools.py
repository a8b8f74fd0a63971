"""Governed workspace tools on the real dev server: the disclosed surface, a skill readable in
one state and invisible in another, a blocked call the model reads, scratchpad files that
carry across turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.scenarios import ORDERS, write_order_skill

SPEC = """
title: Orders
tools:
  forbid_always: [archmax_wait]
states:
  intake:
    triggers: { manual: }
    instructions: Route the request.
    transitions:
      - { to: lookup, description: The customer asks about an order. }
  lookup:
    skills: { allow: [order-data] }
    instructions: Read the orders and answer.
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "orders", SPEC)
    write_order_skill(tmp_path, [{"id": "ORD-1001"}])
    return tmp_path


async def test_a_skill_is_invisible_in_one_state_and_readable_in_another(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """intake enables no skill: the read is blocked (skill.not-allowed) and the model goes
    on; lookup enables order-data: the same read returns the file."""
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "intake", "last_tool": "read_file"},
                        "reply": {"tool_calls": [call("archmax_advance", to="lookup")]},
                    },
                    {
                        "when": {"state": "intake"},
                        "reply": {"tool_calls": [call("read_file", file_path=ORDERS)]},
                    },
                    {
                        "when": {
                            "state": "lookup",
                            "last_tool": "read_file",
                            "last_tool_result": "/(?P<order>ORD-\\d+)/",
                        },
                        "reply": {"content": "Found {order}."},
                    },
                    {
                        "when": {"state": "lookup"},
                        "reply": {"tool_calls": [call("read_file", file_path=ORDERS)]},
                    },
                ]
            }
        )
    )
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        outcome = await agent.workflow.send("gov-1", "Where is my order?")
        view = await agent.sessions.view("gov-1")
    reads = [m for m in view.transcript if m.role == "tool" and m.name == "read_file"]
    assert [(m.state, m.status) for m in reads] == [("intake", "blocked"), ("lookup", "ok")]
    assert reads[0].rule == "skill.not-allowed"
    assert "ORD-1001" in (reads[1].content or "")
    assert outcome.reply == "Found ORD-1001."
    surfaces = [{t["function"]["name"] for t in r.body["tools"]} for r in server.requests]
    assert all("archmax_wait" not in names for names in surfaces)  # forbid_always removes it
    assert all({"read_file", "write_file", "ls"} <= names for names in surfaces)


async def test_scratchpad_files_carry_across_turns(
    client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
) -> None:
    """A file a turn writes to scratchpad/ is there for the next turn at the same path."""
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {
                            "state": "intake",
                            "last_user": "remember",
                            "last_tool": "write_file",
                        },
                        "reply": {"content": "Noted."},
                    },
                    {
                        "when": {"state": "intake", "last_user": "remember"},
                        "reply": {
                            "tool_calls": [
                                call("write_file", file_path="scratchpad/notes.md", content="ORD-7")
                            ]
                        },
                    },
                    {
                        "when": {
                            "state": "intake",
                            "last_tool": "read_file",
                            "last_tool_result": "/(?P<note>ORD-\\d+)/",
                        },
                        "reply": {"content": "You told me {note}."},
                    },
                    {
                        "when": {"state": "intake", "last_user": "recall"},
                        "reply": {
                            "tool_calls": [call("read_file", file_path="scratchpad/notes.md")]
                        },
                    },
                ]
            }
        )
    )
    store = tmp_path / "store"
    async with running_agent(client, task_queue, root, "orders", server, store=store) as agent:
        await agent.workflow.send("gov-2", "remember ORD-7")
        recalled = await agent.workflow.send("gov-2", "recall")
    assert (store / "gov-2" / "scratchpad" / "notes.md").read_text() == "ORD-7"
    assert recalled.reply == "You told me ORD-7."


async def test_writes_outside_the_scratchpad_and_escapes_are_blocked(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """A write into the read-only skills mount and a `..` escape are refused; the model
    reads both refusals and finishes the turn."""
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "intake", "last_tool": "read_file"},
                        "reply": {"content": "I could not do that."},
                    },
                    {
                        "when": {"state": "intake"},
                        "reply": {
                            "tool_calls": [
                                call("write_file", file_path="skills/order-data/x.md", content="x"),
                                call("read_file", file_path="scratchpad/../../other/secret"),
                            ]
                        },
                    },
                ]
            }
        )
    )
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        outcome = await agent.workflow.send("gov-3", "break out")
        view = await agent.sessions.view("gov-3")
    results = [m for m in view.transcript if m.role == "tool"]
    assert [m.status for m in results] == ["blocked", "blocked"]
    assert results[0].rule is not None and results[1].rule is not None
    assert outcome.kind == "completed"
    assert not (root / "skills" / "order-data" / "x.md").exists()


async def test_only_enabled_skills_join_the_prompt(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """SKILL.md's description is shown in the state that enables the skill, not elsewhere."""
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "intake"},
                        "reply": {"tool_calls": [call("archmax_advance", to="lookup")]},
                    },
                    {"when": {"state": "lookup"}, "reply": {"content": "ok"}},
                ]
            }
        )
    )
    async with running_agent(client, task_queue, root, "orders", server) as agent:
        await agent.workflow.send("gov-4", "hi")
    systems = [r.body["messages"][0]["content"] for r in server.requests]
    assert "skills/order-data/" not in systems[0]
    assert "`skills/order-data/` — Orders." in systems[1]


REQUIRES = """
states:
  collect:
    triggers: { manual: }
    requires: [order_id]
    transitions:
      - { to: done, description: The order id is recorded. }
  done:
    instructions: Confirm.
"""


async def test_a_state_requires_its_variables_before_it_may_be_left(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """archmax_advance out of a state whose requires are unset is a refusal the model reads;
    once the agent records the variable, the advance commits."""
    write_workflow(tmp_path, "collect", REQUIRES)
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "collect", "last_tool_result": "/transition.requires/"},
                        "reply": {
                            "tool_calls": [
                                call("archmax_set_variables", variables={"order_id": "ORD-9"})
                            ]
                        },
                    },
                    {"when": {"state": "done"}, "reply": {"content": "Recorded."}},
                    {
                        "when": {"state": "collect"},
                        "reply": {"tool_calls": [call("archmax_advance", to="done")]},
                    },
                ]
            }
        )
    )
    async with running_agent(client, task_queue, tmp_path, "collect", server) as agent:
        outcome = await agent.workflow.send("req-1", "go")
        view = await agent.sessions.view("req-1")
    advances = [m for m in view.transcript if m.role == "tool" and m.name == "archmax_advance"]
    assert [m.status for m in advances] == ["error", "ok"]
    assert advances[0].rule == "transition.requires"
    assert outcome.state == "done" and outcome.variables["order_id"].value == "ORD-9"
