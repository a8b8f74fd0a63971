"""A worker SIGKILLed after a tool's effect is applied, before its activity completed: the
retry, on a new worker process, applies nothing twice and answers as the first attempt would.

The boundary is made reachable by the test hook ``ARCHMAX_TEST_PAUSE_AFTER_EFFECT`` (see
:mod:`activities.effects`): the worker marks the moment the change is on disk and waits there
to be killed. The session (``edit_file`` ``START`` → ``START X``, then ``move_file``, then an
advance) is run once without a fault and once killed at both tools; the files, the trail and
the tool answers must agree, and each retry must start within 30 s of its kill.
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
from pathlib import Path
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from archmax_temporal.activities.effects import PAUSE_AFTER_EFFECT_ENV
from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.contracts.base import HEARTBEAT_TIMEOUT
from archmax_temporal.workflows.workspace_tools import EDIT_FILE_ACTIVITY, MOVE_FILE_ACTIVITY
from tests.conftest import Scripted, running_agent, write_workflow
from tests.conftest import tool_call as call

SPEC = """
title: Editing
states:
  edit:
    triggers: { manual: }
    instructions: Edit the draft, then file it.
    transitions:
      - { to: filed, description: The draft is edited and filed. }
  filed:
    instructions: Say it is filed.
"""

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"state": "filed"}, "reply": {"content": "Filed."}},
            {
                "when": {"last_tool": "move_file"},
                "reply": {"tool_calls": [call("archmax_advance", to="filed")]},
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
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path="scratchpad/draft.txt",
                            old_string="START",
                            new_string="START X",
                        )
                    ]
                }
            },
        ]
    }
)

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
    """The attempt number and start time of ``activity``'s last attempt, from the history."""
    scheduled = {
        e.event_id
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    }
    assert len(scheduled) == 1, f"{activity} scheduled {len(scheduled)} times"
    (started,) = [
        e
        for e in events
        if e.HasField("activity_task_started_event_attributes")
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]
    when = started.event_time.seconds + started.event_time.nanos / 1e9
    return started.activity_task_started_event_attributes.attempt, when


def _scheduled(events: list[HistoryEvent]) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


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


async def test_a_worker_killed_after_the_effect_applies_nothing_twice(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Kill the worker right after ``edit_file`` renamed its file into place, then right
    after ``move_file`` did: the draft is edited exactly once (``START X END``) and moved,
    the trail and the answers are those of a run nobody killed, and each retry ran on the
    next worker within 30 s of its kill."""
    write_workflow(tmp_path, "editing", SPEC)
    server = scripted(PLAYBOOK)

    # the uninterrupted run, for comparison
    calm_store = tmp_path / "calm"
    (calm_store / "calm-1" / "scratchpad").mkdir(parents=True)
    (calm_store / "calm-1" / "scratchpad" / "draft.txt").write_text("START END")
    async with running_agent(
        client, f"{task_queue}-calm", tmp_path, "editing", server, store=calm_store
    ) as agent:
        calm_outcome = await agent.workflow.send("calm-1", "Edit and file the draft.")
        calm = await _settled(agent, "calm-1")
    assert _files(calm_store, "calm-1") == {"final.txt": "START X END"}

    # the same session, its worker killed after each effect
    store = tmp_path / "store"
    (store / "crash-1" / "scratchpad").mkdir(parents=True)
    (store / "crash-1" / "scratchpad" / "draft.txt").write_text("START END")
    marker = tmp_path / "paused"
    pause = PAUSE_AFTER_EFFECT_ENV
    workers: list[Worker] = []
    try:
        async with running_agent(
            client, task_queue, tmp_path, "editing", server, store=store, worker=False
        ) as agent:
            workers.append(
                Worker(
                    client,
                    task_queue,
                    server.url,
                    tmp_path,
                    store,
                    **{pause: f"edit_file={marker}"},
                )
            )
            sending = asyncio.create_task(
                agent.workflow.send("crash-1", "Edit and file the draft.")
            )
            await _paused_at(marker, "edit_file")
            assert (store / "crash-1" / "scratchpad" / "draft.txt").read_text() == "START X END"
            edit_killed = workers[0].kill()
            workers.append(
                Worker(
                    client,
                    task_queue,
                    server.url,
                    tmp_path,
                    store,
                    **{pause: f"move_file={marker}"},
                )
            )
            await _paused_at(marker, "move_file")
            assert _files(store, "crash-1") == {"final.txt": "START X END"}
            move_killed = workers[1].kill()
            workers.append(Worker(client, task_queue, server.url, tmp_path, store))
            outcome = await asyncio.wait_for(sending, timeout=120)
            crashed = await _settled(agent, "crash-1")
    finally:
        for worker in workers:
            worker.stop()

    # exactly once: the file, the answers, the trail
    assert _files(store, "crash-1") == {"final.txt": "START X END"}
    assert outcome.kind == calm_outcome.kind == "completed"
    assert outcome.reply == calm_outcome.reply == "Filed."
    assert crashed["answers"] == calm["answers"]
    assert crashed["answers"][:2] == [
        ("edit_file", "ok", "Replaced 1 occurrence in 'scratchpad/draft.txt'."),
        ("move_file", "ok", "Moved 'scratchpad/draft.txt' to 'scratchpad/final.txt' (11 bytes)."),
    ]
    assert crashed["trail"] == calm["trail"]
    assert crashed["scheduled"] == calm["scheduled"]

    # each retry came promptly, on the next worker, as attempt 2
    for activity, killed_at in (
        (EDIT_FILE_ACTIVITY, edit_killed),
        (MOVE_FILE_ACTIVITY, move_killed),
    ):
        number, started = _retry_started(crashed["events"], activity)
        assert number == 2
        waited = started - killed_at
        print(f"{activity}: retried {waited:.1f} s after the SIGKILL")
        assert 0 < waited < RETRY_WITHIN
    heartbeats = {
        e.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta()
        for e in crashed["events"]
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name.startswith(
            "archmax.workspace."
        )
    }
    assert heartbeats == {HEARTBEAT_TIMEOUT}
    journal = store / "crash-1" / "checkpoints" / "effects"
    assert not journal.exists() or not list(journal.iterdir())  # pruned at the turn's end
