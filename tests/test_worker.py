"""Operating ``archmax worker``: its options, health endpoints, metrics endpoint, and a drain on
SIGTERM that a second signal cuts short. The worker runs as a real process."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkflowRunner

from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import (
    PASSTHROUGH_MODULES,
    WorkerOptions,
    checking_runner,
    workflow_runner,
)
from archmax_temporal.workflows import deadlines
from archmax_temporal.workflows.errors import ConfigurationError
from tests.support.agents import Scripted, copy_example
from tests.support.runner_probe import RunnerProbe

SLOW_PLAYBOOK = """
rules:
  - when: {}
    reply: {content: "Done, slowly."}
    delay_ms: 60000
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TestWorkerOptions:
    def test_reads_the_environment_and_flags_win(self) -> None:
        """Each option has a variable; a flag (an override) wins over it."""
        env = {
            "ARCHMAX_MAX_CONCURRENT_WORKFLOW_TASKS": "7",
            "ARCHMAX_MAX_CONCURRENT_ACTIVITIES": "9",
            "ARCHMAX_MAX_CACHED_WORKFLOWS": "0",
            "ARCHMAX_SHUTDOWN_GRACE": "2.5",
            "ARCHMAX_METRICS_ADDRESS": "0.0.0.0:9464",
            "ARCHMAX_HEALTH_ADDRESS": "0.0.0.0:8081",
        }
        options = WorkerOptions.from_env(env, max_concurrent_activities=3)
        assert options.max_concurrent_workflow_tasks == 7
        assert options.max_concurrent_activities == 3
        assert options.max_cached_workflows == 0
        assert options.graceful_shutdown == timedelta(seconds=2.5)
        assert options.metrics_address == "0.0.0.0:9464"
        assert options.health_address == "0.0.0.0:8081"

    def test_a_bad_value_names_its_variable(self) -> None:
        """A malformed option is a configuration error naming the variable."""
        with pytest.raises(ConfigurationError, match="ARCHMAX_MAX_CONCURRENT_ACTIVITIES"):
            WorkerOptions.from_env({"ARCHMAX_MAX_CONCURRENT_ACTIVITIES": "0"})


class WorkerProcess:
    """``python -m archmax_temporal worker`` with health and metrics endpoints."""

    def __init__(self, proc: subprocess.Popen[bytes], health: str, metrics: str, log: Path):
        self.proc, self.health, self.metrics, self.log = proc, health, metrics, log

    def get(self, url: str) -> httpx.Response:
        return httpx.get(url, timeout=5)

    def wait_for(self, path: str, status: int, timeout: float = 30) -> httpx.Response:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                response = self.get(f"http://{self.health}{path}")
                if response.status_code == status:
                    return response
                last = response.status_code
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.1)
        raise AssertionError(f"{path} never answered {status} (last: {last})")


@pytest.fixture
def worker_process(
    env: WorkflowEnvironment, task_queue: str, tmp_path: Path, scripted: Scripted
) -> Iterator[tuple[WorkerProcess, ScriptedModelServer, Path]]:
    root = copy_example("support-inbox", tmp_path)
    model = scripted(SLOW_PLAYBOOK)
    health, metrics = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    log = tmp_path / "worker.log"
    child_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ARCHMAX_", "TEMPORAL_"))},
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": task_queue,
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_API_BASE_URL": model.url,
        "ARCHMAX_API_KEY": "sk-test-not-a-secret",
        "ARCHMAX_MODEL": "scripted",
        "ARCHMAX_HEALTH_ADDRESS": health,
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "archmax_temporal",
                "worker",
                "--metrics-address",
                metrics,
                "--shutdown-grace",
                "30",
                "--max-concurrent-activities",
                "4",
            ],
            stdout=out,
            stderr=out,
            env=child_env,
            cwd=root,
        )
    try:
        yield WorkerProcess(proc, health, metrics, log), model, root
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_health_readiness_metrics_then_a_drain_a_second_signal_cuts_short(
    env: WorkflowEnvironment,
    task_queue: str,
    worker_process: tuple[WorkerProcess, ScriptedModelServer, Path],
) -> None:
    """The worker answers /healthz, /readyz and /metrics; on SIGTERM with a model call in
    flight it drains (not ready, still alive); a second SIGTERM exits at once."""
    worker, _, root = worker_process
    await asyncio.to_thread(worker.wait_for, "/readyz", 200)
    healthz = await asyncio.to_thread(worker.get, f"http://{worker.health}/healthz")
    assert healthz.status_code == 200 and healthz.json() == {"status": "ok"}
    metrics = await asyncio.to_thread(worker.get, f"http://{worker.metrics}/metrics")
    assert metrics.status_code == 200 and "temporal_worker_start_total" in metrics.text
    missing = await asyncio.to_thread(worker.get, f"http://{worker.health}/nope")
    assert missing.status_code == 404

    config = RuntimeConfig(
        root=root, store=root / "sessions", address="unused", task_queue=task_queue
    )
    agent = await create_agent("support-inbox", config=config, client=env.client, worker="external")
    send = asyncio.create_task(
        agent.workflow.send(
            f"slow-{task_queue}",
            "About the thing we discussed on the phone.",
            trigger="email_received",
            variables={"conversation_id": f"slow-{task_queue}"},
        )
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            scrape = (await asyncio.to_thread(worker.get, f"http://{worker.metrics}/metrics")).text
            if 'temporal_activity_task_received_total{activity_type="archmax.model.complete"' in (
                scrape
            ):
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError("the model call never started")
        worker.proc.send_signal(signal.SIGTERM)
        drained = await asyncio.to_thread(worker.wait_for, "/readyz", 503)
        assert drained.json() == {"status": "draining"}
        alive = await asyncio.to_thread(worker.get, f"http://{worker.health}/healthz")
        assert alive.status_code == 200  # draining is alive: no restart mid-drain
        await asyncio.sleep(1.0)
        assert worker.proc.poll() is None  # the 60 s model call holds the drain (grace 30 s)
        started = time.monotonic()
        worker.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.proc.wait, 10)
        assert time.monotonic() - started < 5
        assert code == 128 + signal.SIGTERM
        text = worker.log.read_text()
        assert "draining" in text and "sk-test-not-a-secret" not in text
    finally:
        send.cancel()
        await agent.close()


def test_a_sigterm_with_nothing_in_flight_exits_cleanly(
    worker_process: tuple[WorkerProcess, ScriptedModelServer, Path],
) -> None:
    """An idle worker drains at once on SIGTERM and exits 0."""
    worker, _, _ = worker_process
    worker.wait_for("/readyz", 200)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(20) == 0
    assert "worker stopped" in worker.log.read_text()


# --- how the session workflow is run ---------------------------------------------------------
# Unsandboxed by every worker and replayer; in Temporal's sandbox, with archmax's workflow code
# inside it, by CI's replays (tests/e2e/test_replay.py). A sandbox checks only the code it
# imports for each run: the checking one does import archmax's and refuses a clock read made
# through it, which is what the replays rely on.


async def probe(client: Client, task_queue: str, runner: WorkflowRunner) -> list[str]:
    async with Worker(
        client, task_queue=task_queue, workflows=[RunnerProbe], workflow_runner=runner
    ):
        return await client.execute_workflow(
            RunnerProbe.run, id(deadlines), id=f"probe-{uuid.uuid4().hex}", task_queue=task_queue
        )


async def test_the_checking_sandbox_imports_archmax_code_and_refuses_the_clock(
    client: Client, task_queue: str
) -> None:
    assert await probe(client, task_queue, checking_runner()) == [
        "imported for the run",
        "clock refused",
    ]
    assert not any(name.startswith("archmax_temporal") for name in PASSTHROUGH_MODULES)


async def test_the_worker_runs_the_workflow_code_it_imported(
    client: Client, task_queue: str
) -> None:
    """No copy per run: one module, one table of shared spec parts for every cached session."""
    assert await probe(client, task_queue, workflow_runner()) == ["shared module", "clock read"]
