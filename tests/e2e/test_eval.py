"""``archmax_eval``: a JavaScript snippet the agent runs in the sandbox, on its own
authority; its console output and last value answer the call, and every call starts afresh."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory

from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.models import Message, Outcome
from archmax_temporal.workflows.sandbox import SANDBOX_ACTIVITY
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

DESK = """
title: Sums
states:
  sum:
    triggers: { manual: }
    instructions: Compute with archmax_eval.
  locked:
    triggers: { audit: }
    tools: { forbid: [read_file] }
"""

DOUBLE = (
    "(async () => { console.log('reading'); "
    "const n = JSON.parse(await tools.readFile({ file_path: 'scratchpad/n.json' })).n; "
    "return { doubled: n * 2, state: args.state }; })()"
)


def _playbook(code: str) -> str:
    return json.dumps(
        {
            "rules": [
                {"when": {"last_tool": "archmax_eval"}, "reply": {"content": "Computed."}},
                {"reply": {"tool_calls": [call("archmax_eval", code=code)]}},
            ]
        }
    )


async def _eval(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    root: Path,
    sid: str,
    code: str,
    **send: Any,
) -> tuple[Outcome, Message, ScriptedModelServer, WorkflowHistory]:
    server = scripted(_playbook(code))
    store = root / "sessions"
    (store / sid / "scratchpad").mkdir(parents=True, exist_ok=True)
    (store / sid / "scratchpad" / "n.json").write_text('{"n": 21}')
    async with running_agent(client, task_queue, root, "sums", server, store=store) as agent:
        outcome = await agent.workflow.send(sid, "Double it.", **send)
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    [answer] = [m for m in view.transcript if m.role == "tool" and m.name == "archmax_eval"]
    return outcome, answer, server, history


async def test_the_value_and_console_output_answer_the_call(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "sums", DESK)
    outcome, answer, server, history = await _eval(
        client, task_queue, scripted, tmp_path, "eval-1", DOUBLE
    )
    assert outcome.reply == "Computed."
    assert answer.status == "ok"
    assert answer.content == 'log reading\n=> {"doubled": 42, "state": "sum"}'
    assert "archmax_eval" in {t["function"]["name"] for t in server.requests[0].body["tools"]}
    kinds = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert SANDBOX_ACTIVITY in kinds


async def test_its_tool_calls_are_governed_as_the_agents_own(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "sums", DESK)
    _, answer, _, _ = await _eval(
        client, task_queue, scripted, tmp_path, "eval-2", DOUBLE, trigger="audit"
    )
    assert answer.status == "error"
    assert answer.content is not None
    assert answer.content.startswith("archmax_eval failed (SandboxScriptError)")
    assert "Blocked by governance" in answer.content and "read_file" in answer.content


async def test_a_runaway_snippet_is_an_error_answer_and_the_turn_goes_on(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "sums", DESK + "settings: { timeoutMs: 300 }\n")
    outcome, answer, _, _ = await _eval(
        client, task_queue, scripted, tmp_path, "eval-3", "while (true) {}"
    )
    assert answer.status == "error" and "SandboxTimeoutError" in (answer.content or "")
    assert outcome.kind == "completed" and outcome.reply == "Computed."
