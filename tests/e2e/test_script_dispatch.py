"""A script's own sub-workflow calls (``tools.archmaxWorkflow<Slug>`` inside ``archmax_run``)
on the dev server: each is dispatched by the session workflow as the agent's call would be (a
child workflow, governed, on the trail), and the script resumes by replaying its journal, so
no earlier tool call runs twice.

One scripted model serves the caller and its children: rules match on the state.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

BATCH = """
title: Batch
states:
  fan-out:
    triggers: { manual: }
    skills: { allow: [batch] }
    instructions: Run the batch script.
    tools:
      allow:
        - { tool: archmax_run, paths: ["skills/batch/scripts/**"] }
        - edit_file
        - archmax_workflow_enrich
        - archmax_workflow_confirm
  other:
    instructions: Only here may elsewhere be called.
    tools: { allow: [archmax_workflow_elsewhere] }
"""

ENRICH = """
title: Enrich
states:
  enrich-doc:
    triggers:
      manual:
        description: Give a document a verdict.
        requires: [{ name: doc, type: string }]
        returns: [{ name: verdict, type: string }]
    instructions: Give the verdict.
"""

CONFIRM = """
title: Confirm
states:
  ask:
    triggers: { manual: { description: Ask a person for a code. } }
    instructions: Ask for the code and wait.
"""

ELSEWHERE = """
title: Elsewhere
states:
  there:
    triggers: { manual: }
"""

SCRIPTS = {
    # An edit before the fan-out: replayed on resumption, it would fail if it ran twice.
    "fan-out.js": """export default async ({ tools, args }) => {
  await tools.editFile({ file_path: "scratchpad/count.txt", old_string: "n=0", new_string: "n=1" });
  const verdicts = [];
  for (const doc of args.docs) {
    const answer = JSON.parse(await tools.archmaxWorkflowEnrich({ doc }));
    verdicts.push(answer.returns.verdict);
  }
  return { verdicts };
};
""",
    # The same fan-out as a plain script awaiting at its top level, every child at once.
    "await-fan-out.js": """const edit = { old_string: "n=0", new_string: "n=1" };
await tools.editFile({ file_path: "scratchpad/count.txt", ...edit });
const answers = await Promise.all(args.docs.map((doc) => tools.archmaxWorkflowEnrich({ doc })));
const verdicts = answers.map((answer) => JSON.parse(answer).returns.verdict);
({ verdicts })
""",
    "random.js": """export default async ({ tools }) => {
  await tools.writeFile({ file_path: `scratchpad/r-${Math.random()}.txt`, content: "x" });
  await tools.archmaxWorkflowEnrich({ doc: "a" });
  return "done";
};
""",
    # Parks on a child that waits for a person, then calls a second child once it is back.
    "park.js": """export default async ({ tools }) => {
  await tools.editFile({ file_path: "scratchpad/count.txt", old_string: "n=0", new_string: "n=1" });
  const code = await tools.archmaxWorkflowConfirm({});
  const enriched = JSON.parse(await tools.archmaxWorkflowEnrich({ doc: "c" }));
  return { code, verdict: enriched.returns.verdict };
};
""",
    "elsewhere.js": """export default async ({ tools }) => {
  try {
    return await tools.archmaxWorkflowElsewhere({});
  } catch (error) {
    return { refused: String(error.message) };
  }
};
""",
}


def _run(script: str, **args: Any) -> dict[str, Any]:
    return call("archmax_run", file_path=f"skills/batch/scripts/{script}", args=args)


PLAYBOOK = json.dumps(
    {
        "rules": [
            # --- the children ----------------------------------------------------------
            {
                "when": {"state": "enrich-doc", "last_tool": "archmax_set_variables"},
                "reply": {"content": "Verdict given."},
            },
            {
                "when": {"state": "enrich-doc", "any_message": '/"doc": "(?P<doc>\\w+)"/'},
                "reply": {
                    "tool_calls": [call("archmax_set_variables", variables={"verdict": "ok-{doc}"})]
                },
            },
            {
                "when": {"state": "ask", "last_tool_result": '/"code": "(?P<code>\\d+)"/'},
                "reply": {"content": "The code is {code}."},
            },
            {
                "when": {"state": "ask"},
                "reply": {
                    "content": "What is the code?",
                    "tool_calls": [call("archmax_wait", reason="waiting for the code")],
                },
            },
            # --- the caller ------------------------------------------------------------
            {"when": {"last_tool": "archmax_run"}, "reply": {"content": "Script finished."}},
            {  # after a resumption the runtime's note follows the script's answer
                "when": {"any_message": "/answers the pending call/"},
                "reply": {"content": "Script finished."},
            },
            {
                "when": {"last_user": "fan"},
                "reply": {"tool_calls": [_run("fan-out.js", docs=["a", "b"])]},
            },
            {
                "when": {"last_user": "await"},
                "reply": {"tool_calls": [_run("await-fan-out.js", docs=["a", "b"])]},
            },
            {"when": {"last_user": "random"}, "reply": {"tool_calls": [_run("random.js")]}},
            {"when": {"last_user": "park"}, "reply": {"tool_calls": [_run("park.js")]}},
            {"when": {"last_user": "elsewhere"}, "reply": {"tool_calls": [_run("elsewhere.js")]}},
        ]
    }
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for slug, spec in (
        ("batch", BATCH),
        ("enrich", ENRICH),
        ("confirm", CONFIRM),
        ("elsewhere", ELSEWHERE),
    ):
        write_workflow(tmp_path, slug, spec)
    skill = tmp_path / "skills" / "batch"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: batch\ndescription: Batch scripts.\n---\n")
    for name, source in SCRIPTS.items():
        (skill / "scripts" / name).write_text(source, encoding="utf-8")
    return tmp_path


@pytest.fixture
def sid() -> str:
    return f"ptc-{uuid.uuid4().hex[:8]}"


def _script_answer(view: Any) -> Any:
    [answer] = [m for m in view.transcript if m.role == "tool" and m.name == "archmax_run"]
    return answer


async def test_a_script_fans_out_to_child_workflows_and_runs_each_earlier_call_once(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    store = root / "sessions"
    (store / sid / "scratchpad").mkdir(parents=True)
    (store / sid / "scratchpad" / "count.txt").write_text("n=0")
    async with running_agent(client, task_queue, root, "batch", scripted(PLAYBOOK)) as agent:
        outcome = await agent.workflow.send(sid, "fan out")
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
        events = [e async for e in agent.sessions.events(sid)]
        children = [await agent.sessions.get(f"{sid}.enrich-{n}") for n in (1, 2)]
    assert outcome.kind == "completed" and outcome.reply == "Script finished."
    answer = _script_answer(view)
    assert answer.status == "ok"
    assert json.loads(answer.content or "") == {"verdicts": ["ok-a", "ok-b"]}
    # The edit ran once: a second run of it would have found no "n=0" and failed the script.
    assert (store / sid / "scratchpad" / "count.txt").read_text() == "n=1"
    dispatches = [step for step in view.trail if step.kind == "sub-workflow"]
    assert [(d.workflow, d.status, d.reason) for d in dispatches] == [
        ("enrich", "ok", f"{sid}.enrich-1"),
        ("enrich", "ok", f"{sid}.enrich-2"),
    ]
    assert [c.status for c in children] == ["completed", "completed"]
    started = [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert started == [f"{sid}.enrich-1", f"{sid}.enrich-2"]
    sandbox_runs = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == "archmax.sandbox.run"
    ]
    assert len(sandbox_runs) == 3  # the first run, then one resumption per dispatch
    linked = [(e.type, e.data["childSessionId"]) for e in events if "childSessionId" in e.data]
    assert linked == [
        ("sub-workflow-start", f"{sid}.enrich-1"),
        ("sub-workflow-result", f"{sid}.enrich-1"),
        ("sub-workflow-start", f"{sid}.enrich-2"),
        ("sub-workflow-result", f"{sid}.enrich-2"),
    ]
    stops = [e.data["dispatch"] for e in events if e.type == "script-result"]
    assert stops == ["archmax_workflow_enrich", "archmax_workflow_enrich", None]


async def test_a_top_level_await_fan_out_dispatches_each_child_and_runs_each_call_once(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """A plain script awaiting ``Promise.all`` over one child per item at its top level: the
    children run in turn, the edit before them once, and its last expression answers."""
    store = root / "sessions"
    (store / sid / "scratchpad").mkdir(parents=True)
    (store / sid / "scratchpad" / "count.txt").write_text("n=0")
    async with running_agent(client, task_queue, root, "batch", scripted(PLAYBOOK)) as agent:
        outcome = await agent.workflow.send(sid, "await them")
        view = await agent.sessions.view(sid)
        children = [await agent.sessions.get(f"{sid}.enrich-{n}") for n in (1, 2)]
    assert outcome.kind == "completed" and outcome.reply == "Script finished."
    answer = _script_answer(view)
    assert answer.status == "ok"
    assert json.loads(answer.content or "") == {"verdicts": ["ok-a", "ok-b"]}
    assert (store / sid / "scratchpad" / "count.txt").read_text() == "n=1"
    assert [c.status for c in children] == ["completed", "completed"]


async def test_a_script_that_changes_course_on_resumption_fails_with_a_clear_error(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    async with running_agent(client, task_queue, root, "batch", scripted(PLAYBOOK)) as agent:
        await agent.workflow.send(sid, "random")
        view = await agent.sessions.view(sid)
    answer = _script_answer(view)
    assert answer.status == "error"
    assert "SandboxScriptError" in (answer.content or "")
    assert "changed course when resumed" in (answer.content or "")


async def test_a_parked_child_parks_the_scripts_session_and_its_end_runs_the_script_on(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The script's first child waits for a person: the caller parks with it, its
    archmax_run unanswered. Delivering to the child finishes it; the script runs on from its
    journal (the edit is not made again), dispatches its second child, and its result
    answers the archmax_run call; the caller's turn then completes."""
    store = root / "sessions"
    (store / sid / "scratchpad").mkdir(parents=True)
    (store / sid / "scratchpad" / "count.txt").write_text("n=0")
    child_id = f"{sid}.confirm-1"
    async with running_agent(client, task_queue, root, "batch", scripted(PLAYBOOK)) as agent:
        parked = await agent.workflow.send(sid, "park")
        while_parked = await agent.sessions.view(sid)
        delivered = await agent.workflow.deliver(
            child_id, trigger="reply", variables={"code": "42"}
        )
        for _ in range(100):
            summary = await agent.sessions.get(sid)
            if summary.status == "completed":
                break
            await asyncio.sleep(0.1)
        view = await agent.sessions.view(sid)
    assert (parked.kind, parked.status) == ("parked", "awaiting_input")
    assert parked.delegation is not None and parked.delegation.session_id == child_id
    assert parked.delegation.tool == "archmax_run"
    assert not [m for m in while_parked.transcript if m.role == "tool" and m.name == "archmax_run"]
    assert (delivered.kind, delivered.reply) == ("completed", "The code is 42.")
    assert summary.status == "completed"
    answer = _script_answer(view)
    assert answer.status == "ok"
    assert json.loads(answer.content or "") == {"code": "The code is 42.", "verdict": "ok-c"}
    assert (store / sid / "scratchpad" / "count.txt").read_text() == "n=1"
    dispatches = [(d.workflow, d.status, d.reason) for d in view.trail if d.kind == "sub-workflow"]
    assert dispatches == [("confirm", "ok", child_id), ("enrich", "ok", f"{sid}.enrich-1")]
    assert view.transcript[-1].content == "Script finished."


async def test_a_script_calling_a_workflow_its_state_does_not_allow_is_blocked(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    async with running_agent(client, task_queue, root, "batch", scripted(PLAYBOOK)) as agent:
        await agent.workflow.send(sid, "elsewhere")
        view = await agent.sessions.view(sid)
    refused = json.loads(_script_answer(view).content or "")["refused"]
    assert refused.startswith("Blocked by governance")
    assert "archmax_workflow_elsewhere" in refused
    assert not [step for step in view.trail if step.kind == "sub-workflow"]


async def test_a_script_parked_on_a_child_resumes_on_another_worker(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The worker that ran the script is gone by the time the child is answered: a new
    worker (no cache, same store) resumes the script from its stored journal."""
    store = root / "sessions"
    (store / sid / "scratchpad").mkdir(parents=True)
    (store / sid / "scratchpad" / "count.txt").write_text("n=0")
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "batch", server) as first:
        parked = await first.workflow.send(sid, "park")
    assert parked.kind == "parked"
    journals = list((store / sid / "checkpoints" / "scripts").glob("*.json"))
    assert len(journals) == 1  # the stopped run's calls, in the store, not the history
    async with running_agent(client, task_queue, root, "batch", server) as second:
        await second.workflow.deliver(f"{sid}.confirm-1", trigger="reply", variables={"code": "7"})
        for _ in range(100):
            if (await second.sessions.get(sid)).status == "completed":
                break
            await asyncio.sleep(0.1)
        view = await second.sessions.view(sid)
    answer = _script_answer(view)
    assert json.loads(answer.content or "") == {"code": "The code is 7.", "verdict": "ok-c"}
    assert (store / sid / "scratchpad" / "count.txt").read_text() == "n=1"
