"""The spec a turn runs under: workflow.yaml as the host loaded it when the turn began.

One session lives through edits of its workflow: a new turn adopts the host's current spec
(its hash on the turn's trail step, in the summary and outcome, ``_specs/<hash>.json``
written); a state the edit removed sends the next turn to the trigger's entry state with an
``[error]`` note; a trigger the edit added is accepted on the existing id; a parked turn
resumes under the spec it parked with."""

from __future__ import annotations

import json
import os
from pathlib import Path

from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.models import Message, TrailStep
from archmax_temporal.workflows.patches import BEFORE_GENERATION, GENERATION_PATCH
from archmax_temporal.workflows.session import TURN_SPEC_PATCH
from tests.support.activity_events import patch_ids
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.golden import replayer

V1 = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Intake, first edition.
    transitions:
      - { to: answer, description: Ready to answer. }
  answer:
    instructions: Answer, first edition.
"""

# `answer` is gone (renamed `respond`), `chat` is a new trigger; intake can park.
V2 = """
title: Desk
states:
  intake:
    triggers:
      manual:
      chat: {}
    instructions: Intake, second edition.
    transitions:
      - { to: respond, description: Ready to answer. }
  respond:
    instructions: Respond, second edition.
"""

V3 = V2.replace("second edition", "third edition")

PLAYBOOK = json.dumps(
    {
        "rules": [
            {
                "name": "resumed",
                "when": {"last_user": "/ORD-/"},
                "reply": {"content": "Thanks, noted."},
            },
            {
                "name": "park",
                "when": {"last_user": "/wait/"},
                "reply": {
                    "content": "Which order?",
                    "tool_calls": [call("archmax_wait", reason="the order id")],
                },
            },
            {
                "name": "to-answer",
                "when": {"state": "intake", "any_message": "/first edition/"},
                "reply": {"tool_calls": [call("archmax_advance", to="answer")]},
            },
            {
                "name": "to-respond",
                "when": {"state": "intake"},
                "reply": {"tool_calls": [call("archmax_advance", to="respond")]},
            },
            {"name": "answered", "when": {"state": "answer"}, "reply": {"content": "Answered."}},
            {"name": "responded", "when": {"state": "respond"}, "reply": {"content": "Responded."}},
        ]
    }
)


def _system(server: ScriptedModelServer, index: int) -> str:
    messages = server.requests[index].messages
    return "\n".join(str(m.get("content")) for m in messages if m.get("role") == "system")


def _turn_steps(trail: list[TrailStep]) -> list[TrailStep]:
    return [step for step in trail if step.spec_hash is not None]


def _errors(transcript: list[Message]) -> list[str]:
    return [m.content or "" for m in transcript if m.note == "error" and m.role == "tool"]


async def _edit(agent: Agent, root: Path, yaml_text: str) -> str:
    write_workflow(root, "desk", yaml_text)
    agent.reload()
    return agent.loaded.spec_hash


async def test_an_edited_workflow_reaches_the_next_turn_of_a_session(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Turn 1 under v1 ends in `answer`; v2 drops `answer` and adds trigger `chat`: turn 2
    (fired through `chat` on the same id) opens at intake with an [error] note and runs
    under v2; a turn parked under v2 resumes under v2 after v3 is loaded; the next turn runs
    under v3. Every spec a turn ran under is in the store; the history replays."""
    store = tmp_path / "sessions"
    write_workflow(tmp_path, "desk", V1)
    server = scripted(PLAYBOOK)
    sid = "edited-1"
    async with running_agent(client, task_queue, tmp_path, "desk", server, store=store) as agent:
        v1 = agent.loaded.spec_hash
        first = await agent.workflow.send(sid, "Hello")
        v2 = await _edit(agent, tmp_path, V2)
        second = await agent.workflow.send(sid, "Hello again", trigger="chat")
        parked = await agent.workflow.send(sid, "Please wait for me")
        v3 = await _edit(agent, tmp_path, V3)
        resumed = await agent.workflow.send(sid, "ORD-7")  # a send into a park delivers
        summary_resumed = await agent.sessions.get(sid)
        third = await agent.workflow.send(sid, "One more thing")
        summary = await agent.sessions.get(sid)
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    assert len({v1, v2, v3}) == 3
    assert (first.state, first.spec_hash) == ("answer", v1)
    assert (second.kind, second.state, second.spec_hash) == ("completed", "respond", v2)
    assert [(s.to, s.reason) for s in second.trail][:1] == [("intake", "chat")]
    [moved] = _errors(view.transcript)
    assert "state 'answer' no longer exists" in moved and f"spec {v2}" in moved
    assert "opens at 'intake'" in moved
    assert (parked.kind, parked.spec_hash) == ("parked", v2)
    assert (resumed.disposition, resumed.kind, resumed.spec_hash) == ("deliver", "completed", v2)
    assert summary_resumed.spec_hash == v2  # the parked turn kept its spec
    assert (third.spec_hash, summary.spec_hash, third.state) == (v3, v3, "respond")
    assert [(s.reason, s.spec_hash) for s in _turn_steps(view.trail)] == [
        ("manual", v1),
        ("chat", v2),
        ("manual", v2),
        ("manual", v3),
    ]
    rules = [r.rule for r in server.requests]
    assert rules == [
        "to-answer",
        "answered",
        "to-respond",
        "responded",
        "park",
        "resumed",
        "responded",
    ]
    assert "first edition" in _system(server, 0)
    assert "second edition" in _system(server, 2)
    assert "second edition" in _system(server, 4)
    assert "second edition" in _system(server, 5)  # resumed after v3 was loaded: still v2
    assert "third edition" in _system(server, 6)
    for spec_hash in (v1, v2, v3):
        assert (store / "_specs" / f"{spec_hash}.json").is_file(), spec_hash
    metadata = json.loads((store / sid / "artifacts" / "metadata.json").read_text())
    assert metadata["specHash"] == v3
    # adoption is patched: a run of this code takes it under the generation, no marker more
    assert TURN_SPEC_PATCH in BEFORE_GENERATION
    assert patch_ids(history.events) == [GENERATION_PATCH]
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_a_new_trigger_is_accepted_on_an_existing_session_by_a_new_host(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A host started after the edit (the CLI's case: it loads the workflow per command)
    fires the added trigger on an id an older host created: accepted, and the turn runs
    under the new spec. The old host still fires its own turns under its spec."""
    write_workflow(tmp_path, "desk", V1)
    server = scripted(PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "desk", server) as old:
        await old.workflow.send("edited-2", "Hello")
        write_workflow(tmp_path, "desk", V2)
        async with running_agent(client, task_queue, tmp_path, "desk", server, worker=False) as new:
            chat = await new.workflow.send("edited-2", "Hi", trigger="chat")
        again = await old.workflow.send("edited-2", "Back to v1")
    assert (chat.kind, chat.state) == ("completed", "respond")
    assert chat.spec_hash == new.loaded.spec_hash != old.loaded.spec_hash
    # the old host's turn: v1 has no `respond`, so it opens at intake, under v1 again
    assert (again.kind, again.state, again.spec_hash) == (
        "completed",
        "answer",
        old.loaded.spec_hash,
    )


async def test_archmax_serve_loads_an_edited_workflow_again(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    """The HTTP server's agents: the same agent while the workflow's files are unchanged, the
    workflow loaded again (a new spec hash for the next turn) once workflow.yaml changed."""
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.http.agents import RootAgents

    directory = write_workflow(tmp_path, "desk", V1)
    config = RuntimeConfig(
        root=tmp_path,
        store=tmp_path / "sessions",
        address="unused",
        task_queue=task_queue,
        address_configured=True,
    )
    agents = RootAgents(config, worker="external", client=client)
    try:
        first = await agents("desk")
        loaded = first.loaded.spec_hash
        unchanged = await agents("desk")
        unchanged_hash = unchanged.loaded.spec_hash
        write_workflow(tmp_path, "desk", V2)
        spec = directory / "workflow.yaml"
        stat = spec.stat()
        os.utime(spec, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        edited = await agents("desk")
    finally:
        await agents.aclose()
    assert unchanged is first and unchanged_hash == loaded
    assert edited is first and edited.loaded.spec_hash != loaded
    assert "chat" in edited.loaded.spec.trigger_ids()


CALLEE = """
title: Callee
states:
  check:
    triggers: { manual: { description: Check it. } }
    instructions: Check it, EDITION edition.
"""

CALLER = """
title: Caller
states:
  desk:
    triggers: { manual: }
    instructions: Run the check as a sub-workflow.
    tools: { allow: [archmax_workflow_callee] }
"""

DELEGATING = json.dumps(
    {
        "rules": [
            {
                "name": "done",
                "when": {"state": "desk", "last_tool": "archmax_workflow_callee"},
                "reply": {"content": "Done."},
            },
            {
                "name": "dispatch",
                "when": {"state": "desk"},
                "reply": {"tool_calls": [call("archmax_workflow_callee")]},
            },
            {"name": "checked", "when": {"state": "check"}, "reply": {"content": "Checked."}},
        ]
    }
)


async def test_a_sub_workflow_starts_under_the_callee_as_the_turn_found_it(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Sub-workflows follow the rule: the callee edited between two turns of the caller's
    session, the second turn's child runs the edited callee (its own spec hash), the first
    child ran the original."""
    write_workflow(tmp_path, "callee", CALLEE.replace("EDITION", "first"))
    write_workflow(tmp_path, "caller", CALLER)
    server = scripted(DELEGATING)
    async with running_agent(client, task_queue, tmp_path, "caller", server) as agent:
        first = await agent.workflow.send("delegating-1", "Check, please.")
        write_workflow(tmp_path, "callee", CALLEE.replace("EDITION", "second"))
        agent.reload()
        second = await agent.workflow.send("delegating-1", "Check again.")
        children = [
            await agent.sessions.get("delegating-1.callee-1"),
            await agent.sessions.get("delegating-1.callee-2"),
        ]
    assert (first.kind, second.kind) == ("completed", "completed")
    assert first.spec_hash == second.spec_hash  # the caller's own spec did not change
    checks = [r for r in server.requests if r.rule == "checked"]
    assert [("first edition" in _system(server, server.requests.index(r))) for r in checks] == [
        True,
        False,
    ]
    assert "second edition" in _system(server, server.requests.index(checks[1]))
    assert children[0].spec_hash != children[1].spec_hash
