"""Short workspace tools and the turn's save run as local activities (issue 28).

``ls``, ``read_file``, ``glob`` and the small writes run on the worker that runs the workflow
task, with no round trip through the server (a ``core_local_activity`` marker in the history,
no scheduled activity); ``grep``, a large write and the model call stay regular activities.
The turn's save is local too, unless a local write came after the last model call (then it
is regular: its scheduling records the write first, since the save prunes the effect
journal). A local activity refused by a worker of another store goes on as the regular
activity, which reaches a worker of the session's store. Each history replays.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.worker import Worker

from archmax_temporal import worker as worker_module
from archmax_temporal.activities import store_identity as identity
from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.worker import build_worker
from archmax_temporal.workflows import store_binding
from archmax_temporal.workflows.contracts import base
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.store import PERSIST_ACTIVITY, PERSIST_RETRY
from archmax_temporal.workflows.contracts.workspace import (
    EDIT_FILE_ACTIVITY,
    GREP_ACTIVITY,
    LOCAL_MAX_ARGUMENT_CHARS,
    READ_FILE_ACTIVITY,
    WORKSPACE_RETRY,
    WRITE_FILE_ACTIVITY,
    WorkspaceToolInput,
    runs_local,
)
from archmax_temporal.workflows.models import DeliverInput
from tests.support.activity_events import local_activities, local_marker, scheduled_activities
from tests.support.agents import Scripted, model_config, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.golden import replayer

SPEC = """
title: Notes
states:
  work:
    triggers: { manual: }
    instructions: Read, write, search, wait.
    transitions:
      - { to: done, description: "Approved." }
  done:
    instructions: Say done.
"""

BIG = "x" * (LOCAL_MAX_ARGUMENT_CHARS + 1)

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"state": "done"}, "reply": {"content": "Done."}},
            {
                "when": {"last_user": "/Approved/"},
                "reply": {"tool_calls": [call("archmax_advance", to="done")]},
            },
            {
                "when": {"last_user": "/Read/", "last_tool": "grep"},
                "reply": {"content": "Read it."},
            },
            {
                "when": {"last_user": "/Read/", "last_tool": "edit_file"},
                "reply": {"tool_calls": [call("grep", pattern="beta")]},
            },
            {
                "when": {"last_user": "/Read/", "last_tool": "write_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path="scratchpad/b.txt",
                            old_string="beta",
                            new_string="beta gamma",
                        )
                    ]
                },
            },
            {
                "when": {"last_user": "/Read/", "last_tool": "read_file"},
                "reply": {
                    "tool_calls": [call("write_file", file_path="scratchpad/b.txt", content="beta")]
                },
            },
            {
                "when": {"last_user": "/Read/"},
                "reply": {"tool_calls": [call("read_file", file_path="scratchpad/a.txt")]},
            },
            {
                "when": {"last_user": "/Big/", "last_tool": "write_file"},
                "reply": {"content": "Wrote it."},
            },
            {
                "when": {"last_user": "/Big/"},
                "reply": {
                    "tool_calls": [call("write_file", file_path="scratchpad/big.txt", content=BIG)]
                },
            },
            {
                "when": {"last_user": "/Park/"},
                "reply": {
                    "content": "Noted; waiting for approval.",
                    "tool_calls": [
                        call("write_file", file_path="scratchpad/c.txt", content="gamma"),
                        call("archmax_wait", reason="the approval"),
                    ],
                },
            },
        ]
    }
)


def _sid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _local(events: list[HistoryEvent]) -> list[dict[str, Any]]:
    """The local activities a history records (each marker's data), in order."""
    return [m for e in events if (m := local_marker(e)) is not None]


def _scheduled(events: list[HistoryEvent]) -> list[Any]:
    return [
        e.activity_task_scheduled_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def _replays(history: Any) -> None:
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


async def test_short_tools_and_the_save_run_as_local_activities(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """``read_file``, ``write_file`` and ``edit_file`` are local activities (markers, never
    scheduled), ``grep`` and the model calls regular ones; the turn's save, after a model
    call, is local; the tools answer as before, the files hold each change once, the
    artifacts are written, the effect journal is pruned, and the history replays."""
    write_workflow(tmp_path, "notes", SPEC)
    server = scripted(PLAYBOOK)
    store = tmp_path / "sessions"
    sid = _sid("local-tools")
    (store / sid / "scratchpad").mkdir(parents=True)
    (store / sid / "scratchpad" / "a.txt").write_text("alpha\n")
    async with running_agent(client, task_queue, tmp_path, "notes", server, store=store) as agent:
        outcome = await agent.workflow.send(sid, "Read it.")
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
        stream = [e async for e in agent.sessions.events(sid)]
    assert (outcome.kind, outcome.reply) == ("completed", "Read it.")
    called = {e.data["callId"]: e.data["tool"] for e in stream if e.type == "tool-called"}
    results = [(e.data["callId"], e.data["tool"]) for e in stream if e.type == "tool-result"]
    assert results == list(called.items())  # each local tool's answer, read off its marker
    assert [e.type for e in stream][-1] == "turn-end"
    answers = [(m.name, m.status, m.content) for m in view.transcript if m.role == "tool"]
    assert answers == [
        ("read_file", "ok", "     1\talpha"),
        ("write_file", "ok", "Wrote 'scratchpad/b.txt' (4 chars)."),
        ("edit_file", "ok", "Replaced 1 occurrence in 'scratchpad/b.txt'."),
        ("grep", "ok", "scratchpad/b.txt:1:beta gamma"),
    ]
    assert (store / sid / "scratchpad" / "b.txt").read_text() == "beta gamma"
    events = list(history.events)
    assert local_activities(events) == [
        READ_FILE_ACTIVITY,
        WRITE_FILE_ACTIVITY,
        EDIT_FILE_ACTIVITY,
        PERSIST_ACTIVITY,
    ]
    assert scheduled_activities(events) == [MODEL_ACTIVITY] * 4 + [GREP_ACTIVITY] + [MODEL_ACTIVITY]
    ids = [str(m["activity_id"]) for m in _local(events)]
    assert ids == ["l1", "l2", "l3", "l4"]  # the run's local activities, counted
    metadata = json.loads((store / sid / "artifacts" / "metadata.json").read_text())
    assert metadata["status"] == "completed"  # the local save wrote the artifacts
    journal = store / sid / "checkpoints" / "effects"
    assert not journal.exists() or not list(journal.iterdir())
    await _replays(history)


async def test_a_save_after_an_unrecorded_local_write_or_a_signal_is_regular(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A turn that parks right after a local write (no model call after it) saves through a
    regular activity, whose scheduling records the write before the save prunes its journal
    entry; so does a turn a ``deliver`` signal drove (its end is read off the save's input:
    the events say ``parked``, ``delivered``, ``turn-end``). The local write's answer is a
    ``tool-result`` event of its call. A write larger than :data:`LOCAL_MAX_ARGUMENT_CHARS`
    is a regular activity."""
    write_workflow(tmp_path, "notes", SPEC)
    server = scripted(PLAYBOOK)
    store = tmp_path / "sessions"
    sid, big = _sid("local-park"), _sid("local-big")
    async with running_agent(client, task_queue, tmp_path, "notes", server, store=store) as agent:
        parked = await agent.workflow.send(sid, "Park it.")
        parked_history = list((await agent.handle(sid).fetch_history()).events)
        await client.get_workflow_handle(sid).signal(
            "deliver", DeliverInput(trigger="approval", message="Approved.")
        )
        deadline = time.monotonic() + 60
        while (await agent.sessions.get(sid)).status != "completed":
            assert time.monotonic() < deadline, "the signalled turn never completed"
            await asyncio.sleep(0.1)
        history = await agent.handle(sid).fetch_history()
        events = [e async for e in agent.sessions.events(sid)]
        wrote = await agent.workflow.send(big, "Big one.")
        big_history = await agent.handle(big).fetch_history()
    assert parked.kind == "parked"
    assert (store / sid / "scratchpad" / "c.txt").read_text() == "gamma"
    assert local_activities(parked_history) == [WRITE_FILE_ACTIVITY]
    assert scheduled_activities(parked_history) == [MODEL_ACTIVITY, PERSIST_ACTIVITY]
    assert local_activities(history.events) == [WRITE_FILE_ACTIVITY]
    signalled = [MODEL_ACTIVITY, MODEL_ACTIVITY, PERSIST_ACTIVITY]  # the save: regular
    assert scheduled_activities(history.events) == [MODEL_ACTIVITY, PERSIST_ACTIVITY, *signalled]
    kinds = [e.type for e in events]
    assert kinds.index("parked") < kinds.index("delivered") < len(kinds) - 1
    assert (events[-1].type, events[-1].data["kind"]) == ("turn-end", "completed")
    [called] = [e for e in events if e.type == "tool-called" and e.data["tool"] == "write_file"]
    [result] = [e for e in events if e.type == "tool-result" and e.data["tool"] == "write_file"]
    assert result.data["callId"] == called.data["callId"] and result.seq > called.seq
    assert result.data["preview"] == "Wrote 'scratchpad/c.txt' (5 chars)."
    await _replays(history)

    assert wrote.reply == "Wrote it."
    assert (store / big / "scratchpad" / "big.txt").read_text() == BIG
    assert WRITE_FILE_ACTIVITY in scheduled_activities(big_history.events)
    assert WRITE_FILE_ACTIVITY not in local_activities(big_history.events)
    await _replays(big_history)


def _worker_kind(**forced: Any) -> Callable[..., Worker]:
    """``worker.Worker`` with some options forced (an activity-only worker, a worker with no
    remote activities)."""

    def make(*args: Any, **options: Any) -> Worker:
        return Worker(*args, **{**options, **forced})

    return make


@asynccontextmanager
async def _two_stores(
    client: Client,
    task_queue: str,
    root: Path,
    server: Any,
    stores: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[None]:
    """Workflow tasks (and so local activities) on a worker of the second store only;
    regular activities on a worker of the first store only."""
    store_a, store_b = stores
    with monkeypatch.context() as patched:
        patched.setattr(worker_module, "Worker", _worker_kind(workflows=[]))
        a = build_worker(
            client, task_queue=task_queue, model=model_config(server), store_dir=store_a,
            authoring_root=root,
        )  # fmt: skip
        patched.setattr(worker_module, "Worker", _worker_kind(no_remote_activities=True))
        b = build_worker(
            client, task_queue=task_queue, model=model_config(server), store_dir=store_b,
            authoring_root=root, max_cached_workflows=0,
        )  # fmt: skip
    async with a, b:
        yield


async def test_a_local_activity_refused_by_another_store_goes_on_as_a_regular_one(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session of store A whose workflow tasks run on a worker of store B: its local
    ``read_file`` and save carry the store header, B refuses them (``StoreMismatchError``,
    no local retry), and each goes on as the regular activity, under the same activity id,
    which a worker of A runs: the answer is A's file, B holds nothing of the session, the
    history replays."""
    write_workflow(tmp_path, "notes", SPEC)
    server = scripted(PLAYBOOK)
    store_a, store_b = tmp_path / "store-a", tmp_path / "store-b"
    sid = _sid("local-store")
    (store_a / sid / "scratchpad").mkdir(parents=True)
    (store_a / sid / "scratchpad" / "a.txt").write_text("alpha\n")
    async with (
        running_agent(
            client, task_queue, tmp_path, "notes", server, store=store_a, worker=False
        ) as agent,
        _two_stores(client, task_queue, tmp_path, server, (store_a, store_b), monkeypatch),
    ):
        outcome = await agent.workflow.send(sid, "Read it.")
        view = await agent.sessions.view(sid)
        history = await agent.handle(sid).fetch_history()
    assert outcome.kind == "completed"
    answers = [(m.name, m.status, m.content) for m in view.transcript if m.role == "tool"]
    assert answers[0] == ("read_file", "ok", "     1\talpha")
    assert (store_a / sid / "scratchpad" / "b.txt").read_text() == "beta gamma"
    assert not (store_b / sid).exists()
    events = list(history.events)
    refused = _local(events)
    assert [m["activity_type"] for m in refused] == [
        READ_FILE_ACTIVITY,
        WRITE_FILE_ACTIVITY,
        EDIT_FILE_ACTIVITY,
        PERSIST_ACTIVITY,
    ]
    a = identity.read_store_identity(FilesystemSessionStore(store_a))
    assert a is not None
    by_id = {s.activity_id: s for s in _scheduled(events)}
    for marker in refused:
        regular = by_id[str(marker["activity_id"])]  # the same id: the same effect key
        assert regular.activity_type.name == marker["activity_type"]
        header = regular.header.fields[store_binding.STORE_HEADER]
        assert store_binding.read_store_header({store_binding.STORE_HEADER: header}) == (
            store_binding.StoreRef(id=a.id, description=str(store_a))
        )
    failures = [
        e.marker_recorded_event_attributes.failure
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and local_marker(e) is not None
    ]
    assert len(failures) == len(refused)
    for failure in failures:  # refused at once, not retried locally
        refusal = failure.cause if failure.HasField("cause") else failure
        assert refusal.application_failure_info.type == base.MISMATCH
    await _replays(history)


class TestTheRule:
    """Which calls run locally, and which failures of a local attempt go on as regular."""

    def test_short_tools_with_small_arguments_run_locally(self) -> None:
        def call_(tool: str, **arguments: Any) -> WorkspaceToolInput:
            return WorkspaceToolInput(session_id="s", tool=tool, arguments=arguments)

        assert runs_local(call_("read_file", file_path="scratchpad/a.txt"))
        assert runs_local(call_("write_file", file_path="scratchpad/a", content="x" * 1000))
        assert not runs_local(call_("write_file", file_path="scratchpad/a", content=BIG))
        assert not runs_local(call_("grep", pattern="x"))

    def test_only_a_cancellation_of_a_local_attempt_is_raised(self) -> None:
        def failed(cause: BaseException) -> ActivityError:
            error = ActivityError(
                "failed", scheduled_event_id=0, started_event_id=0, identity="",
                activity_type="t", activity_id="1", retry_state=None,
            )  # fmt: skip
            error.__cause__ = cause
            return error

        mismatch = ApplicationError("other store", type=base.MISMATCH)
        assert not base.cancelled(failed(mismatch))
        assert not base.cancelled(mismatch)
        assert not base.cancelled(ApplicationError("no", type="PathEscapeError"))
        assert base.cancelled(failed(CancelledError("cancelled")))
        assert base.cancelled(CancelledError("cancelled"))
        local = base.local_retry(WORKSPACE_RETRY)
        assert base.MISMATCH in (local.non_retryable_error_types or [])
        assert set(WORKSPACE_RETRY.non_retryable_error_types or []) < set(
            local.non_retryable_error_types or []
        )
        assert local.maximum_attempts == base.LOCAL_ATTEMPTS
        assert base.local_retry(PERSIST_RETRY).non_retryable_error_types == [base.MISMATCH]
