"""Sub-workflows (harness §6) on the dev server: ``archmax_workflow_<slug>`` runs another
workflow of the root as a Temporal child workflow with its own session; files cross both ways,
refusals start no child, a parked child parks its caller, denials accumulate down the chain.

One scripted model serves caller and child: rules match on the state each one stands in.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Replayer

from archmax_temporal.client.host import Agent
from archmax_temporal.worker import DATA_CONVERTER, workflow_interceptors, workflow_runner
from archmax_temporal.workflows.errors import SessionAwaitingSubWorkflowError
from archmax_temporal.workflows.models import (
    Message,
    Outcome,
    PendingInput,
    SessionInput,
    SessionSummary,
    ToolMock,
)
from archmax_temporal.workflows.session import ArchmaxSession
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

DESK = """
title: Desk
tools:
  forbid_always: [grep]
states:
  desk:
    triggers: { manual: }
    instructions: Hand documents to the enrich workflow.
    tools:
      allow:
        - archmax_workflow_enrich
        - archmax_workflow_confirm
        - archmax_workflow_dormant
        - archmax_workflow_approve
        - archmax_workflow_echo
        - archmax_workflow_crash
"""

ENRICH = """
title: Enrich
states:
  enrich-doc:
    triggers:
      manual:
        description: Summarise a document into a report file.
        requires:
          - { name: doc, type: file, description: The document to summarise. }
          - { name: topic, type: string }
        returns:
          - { name: report, type: file }
          - { name: verdict, type: string }
    instructions: Read the document, write a report, return it.
"""

CONFIRM = """
title: Confirm
states:
  ask:
    triggers:
      manual:
        description: Ask a person for the confirmation code.
    instructions: Ask for the code and wait for it.
"""

APPROVE = """
title: Approve
states:
  draft:
    triggers: { manual: { description: Get a person's sign-off. } }
    instructions: Draft, then send for sign-off.
    transitions:
      - { to: signoff, description: Ready for a person. }
  signoff:
    type: human
    transitions:
      - { to: signed, description: Approved., type: approve }
  signed:
    instructions: Say it is signed.
"""

ECHO = """
title: Echo
states:
  echo-back:
    triggers: { manual: }
    tools: { allow: [archmax_workflow_desk] }
"""

CRASH = """
title: Crash
states:
  crash-now:
    triggers: { manual: }
"""

DORMANT = """
title: Dormant
disabled: true
states:
  sleep:
    triggers: { manual: }
"""

REPORT = "scratchpad/report.md"

CALL_ENRICH = call(
    "archmax_workflow_enrich", doc="${{{{source}}}}", topic="invoices"
)  # {{ }}: the playbook's own templating; the model writes ${{source}}

PLAYBOOK = json.dumps(
    {
        "rules": [
            # --- the child: enrich -----------------------------------------------------
            {
                "when": {"state": "enrich-doc", "last_tool": "archmax_set_variables"},
                "reply": {"content": "Report written."},
            },
            {
                "when": {"state": "enrich-doc", "last_tool": "grep"},
                "reply": {
                    "tool_calls": [
                        call(
                            "archmax_set_variables",
                            variables={"report": REPORT, "verdict": "fine"},
                        )
                    ]
                },
            },
            {
                "when": {"state": "enrich-doc", "last_tool": "write_file"},
                "reply": {"tool_calls": [call("grep", pattern="REPORT")]},
            },
            {
                "when": {
                    "state": "enrich-doc",
                    "last_tool": "read_file",
                    "last_tool_result": "/(?P<body>DOC \\w+)/",
                },
                "reply": {
                    "tool_calls": [call("write_file", file_path=REPORT, content="REPORT {body}")]
                },
            },
            {
                "when": {"state": "enrich-doc"},
                "reply": {"tool_calls": [call("read_file", file_path="${{{{doc}}}}")]},
            },
            # --- the child: confirm ----------------------------------------------------
            {
                "when": {"state": "ask", "last_tool_result": '/"code": "(?P<code>\\d+)"/'},
                "reply": {"content": "The code is {code}."},
            },
            {
                "when": {"state": "ask"},
                "reply": {
                    "content": "What is the confirmation code?",
                    "tool_calls": [call("archmax_wait", reason="waiting for the code")],
                },
            },
            # --- the child: approve ----------------------------------------------------
            {"when": {"state": "signed"}, "reply": {"content": "Signed by a person."}},
            {"when": {"state": "signoff"}, "reply": {"content": "Waiting for sign-off."}},
            {
                "when": {"state": "draft"},
                "reply": {"tool_calls": [call("archmax_advance", to="signoff")]},
            },
            # --- the child: echo (calls its caller back) -------------------------------
            {
                "when": {"state": "echo-back", "last_tool": "archmax_workflow_desk"},
                "reply": {"content": "Calling back was refused."},
            },
            {
                "when": {"state": "echo-back"},
                "reply": {"tool_calls": [call("archmax_workflow_desk")]},
            },
            # --- the child: crash ------------------------------------------------------
            {
                "when": {"state": "crash-now"},
                "reply": {
                    "tool_calls": [call("archmax_raise", code="no-data", reason="nothing here")]
                },
            },
            # --- the caller: desk ------------------------------------------------------
            {
                "when": {"state": "desk", "last_tool": "archmax_workflow_crash"},
                "reply": {"content": "The crash child failed."},
            },
            {
                "when": {"state": "desk", "last_user": "crash"},
                "reply": {"tool_calls": [call("archmax_workflow_crash")]},
            },
            {
                "when": {"state": "desk", "last_tool": "archmax_workflow_echo"},
                "reply": {"content": "Echo is back."},
            },
            {
                "when": {"state": "desk", "last_user": "echo"},
                "reply": {"tool_calls": [call("archmax_workflow_echo")]},
            },
            {
                "when": {"state": "desk", "any_message": "Signed by a person."},
                "reply": {"content": "The sign-off is in."},
            },
            {
                "when": {"state": "desk", "any_message": "/The code is (?P<code>\\d+)/"},
                "reply": {"content": "Confirmed with code {code}."},
            },
            {
                "when": {
                    "state": "desk",
                    "last_tool": "archmax_workflow_enrich",
                    "last_tool_result": '/"report": "(?P<path>[^"]+)"/',
                },
                "reply": {"content": "The report is at {path}."},
            },
            {
                "when": {"state": "desk", "last_tool": "archmax_workflow_enrich"},
                "reply": {"content": "The call did not go through."},
            },
            {
                "when": {"state": "desk", "last_tool": "archmax_workflow_dormant"},
                "reply": {"content": "Dormant refused."},
            },
            {
                "when": {"state": "desk", "last_user": "no document"},
                "reply": {"tool_calls": [call("archmax_workflow_enrich", topic="invoices")]},
            },
            {
                "when": {"state": "desk", "last_user": "dormant"},
                "reply": {"tool_calls": [call("archmax_workflow_dormant")]},
            },
            {
                "when": {"state": "desk", "last_user": "sign"},
                "reply": {"tool_calls": [call("archmax_workflow_approve")]},
            },
            {
                "when": {"state": "desk", "last_user": "confirm"},
                "reply": {"tool_calls": [call("archmax_workflow_confirm")]},
            },
            {"when": {"state": "desk"}, "reply": {"tool_calls": [CALL_ENRICH]}},
        ]
    }
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for slug, spec in (
        ("desk", DESK),
        ("enrich", ENRICH),
        ("confirm", CONFIRM),
        ("dormant", DORMANT),
        ("approve", APPROVE),
        ("echo", ECHO),
        ("crash", CRASH),
    ):
        write_workflow(tmp_path, slug, spec)
    return tmp_path


@pytest.fixture
def sid() -> str:
    return f"subwf-{uuid.uuid4().hex[:8]}"


async def _event_types(agent: Agent, session_id: str) -> list[int]:
    history = await agent.handle(session_id).fetch_history()
    return [event.event_type for event in history.events]


def _tool_results(transcript: list[Message], name: str) -> list[Message]:
    return [m for m in transcript if m.role == "tool" and m.name == name]


async def _settled(agent: Agent, session_id: str, status: str) -> SessionSummary:
    """The session's summary once its status is ``status`` (the caller resumes on its own)."""
    summary = await agent.sessions.get(session_id)
    for _ in range(100):
        if summary.status == status:
            return summary
        await asyncio.sleep(0.1)
        summary = await agent.sessions.get(session_id)
    raise AssertionError(f"{session_id} stayed {summary.status}, never {status}")


async def test_a_child_reads_a_file_argument_and_returns_a_file(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The file argument lands in the child's attachments; the child's file return lands in
    the caller's, and the call answers {message, returns} with the caller's path; the caller's
    trail records the dispatch and its history the child's start and completion."""
    server = scripted(PLAYBOOK)
    store = root / "sessions"
    async with running_agent(client, task_queue, root, "desk", server, store=store) as agent:
        outcome = await agent.workflow.send(
            sid, "Please enrich this.", files={"source": ("input.txt", "DOC alpha")}
        )
        view = await agent.sessions.view(sid)
        child_id = f"{sid}.enrich-1"
        child = await agent.sessions.view(child_id)
        history = await agent.handle(sid).fetch_history()
        child_history = await agent.handle(child_id).fetch_history()
        child_description = await agent.handle(child_id).describe()
    assert outcome.kind == "completed"
    assert outcome.reply == "The report is at scratchpad/attachments/report.md."
    (answer,) = _tool_results(view.transcript, "archmax_workflow_enrich")
    assert answer.status == "ok"
    assert json.loads(answer.content or "") == {
        "message": "Report written.",
        "returns": {"report": "scratchpad/attachments/report.md", "verdict": "fine"},
    }
    assert (store / sid / "scratchpad" / "attachments" / "report.md").read_text() == (
        "REPORT DOC alpha"
    )
    assert (store / child_id / "scratchpad" / "attachments" / "input.txt").read_text() == (
        "DOC alpha"
    )
    steps = [s for s in view.trail if s.kind == "sub-workflow"]
    assert [(s.to, s.workflow, s.status, s.reason) for s in steps] == [
        ("desk", "enrich", "ok", child_id)
    ]
    # the child: its own session, seeded with the arguments (the file at its own path)
    assert child.summary.parent_session_id == sid
    assert child.summary.status == "completed"
    assert child.summary.variables["doc"].value == "scratchpad/attachments/input.txt"
    assert child.summary.variables["topic"].locked is True
    assert "source" not in child.summary.variables  # the caller's variables never cross
    assert await child_description.static_summary() == (
        f"archmax sub-workflow · enrich (called by {sid})"
    )
    types = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED in types
    assert EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED in types
    assert EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED in types
    # the child's folder is in its caller's store: it records the caller's store
    parent_input, child_input = [
        (await DATA_CONVERTER.decode(started.input.payloads, [SessionInput]))[0]
        for started in (
            recorded.events[0].workflow_execution_started_event_attributes
            for recorded in (history, child_history)
        )
    ]
    assert parent_input.store_id is not None
    assert (child_input.store_id, child_input.store_description) == (
        parent_input.store_id,
        parent_input.store_description,
    )
    replayer = Replayer(
        workflows=[ArchmaxSession],
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(),
        interceptors=workflow_interceptors(),
    )
    for recorded in (history, child_history):
        assert (await replayer.replay_workflow(recorded)).replay_failure is None


async def test_the_callers_workflow_wide_denials_hold_in_the_child(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The caller forbids grep workflow-wide; the child's spec does not, yet its grep is
    blocked by the inherited tools.forbidden (and grep is off its surface)."""
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        await agent.workflow.send(
            sid, "Please enrich this.", files={"source": ("input.txt", "DOC beta")}
        )
        child = await agent.sessions.view(f"{sid}.enrich-1")
    (grep,) = _tool_results(child.transcript, "grep")
    assert (grep.status, grep.rule) == ("blocked", "tool.forbidden")
    child_requests = [r for r in server.requests if r.state == "enrich-doc"]
    assert child_requests
    assert all(
        "grep" not in [t["function"]["name"] for t in r.body.get("tools", [])]
        for r in child_requests
    )


async def test_a_missing_required_argument_is_blocked_and_starts_no_child(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        outcome = await agent.workflow.send(sid, "There is no document, just enrich.")
        view = await agent.sessions.view(sid)
        types = await _event_types(agent, sid)
    (answer,) = _tool_results(view.transcript, "archmax_workflow_enrich")
    assert (answer.status, answer.rule) == ("blocked", "sub-workflow.missing-param")
    assert "'doc' (file) is missing" in (answer.content or "")
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in types
    assert [s for s in view.trail if s.kind == "sub-workflow"] == []
    assert outcome.reply == "The call did not go through."


async def test_a_disabled_target_is_blocked_even_when_mocked(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    server = scripted(PLAYBOOK)
    mocks = [ToolMock(tool="archmax_workflow_dormant", result="never")]
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        outcome = await agent.workflow.send(sid, "Wake the dormant one.", mocks=mocks)
        view = await agent.sessions.view(sid)
        types = await _event_types(agent, sid)
    (answer,) = _tool_results(view.transcript, "archmax_workflow_dormant")
    assert (answer.status, answer.rule) == ("blocked", "sub-workflow.disabled")
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in types
    assert outcome.reply == "Dormant refused."


async def test_a_mocked_call_starts_no_child_and_is_on_the_trail(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """A mock answers with its message and returns; the file return names a file of the
    caller's own session and arrives in its attachments; the trail still records it."""
    server = scripted(PLAYBOOK)
    mocks = [
        ToolMock(
            tool="archmax_workflow_enrich",
            result={
                "message": "mocked",
                "returns": {"report": "scratchpad/fixtures/r.md", "verdict": "ok"},
            },
        )
    ]
    store = root / "sessions"
    async with running_agent(client, task_queue, root, "desk", server, store=store) as agent:
        await agent.sessions.seed(sid, {"scratchpad/fixtures/r.md": "FIXTURE"})
        outcome = await agent.workflow.send(
            sid, "Please enrich this.", files={"source": ("input.txt", "DOC x")}, mocks=mocks
        )
        view = await agent.sessions.view(sid)
        types = await _event_types(agent, sid)
    assert outcome.reply == "The report is at scratchpad/attachments/r.md."
    assert (store / sid / "scratchpad" / "attachments" / "r.md").read_text() == "FIXTURE"
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in types
    steps = [(s.kind, s.workflow, s.status) for s in view.trail if s.kind == "sub-workflow"]
    assert steps == [("sub-workflow", "enrich", "ok")]


async def test_an_error_mock_records_a_failed_dispatch(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    server = scripted(PLAYBOOK)
    mocks = [ToolMock(tool="archmax_workflow_enrich", result={"error": "enrich is down"})]
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        outcome = await agent.workflow.send(
            sid, "Please enrich this.", files={"source": ("input.txt", "DOC x")}, mocks=mocks
        )
    (step,) = [s for s in outcome.trail if s.kind == "sub-workflow"]
    assert (step.workflow, step.status) == ("enrich", "error")


async def test_a_parked_child_parks_the_caller_and_delivering_to_it_resumes_both(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The child waits for input: the caller's send returns parked, mirroring the child and
    naming it; the caller refuses firings; a delivery to the child finishes it, and the
    caller's pending call gets the child's answer and its turn goes on to completion."""
    server = scripted(PLAYBOOK)
    child_id = f"{sid}.confirm-1"
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        parked = await agent.workflow.send(sid, "Please confirm the order.")
        summary = await agent.sessions.get(sid)
        with pytest.raises(SessionAwaitingSubWorkflowError, match=child_id):
            await agent.workflow.deliver(sid, trigger="reply", variables={"code": "1"})
        delivered = await agent.workflow.deliver(
            child_id, trigger="reply", variables={"code": "42"}
        )
        resumed = await _settled(agent, sid, "completed")
        view = await agent.sessions.view(sid)
        types = await _event_types(agent, sid)
    assert isinstance(parked, Outcome)
    assert (parked.kind, parked.status, parked.parked_channel) == (
        "parked",
        "awaiting_input",
        "input",
    )
    assert parked.delegation is not None and parked.delegation.session_id == child_id
    assert isinstance(parked.pending, PendingInput)
    assert parked.pending.reason == "waiting for the code"
    assert summary.wait_reason == f"waiting on sub-workflow session {child_id!r}"
    assert summary.delegation is not None and summary.delegation.workflow == "confirm"
    assert (delivered.kind, delivered.reply) == ("completed", "The code is 42.")
    assert resumed.delegation is None
    (answer,) = _tool_results(view.transcript, "archmax_workflow_confirm")
    assert (answer.status, answer.content) == ("ok", "The code is 42.")
    assert any(m.note == "sub-workflow" and m.role == "tool" for m in view.transcript)
    assert view.transcript[-1].content == "Confirmed with code 42."
    steps = [(s.workflow, s.status) for s in view.trail if s.kind == "sub-workflow"]
    assert steps == [("confirm", "ok")]
    assert EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED in types


async def test_a_child_at_a_human_state_parks_the_caller_until_it_is_decided(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The child parks awaiting a decision: so does the caller; the caller refuses a
    decision (it belongs to the child), deciding on the child finishes both."""
    server = scripted(PLAYBOOK)
    child_id = f"{sid}.approve-1"
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        parked = await agent.workflow.send(sid, "Get this signed off.")
        with pytest.raises(SessionAwaitingSubWorkflowError):
            await agent.workflow.decide(sid, to="signed")
        decided = await agent.workflow.decide(child_id, to="signed", comment="ok")
        resumed = await _settled(agent, sid, "completed")
        view = await agent.sessions.view(sid)
    assert (parked.kind, parked.status, parked.parked_channel) == (
        "parked",
        "awaiting_decision",
        "decision",
    )
    assert parked.delegation is not None and parked.delegation.session_id == child_id
    assert parked.reply == ""  # the caller spent no handoff call on a child's park
    assert (decided.kind, decided.reply) == ("completed", "Signed by a person.")
    assert resumed.status == "completed"
    assert view.transcript[-1].content == "The sign-off is in."


async def test_the_loader_pins_every_reachable_workflow_once(root: Path) -> None:
    """Targets are resolved transitively and cycle-safe; an absent target stays out."""
    from archmax_temporal.client.loader import load_delegates, load_workflow

    write_workflow(
        root,
        "loop-a",
        "states:\n  a:\n    triggers: { manual: }\n"
        "    tools: { allow: [archmax_workflow_loop-b, archmax_workflow_ghost] }\n",
    )
    write_workflow(
        root,
        "loop-b",
        "states:\n  b:\n    triggers: { manual: }\n"
        "    tools: { allow: [archmax_workflow_loop-a, archmax_workflow_enrich] }\n",
    )
    delegates = load_delegates(root, load_workflow(root, "loop-a"))
    assert sorted(delegates) == ["enrich", "loop-b"]
    enrich = delegates["enrich"]
    assert enrich.spec is not None and enrich.spec_hash


def test_validate_reports_what_a_dispatch_would_refuse(root: Path) -> None:
    """An unknown target, a cycle and an over-deep chain are errors; a disabled target is a
    warning."""
    from archmax_temporal.client.testing.validate import validate_workflow

    def calls(*targets: str) -> str:
        allow = ", ".join(f"archmax_workflow_{t}" for t in targets)
        return f"states:\n  s:\n    triggers: {{ manual: }}\n    tools: {{ allow: [{allow}] }}\n"

    write_workflow(root, "cyc-a", calls("cyc-b", "ghost", "dormant"))
    write_workflow(root, "cyc-b", calls("cyc-a"))
    write_workflow(root, "deep-1", calls("deep-2"))
    write_workflow(root, "deep-2", calls("deep-3"))
    write_workflow(root, "deep-3", calls("deep-4"))
    write_workflow(root, "deep-4", calls("enrich"))
    cyclic = validate_workflow(root, "cyc-a")
    messages = [(d.level, d.message) for d in cyclic.diagnostics if "workflow" in d.message]
    assert ("error", "archmax_workflow_ghost: no workflow 'ghost' under workflows/") in messages
    assert ("warning", "archmax_workflow_dormant: workflow 'dormant' is disabled") in messages
    assert ("error", "sub-workflows: cycle cyc-a → cyc-b → cyc-a") in messages
    assert not cyclic.valid
    deep = validate_workflow(root, "deep-1")
    assert [d.message for d in deep.errors] == [
        "sub-workflows: deep-1 → deep-2 → deep-3 → deep-4 → enrich is deeper than 3"
    ]
    assert validate_workflow(root, "deep-2").errors == []


def test_the_tool_takes_the_targets_manual_requires_typed_as_declared() -> None:
    """Every entry is required; ``date`` is a formatted string, ``file`` a workspace path
    (a non-empty string), an untyped entry accepts anything."""
    from archmax_temporal.workflows import signatures
    from archmax_temporal.workflows.spec import SignatureEntry

    schema = signatures.json_schema(
        ["note", SignatureEntry(name="due", type="date"), SignatureEntry(name="doc", type="file")]
    )
    assert schema["required"] == ["note", "due", "doc"]
    assert schema["properties"]["note"] == {}
    assert schema["properties"]["due"] == {"type": "string", "format": "date"}
    assert schema["properties"]["doc"]["type"] == "string"
    assert "scratchpad/attachments/" in schema["properties"]["doc"]["description"]
    assert signatures.conforms("scratchpad/a.txt", "file")
    assert not signatures.conforms("  ", "file") and not signatures.conforms(3, "file")


async def test_a_child_calling_its_caller_is_refused_as_a_cycle(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """echo grants archmax_workflow_desk, but desk is already in the chain: blocked, no
    grandchild starts, and echo's closing message answers desk's call."""
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        outcome = await agent.workflow.send(sid, "Please echo.")
        child = await agent.sessions.view(f"{sid}.echo-1")
        types = await _event_types(agent, f"{sid}.echo-1")
    (refused,) = _tool_results(child.transcript, "archmax_workflow_desk")
    assert (refused.status, refused.rule) == ("blocked", "sub-workflow.cycle")
    assert "desk → echo → desk" in (refused.content or "")
    assert EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED not in types
    assert outcome.reply == "Echo is back."
    (answer,) = [m for m in outcome.trail if m.kind == "sub-workflow"]
    assert answer.workflow == "echo"


async def test_a_child_that_raises_fails_the_call_and_the_dispatch(
    client: Client, task_queue: str, scripted: Scripted, root: Path, sid: str
) -> None:
    """The child's raise is a tool error naming its code; the trail step is an error."""
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, root, "desk", server) as agent:
        outcome = await agent.workflow.send(sid, "Please crash.")
        view = await agent.sessions.view(sid)
    (answer,) = _tool_results(view.transcript, "archmax_workflow_crash")
    assert answer.status == "error"
    assert f"session {sid}.crash-1) raised no-data: nothing here" in (answer.content or "")
    steps = [(s.workflow, s.status) for s in outcome.trail if s.kind == "sub-workflow"]
    assert steps == [("crash", "error")]
    assert outcome.reply == "The crash child failed."
