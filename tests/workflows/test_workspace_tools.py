"""copy_file, move_file and remove_file through a real session: disclosed in every state,
each call an activity of its own, governed like the agent's other tools."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.workflows.workspace_tools import (
    COPY_FILE_ACTIVITY,
    MOVE_FILE_ACTIVITY,
    REMOVE_FILE_ACTIVITY,
)
from tests.support.activity_events import activities_run
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

DESK = """
title: Filing
states:
  file-it:
    triggers: { manual: }
    instructions: File the draft.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "copy_file", "last_tool_result": "/Blocked/"},
                "reply": {"content": "Filed."},
            },
            {
                "when": {"last_tool": "remove_file"},
                "reply": {
                    "tool_calls": [
                        call("copy_file", source="scratchpad/final.md", destination="AGENTS.md")
                    ]
                },
            },
            {
                "when": {"last_tool": "move_file"},
                "reply": {
                    "tool_calls": [call("remove_file", file_path="scratchpad/archive/q3.md")]
                },
            },
            {
                "when": {"last_tool": "copy_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "move_file",
                            source="scratchpad/draft.md",
                            destination="scratchpad/final.md",
                        )
                    ]
                },
            },
            {
                "when": {"last_tool": "write_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "copy_file",
                            source="scratchpad/draft.md",
                            destination="scratchpad/archive/q3.md",
                        )
                    ]
                },
            },
            {
                "reply": {
                    "tool_calls": [
                        call("write_file", file_path="scratchpad/draft.md", content="# Q3")
                    ]
                }
            },
        ]
    }
)


async def test_the_agent_copies_moves_and_removes_within_the_scratchpad(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "filing", DESK)
    server = scripted(PLAYBOOK)
    store = tmp_path / "sessions"
    async with running_agent(client, task_queue, tmp_path, "filing", server, store=store) as agent:
        outcome = await agent.workflow.send("filing-1", "File the Q3 draft.")
        view = await agent.sessions.view("filing-1")
        history = await agent.handle("filing-1").fetch_history()
    assert outcome.reply == "Filed."
    answers = [(m.name, m.status) for m in view.transcript if m.role == "tool"]
    assert answers == [
        ("write_file", "ok"),
        ("copy_file", "ok"),
        ("move_file", "ok"),
        ("remove_file", "ok"),
        ("copy_file", "blocked"),  # AGENTS.md is read-only: governance refuses before any I/O
    ]
    session = store / "filing-1" / "scratchpad"
    assert (session / "final.md").read_text() == "# Q3"
    assert not (session / "draft.md").exists() and not (session / "archive" / "q3.md").exists()
    tools = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert {"copy_file", "move_file", "remove_file"} <= tools
    ran = activities_run(history.events)  # regular or local
    for name in (COPY_FILE_ACTIVITY, MOVE_FILE_ACTIVITY, REMOVE_FILE_ACTIVITY):
        assert name in ran
