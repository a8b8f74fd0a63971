"""Killing the worker loses nothing: a session parked on a worker that is SIGKILLed is resumed
by a brand-new worker process when the event is delivered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from temporalio.client import Client

from tests.conftest import EXAMPLES, Scripted, running_agent

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"


def _worker_process(
    client: Client, task_queue: str, model_url: str, store: Path
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": task_queue,
        "ARCHMAX_ROOT": str(ROOT),
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
            client, task_queue, ROOT, "support-inbox", server, worker=False
        ) as agent:
            parked = await agent.workflow.send(
                None,
                "About my order",
                trigger="email_received",
                variables={"conversation_id": "crash-1"},
            )
            assert parked.kind == "parked"
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL
            second = _worker_process(client, task_queue, server.url, store)
            try:
                resumed = await agent.workflow.deliver(
                    "crash-1", trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
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
    assert [s.reason for s in resumed.trail] == [
        "email_received",
        "email_reply",
        "the reply names ORD-1001",
    ]
    trail = json.loads((store / "crash-1" / "artifacts" / "trail.json").read_text())
    assert len(trail["steps"]) == 3
