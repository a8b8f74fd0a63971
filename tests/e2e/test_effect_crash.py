"""The fault suite: a reference session, its worker SIGKILLed at each activity boundary.

The session writes a note (``write_file``), edits a draft (``edit_file``), files it (``move_file``),
parks for approval (``archmax_wait``; the park's artifacts are written by ``persist_turn``), is
delivered the approval and advances. It is run once without a fault, then once with a worker killed
right after each of those activities applied its effect and before it reported back (the test hook
``ARCHMAX_TEST_PAUSE_AFTER_EFFECT``, see :mod:`archmax_temporal.activities.effects`: the worker
marks the moment and waits there to be killed), a new worker started each time. Both runs must end
with the same trail, the same files byte for byte, the same tool answers and activities, no effect
applied twice, and each retry started within 30 s of its kill. (A kill in the middle of a model
call: tests/e2e/test_worker_crash.py.)

The note is larger than a local activity takes, so its write is a regular activity (retried
as its attempt 2 once its heartbeat stops); the edit, the move and the save are local
activities (contracts.base ``local_first``): killed before the workflow task that ran them
completed, they run again when the next worker replays that task (the task timed out), under
the same activity id, and the effect journal answers them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TimeoutType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from archmax_temporal.activities.effects import PAUSE_AFTER_EFFECT_ENV
from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.contracts.base import HEARTBEAT_TIMEOUT
from archmax_temporal.workflows.contracts.store import PERSIST_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import LOCAL_MAX_ARGUMENT_CHARS
from archmax_temporal.workflows.models import Outcome
from archmax_temporal.workflows.workspace_tools import (
    EDIT_FILE_ACTIVITY,
    MOVE_FILE_ACTIVITY,
    WRITE_FILE_ACTIVITY,
)
from tests.support.activity_events import local_marker
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

SPEC = """
title: Editing
states:
  edit:
    triggers: { manual: }
    instructions: Note it, edit the draft, file it, wait for approval.
    transitions:
      - { to: filed, description: "The draft is edited, filed and approved." }
  filed:
    instructions: Say it is filed.
"""

NOTE = "noted " * (LOCAL_MAX_ARGUMENT_CHARS // 6 + 1)
"""Larger than a local activity takes: the note's write is a regular activity."""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"state": "filed"}, "reply": {"content": "Filed."}},
            {
                "when": {"last_user": "/Approved/"},
                "reply": {"tool_calls": [call("archmax_advance", to="filed")]},
            },
            {
                "when": {"last_tool": "move_file"},
                "reply": {
                    "content": "Filed as final.txt; may I close it?",
                    "tool_calls": [call("archmax_wait", reason="the approval")],
                },
            },
            {
                "when": {"last_tool": "edit_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "move_file",
                            source="scratchpad/draft.txt",
                            destination="scratchpad/final.txt",
                        )
                    ]
                },
            },
            {
                "when": {"last_tool": "write_file"},
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path="scratchpad/draft.txt",
                            old_string="START",
                            new_string="START X",
                        )
                    ]
                },
            },
            {
                "reply": {
                    "tool_calls": [
                        call("write_file", file_path="scratchpad/note.txt", content=NOTE)
                    ]
                }
            },
        ]
    }
)

RUN = uuid.uuid4().hex[:8]
CALM, CRASHED = f"effects-calm-{RUN}", f"effects-crash-{RUN}"
"""Workflow ids are namespace-wide: this file's own, never another test's."""

BOUNDARIES = ("write_file", "edit_file", "move_file", "persist_turn")
"""Where the worker is killed, in the order the session reaches them."""

ACTIVITIES = {
    "write_file": WRITE_FILE_ACTIVITY,
    "edit_file": EDIT_FILE_ACTIVITY,
    "move_file": MOVE_FILE_ACTIVITY,
    "persist_turn": PERSIST_ACTIVITY,
}

LOCAL = ("edit_file", "move_file", "persist_turn")
"""The boundaries that are local activities (the first save: a model call came after the
move); the note's write is a regular one."""


RETRY_WITHIN = 30.0
"""Seconds from a SIGKILL to the retried attempt's start that the runtime promises."""


class Worker:
    """``python -m archmax_temporal worker`` in a process of its own, its stderr drained."""

    def __init__(
        self, client: Client, task_queue: str, model_url: str, root: Path, store: Path, **env: str
    ) -> None:
        environment = {
            **{k: v for k, v in os.environ.items() if k != PAUSE_AFTER_EFFECT_ENV},
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "ARCHMAX_TASK_QUEUE": task_queue,
            "ARCHMAX_ROOT": str(root),
            "ARCHMAX_STORE": str(store),
            "ARCHMAX_API_BASE_URL": model_url,
            "ARCHMAX_MODEL": "scripted",
            **env,
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "archmax_temporal", "worker"],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the worker announces itself once connected
            line = self.process.stderr.readline()
            if line.startswith("worker"):
                break
            if self.process.poll() is not None:
                raise AssertionError(f"worker did not start (rc={self.process.poll()})")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    def kill(self) -> float:
        """SIGKILL the worker; the Unix time of the kill."""
        killed_at = time.time()
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=10) == -signal.SIGKILL
        return killed_at

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


async def _paused_at(marker: Path, tool: str, timeout: float = 90) -> str:
    """Wait until a worker has applied ``tool``'s effect and paused; its idempotency key."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists():
            for line in marker.read_text().splitlines():
                name, _, key = line.partition(" ")
                if name == tool:
                    return key
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker paused after {tool}")


def _retry_started(events: list[HistoryEvent], activity: str) -> tuple[int, float]:
    """The attempt number and start time of the first scheduled ``activity``'s last
    attempt, from the history."""
    scheduled = min(
        e.event_id
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    )
    (started,) = [
        e
        for e in events
        if e.HasField("activity_task_started_event_attributes")
        and e.activity_task_started_event_attributes.scheduled_event_id == scheduled
    ]
    when = started.event_time.seconds + started.event_time.nanos / 1e9
    return started.activity_task_started_event_attributes.attempt, when


def _local_type(event: HistoryEvent) -> str | None:
    """The activity type of a local activity's marker; None for any other event."""
    marker = local_marker(event)
    return None if marker is None else str(marker["activity_type"])


def _local_rerun(events: list[HistoryEvent], activity: str) -> tuple[int, float]:
    """For the first local ``activity``: how many workflow tasks timed out before its marker
    (the task that ran it first was lost with its worker), and when the task that recorded it
    started."""
    (at,) = [i for i, e in enumerate(events) if _local_type(e) == activity][:1]
    timed_out = sum(
        1
        for e in events[:at]
        if e.HasField("workflow_task_timed_out_event_attributes")
        and e.workflow_task_timed_out_event_attributes.timeout_type
        == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE
    )
    started = [e for e in events[:at] if e.HasField("workflow_task_started_event_attributes")][-1]
    return timed_out, started.event_time.seconds + started.event_time.nanos / 1e9


def _scheduled(events: list[HistoryEvent]) -> list[str]:
    """The activities a history records, regular (scheduled) and local (markers), in order."""
    names = []
    for e in events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            names.append(e.activity_task_scheduled_event_attributes.activity_type.name)
        elif (local := _local_type(e)) is not None:
            names.append(f"local {local}")
    return names


async def _settled(agent: Agent, session_id: str) -> dict[str, Any]:
    """What a run left: files, trail, tool answers and the activities it scheduled."""
    view = await agent.sessions.view(session_id)
    history = await agent.handle(session_id).fetch_history()
    return {
        "trail": [(s.to, s.kind, s.reason, s.status) for s in view.trail],
        "answers": [(m.name, m.status, m.content) for m in view.transcript if m.role == "tool"],
        "scheduled": _scheduled(list(history.events)),
        "events": list(history.events),
    }


def _files(store: Path, session_id: str) -> dict[str, str]:
    pad = store / session_id / "scratchpad"
    return {p.name: p.read_text() for p in sorted(pad.iterdir()) if p.is_file()}


def _stored_trail(store: Path, session_id: str) -> list[tuple[object, ...]]:
    steps = json.loads((store / session_id / "artifacts" / "trail.json").read_text())["steps"]
    return [(s["to"], s["kind"], s["reason"]) for s in steps]


def _seed(store: Path, session_id: str) -> None:
    (store / session_id / "scratchpad").mkdir(parents=True)
    (store / session_id / "scratchpad" / "draft.txt").write_text("START END")


async def _run(agent: Agent, session_id: str) -> tuple[Outcome, Outcome]:
    parked = await agent.workflow.send(session_id, "Note it, edit and file the draft.")
    done = await agent.workflow.send(session_id, "Approved.")
    return parked, done


async def test_a_worker_killed_at_each_boundary_applies_nothing_twice(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Kill the worker right after each boundary's effect (a file written, edited, moved;
    the park's artifacts written): the files hold each change exactly once, the trail, the
    answers and the activities are those of a run nobody killed, and each retry ran on the
    next worker within 30 s of its kill."""
    write_workflow(tmp_path, "editing", SPEC)
    server = scripted(PLAYBOOK)

    # the uninterrupted run, for comparison
    calm_store = tmp_path / "calm"
    _seed(calm_store, CALM)
    async with running_agent(
        client, f"{task_queue}-calm", tmp_path, "editing", server, store=calm_store
    ) as agent:
        calm_parked, calm_done = await _run(agent, CALM)
        calm = await _settled(agent, CALM)
    calm_files = _files(calm_store, CALM)
    assert calm_files == {"final.txt": "START X END", "note.txt": NOTE}
    assert [a for a in calm["scheduled"] if a.startswith("local ")] == [
        f"local {ACTIVITIES[b]}" for b in LOCAL
    ] + [f"local {PERSIST_ACTIVITY}"]  # and the second turn's save
    assert (calm_parked.kind, calm_done.kind) == ("parked", "completed")

    # the same session, its worker killed at each boundary in turn
    store = tmp_path / "store"
    _seed(store, CRASHED)
    marker = tmp_path / "paused"
    pause = PAUSE_AFTER_EFFECT_ENV
    workers: list[Worker] = []
    killed: dict[str, float] = {}
    try:
        async with running_agent(
            client, task_queue, tmp_path, "editing", server, store=store, worker=False
        ) as agent:
            running = asyncio.create_task(_run(agent, CRASHED))
            for boundary in BOUNDARIES:
                workers.append(
                    Worker(
                        client, task_queue, server.url, tmp_path, store,
                        **{pause: f"{boundary}={marker}"},
                    )
                )  # fmt: skip
                await _paused_at(marker, boundary)
                killed[boundary] = workers[-1].kill()
            workers.append(Worker(client, task_queue, server.url, tmp_path, store))
            parked, done = await asyncio.wait_for(running, timeout=180)
            crashed = await _settled(agent, CRASHED)
    finally:
        for worker in workers:
            worker.stop()

    # exactly once: the files, the answers, the trail, the outcomes
    assert _files(store, CRASHED) == calm_files
    assert (parked.kind, parked.reply) == (calm_parked.kind, calm_parked.reply)
    assert (done.kind, done.reply) == (calm_done.kind, calm_done.reply) == ("completed", "Filed.")
    assert crashed["answers"] == calm["answers"]
    assert crashed["answers"][:3] == [
        ("write_file", "ok", f"Wrote 'scratchpad/note.txt' ({len(NOTE)} chars)."),
        ("edit_file", "ok", "Replaced 1 occurrence in 'scratchpad/draft.txt'."),
        ("move_file", "ok", "Moved 'scratchpad/draft.txt' to 'scratchpad/final.txt' (11 bytes)."),
    ]
    assert crashed["trail"] == calm["trail"]
    assert _stored_trail(store, CRASHED) == _stored_trail(calm_store, CALM)
    assert crashed["scheduled"] == calm["scheduled"]

    # each retry came promptly, on the next worker: a regular activity as its attempt 2, a
    # local one in the workflow task that replaced the one lost with the killed worker
    lost_tasks = 0
    for boundary, killed_at in killed.items():
        if boundary in LOCAL:
            timed_out, started = _local_rerun(crashed["events"], ACTIVITIES[boundary])
            assert timed_out == lost_tasks + 1, boundary  # its task was lost with the worker
            lost_tasks = timed_out
        else:
            number, started = _retry_started(crashed["events"], ACTIVITIES[boundary])
            assert number == 2, boundary
        waited = started - killed_at
        print(f"{boundary}: retried {waited:.1f} s after the SIGKILL")
        assert 0 < waited < RETRY_WITHIN, boundary
    heartbeats = {
        e.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta()
        for e in crashed["events"]
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name in {*ACTIVITIES.values()}
    }
    assert heartbeats == {HEARTBEAT_TIMEOUT}  # the note's write
    journal = store / CRASHED / "checkpoints" / "effects"
    assert not journal.exists() or not list(journal.iterdir())  # pruned at the turn's end
