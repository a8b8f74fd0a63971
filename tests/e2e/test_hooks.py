"""Lifecycle hooks end to end on the dev server with the scripted model: when a hook runs,
what its verdict does to an advance, an entry and a completion, rubric grading out of the
transcript's sight, mocks that reach a hook, and ``archmax_run`` scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.workflows.models import ToolMock
from archmax_temporal.workflows.sandbox import SANDBOX_ACTIVITY
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.scenarios import write_gated


def hook(root: Path, slug: str, name: str, source: str) -> None:
    path = root / "workflows" / slug / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")


def playbook(*rules: dict[str, Any]) -> str:
    return json.dumps({"rules": list(rules)})


def scheduled(history: Any, activity_type: str) -> int:
    """How many activities of ``activity_type`` one run's history scheduled."""
    return sum(
        1
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    )


def tool_results(view: Any, name: str) -> list[Any]:
    return [m for m in view.transcript if m.role == "tool" and m.name == name]


# --- before ---------------------------------------------------------------------------------


async def test_a_before_veto_on_advance_commits_nothing_and_runs_once_per_entry(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_gated(tmp_path)
    server = scripted(
        playbook(
            {
                "when": {"state": "intake", "last_tool_result": "/hook.veto|vetoed by before/"},
                "reply": {
                    "tool_calls": [call("archmax_set_variables", variables={"approved": True})]
                },
            },
            {
                "when": {"state": "intake"},
                "reply": {"tool_calls": [call("archmax_advance", to="review", reason="ready")]},
            },
            {
                "when": {"state": "review", "last_tool": "archmax_advance"},
                "reply": {"tool_calls": [call("ls", path="scratchpad")]},
            },
            {"when": {"state": "review"}, "reply": {"content": "Reviewed."}},
        )
    )
    async with running_agent(client, task_queue, tmp_path, "gated", server) as agent:
        outcome = await agent.workflow.send("hook-before-1", "Please review.")
        view = await agent.sessions.view("hook-before-1")
        history = await agent.handle("hook-before-1").fetch_history()
        runs = scheduled(history, SANDBOX_ACTIVITY)
    advances = tool_results(view, "archmax_advance")
    assert [(m.status, m.state) for m in advances] == [("error", "intake"), ("ok", "review")]
    assert advances[0].rule == "hook.veto"
    assert "no approval yet (intake -> review)" in (advances[0].content or "")
    # The refused attempt left no trail step; the one that passed is the only advance.
    assert [(t.kind, t.to) for t in outcome.trail] == [("trigger", "intake"), ("agent", "review")]
    assert outcome.status == "completed" and outcome.reply == "Reviewed."
    # Two entries attempted, two runs: later model calls in the visit do not re-run it.
    assert runs == 2


START_VETO = """
title: Requester check
states:
  identify:
    triggers: { manual: }
    before: { script: hooks/requester.js }
    skills: { allow: [] }
    instructions: Identify the case.
    transitions:
      - { to: answer, description: Identified. }
  answer:
    instructions: Answer.
"""

REQUESTER = """export default async ({ messages, tools }) => {
  const file_path = "skills/orders/assets/orders.json";
  const orders = JSON.parse(await tools.readFile({ file_path }));
  const text = messages.filter((m) => m.role === "user").map((m) => m.text).join(" ");
  const email = (text.match(/[\\w.]+@[\\w.]+/) || [])[0];
  if (!email) return veto("Please tell me the email address on your order.");
  if (!orders.some((o) => o.email === email))
    return veto(`The email address "${email}" is not in the order database.`);
  return ok();
};
"""


def orders_root(tmp_path: Path) -> Path:
    write_workflow(tmp_path, "requester", START_VETO)
    hook(tmp_path, "requester", "requester.js", REQUESTER)
    skill = tmp_path / "skills" / "orders"
    (skill / "assets").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: orders\ndescription: Orders.\n---\n")
    (skill / "assets" / "orders.json").write_text(json.dumps([{"email": "ann@example.com"}]))
    return tmp_path


async def test_a_start_state_before_veto_rejects_the_session_before_any_model_call(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """The hook reads a skill bundle the state does not enable (runtime authority)."""
    root = orders_root(tmp_path)
    server = scripted(playbook({"reply": {"content": "never"}}))
    async with running_agent(client, task_queue, root, "requester", server) as agent:
        outcome = await agent.workflow.send("hook-start-1", "I am bob@example.com, refund me.")
    assert outcome.status == "rejected"
    assert outcome.reply == 'The email address "bob@example.com" is not in the order database.'
    assert "vetoed by before hook hooks/requester.js" in (outcome.rejected or "")
    assert [t.kind for t in outcome.trail] == ["trigger"]  # noTraversal
    assert server.requests == []


async def test_a_hook_reading_a_mocked_file_sees_the_mock(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """The real file lists ann; the case's mock says nobody is on file, and the hook sees it."""
    root = orders_root(tmp_path)
    server = scripted(playbook({"reply": {"content": "Hello Ann."}}))
    mocks = [ToolMock(tool="read_file", when_input={"file_path": "/orders\\.json$/"}, result="[]")]
    async with running_agent(client, task_queue, root, "requester", server) as agent:
        message = "I am ann@example.com, hello"
        plain = await agent.workflow.send("hook-mock-1", message)
        mocked = await agent.workflow.send("hook-mock-2", message, mocks=mocks)
    assert plain.status == "completed" and plain.reply == "Hello Ann."
    assert mocked.status == "rejected"
    assert mocked.reply == 'The email address "ann@example.com" is not in the order database.'


ROUTED = """
title: Routed
settings: { timeoutMs: 300 }
states:
  intake:
    triggers: { manual: }
    before: { script: hooks/spin.js }
    on_error: escalation
    instructions: Work.
  escalation:
    instructions: Tell the person a human will follow up.
"""


async def test_a_hook_that_times_out_is_a_turn_failure_routed_by_on_error(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "routed", ROUTED)
    hook(tmp_path, "routed", "spin.js", "export default () => { while (true) {} };\n")
    server = scripted(
        playbook({"when": {"state": "escalation"}, "reply": {"content": "Escalated."}})
    )
    async with running_agent(client, task_queue, tmp_path, "routed", server) as agent:
        outcome = await agent.workflow.send("hook-timeout-1", "Hello")
        view = await agent.sessions.view("hook-timeout-1")
    assert outcome.status == "completed" and outcome.reply == "Escalated."
    routed = [t for t in outcome.trail if t.kind == "on_error"]
    assert [t.to for t in routed] == ["escalation"]
    assert "timed out after 300 ms" in (routed[0].reason or "")
    assert any(m.note == "error" and "timed out" in (m.content or "") for m in view.transcript)


# --- after ----------------------------------------------------------------------------------

DRAFT = """
title: Draft
states:
  draft:
    triggers: { manual: }
    after: { script: hooks/check.js, max_iterations: 1 }
    instructions: Draft, then advance.
    transitions:
      - { to: sent, description: The draft is ready. }
  sent:
    instructions: Confirm.
"""

ALWAYS_CORRECT = """export default ({ from, to, reason }) =>
  correct(`cite the order id before leaving ${from} for ${to} (${reason})`);
"""


async def test_an_after_correct_allows_max_iterations_retries_then_fails_the_turn(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "draft", DRAFT)
    hook(tmp_path, "draft", "check.js", ALWAYS_CORRECT)
    server = scripted(
        playbook(
            {
                "when": {"state": "draft"},
                "reply": {"tool_calls": [call("archmax_advance", to="sent", reason="done")]},
            },
        )
    )
    async with running_agent(client, task_queue, tmp_path, "draft", server) as agent:
        outcome = await agent.workflow.send("hook-after-1", "Draft it.")
        view = await agent.sessions.view("hook-after-1")
    advances = tool_results(view, "archmax_advance")
    assert len(advances) == 2
    assert advances[0].rule == "hook.correct"
    assert "cite the order id before leaving draft for sent (done)" in (advances[0].content or "")
    assert outcome.status == "rejected" and outcome.state == "draft"
    assert "corrections exhausted for after hook hooks/check.js" in (outcome.rejected or "")
    assert "max_iterations: 1" in (outcome.rejected or "")
    assert [t.kind for t in outcome.trail] == ["trigger"]


ANSWER = """
title: Answer
states:
  answer:
    triggers: { manual: }
    after: { script: hooks/cites.js }
    instructions: Answer, citing the order id.
"""

CITES = """export default ({ messages }) => {
  const last = messages.filter((m) => m.role === "assistant" && m.text).pop();
  return /ORD-\\d+/.test(last ? last.text : "") ? ok() : veto("the answer must cite the order id");
};
"""


async def test_a_terminal_after_veto_notes_it_and_calls_the_model_again(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "answer", ANSWER)
    hook(tmp_path, "answer", "cites.js", CITES)
    server = scripted(
        playbook(
            {"when": {"any_message": "/\\[after\\]/"}, "reply": {"content": "It is ORD-7."}},
            {"reply": {"content": "It is on its way."}},
        )
    )
    async with running_agent(client, task_queue, tmp_path, "answer", server) as agent:
        outcome = await agent.workflow.send("hook-terminal-1", "Where is my order?")
        view = await agent.sessions.view("hook-terminal-1")
    notes = [m for m in view.transcript if m.note == "after" and m.role == "tool"]
    assert len(notes) == 1 and "the answer must cite the order id" in (notes[0].content or "")
    assert outcome.status == "completed" and outcome.reply == "It is ORD-7."
    assert len(server.requests) == 2


# --- rubric ---------------------------------------------------------------------------------

RUBRIC = """
title: Rubric
states:
  reply:
    triggers: { manual: }
    after:
      rubric: { instructions: "The reply must be polite.", max_iterations: 1 }
    transitions:
      - { to: done, description: Replied. }
  done:
    instructions: Say goodbye.
"""


async def test_a_rubric_verdict_gates_the_advance_out_of_the_transcript(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "rubric", RUBRIC)
    server = scripted(
        playbook(
            {
                "when": {"any_message": "strict grader"},
                "reply": {"content": '```json\n{"verdict": "correct", "reason": "be polite"}\n```'},
                "times": 1,
            },
            {
                "when": {"any_message": "strict grader"},
                "reply": {"content": '{"verdict": "ok", "reason": "polite now"}'},
            },
            {
                "when": {"state": "reply"},
                "reply": {"tool_calls": [call("archmax_advance", to="done", reason="replied")]},
            },
            {"when": {"state": "done"}, "reply": {"content": "Goodbye."}},
        )
    )
    async with running_agent(client, task_queue, tmp_path, "rubric", server) as agent:
        outcome = await agent.workflow.send("hook-rubric-1", "Hi")
        view = await agent.sessions.view("hook-rubric-1")
        events = [e async for e in agent.sessions.events("hook-rubric-1")]
    rubric = [(e.type, e.data.get("verdict")) for e in events if e.type.startswith("rubric-")]
    assert rubric == [
        ("rubric-start", None),
        ("rubric-result", "correct"),
        ("rubric-start", None),
        ("rubric-result", "ok"),
    ]
    advances = tool_results(view, "archmax_advance")
    assert [m.status for m in advances] == ["error", "ok"]
    assert "rubric#0 (correct): be polite" in (advances[0].content or "")
    assert outcome.status == "completed" and outcome.state == "done"
    graded = [r for r in server.requests if "strict grader" in json.dumps(r.body)]
    assert len(graded) == 2
    assert all("tools" not in r.body for r in graded)  # a grader gets no tools
    assert "The reply must be polite." in json.dumps(graded[0].body)
    text = json.dumps([m.model_dump() for m in view.transcript])
    assert "strict grader" not in text and "polite now" not in text


# --- custom kinds ---------------------------------------------------------------------------

CUSTOM = """
title: Custom
extensions: { hooks: [webhook] }
states:
  intake:
    triggers: { manual: }
    before: { webhook: "https://hooks.example/check" }
    instructions: Work.
"""


async def test_a_custom_kind_runs_the_host_executor(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "custom", CUSTOM)
    seen: list[tuple[Any, str]] = []

    def webhook(config: Any, args: dict[str, Any]) -> dict[str, str]:
        seen.append((config, args["phase"]))
        return {"verdict": "veto", "reason": f"{config} says no"}

    server = scripted(playbook({"reply": {"content": "never"}}))
    async with running_agent(
        client, task_queue, tmp_path, "custom", server, hook_executors={"webhook": webhook}
    ) as agent:
        outcome = await agent.workflow.send("hook-custom-1", "Hello")
    assert seen == [("https://hooks.example/check", "before")]
    assert outcome.status == "rejected" and outcome.reply == "https://hooks.example/check says no"


# --- archmax_run ----------------------------------------------------------------------------

SCRIPTED = """
title: Scripts
states:
  lookup:
    triggers: { manual: }
    skills: { allow: [orders] }
    instructions: Count the orders with the script.
"""

COUNT = """/** Count orders: reads the bundle's asset, returns a summary. */
export default async ({ tools, args }) => {
  const file_path = "skills/orders/assets/orders.json";
  const orders = JSON.parse(await tools.readFile({ file_path }));
  return { count: orders.length, first: orders[0].id, status: args.status };
};
"""


async def test_archmax_run_returns_a_script_result_read_from_a_skill_asset(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "scripts", SCRIPTED)
    skill = tmp_path / "skills" / "orders"
    (skill / "assets").mkdir(parents=True)
    (skill / "scripts").mkdir()
    (skill / "SKILL.md").write_text("---\nname: orders\ndescription: Orders.\n---\n")
    (skill / "assets" / "orders.json").write_text(json.dumps([{"id": "ORD-1"}, {"id": "ORD-2"}]))
    (skill / "scripts" / "count.js").write_text(COUNT)
    server = scripted(
        playbook(
            {
                "when": {"last_tool": "archmax_run", "last_tool_result": '/"count": (?P<n>\\d+)/'},
                "reply": {"content": "{n} orders."},
            },
            {
                "reply": {
                    "tool_calls": [
                        call(
                            "archmax_run",
                            file_path="skills/orders/scripts/count.js",
                            args={"status": "open"},
                        )
                    ]
                }
            },
        )
    )
    async with running_agent(client, task_queue, tmp_path, "scripts", server) as agent:
        outcome = await agent.workflow.send("hook-run-1", "How many orders?")
        view = await agent.sessions.view("hook-run-1")
    [run] = tool_results(view, "archmax_run")
    assert run.status == "ok"
    assert json.loads(run.content or "") == {"count": 2, "first": "ORD-1", "status": "open"}
    assert outcome.reply == "2 orders."
    tools = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert "archmax_run" in tools


async def test_archmax_run_outside_a_skill_bundle_is_blocked(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "scripts", SCRIPTED)
    server = scripted(
        playbook(
            {"when": {"last_tool": "archmax_run"}, "reply": {"content": "ok"}},
            {"reply": {"tool_calls": [call("archmax_run", file_path="scratchpad/evil.js")]}},
        )
    )
    async with running_agent(client, task_queue, tmp_path, "scripts", server) as agent:
        await agent.workflow.send("hook-run-2", "Run it.")
        view = await agent.sessions.view("hook-run-2")
    [run] = tool_results(view, "archmax_run")
    assert (run.status, run.rule) == ("blocked", "script.skill-only")


PARKED = """
title: Parked
states:
  collect:
    triggers: { manual: }
    before: { script: hooks/gate.js }
    instructions: Ask for the order id and wait for the reply.
"""


async def test_a_delivery_after_continue_as_new_does_not_rerun_the_before_hook(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """before_done is carried: resuming a parked visit is no new entry, even in a new run."""
    write_workflow(tmp_path, "parked", PARKED)
    hook(tmp_path, "parked", "gate.js", "export default () => ok();\n")
    server = scripted(
        playbook(
            {"when": {"handoff": True}, "reply": {"content": "Waiting for your order id."}},
            {"when": {"last_user": "/ORD-1/"}, "reply": {"content": "Thanks."}},
            {"reply": {"tool_calls": [call("archmax_wait", reason="the order id")]}},
        )
    )
    async with running_agent(
        client, task_queue, tmp_path, "parked", server, requests_per_run=1
    ) as agent:
        parked = await agent.workflow.send("hook-can-1", "Help me.")
        resumed = await agent.workflow.deliver(
            "hook-can-1", trigger="email_reply", message="It is ORD-1."
        )
        runs = [await agent.handle("hook-can-1").fetch_history()]
        while (
            previous := runs[0]
            .events[0]
            .workflow_execution_started_event_attributes.continued_execution_run_id
        ):
            handle = client.get_workflow_handle("hook-can-1", run_id=previous)
            runs.insert(0, await handle.fetch_history())
    assert parked.status == "awaiting_input" and resumed.reply == "Thanks."

    # run 1: the turn (the entry's one hook run), run 2: the delivery, run 3: idle.
    assert [scheduled(history, SANDBOX_ACTIVITY) for history in runs] == [1, 0, 0]


async def test_an_after_hook_that_throws_vetoes_the_advance_and_the_agent_goes_on(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "draft", DRAFT)
    hook(
        tmp_path,
        "draft",
        "check.js",
        'export default () => {\n  throw new Error("no draft");\n};\n',
    )
    server = scripted(
        playbook(
            {
                "when": {"last_tool": "archmax_advance"},
                "reply": {"content": "I could not send it."},
            },
            {"reply": {"tool_calls": [call("archmax_advance", to="sent", reason="done")]}},
        )
    )
    async with running_agent(client, task_queue, tmp_path, "draft", server) as agent:
        outcome = await agent.workflow.send("hook-throw-1", "Send it.")
        view = await agent.sessions.view("hook-throw-1")
    [advance] = tool_results(view, "archmax_advance")
    assert advance.rule == "hook.veto"
    assert "hooks/check.js (line 2): Error: no draft" in (advance.content or "")
    assert outcome.status == "completed" and outcome.state == "draft"
