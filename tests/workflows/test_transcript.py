"""Each message enters the history once: a model call carries what is new since the last and
refers to the rest, kept in the store's log; the prompt and tool list travel once a run."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.events import RUN_STRIDE
from archmax_temporal.worker import DATA_CONVERTER
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from archmax_temporal.workflows.models import (
    PROMPTS_KEPT,
    ModelCallInput,
    SessionState,
    SessionView,
)
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.transcript import TRAIL_WINDOW, kept_prompts
from tests.support.agents import Scripted, running_agent, tool_call, write_workflow

READER = """
title: Reader
states:
  read:
    triggers: { manual: {} }
    instructions: Read the file as often as asked, then say done.
    tools:
      allow: [read_file]
"""


def _book(steps: int) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "times": steps,
                    "reply": {
                        "tool_calls": [
                            {"name": "read_file", "arguments": {"file_path": "scratchpad/data.txt"}}
                        ]
                    },
                }
            ],
            "default": {"content": "done"},
        }
    )


async def _one_turn(
    client: Client, task_queue: str, scripted: Scripted, root: Path, steps: int
) -> tuple[list[ModelCallInput], int, int, int]:
    """Run one turn of ``steps`` tool steps (on a caching worker: the size is the point
    here, not replay); the model inputs, the history's bytes and
    largest event, and how many messages the whole conversation has."""
    server = scripted(_book(steps))
    sid = f"history-{steps}"
    async with running_agent(client, task_queue, root, "reader", server, worker_cache=10) as agent:
        await agent.sessions.seed(sid, {"scratchpad/data.txt": "x" * 2048})
        outcome = await agent.workflow.send(sid, "read it")
        assert outcome.kind == "completed"
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    inputs: list[ModelCallInput] = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name == MODEL_ACTIVITY:
            (decoded,) = DATA_CONVERTER.payload_converter.from_payloads(
                list(attributes.input.payloads), [ModelCallInput]
            )
            inputs.append(decoded)
    sizes = [event.ByteSize() for event in history.events]
    return inputs, sum(sizes), max(sizes), len(view.transcript)


async def test_every_message_is_carried_by_exactly_one_model_call(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Across a 20-step turn, the model calls' inputs carry each message once, but for the
    model's own answers, which no call carries (each is its call's result, and that call
    logs it), the system prompt once and the tool list never (every call names it by
    digest), and the whole conversation is there for the host to read."""
    write_workflow(tmp_path, "reader", READER)
    inputs, _, largest, total = await _one_turn(client, task_queue, scripted, tmp_path, 20)
    assert len(inputs) == 21
    assert all(call.log_answer for call in inputs)
    assert all(m.role != "assistant" for call in inputs for m in call.messages)
    assert sum(len(call.messages) for call in inputs) + len(inputs) == total
    assert [call.log.base for call in inputs if call.log] == [
        sum(len(c.messages) + 1 for c in inputs[:n]) for n in range(len(inputs))
    ]
    assert sum(1 for call in inputs if call.system is not None) == 1
    assert sum(1 for call in inputs if call.tools) == 0
    assert len({call.tools_digest for call in inputs}) == 1 and inputs[0].tools_digest
    assert largest < 16 * 1024


async def test_the_history_grows_linearly_with_the_steps_of_a_turn(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Four times the steps cost about four times the history (it grew with their square)."""
    write_workflow(tmp_path, "reader", READER)
    _, small, _, _ = await _one_turn(client, task_queue, scripted, tmp_path, 6)
    _, large, _, _ = await _one_turn(client, task_queue, scripted, tmp_path, 24)
    assert large / small < 5.0, (small, large)


async def test_a_long_turn_continues_as_new_between_model_calls_and_goes_on(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """With the run bounded to two model calls, a seven-step turn is carried by several runs:
    the waiting caller gets the one outcome, every step's answer is in the conversation, and
    the session took one turn, and its events read across the runs."""
    write_workflow(tmp_path, "reader", READER)
    server = scripted(_book(7))
    sid = "history-mid-turn"
    async with running_agent(
        client, task_queue, tmp_path, "reader", server, model_calls_per_run=2
    ) as agent:
        await agent.sessions.seed(sid, {"scratchpad/data.txt": "x" * 2048})
        outcome = await agent.workflow.send(sid, "read it")
        view = await agent.sessions.view(sid)
        events = [e async for e in agent.sessions.events(sid)]
        later = [e async for e in agent.sessions.events(sid, after=events[-4].seq)]
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{sid}'")]
    # the events read across every run of the chain, in one increasing order
    reads = [e for e in events if e.type == "tool-result" and e.data.get("tool") == "read_file"]
    assert len(reads) == 7
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert events[-1].seq >= (len(runs) - 1) * RUN_STRIDE
    assert [e.type for e in events].count("turn-start") == 1
    assert later == events[-3:]
    assert (outcome.kind, outcome.reply, outcome.disposition) == ("completed", "done", "turn")
    assert len(runs) >= 4
    answers = [m for m in view.transcript if m.role == "tool" and m.name == "read_file"]
    assert len(answers) == 7 and all(len(m.content or "") > 2000 for m in answers)
    assert view.summary.turns == 1
    assert len(server.requests) == 8


PING_PONG = """
title: Ping pong
states:
  ping:
    triggers: { manual: {} }
    instructions: Go to pong.
    transitions:
      - { to: pong, description: Always. }
  pong:
    instructions: Go to ping.
    transitions:
      - { to: ping, description: Always. }
"""


async def test_the_trail_the_session_carries_is_bounded_and_the_view_is_whole(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """After a turn of 120 advances, the session keeps a window of its trail (the rest is the
    store's trail.json); an outcome carries the newest of its firing's steps with their index,
    and ``sessions.view`` the whole trail in order."""
    write_workflow(tmp_path, "ping-pong", PING_PONG)
    moves = 60
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "ping", "last_user": "/bounce/"},
                        "times": moves,
                        "reply": {"tool_calls": [tool_call("archmax_advance", to="pong")]},
                    },
                    {
                        "when": {"state": "pong", "last_user": "/bounce/"},
                        "times": moves,
                        "reply": {"tool_calls": [tool_call("archmax_advance", to="ping")]},
                    },
                ],
                "default": {"content": "here"},
            }
        )
    )
    sid = "history-trail"
    async with running_agent(
        client, task_queue, tmp_path, "ping-pong", server, worker_cache=10
    ) as agent:
        first = await agent.workflow.send(sid, "bounce")
        second = await agent.workflow.send(sid, "where are you?")
        held: SessionView = await agent.handle(sid).query(ArchmaxSession.view)
        view = await agent.sessions.view(sid)
    steps = 1 + 2 * moves  # the trigger arrival, then every advance
    # a firing's outcome carries its steps the session still holds: the newest, numbered
    assert (len(first.trail), first.trail_offset) == (TRAIL_WINDOW, steps - TRAIL_WINDOW)
    assert [s.kind for s in second.trail] == ["trigger"]
    assert second.trail_offset == steps
    assert held.trail_offset > 0 and len(held.trail) <= TRAIL_WINDOW + 1
    assert len(view.trail) == steps + 1 and view.trail_offset == 0
    assert [s.to for s in view.trail[1:steps]] == ["pong", "ping"] * moves
    assert view.trail[-len(held.trail) :] == held.trail
    stored = json.loads((tmp_path / "sessions" / sid / "artifacts" / "trail.json").read_text())
    assert len(stored["steps"]) == steps + 1


async def test_what_a_run_carries_on_stays_small_however_large_the_messages(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Twelve turns of 100 KB messages, continuing as new every third: the window of logged
    messages is kept shortened (the log has them whole), so no event nears Temporal's 256 KB
    warning, and the host's view still reads every message whole."""
    write_workflow(tmp_path, "reader", READER)
    server = scripted(json.dumps({"default": {"content": "done"}}))
    sid = "history-large-messages"
    big = [f"{n:02d}" + "y" * 100_000 for n in range(12)]
    async with running_agent(
        client, task_queue, tmp_path, "reader", server, worker_cache=10, requests_per_run=3
    ) as agent:
        for message in big:
            assert (await agent.workflow.send(sid, message)).reply == "done"
        view = await agent.sessions.view(sid)
    largest, runs = 0, 0
    run_id: str | None = None  # the chain, walked back from its latest run
    while runs == 0 or run_id is not None:
        history = await client.get_workflow_handle(sid, run_id=run_id).fetch_history()
        largest = max(largest, *(event.ByteSize() for event in history.events))
        started = history.events[0].workflow_execution_started_event_attributes
        run_id, runs = started.continued_execution_run_id or None, runs + 1
    assert runs >= 4
    assert largest < 128 * 1024, largest  # one message whole, the window's shortened
    said = [m.content for m in view.transcript if m.role == "user"]
    assert said == big


def test_the_schema_text_is_each_schemas_fields_as_json_with_keys_sorted() -> None:
    """Its digest names stored schemas and every model call's ``tools_digest``: the text built
    from the fields equals the schemas' JSON dump, for every built-in schema and a host's,
    and a schema model that gains a field fails here first."""
    from archmax_temporal.workflows import sandbox, todos, workspace_tools
    from archmax_temporal.workflows.models import ToolSchema
    from archmax_temporal.workflows.transcript import schemas_text

    host = ToolSchema(
        name="charge",
        description="Charge an order.",
        parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    )
    tools = [
        *workspace_tools.workspace_tool_schemas(),
        todos.write_todos_schema(),
        sandbox.archmax_eval_schema(),
        sandbox.archmax_run_schema(),
        host,
    ]
    dumped = json.dumps([t.model_dump(mode="json") for t in tools], sort_keys=True)
    assert schemas_text(tools) == dumped
    assert schemas_text([]) == "[]"
    assert set(ToolSchema.model_fields) == {"name", "description", "parameters"}


def test_the_prompts_a_session_carries_are_the_newest_few_each_once() -> None:
    """A call that succeeded records its prompt's and tool list's digests (none for no
    tools) newest last; one named again moves to the end; only the newest few are carried
    to the next run, and none at all leaves the state's wire form as before."""
    s = SessionState()
    assert "prompts_kept" not in s.model_dump(mode="json")
    kept_prompts(s, ["p1", "t1"])
    kept_prompts(s, ["p2", None])
    kept_prompts(s, ["p1", "t1"])
    assert s.prompts_kept == ["p2", "p1", "t1"]
    for n in range(PROMPTS_KEPT):
        kept_prompts(s, [f"p{n + 10}", None])
    assert s.prompts_kept == [f"p{n + 10}" for n in range(PROMPTS_KEPT)]
    assert SessionState.model_validate_json(s.model_dump_json()).prompts_kept == s.prompts_kept
