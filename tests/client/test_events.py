"""A session's events in archmax's vocabulary, read from its Temporal history: after the fact
from recorded histories, and live by following a running session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory

from archmax_temporal.client.events import SessionEvent, read_history, session_events
from archmax_temporal.live import LiveEvent
from archmax_temporal.worker import DATA_CONVERTER
from tests.support import paths
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

HISTORIES = paths.HISTORIES / "0.1.0"


def _golden(name: str, **kwargs: int) -> list[SessionEvent]:
    history = WorkflowHistory.from_json(name, (HISTORIES / f"{name}.json").read_text())
    return read_history(history.events, name, DATA_CONVERTER, **kwargs)


def test_a_park_and_delivery_reads_as_turns_states_and_calls() -> None:
    events = _golden("support-inbox-park-deliver")
    assert [e.type for e in events if e.type in ("turn-start", "delivered", "turn-end")] == [
        "turn-start",
        "turn-end",
        "delivered",
        "turn-end",
    ]
    assert [e.data["state"] for e in events if e.type == "state-enter"] == ["clarify", "answer"]
    called = [e.data["tool"] for e in events if e.type == "tool-called"]
    assert called == ["archmax_wait", "archmax_advance"]
    assert events[-1].data == {"kind": "completed", "state": "answer", "rejected": None}
    assert all(e.session_id == "support-inbox-park-deliver" for e in events)
    assert [e.seq for e in events] == sorted(e.seq for e in events)


def test_a_before_hook_veto_reads_as_hook_start_output_and_verdict() -> None:
    events = _golden("order-lookup-cross-company-veto")
    hooks = [(e.type, e.data["hook"], e.data.get("verdict")) for e in events if "hook" in e.data]
    assert hooks == [
        ("hook-start", "hooks/check-requester.js", None),
        ("hook-output", "hooks/check-requester.js", None),
        ("hook-verdict", "hooks/check-requester.js", "ok"),
        ("hook-start", "hooks/check-tenancy.js", None),
        ("hook-verdict", "hooks/check-tenancy.js", "veto"),
    ]
    [line] = [e.data for e in events if e.type == "hook-output"]
    assert (line["method"], line["text"]) == (
        "log",
        "requester support@acmecorp.com may see orders of Acme Corp",
    )
    assert events[-1].type == "turn-end" and events[-1].level == "error"


def test_a_scripts_resumptions_read_as_script_results_naming_each_dispatch() -> None:
    events = _golden("order-lookup-enrichment-fan-out")
    runs = [e.data["dispatch"] for e in events if e.type == "script-result"]
    assert runs == ["archmax_workflow_enrich-order", "archmax_workflow_enrich-order", None]


def test_after_resumes_a_stream_past_the_last_event_seen() -> None:
    events = _golden("support-inbox-park-deliver")
    later = _golden("support-inbox-park-deliver", after=events[4].seq)
    assert later and later[0].seq > events[4].seq
    assert [e.seq for e in later] == [e.seq for e in events if e.seq > events[4].seq]


NOTES = """
title: Notes
states:
  note:
    triggers: { manual: }
    instructions: Write the note, then wait for the go-ahead.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "archmax_note"}, "reply": {"content": "Done."}},
            {
                "when": {"last_tool": "write_file"},
                "reply": {"tool_calls": [call("archmax_wait", reason="the go-ahead")]},
            },
            {
                "reply": {
                    "tool_calls": [call("write_file", file_path="scratchpad/n.md", content="hi")]
                }
            },
        ]
    }
)


async def test_following_a_session_streams_its_events_as_they_happen(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "notes", NOTES)
    async with running_agent(client, task_queue, tmp_path, "notes", scripted(PLAYBOOK)) as agent:
        parked = await agent.workflow.send("events-1", "Write it.")
        seen: list[SessionEvent] = []

        async def follow() -> None:
            async for event in agent.sessions.events("events-1", follow=True):
                seen.append(event)
                if event.type == "turn-end":
                    return

        following = asyncio.create_task(follow())
        await asyncio.sleep(0.3)  # the stream has caught up and now waits on the history
        assert [e.type for e in seen][-1] == "parked"
        await agent.workflow.deliver("events-1", trigger="go_ahead")
        await asyncio.wait_for(following, timeout=30)
    assert parked.kind == "parked"
    [called] = [e for e in seen if e.type == "tool-called" and e.data["tool"] == "write_file"]
    [result] = [e for e in seen if e.type == "tool-result" and e.data["tool"] == "write_file"]
    assert result.data["callId"] == called.data["callId"]
    assert (result.data["tool"], result.data["status"]) == ("write_file", "ok")
    [park] = [e for e in seen if e.type == "parked"]
    assert (park.data["state"], park.data["reason"]) == ("note", "the go-ahead")
    assert seen[-1].data["kind"] == "completed"
    assert [e.type for e in seen].index("delivered") > [e.type for e in seen].index("parked")


def test_calls_that_ran_no_activity_are_read_off_the_next_model_input() -> None:
    events = _golden("order-lookup-enrichment-fan-out")
    [named] = [e.data["names"] for e in events if e.type == "variables-set"]
    assert named == ["enrichments"]
    results = {e.data["tool"]: e.data for e in events if e.type == "tool-result"}
    assert results["archmax_run"]["preview"].startswith('[{"order_id": "ORD-1002"')
    assert results["archmax_advance"]["status"] == "ok"
    called = {e.data["callId"] for e in events if e.type == "tool-called"}
    assert {d["callId"] for d in results.values()} <= called


GUARDED = """
title: Guarded
states:
  guarded:
    triggers: { manual: }
    tools: { forbid: [write_file] }
"""

GUARDED_PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"last_tool": "archmax_set_variables"}, "reply": {"content": "Noted."}},
            {
                "when": {"last_tool": "write_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "archmax_set_variables",
                            variables={"outcome": "x", "title": "Refused write"},
                        )
                    ]
                },
            },
            {
                "reply": {
                    "tool_calls": [call("write_file", file_path="scratchpad/a.md", content="a")]
                }
            },
        ]
    }
)


async def test_a_refused_call_is_tool_blocked_with_its_rule(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "guarded", GUARDED)
    server = scripted(GUARDED_PLAYBOOK)
    async with running_agent(client, task_queue, tmp_path, "guarded", server) as agent:
        await agent.workflow.send("events-2", "Try it.")
        events = [e async for e in agent.sessions.events("events-2")]
    [blocked] = [e for e in events if e.type == "tool-blocked"]
    assert (blocked.data["tool"], blocked.data["rule"], blocked.level) == (
        "write_file",
        "tool.forbidden-here",
        "warn",
    )
    assert [e.data["names"] for e in events if e.type == "variables-set"] == [["outcome", "title"]]
    assert [e.data["title"] for e in events if e.type == "title-set"] == ["Refused write"]
    assert not [e for e in events if e.type == "tool-result" and e.data["tool"] == "write_file"]


async def test_on_event_streams_each_turn_while_send_and_deliver_run(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "notes", NOTES)
    first: list[SessionEvent] = []
    second: list[SessionEvent] = []

    async def collect(event: SessionEvent) -> None:
        second.append(event)

    async with running_agent(client, task_queue, tmp_path, "notes", scripted(PLAYBOOK)) as agent:
        parked = await agent.workflow.send("events-3", "Write it.", on_event=first.append)
        done = await agent.workflow.deliver("events-3", trigger="go_ahead", on_event=collect)
    assert (parked.kind, done.kind) == ("parked", "completed")
    assert first[0].type == "turn-start" and first[-1].type == "parked"
    assert any(e.type == "tool-called" and e.data["tool"] == "write_file" for e in first)
    assert second[0].type == "delivered" and second[-1].type == "turn-end"
    assert not {e.seq for e in first} & {e.seq for e in second}  # each turn's own events


async def test_a_send_to_a_session_parked_for_input_reads_as_delivered(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Seed: send to a session parked with archmax_wait delivers the trigger into it: the
    stream says ``delivered`` (with the trigger), as for ``deliver``, not ``turn-start``."""
    write_workflow(tmp_path, "notes", NOTES)
    live: list[SessionEvent] = []
    async with running_agent(client, task_queue, tmp_path, "notes", scripted(PLAYBOOK)) as agent:
        parked = await agent.workflow.send("events-send-1", "Write it.")
        done = await agent.workflow.send(
            "events-send-1", None, trigger="go_ahead", on_event=live.append
        )
        read = [e async for e in agent.sessions.events("events-send-1")]
    assert (parked.kind, done.kind, done.disposition) == ("parked", "completed", "deliver")
    assert live[0].type == "delivered" and live[0].data == {"trigger": "go_ahead"}
    starts = [(e.type, e.data.get("trigger")) for e in read if e.type in _STARTS]
    assert starts == [("turn-start", None), ("delivered", "go_ahead")]


_STARTS = ("turn-start", "delivered", "decided")


async def test_an_error_in_on_event_reaches_the_caller(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "notes", NOTES)

    def broken(event: SessionEvent) -> None:
        raise LookupError(f"host bug on {event.type}")

    async with running_agent(client, task_queue, tmp_path, "notes", scripted(PLAYBOOK)) as agent:
        with pytest.raises(LookupError, match="host bug on turn-start"):
            await agent.workflow.send("events-4", "Write it.", on_event=broken)
        summary = await agent.sessions.get("events-4")
    assert summary.status == "awaiting_input"  # the session itself is untouched by it


class _Silent:
    """A live channel whose subscription never brings an event."""

    @contextlib.asynccontextmanager
    async def subscribe(self, session_id: str) -> AsyncIterator[AsyncIterator[LiveEvent]]:
        async def nothing() -> AsyncIterator[LiveEvent]:
            await asyncio.Event().wait()
            yield  # type: ignore[misc]  # never reached: it makes this a generator

        yield nothing()


def _pumps() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "merged.<locals>.pump" in repr(t) and not t.done()]


async def test_a_followed_stream_closed_mid_way_leaves_no_task_pending(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A stream that merges live text is closed with its caller's stream: its two pumps end
    then, not when the collector finds them (one left pending was destroyed later with a
    warning, into another test's loop)."""
    write_workflow(tmp_path, "notes", NOTES)
    async with running_agent(client, task_queue, tmp_path, "notes", scripted(PLAYBOOK)) as agent:
        sid = f"events-closed-{uuid.uuid4().hex[:8]}"
        await agent.workflow.send(sid, "Write it.")
        stream = session_events(client, sid, follow=True, live=_Silent())  # type: ignore[arg-type]
        first = await anext(stream)
        assert first.type and _pumps()
        await stream.aclose()
        assert _pumps() == []
