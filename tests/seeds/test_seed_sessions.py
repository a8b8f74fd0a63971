"""The sessions seed and the testing seed, statement by statement, where an audit found them
untested or unkept: each test reads as the seed's own words, on the real dev server with the
scripted model behind the real ``openai`` client."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.workflows.models import Message, ToolMock
from tests.support.agents import Scripted, model_config, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.scenarios import REVIEW, REVIEW_PLAYBOOK

RUN = uuid.uuid4().hex[:8]
SID = {
    name: f"{name}-{RUN}"
    for name in (
        "sig-1",
        "timer-1",
        "reply-1",
        "route-1",
        "host-case-1",
        "mocks-1",
        "guard-1",
        "upload-1",
    )
}
"""Session ids are namespace-wide: each test's own, never another test file's."""
LAST = f"AAQk-last-{RUN}"

WAITER = """
title: Waiter
states:
  check:
    triggers: { manual: }
    instructions: Wait for the event, then finish.
    transitions: [{ to: done, description: It arrived. }]
  done:
    instructions: Say done.
"""

WAITER_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool_result": "/trigger 'timer'/"},
                "reply": {
                    "content": "Not posted yet.",
                    "tool_calls": [call("archmax_wait", reason="check again", until="1h")],
                },
            },
            {
                "when": {"last_tool_result": "/trigger 'nudge'/"},
                "reply": {
                    "content": "Still waiting.",
                    "tool_calls": [call("archmax_wait", reason="another nudge")],
                },
            },
            {"when": {"last_tool_result": "/delivered/"}, "reply": {"content": "Done."}},
            {
                "when": {"last_user": "/timed/"},
                "reply": {
                    "content": "I will look tomorrow.",
                    "tool_calls": [call("archmax_wait", reason="the posting", until="1s")],
                },
            },
            {
                "reply": {
                    "content": "Waiting for the go-ahead.",
                    "tool_calls": [call("archmax_wait", reason="the go-ahead")],
                }
            },
        ]
    }
)


async def _events_until(
    agent: Agent, session_id: str, done: Any, timeout: float = 30.0
) -> list[SessionEvent]:
    """The session's events, read again until ``done(events)`` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = [e async for e in agent.sessions.events(session_id)]
        if done(events) or asyncio.get_running_loop().time() > deadline:
            return events
        await asyncio.sleep(0.2)


def _types(events: list[SessionEvent], *kinds: str) -> list[SessionEvent]:
    return [e for e in events if e.type in kinds]


# --- the park lifecycle event, whatever resumed the session ------------------------------------


async def test_a_deliver_signal_reads_as_delivered_then_the_re_park(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "The park lifecycle event says which channel a session awaits, and for an agent
    park, the reason it gave", so a subscriber tells "turn ended" from "session waiting"
    whatever resumed it. A refused signal (no trigger id) leaves the session parked exactly
    as it was: it is reported refused, with the reason, never delivered. (A signal is
    reported once the turn it starts shows in the history.)"""
    write_workflow(tmp_path, "waiter", WAITER)
    async with running_agent(
        client, task_queue, tmp_path, "waiter", scripted(WAITER_PLAYBOOK)
    ) as agent:
        await agent.workflow.send(SID["sig-1"], "Wait for it.")
        await agent.workflow.signal_deliver(SID["sig-1"], trigger="")  # refused: no trigger id
        # the next signal once the refusal is recorded (in one workflow task, the two would
        # land in an order the history does not promise)
        await _events_until(agent, SID["sig-1"], lambda found: bool(_types(found, "refused")))
        await agent.workflow.signal_deliver(SID["sig-1"], trigger="nudge")
        events = await _events_until(
            agent, SID["sig-1"], lambda found: len(_types(found, "parked")) >= 2
        )
    delivered = _types(events, "delivered")
    assert [e.data["trigger"] for e in delivered] == ["nudge"]
    parks = _types(events, "parked")
    assert [(p.data["channel"], p.data["reason"]) for p in parks] == [
        ("input", "the go-ahead"),
        ("input", "another nudge"),
    ]
    (refused,) = _types(events, "refused")  # reported as refused, with the reason
    assert (refused.level, refused.data["trigger"], refused.data["signal"]) == ("warn", "", True)
    assert refused.data["type"] and refused.data["reason"]
    order = [e.type for e in events if e.type in ("parked", "delivered", "refused")]
    assert order == ["parked", "refused", "delivered", "parked"]


async def test_a_timer_wake_reads_as_delivered_and_the_re_park_carries_its_new_resume_at(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "The polling loop is then park → resume → re-park with a new until", and
    "resumeAt then rides SessionSummary and the park event": the wake is a ``delivered`` of
    trigger ``timer``, and the re-park's event carries the new resume time."""
    write_workflow(tmp_path, "waiter", WAITER)
    async with running_agent(
        client, task_queue, tmp_path, "waiter", scripted(WAITER_PLAYBOOK)
    ) as agent:
        first = await agent.workflow.send(SID["timer-1"], "A timed check.")
        events = await _events_until(
            agent, SID["timer-1"], lambda found: len(_types(found, "parked")) >= 2
        )
        summary = await agent.sessions.get(SID["timer-1"])
    assert first.kind == "parked"
    [wake] = _types(events, "delivered")
    assert wake.data["trigger"] == "timer"
    parks = _types(events, "parked")
    assert [p.data["reason"] for p in parks] == ["the posting", "check again"]
    assert parks[1].data["resumeAt"] is not None
    assert summary.resume_at is not None
    assert parks[1].data["resumeAt"] == summary.resume_at.isoformat()
    assert str(parks[1].data["resumeAt"]) > str(parks[0].data["resumeAt"])


async def test_a_message_to_a_human_park_and_its_answer_are_park_message_events(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "A message a person sends to a parked session, and the answer it gets, are the
    park-message events (inbound and outbound). Those move the session nowhere." No second
    ``parked`` for a park that did not change, and the answer is no ordinary agent-text."""
    write_workflow(tmp_path, "review", REVIEW)
    seen: list[SessionEvent] = []
    async with running_agent(
        client, task_queue, tmp_path, "review", scripted(REVIEW_PLAYBOOK)
    ) as agent:
        await agent.workflow.send(SID["reply-1"], "Draft it.")
        answered = await asyncio.wait_for(
            agent.workflow.reply(SID["reply-1"], "Is it ready?", on_event=seen.append), timeout=8
        )
        events = [e async for e in agent.sessions.events(SID["reply-1"])]
    assert answered.kind == "parked"
    messages = [(e.data["direction"], e.data["text"]) for e in _types(events, "park-message")]
    assert messages == [("inbound", "Is it ready?"), ("outbound", "It is waiting for you.")]
    assert len(_types(events, "parked")) == 1
    texts = [e.data["text"] for e in _types(events, "agent-text")]
    assert "It is waiting for you." not in texts
    assert [e.type for e in seen][-1] == "park-message"


async def test_a_decision_routing_into_another_human_state_spends_one_handoff_call(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "A park at a human state spends one tool-less model call: the handoff message.
    … A decision that routes straight into another human state spends one too." """
    write_workflow(tmp_path, "review", REVIEW)
    async with running_agent(
        client, task_queue, tmp_path, "review", scripted(REVIEW_PLAYBOOK)
    ) as agent:
        await agent.workflow.send(SID["route-1"], "Draft it.")
        before = len([e async for e in agent.sessions.events(SID["route-1"])])
        routed = await agent.workflow.decide(SID["route-1"], to="second-review")
        events = [e async for e in agent.sessions.events(SID["route-1"])][before:]
    assert (routed.kind, routed.state, routed.parked_channel) == (
        "parked",
        "second-review",
        "decision",
    )
    assert len(_types(events, "model-usage")) == 1


# --- mocks belong to the case's own firings -------------------------------------------------

READER = """
title: Reader
states:
  read:
    triggers: { manual: }
    instructions: Read the note and say what it says.
    tools: { allow: [read_file] }
"""

READER_PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "when": {"last_tool": "read_file", "last_tool_result": "/(?P<text>.*)/s"},
                "reply": {"content": "The note says {text}."},
            },
            {"reply": {"tool_calls": [call("read_file", file_path="scratchpad/note.md")]}},
        ]
    }
)

READER_CASE = """
title: The note is read as mocked
description: The read is answered by the case's mock, on a session named by the host.
mocks:
  - tool: read_file
    result: "{word}"
steps:
  - send: "Read the note."
  - succeeded: true
  - reply: {{ includes: ["The note says {word}."] }}
"""


async def test_a_case_re_run_on_an_existing_session_brings_its_own_mocks(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "mocks — Tool-result mocks the driven session sees." A case re-run on the
    session a host names (``session_id_for_case``) sees its own mocks, not the ones the
    session started with; and a host-named session is left running for the host."""
    directory = write_workflow(tmp_path, "reader", READER)
    case = directory / "tests" / "note.test.yaml"
    case.parent.mkdir()
    server = scripted(READER_PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "reader", server) as agent:
        results = []
        for word in ("first", "second"):
            case.write_text(READER_CASE.format(word=word))
            results.append(
                await run_tests(
                    "reader",
                    tmp_path,
                    create_target=agent,
                    session_id_for_case=lambda _case: SID["host-case-1"],
                    model=model_config(server),
                )
            )
        view = await agent.sessions.view(SID["host-case-1"])
        described = await agent.handle(SID["host-case-1"]).describe()
    assert [r.results[0].verdict.failures for r in results] == [[], []]
    answers = [m.content for m in view.transcript if m.role == "tool" and m.name == "read_file"]
    assert answers == ["first", "second"]
    assert described.status == WorkflowExecutionStatus.RUNNING


async def test_the_host_api_carries_mocks_on_each_firing(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "reader", READER)
    server = scripted(READER_PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "reader", server) as agent:
        one = await agent.workflow.send(
            SID["mocks-1"], "Read.", mocks=[ToolMock(tool="read_file", result="one")]
        )
        kept = await agent.workflow.send(SID["mocks-1"], "Again.")
        two = await agent.workflow.send(
            SID["mocks-1"], "Once more.", mocks=[ToolMock(tool="read_file", result="two")]
        )
    assert (one.reply, kept.reply, two.reply) == (
        "The note says one.",
        "The note says one.",
        "The note says two.",
    )


# --- run_tests: the host's extras, and what a suite leaves behind -----------------------------


class _Backend:
    """An authoring backend that is no directory: a store of files by path."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def walk(self, path: str) -> list[str]:
        return sorted(p for p in self.files if p.startswith(path + "/"))

    def read_bytes(self, path: str) -> bytes:
        return self.files[path].encode("utf-8")


WAIT_CASE = """
title: The session waits for the go-ahead
description: The first send parks for input in check.
steps:
  - send: "Wait for it."
  - parked: { channel: input, state: check }
"""


async def test_run_tests_reads_the_suite_from_any_backend_against_a_built_target(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "authoring, the backend the suite itself is read from … createTarget, the agent
    under test: a built workflow-governed runtime or a factory." A case session the runner
    named itself is ended with its case, so a suite leaves no running sessions behind."""
    write_workflow(tmp_path, "waiter", WAITER)  # what the agent under test runs
    backend = _Backend(
        {
            "workflows/waiter/workflow.yaml": WAITER,
            "workflows/waiter/tests/wait.test.yaml": WAIT_CASE,
        }
    )
    server = scripted(WAITER_PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "waiter", server) as agent:
        result = await run_tests(
            "waiter",
            tmp_path / "elsewhere",
            authoring=backend,
            create_target=agent,
            model=model_config(server),
        )
        [case] = result.results
        assert case.session_id is not None
        described = await agent.handle(case.session_id).describe()
    assert (result.exit_code, case.id, case.verdict.failures) == (0, "wait", [])
    # ended: cancelled, or terminated when the cancellation was not taken within the grace
    assert described.status in (
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
    )


# --- variables, paths and files -------------------------------------------------------------

GUARDED = """
title: Guarded
states:
  check:
    triggers: { manual: }
    instructions: Wait for the order id, then read its file.
    tools:
      allow:
        - { tool: read_file, paths: ["${{order_id}}.json"] }
"""

GUARDED_PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "read_file"}, "reply": {"content": "Read."}},
            {
                "when": {"last_tool_result": "/delivered/"},
                "reply": {
                    "tool_calls": [
                        call("read_file", file_path="ORD-1.json"),
                        call("read_file", file_path="ORD-2.json"),
                    ]
                },
            },
            {"reply": {"tool_calls": [call("archmax_wait", reason="the order id")]}},
        ]
    }
)


async def test_a_tools_allow_guard_binds_to_a_delivered_variable(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "The delivered values are seeded as locked session variables … A downstream
    tools.allow guard can then bind to them." """
    write_workflow(tmp_path, "guarded", GUARDED)
    server = scripted(GUARDED_PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "guarded", server) as agent:
        await agent.sessions.seed(SID["guard-1"], {"ORD-1.json": "{}", "ORD-2.json": "{}"})
        await agent.workflow.send(SID["guard-1"], "Wait for the order.")
        done = await agent.workflow.deliver(
            SID["guard-1"], trigger="order_known", variables={"order_id": "ORD-1"}
        )
        view = await agent.sessions.view(SID["guard-1"])
    answers: dict[str, Message] = {
        m.tool_call_id: m for m in view.transcript if m.role == "tool" and m.tool_call_id
    }
    reads = [
        (c.arguments, answers[c.id].status)
        for m in view.transcript
        for c in m.tool_calls
        if c.name == "read_file"
    ]
    assert done.kind == "completed"
    assert [status for _, status in reads] == ["ok", "blocked"]
    assert view.summary.variables["order_id"].locked


THREADS = """
title: Threads
states:
  intake:
    triggers:
      email_received: { session: triggers.-1.conversationId }
      email_reply: { session: triggers.-1.conversationId }
    instructions: Ask, then wait for the reply.
"""


async def test_a_session_path_with_a_negative_index_addresses_the_conversation(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "session: triggers.-1.conversationId — conversationId of the last entry of a
    triggers array"; related triggers that declare the same path land in the same
    conversation."""
    write_workflow(tmp_path, "threads", THREADS)
    server = scripted(WAITER_PLAYBOOK)
    payload = {"triggers": [{"conversationId": "AAQk-old"}, {"conversationId": LAST}]}
    async with running_agent(client, task_queue, tmp_path, "threads", server) as agent:
        resolved = await agent.workflow.resolve_session(trigger="email_received", variables=payload)
        first = await agent.workflow.send(
            None, "Where is my order?", trigger="email_received", variables=payload
        )
        reply = await agent.workflow.send(
            None, "It's ORD-1001.", trigger="email_reply", variables=payload
        )
    assert (resolved.session_id, resolved.minted) == (LAST, False)
    assert (first.session_id, first.kind) == (LAST, "parked")
    assert (reply.session_id, reply.disposition) == (LAST, "deliver")


UPLOADS = """
title: Uploads
states:
  intake:
    triggers:
      upload: { requires: [{ name: invoice, type: file }] }
    instructions: Acknowledge the invoice.
"""


async def test_files_on_a_turn_satisfy_a_triggers_file_input(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: "files on a turn is the way to satisfy a trigger's file input": the file is
    placed before the turn and its variable seeded, locked, with the placed path."""
    write_workflow(tmp_path, "uploads", UPLOADS)
    server = scripted(json.dumps({"default": {"content": "Got it."}}))
    data = b"%PDF-1.7\x00\xff\x01 invoice"
    async with running_agent(client, task_queue, tmp_path, "uploads", server) as agent:
        outcome = await agent.workflow.send(
            SID["upload-1"],
            "Here it is.",
            trigger="upload",
            files={"invoice": ("invoice.pdf", data)},
        )
    assert outcome.kind == "completed"
    assert outcome.variables["invoice"].value == "scratchpad/attachments/invoice.pdf"
    assert outcome.variables["invoice"].locked
    placed = tmp_path / "sessions" / SID["upload-1"] / "scratchpad" / "attachments" / "invoice.pdf"
    assert placed.read_bytes() == data
