"""Killing the worker loses nothing: a session parked on a worker that is SIGKILLed is resumed
by a brand-new worker process when the event is delivered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from temporalio.client import Client

from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.paths import EXAMPLES

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"
SID = f"worker-crash-{uuid.uuid4().hex[:8]}"
"""Workflow ids are namespace-wide: this file's own, never another test's."""


def _worker_process(
    client: Client, task_queue: str, model_url: str, store: Path, *, root: Path = ROOT
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": task_queue,
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_STORE": str(store),
        "ARCHMAX_API_BASE_URL": model_url,
        "ARCHMAX_MODEL": "scripted",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "archmax_temporal", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the worker announces itself once connected
        line = process.stderr.readline()
        if line.startswith("worker"):
            return process
        if process.poll() is not None:
            break
    raise AssertionError(f"worker did not start (rc={process.poll()})")


async def test_a_killed_worker_loses_nothing(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Park on worker A, SIGKILL it, deliver: worker B resumes the session where it parked."""
    server = scripted(PLAYBOOK)
    store = tmp_path / "store"
    first = _worker_process(client, task_queue, server.url, store)
    try:
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=store, worker=False
        ) as agent:
            parked = await agent.workflow.send(
                None,
                "About my order",
                trigger="email_received",
                variables={"conversation_id": SID},
            )
            assert parked.kind == "parked"
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL
            second = _worker_process(client, task_queue, server.url, store)
            try:
                resumed = await agent.workflow.deliver(
                    SID, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
                )
            finally:
                second.send_signal(signal.SIGTERM)
                assert second.wait(timeout=30) == 0  # SIGTERM is a clean shutdown
    finally:
        if first.poll() is None:
            first.kill()
    assert resumed.kind == "completed"
    assert resumed.state == "answer"
    assert "ORD-1001" in resumed.reply
    assert [s.reason for s in resumed.trail] == ["email_reply", "the reply names ORD-1001"]
    trail = json.loads((store / SID / "artifacts" / "trail.json").read_text())
    assert [s["reason"] for s in trail["steps"]] == [
        "email_received",
        "email_reply",
        "the reply names ORD-1001",
    ]


SLOW_THEN_FAST = {
    "rules": [
        {"name": "hangs", "times": 1, "delay_ms": 90_000, "reply": {"content": "too late"}},
        {"name": "answers", "reply": {"content": "Here is your answer."}},
    ]
}

BUDGETED = """
title: Budgeted
states:
  answer:
    triggers: { manual: }
    budget: { timeoutMs: 60000 }
    on_error: sorry
    instructions: Answer.
    transitions:
      - { to: sorry, description: Nothing works. }
  sorry:
    instructions: Apologise.
"""


async def test_a_worker_killed_mid_model_call_is_noticed_in_seconds(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """SIGKILL the worker while a model call is in flight, inside a state with a
    ``budget.timeoutMs``: the call heartbeats, so a new worker retries it within 30 s (it
    took three minutes, and a budget turned the crash into a rejected turn), and the turn
    completes where it was."""
    root = tmp_path / "root"
    write_workflow(root, "budgeted", BUDGETED)
    server = scripted(json.dumps(SLOW_THEN_FAST))
    store = tmp_path / "store"
    first = _worker_process(client, task_queue, server.url, store, root=root)
    second: subprocess.Popen[str] | None = None
    try:
        async with running_agent(
            client, task_queue, root, "budgeted", server, store=store, worker=False
        ) as agent:
            turn = asyncio.ensure_future(agent.workflow.send("crash-model-1", "hello"))
            while not server.requests:
                await asyncio.sleep(0.05)
            first.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            assert first.wait(timeout=10) == -signal.SIGKILL
            second = _worker_process(client, task_queue, server.url, store, root=root)
            while len(server.requests) < 2:
                await asyncio.sleep(0.1)
                assert time.monotonic() - killed_at < 60, "the call was never retried"
            recovered_after = time.monotonic() - killed_at
            outcome = await asyncio.wait_for(turn, timeout=60)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    assert recovered_after < 30, f"retried {recovered_after:.1f} s after the kill"
    assert (outcome.kind, outcome.state, outcome.reply) == (
        "completed",
        "answer",
        "Here is your answer.",
    )
