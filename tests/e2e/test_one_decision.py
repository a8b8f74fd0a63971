"""One decision on every tool call, end to end: the same guards, variables and mocks
(tests/support/decision_table.py) run through the three paths that call a tool — the turn engine
(the agent's ``read_file``), delegation (the agent's ``archmax_workflow_sink``) and the sandbox
bridge (a script's ``tools.readFile``) — on the dev server with the scripted model, and every
path shows the verdict the table names. Each call is dispatched once: the history schedules
one tool activity (or starts one child) per call that runs, and none for a refused or mocked
one.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from archmax_temporal.client.host import Agent
from archmax_temporal.worker import DATA_CONVERTER
from archmax_temporal.workflows.contracts.sandbox import SANDBOX_ACTIVITY, SandboxRunResult
from archmax_temporal.workflows.contracts.workspace import READ_FILE_ACTIVITY
from archmax_temporal.workflows.models import Message
from tests.support import decision_table as table
from tests.support.activity_events import activities_run
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

SUB_TOOL = f"archmax_workflow_{table.SINK}"

READER = f"""
title: Reader
states:
  {table.STATE}:
    triggers: {{ manual: }}
    instructions: Read what you are asked to.
{table.spec_block("read_file")}"""

CALLER = f"""
title: Caller
states:
  {table.STATE}:
    triggers: {{ manual: }}
    instructions: Hand each path to the sink.
{table.spec_block(SUB_TOOL)}"""

SINK = """
title: Sink
states:
  take:
    triggers:
      manual:
        description: Take a path.
        requires: [{ name: file_path, type: string }]
    instructions: Say that you took it.
"""


def _probe(bridged: str) -> str:
    """A script making every row's call through ``tools.<bridged>``, each answer or refusal
    kept in order."""
    paths = json.dumps([row.file_path for row in table.ROWS])
    return (
        "export default async ({ tools }) => {\n"
        f"  const paths = {paths};\n"
        "  const seen = [];\n"
        "  for (const file_path of paths) {\n"
        "    try {\n"
        f"      seen.push({{ ok: true, text: await tools.{bridged}({{ file_path }}) }});\n"
        "    } catch (error) {\n"
        "      seen.push({ ok: false, text: String(error.message) });\n"
        "    }\n"
        "  }\n"
        "  return seen;\n"
        "};\n"
    )


def _said(row: table.Row) -> dict[str, str]:
    """The row's arguments as a playbook writes them (its ``{{``/``}}`` are literal braces)."""
    return {
        key: value.replace("{", "{{").replace("}", "}}")
        for key, value in table.arguments(row).items()
    }


PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"state": "take"}, "reply": {"content": "taken"}},
            {"when": {"last_tool": "read_file"}, "reply": {"content": "done"}},
            {"when": {"last_tool": SUB_TOOL}, "reply": {"content": "done"}},
            {"when": {"last_tool": "archmax_run"}, "reply": {"content": "done"}},
            {
                "when": {"last_user": "turn"},
                "reply": {"tool_calls": [call("read_file", **_said(r)) for r in table.ROWS]},
            },
            {
                "when": {"last_user": "delegate"},
                "reply": {"tool_calls": [call(SUB_TOOL, **_said(r)) for r in table.ROWS]},
            },
            {
                "when": {"last_user": "ptc-sub"},
                "reply": {
                    "tool_calls": [
                        call("archmax_run", file_path="skills/probe/scripts/probe-sub.js")
                    ]
                },
            },
            {
                "when": {"last_user": "script"},
                "reply": {
                    "tool_calls": [call("archmax_run", file_path="skills/probe/scripts/probe.js")]
                },
            },
        ]
    }
)

_RULE = re.compile(r"^Blocked by governance \(([^)]+)\): ")
_UNRESOLVED = re.compile(r"^\S+ refused: Unresolved variable reference")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "reader", READER)
    write_workflow(tmp_path, "caller", CALLER)
    write_workflow(tmp_path, table.SINK, SINK)
    skill = tmp_path / "skills" / "probe"
    (skill / "assets").mkdir(parents=True)
    (skill / "scripts").mkdir()
    (skill / "SKILL.md").write_text("---\nname: probe\ndescription: Probes.\n---\n")
    (skill / "scripts" / "probe.js").write_text(_probe("readFile"), encoding="utf-8")
    (skill / "scripts" / "probe-sub.js").write_text(_probe("archmaxWorkflowSink"), encoding="utf-8")
    for row in table.ROWS:
        name = row.file_path.rpartition("/")[2]
        if "{" not in name:
            (skill / "assets" / name).write_text(json.dumps({"file": name}))
    (skill / "assets" / "acme-1.json").write_text(json.dumps({"file": "acme-1.json"}))
    return tmp_path


def _verdict(ok: bool, text: str) -> table.Expected:
    """The verdict an answer shows: a governance refusal names its rule, an unresolved
    reference says so, a mock answers its result, anything else ran."""
    refused = _RULE.match(text)
    if refused is not None:
        return table.blocked(refused.group(1))
    if _UNRESOLVED.match(text):
        return table.blocked("tool.unresolved-reference")
    if text == table.MOCKED:
        return table.MOCK
    assert ok, text
    return table.RUN


def _answers(transcript: list[Message], tool: str) -> list[Message]:
    return [m for m in transcript if m.role == "tool" and m.name == tool]


def _transcript_verdicts(answers: list[Message]) -> list[table.Expected]:
    seen = []
    for answer in answers:
        verdict = _verdict(answer.status == "ok", answer.content or "")
        assert (answer.status == "blocked") == (verdict.kind == "blocked"), answer
        assert answer.rule == verdict.rule, answer  # the rule travels on the message too
        seen.append(verdict)
    return seen


def _scheduled(history: WorkflowHistory, activity: str) -> list[Any]:
    return [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    ]


def _children(history: WorkflowHistory) -> list[str]:
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]


def _sandbox_results(history: WorkflowHistory) -> list[SandboxRunResult]:
    converter = DATA_CONVERTER.payload_converter
    runs = {e.event_id for e in _scheduled(history, SANDBOX_ACTIVITY)}
    return [
        converter.from_payload(
            e.activity_task_completed_event_attributes.result.payloads[0], SandboxRunResult
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        and e.activity_task_completed_event_attributes.scheduled_event_id in runs
    ]


def _expected(origin: str) -> list[table.Expected]:
    return [row.expected("script" if origin == "script" else "agent") for row in table.ROWS]


async def _send(agent: Agent, sid: str, message: str, tool: str) -> WorkflowHistory:
    outcome = await agent.workflow.send(
        sid, message, variables=dict(table.VARIABLES), mocks=table.mocks(tool)
    )
    assert outcome.kind == "completed", outcome
    return await agent.handle(sid).fetch_history()


async def test_the_same_guards_give_the_same_verdicts_on_every_path(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    turn_id, delegation_id, script_id = (f"{kind}-{run}" for kind in ("turn", "sub", "ptc"))
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "reader", server) as reader:
        turn_history = await _send(reader, turn_id, "turn", "read_file")
        turn_view = await reader.sessions.view(turn_id)
        script_history = await _send(reader, script_id, "script", "read_file")
        script_view = await reader.sessions.view(script_id)
    async with running_agent(client, task_queue, root, "caller", server) as caller:
        delegation_history = await _send(caller, delegation_id, "delegate", SUB_TOOL)
        delegation_view = await caller.sessions.view(delegation_id)

    # --- the turn engine: the agent's own calls --------------------------------------------
    turn = _transcript_verdicts(_answers(turn_view.transcript, "read_file"))
    assert turn == _expected("agent")
    ran = sum(1 for verdict in turn if verdict == table.RUN)
    ran_calls = activities_run(turn_history.events).count(READ_FILE_ACTIVITY)
    assert ran_calls == ran  # once per call that ran (a local activity: its marker)

    # --- delegation: the agent's sub-workflow calls ----------------------------------------
    delegated = _transcript_verdicts(_answers(delegation_view.transcript, SUB_TOOL))
    assert delegated == turn
    started = _children(delegation_history)
    assert started == [f"{delegation_id}.{table.SINK}-{n}" for n in range(1, ran + 1)]
    trail = [step.reason for step in delegation_view.trail if step.kind == "sub-workflow"]
    assert len(trail) == ran + sum(1 for v in delegated if v == table.MOCK)
    # The refusals read the same on both paths, but for the tool's name.
    for a, b in zip(
        _answers(turn_view.transcript, "read_file"),
        _answers(delegation_view.transcript, SUB_TOOL),
        strict=True,
    ):
        if a.status == "blocked":
            assert (a.content or "").replace("read_file", "TOOL") == (b.content or "").replace(
                SUB_TOOL, "TOOL"
            )

    # --- the sandbox bridge: a script's calls ----------------------------------------------
    [run_answer] = _answers(script_view.transcript, "archmax_run")
    assert run_answer.status == "ok", run_answer.content
    answers = json.loads(run_answer.content or "")
    script = [_verdict(a["ok"], a["text"]) for a in answers]
    assert script == _expected("script")
    # The rows whose arguments hold no reference are decided as on the other two paths.
    plain = [i for i, row in enumerate(table.ROWS) if "${{" not in row.file_path]
    assert [script[i] for i in plain] == [turn[i] for i in plain]
    assert len(_scheduled(script_history, SANDBOX_ACTIVITY)) == 1
    assert READ_FILE_ACTIVITY not in activities_run(script_history.events)  # inside the run
    [result] = _sandbox_results(script_history)
    assert [c.arguments["file_path"] for c in result.calls] == [r.file_path for r in table.ROWS]
    assert [c.mocked for c in result.calls] == [v == table.MOCK for v in script]


async def test_a_scripts_sub_workflow_calls_get_the_agents_verdicts(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """A script's ``tools.archmaxWorkflowSink`` calls are dispatched by the session workflow
    through the same decision: a sub-workflow call's arguments are substituted whoever makes
    it, so every row gets the agent's verdict; each call that runs starts one child."""
    sid = f"ptc-sub-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, root, "caller", scripted(PLAYBOOK)) as caller:
        history = await _send(caller, sid, "ptc-sub", SUB_TOOL)
        view = await caller.sessions.view(sid)
    [run_answer] = _answers(view.transcript, "archmax_run")
    assert run_answer.status == "ok", run_answer.content
    seen = [_verdict(a["ok"], a["text"]) for a in json.loads(run_answer.content or "")]
    assert seen == _expected("agent")
    ran = sum(1 for verdict in seen if verdict == table.RUN)
    assert _children(history) == [f"{sid}.{table.SINK}-{n}" for n in range(1, ran + 1)]
    # Every call stops the run for the workflow to decide it; none is served twice.
    assert len(_scheduled(history, SANDBOX_ACTIVITY)) == len(table.ROWS) + 1


async def test_an_unresolvable_guard_fails_the_turn_on_every_path(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """With ``banned`` unset, the state's second denial cannot be governed: the first call
    that reaches it is a terminal block on every path, a script's included (its run stops
    there, whatever the script would do with the refusal), and the session is rejected with
    the same reason."""
    run = uuid.uuid4().hex[:8]
    seeds = {"customer": "acme"}
    server = scripted(PLAYBOOK)
    outcomes = {}
    async with running_agent(client, task_queue, root, "reader", server) as reader:
        for kind in ("turn", "script"):
            outcomes[kind] = await reader.workflow.send(f"{kind}-{run}", kind, variables=seeds)
        script_history = await reader.handle(f"script-{run}").fetch_history()
        script_view = await reader.sessions.view(f"script-{run}")
    async with running_agent(client, task_queue, root, "caller", server) as caller:
        outcomes["delegate"] = await caller.workflow.send(f"sub-{run}", "delegate", variables=seeds)
        delegation_history = await caller.handle(f"sub-{run}").fetch_history()
        outcomes["script-sub"] = await caller.workflow.send(
            f"ptc-sub-{run}", "ptc-sub", variables=seeds
        )
        script_sub_history = await caller.handle(f"ptc-sub-{run}").fetch_history()
    reasons = {
        kind: (outcome.kind, (outcome.rejected or "").replace(SUB_TOOL, "read_file"))
        for kind, outcome in outcomes.items()
    }
    expected = (
        "rejected",
        "The `read_file` guard `args.file_path` names a variable that is not set; the call "
        "cannot be governed and the session cannot go on.",
    )
    assert reasons == dict.fromkeys(("turn", "script", "delegate", "script-sub"), expected)
    assert not _children(delegation_history) and not _children(script_sub_history)
    assert len(_scheduled(script_sub_history, SANDBOX_ACTIVITY)) == 1  # never run on
    [result] = _sandbox_results(script_history)
    assert result.terminal == expected[1] and len(result.calls) == 1  # the run went no further
    [run_answer] = _answers(script_view.transcript, "archmax_run")
    assert (run_answer.status, run_answer.rule) == ("blocked", "tool.unresolved-variable")


PARKER = """
title: Parker
states:
  work:
    triggers: { manual: }
    skills: { allow: [probe] }
    instructions: Run the park script.
    tools:
      allow:
        - archmax_workflow_confirm
        - { tool: archmax_run, paths: ["skills/probe/scripts/**"] }
      forbid:
        - { tool: read_file, args: { file_path: "**/${{banned}}.json" } }
"""

CONFIRM = """
title: Confirm
states:
  ask:
    triggers: { manual: { description: Ask a person for a code. } }
    instructions: Ask for the code and wait.
"""

PARK_SCRIPT = """export default async ({ tools }) => {
  await tools.archmaxWorkflowConfirm({});
  try {
    return await tools.readFile({ file_path: "skills/probe/assets/acme-1.json" });
  } catch (error) {
    return "caught: " + error.message;
  }
};
"""
"""Parks on a child, then (run on from its journal) makes a call no guard can decide."""

PARK_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"state": "ask", "last_tool_result": "/code/"},
                "reply": {"content": "The code came."},
            },
            {
                "when": {"state": "ask"},
                "reply": {"tool_calls": [call("archmax_wait", reason="waiting for the code")]},
            },
            {"when": {"last_tool": "archmax_run"}, "reply": {"content": "done"}},
            {  # after a resumption the runtime's note follows the script's answer
                "when": {"any_message": "/answers the pending call/"},
                "reply": {"content": "done"},
            },
            {
                "when": {"last_user": "park"},
                "reply": {
                    "tool_calls": [call("archmax_run", file_path="skills/probe/scripts/park.js")]
                },
            },
        ]
    }
)


async def test_a_resumed_scripts_unresolvable_guard_fails_the_turn(
    client: Client, task_queue: str, scripted: Scripted, root: Path
) -> None:
    """The script's first run parks on a child; when the child is answered the script runs
    on from its journal and its next call meets a guard naming an unset variable: the run
    stops there and the caller's turn is rejected, as if the agent had made the call."""
    write_workflow(root, "parker", PARKER)
    write_workflow(root, "confirm", CONFIRM)
    (root / "skills" / "probe" / "scripts" / "park.js").write_text(PARK_SCRIPT, encoding="utf-8")
    sid = f"park-{uuid.uuid4().hex[:8]}"
    server = scripted(PARK_PLAYBOOK)
    async with running_agent(client, task_queue, root, "parker", server) as agent:
        parked = await agent.workflow.send(sid, "park")
        await agent.workflow.deliver(f"{sid}.confirm-1", trigger="reply", variables={"code": "7"})
        deadline = asyncio.get_running_loop().time() + 60
        while True:  # the child's end reaches the caller as a signal: poll for its effect
            summary = await agent.sessions.get(sid)
            if summary.status not in ("running", "awaiting_input"):
                break
            assert asyncio.get_running_loop().time() < deadline, summary.status
            await asyncio.sleep(0.05)
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    assert parked.kind == "parked"
    assert summary.status == "rejected"
    [run_answer] = _answers(view.transcript, "archmax_run")
    assert run_answer.status == "blocked"
    assert (run_answer.content or "").startswith(
        "archmax_run stopped: Blocked by governance (tool.unresolved-variable): "
    )
    results = _sandbox_results(history)
    assert [r.terminal is not None for r in results] == [False, True]
