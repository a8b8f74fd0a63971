"""Operating archmax: reading a session with no worker running, the log stream in JSON mode,
stdout carrying the program's output alone, a host's stderr after a server outage."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import find_temporal_cli
from archmax_temporal.client.http import ServeSettings, create_app
from tests.support.agents import copy_example
from tests.support.child_server import ChildServer, free_port
from tests.support.cli import Cli, park
from tests.support.http_harness import serving


class TestReadingWithNoWorker:
    async def test_get_session_answers_from_visibility_when_no_worker_polls(self, cli: Cli) -> None:
        """``GET /v1/sessions/{id}`` reads as the listing and ``archmax sessions <id>`` do:
        with no worker polling, what visibility knows (200, saying no worker polls), not a
        503."""
        assert park(cli, "ops-read-1").code == 0
        assert cli("dev", "stop").code == 0  # the only worker of the queue is gone
        config = RuntimeConfig.from_env(cli.env)
        app = create_app(config=config, settings=ServeSettings(), worker="external")
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as http:
            shown = await http.get("/v1/sessions/ops-read-1")
            listed = await http.get("/v1/sessions")
        assert shown.status_code == 200, shown.text
        summary = shown.json()
        assert (summary["sessionId"], summary["status"]) == ("ops-read-1", "awaiting_input")
        assert summary["source"] == "visibility"
        assert "no worker is polling" in summary["waitingOn"]
        [same] = [s for s in listed.json()["sessions"] if s["sessionId"] == "ops-read-1"]
        assert (same["status"], same["state"]) == (summary["status"], summary["state"])


def _ready(health: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    """Poll the worker's /readyz until it answers 200 while the process lives. The cap only
    stops a hang: a loaded machine (both cores busy, the suite's other workers starting
    servers) has taken over a minute to import and connect a fresh worker process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the worker exited"
        try:
            if httpx.get(f"http://{health}/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the worker never became ready")


class TestJsonLogs:
    def test_the_worker_writes_only_json_lines_and_nothing_on_stdout(
        self, env: WorkflowEnvironment, task_queue: str, tmp_path: Path
    ) -> None:
        """With ``ARCHMAX_LOG_FORMAT=json`` every line ``archmax worker`` writes, from start to
        a SIGTERM drain, is one JSON object (its banner too), all on stderr; the Temporal
        core's own log lines come through the same chain (logger ``temporalio.core``), never
        as the core's plain text on stdout."""
        root = copy_example("support-inbox", tmp_path)
        health = f"127.0.0.1:{free_port()}"
        child_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ARCHMAX_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "ARCHMAX_TASK_QUEUE": task_queue,
            "ARCHMAX_ROOT": str(root),
            "ARCHMAX_API_BASE_URL": "http://127.0.0.1:9/v1",
            "ARCHMAX_API_KEY": "sk-test-not-a-secret",
            "ARCHMAX_MODEL": "scripted",
            "ARCHMAX_HEALTH_ADDRESS": health,
            "ARCHMAX_METRICS_ADDRESS": f"127.0.0.1:{free_port()}",
            "ARCHMAX_LOG_FORMAT": "json",
            "ARCHMAX_LOG_LEVEL": "info",
        }
        out, err = tmp_path / "stdout", tmp_path / "stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "archmax_temporal", "worker"],
                env=child_env,
                stdout=stdout,
                stderr=stderr,
            )
            try:
                _ready(health, proc)
            finally:
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=60)
        assert code == 0, err.read_text()
        assert out.read_text() == ""
        lines = err.read_text().splitlines()
        parsed: list[dict[str, Any]] = []
        for line in lines:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"not a JSON line: {line!r}") from None
        events = [str(p.get("event", "")) for p in parsed]
        assert any(e.startswith("worker queue") for e in events), events  # the banner
        assert any(e.startswith("worker stopped") for e in events), events
        assert any(str(p.get("logger", "")).startswith("temporalio.core") for p in parsed), events


OUTAGE_HOST = """
import asyncio, gc, sys
from datetime import timedelta
from pathlib import Path

from archmax_temporal.client import firing
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig

firing.SERVER_PATIENCE = timedelta(seconds=2)  # give up on the server soon
if sys.argv[3] == "cli":  # the set-up every archmax command makes before it connects
    from archmax_temporal.client.logs import configure_logging
    from archmax_temporal.connection import forward_core_logs

    configure_logging()
    forward_core_logs()


async def main() -> None:
    root = Path(sys.argv[2])
    config = RuntimeConfig(
        root=root, store=root / "sessions", address=sys.argv[1], task_queue="outage",
        address_configured=True,
    )
    deadline = asyncio.get_running_loop().time() + 300  # a loaded machine starts it slowly
    while True:  # until the server is up
        try:
            agent = await create_agent("support-inbox", config=config, worker="external")
            break
        except Exception as exc:
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"the dev server never answered: {exc!r}") from exc
            await asyncio.sleep(0.1)
    async with agent:
        print("connected", flush=True)
        sys.stdin.readline()  # the server is stopped now
        try:
            await agent.workflow.send(None, "hello")
        except Exception as exc:
            print(type(exc).__name__, flush=True)
        gc.collect()


asyncio.run(main())
gc.collect()
"""


class _DevServer(ChildServer):
    """A dev server of its own on 127.0.0.1, ready once its port takes connections (started
    again on another port when it exits first: a port another test took meanwhile)."""

    name = "Temporal dev server"
    start_timeout = 300.0  # the cap only stops a hang: a loaded machine starts it slowly

    def command(self) -> list[str]:
        return [
            str(find_temporal_cli()),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
        ]

    def answers(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0


def _host_through_an_outage(tmp_path: Path, setup: str) -> tuple[str, str]:
    """Run a host (``setup``: ``library``, or ``cli`` for an archmax command's logging set-up)
    against its own dev server, stop the server, then fire: the host's stdout and stderr."""
    root = copy_example("support-inbox", tmp_path)
    server = _DevServer(tmp_path / "dev-server.log").start(attempts=5)
    port = server.port
    try:
        host = subprocess.Popen(
            [sys.executable, "-c", OUTAGE_HOST, f"127.0.0.1:{port}", str(root), setup],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert host.stdout is not None
        connected = host.stdout.readline()
        assert connected == "connected\n", host.communicate(timeout=30)
    finally:
        server.stop()
    stdout, stderr = host.communicate("\n", timeout=120)
    assert host.returncode == 0, stderr
    return connected + stdout, stderr


class TestServerOutage:
    def test_a_host_call_during_an_outage_leaves_no_unretrieved_future(
        self, tmp_path: Path
    ) -> None:
        """A host whose server goes away under it gets the typed error, and its stderr holds
        no "Future exception was never retrieved" traceback (the start half of each
        update-with-start attempt is collected, not left to the garbage collector)."""
        stdout, stderr = _host_through_an_outage(tmp_path, "library")
        # (the core's retry warnings may precede it: a library keeps the SDK's log set-up)
        assert stdout.splitlines()[-1] == "TemporalUnavailableError"
        assert "never retrieved" not in stderr, stderr

    def test_the_cores_warnings_go_to_stderr_never_stdout(self, tmp_path: Path) -> None:
        """Under an archmax command's set-up, the Temporal core's own warnings (its client
        retrying the unreachable server) are log lines on stderr, through Python's logging;
        stdout carries the program's output alone. (Without it, as a bare library host
        shows, the core prints them on stdout.)"""
        stdout, stderr = _host_through_an_outage(tmp_path, "cli")
        assert stdout.splitlines() == ["connected", "TemporalUnavailableError"]
        assert "temporalio.core" in stderr and "retried" in stderr, stderr


class TestDemo:
    async def test_the_demos_session_ends_completed_for_the_ui_link(
        self, env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``archmax demo`` leaves its session Completed (its run closed idle, the state
        checkpointed), so the UI link it prints never opens on a Running workflow whose queue
        no worker polls once the demo has gone."""
        from archmax_temporal.client.cli.demo import run_demo

        root = copy_example("support-inbox", tmp_path)
        monkeypatch.setenv("TEMPORAL_ADDRESS", env.client.service_client.config.target_host)
        for name in ("ARCHMAX_STORE", "ARCHMAX_ROOT", "ARCHMAX_TASK_QUEUE", "ARCHMAX_IDLE_CLOSE"):
            monkeypatch.delenv(name, raising=False)
        conversation = f"demo-ops-{uuid.uuid4().hex[:6]}"
        assert await run_demo(root=root, conversation=conversation) == 0
        described = await env.client.get_workflow_handle(conversation).describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED


class TestWorkerStart:
    async def test_once_the_worker_says_it_serves_the_queue_a_poller_is_seen(
        self, env: WorkflowEnvironment, task_queue: str, tmp_path: Path
    ) -> None:
        """``archmax worker`` announces its queue (and /readyz turns 200) only once Temporal
        lists its poller: a command run right after the banner never says no worker polls."""
        from archmax_temporal.client.runtime import worker_polling

        root = copy_example("support-inbox", tmp_path)
        child_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ARCHMAX_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "ARCHMAX_TASK_QUEUE": task_queue,
            "ARCHMAX_ROOT": str(root),
            "ARCHMAX_API_BASE_URL": "http://127.0.0.1:9/v1",
            "ARCHMAX_API_KEY": "sk-test-not-a-secret",
            "ARCHMAX_MODEL": "scripted",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "archmax_temporal", "worker"],
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        try:
            seen: list[str] = []
            while not any(line.startswith("worker    queue") for line in seen):
                line = await asyncio.to_thread(proc.stderr.readline)
                assert line, f"the worker exited: {seen}"
                seen.append(line)
            # at once, no waiting: what a command run right after the banner asks
            assert await worker_polling(env.client, task_queue)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)
