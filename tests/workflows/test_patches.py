"""The generation (:mod:`archmax_temporal.workflows.patches`): a new run records one patch
marker, and a run begun on the code before it goes on, replaying, down each patch as it did.

Every session here runs on a worker that keeps no workflow cache, so each workflow task replays
the whole history: the code that continues a session is the code that replays it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.workflows import (
    delegation,
    hook_runner,
    patches,
    runtime_calls,
    session,
    store_binding,
    stored_variables,
    turn,
)
from archmax_temporal.workflows.contracts import base
from archmax_temporal.workflows.patches import BEFORE_GENERATION, GENERATION_PATCH
from tests.support.activity_events import local_marker, patch_ids
from tests.support.agents import Scripted, running_agent
from tests.support.golden import replayer
from tests.support.paths import EXAMPLES

INBOX = EXAMPLES / "support-inbox"
PLAYBOOK = INBOX / "workflows" / "support-inbox" / "playbook.yaml"

PATCHING = (
    base,
    delegation,
    hook_runner,
    runtime_calls,
    session,
    store_binding,
    stored_variables,
    turn,
)
"""The modules whose constants name the patches of the workflow code."""


def _change_versions(events: Iterable[HistoryEvent]) -> list[list[str]]:
    """Each ``TemporalChangeVersion`` a history upserts: the patch ids the run recorded so far."""
    return [
        json.loads(fields["TemporalChangeVersion"].data)
        for e in events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
        and "TemporalChangeVersion"
        in (
            fields
            := e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
    ]


async def _park(agent: Agent, sid: str) -> None:
    """A support-inbox session that parks in clarify for the customer's reply."""
    parked = await agent.workflow.send(
        None, "About my order", trigger="email_received", variables={"conversation_id": sid}
    )
    assert parked.status == "awaiting_input"


async def _deliver(agent: Agent, sid: str) -> None:
    """The reply delivered: the session answers."""
    answered = await agent.workflow.deliver(
        sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
    )
    assert answered.status != "awaiting_input" and answered.reply


def _local_ids(events: Iterable[HistoryEvent]) -> list[str]:
    return [str(m["activity_id"]) for e in events if (m := local_marker(e)) is not None]


async def test_a_new_session_records_the_generation_alone(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A session that parks and is delivered to records one patch marker, the generation, in
    its first workflow task, and one ``TemporalChangeVersion`` naming it alone; it still takes
    the patched paths (its short tools and save run as local activities, counted)."""
    server = scripted(PLAYBOOK)
    sid = f"generation-{uuid.uuid4().hex[:8]}"
    async with running_agent(
        client, task_queue, INBOX, "support-inbox", server, store=tmp_path / "store"
    ) as agent:
        await _park(agent, sid)
        await _deliver(agent, sid)
        history = await agent.handle(sid).fetch_history()
    events = list(history.events)
    assert patch_ids(events) == [GENERATION_PATCH]
    assert _change_versions(events) == [[GENERATION_PATCH]]
    first_task = next(
        e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    )
    (marker,) = [
        e.marker_recorded_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert marker.workflow_task_completed_event_id == first_task
    ids = _local_ids(events)
    assert ids and ids == [f"l{n}" for n in range(1, len(ids) + 1)]
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


async def test_a_session_begun_before_the_generation_goes_on_down_each_patch(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session parked by the code before the generation (which asked each patch itself:
    what :func:`patches.generation` answering False without asking does) is delivered to on
    this code. Its workflow task replays the history, finds no generation marker, and asks
    each patch as the old code did: the turn completes, the history holds the patches' own
    markers and no generation, its local activities keep their old ids, and it replays."""
    server = scripted(PLAYBOOK)
    sid = f"before-{uuid.uuid4().hex[:8]}"
    async with running_agent(
        client, task_queue, INBOX, "support-inbox", server, store=tmp_path / "store"
    ) as agent:
        with monkeypatch.context() as before:
            before.setattr(patches, "generation", lambda: False)
            await _park(agent, sid)
            earlier = list((await agent.handle(sid).fetch_history()).events)
        assert GENERATION_PATCH not in patch_ids(earlier)
        asked_before = patch_ids(earlier)
        assert asked_before and set(asked_before) <= BEFORE_GENERATION
        await _deliver(agent, sid)
        history = await agent.handle(sid).fetch_history()
    events = list(history.events)
    asked = patch_ids(events)
    assert GENERATION_PATCH not in asked
    assert asked[: len(asked_before)] == asked_before and set(asked) <= BEFORE_GENERATION
    ids = _local_ids(events)
    assert len(ids) > len(_local_ids(earlier))  # the delivered turn ran local activities too
    assert all(i.startswith("local-") for i in ids)
    replayed = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


def test_the_generation_stands_for_patches_the_code_defines() -> None:
    """Each id the generation stands for is a patch the workflow code defines (a misspelt one
    would be asked on its own in every run, and its path taken without it in none)."""
    defined = {
        value
        for module in PATCHING
        for name, value in vars(module).items()
        if name.endswith("_PATCH") and isinstance(value, str)
    }
    assert defined >= BEFORE_GENERATION
    assert GENERATION_PATCH not in BEFORE_GENERATION
