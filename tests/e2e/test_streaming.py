"""Live text end to end, on the real dev server and real sockets: a slow scripted model's
text reaches ``on_event``, the HTTP event stream (every message named by ``event:``), ``archmax
events --follow`` and ``archmax run`` on a terminal while it is written, then the durable
``agent-text``; over Redis across processes, and with nothing configured between a command
and the root's background worker. A retried call resets; streaming off sends no deltas."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.background import stop_background_worker
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.events import SessionEvent, merged
from archmax_temporal.client.http import ServeSettings, create_app
from archmax_temporal.live import DELTA, RESET, LiveEvent, LocalChannel, RedisChannel
from tests.support.agents import Scripted, model_config, running_agent, write_workflow
from tests.support.http_harness import http_api, read_messages, server_config, serving, sse_messages

WRITER = """
states:
  answer:
    triggers: { manual: }
    instructions: Answer the customer.
"""

TEXT = (
    "Thank you for your patience. Your order ORD-1001 left our warehouse this morning; the "
    "carrier expects to deliver it on Tuesday, and the tracking link follows by email."
)
QUICK = "Hello! How can I help?"


def _book(*rules: dict[str, Any], chunks: int = 20, delay_ms: int = 40) -> str:
    """``rules`` first, then the slow writer of :data:`TEXT` (``chunks`` × ``delay_ms``)."""
    slow = {"reply": {"content": TEXT}, "stream": {"chunks": chunks, "delay_ms": delay_ms}}
    return json.dumps({"rules": [*rules, slow]})


FIRST_QUICK = {"when": {"last_user": "first"}, "reply": {"content": QUICK}}
"""A quick first turn: the session exists before a stream follows it."""


def _sid(kind: str) -> str:
    return f"live-{kind}-{uuid.uuid4().hex[:8]}"


def _shown(events: list[SessionEvent] | list[dict[str, Any]]) -> dict[str, str]:
    """What a client shows of each message, applying deltas and resets in order."""
    shown: dict[str, str] = {}
    for event in events:
        kind, data = (
            (event.type, event.data)
            if isinstance(event, SessionEvent)
            else (event["type"], event["data"])
        )
        if kind == RESET:
            shown[data["messageId"]] = ""
        elif kind == DELTA:
            shown[data["messageId"]] = shown.get(data["messageId"], "") + data["text"]
    return shown


class TestOnEvent:
    async def test_the_text_arrives_as_it_is_written_then_the_message(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """20 chunks, 40 ms apart: the first delta reaches ``on_event`` long before the
        ``agent-text``; the deltas, in order and all before it, join to its text and carry
        its ``messageId``; every delta's ``seq`` is the last history event before it."""
        write_workflow(tmp_path, "writer", WRITER)
        server = scripted(_book())
        seen: list[tuple[float, SessionEvent]] = []
        loop = asyncio.get_running_loop()
        async with running_agent(
            client, task_queue, tmp_path, "writer", server, live=LocalChannel(tmp_path)
        ) as agent:
            outcome = await agent.workflow.send(
                _sid("on"), "Where is my order?", on_event=lambda e: seen.append((loop.time(), e))
            )
        events = [event for _, event in seen]
        kinds = [event.type for event in events]
        at = kinds.index("agent-text")
        message = events[at]
        deltas = [e for e in events if e.type == DELTA]
        assert kinds.count("agent-text") == 1 and DELTA not in kinds[at:]
        assert len(deltas) >= 2 and all(i < at for i, k in enumerate(kinds) if k == DELTA)
        assert "".join(e.data["text"] for e in deltas) == TEXT == message.data["text"]
        assert outcome.reply == TEXT
        assert {e.data["messageId"] for e in deltas} == {message.data["messageId"]}
        assert all(e.seq <= message.seq for e in deltas)
        first = next(t for t, e in seen if e.type == DELTA)
        whole = seen[at][0]
        assert whole - first > 0.4, (first, whole)  # 800 ms of writing

    async def test_a_retried_call_resets_so_the_text_shows_once(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The first attempt breaks off mid-answer (a dropped connection: transient); the
        second writes it whole. The stream says so (``agent-text-reset``), so a client that
        applies the events shows the text exactly once, as the durable message has it."""
        write_workflow(tmp_path, "writer", WRITER)
        breaking = {
            "times": 1,
            "reply": {"content": TEXT},
            "stream": {"chunks": 20, "delay_ms": 20, "break_after": 8},
        }
        server = scripted(_book(breaking, chunks=20, delay_ms=20))
        events: list[SessionEvent] = []
        async with running_agent(
            client, task_queue, tmp_path, "writer", server, live=LocalChannel(tmp_path)
        ) as agent:
            outcome = await agent.workflow.send(_sid("retry"), "Hi", on_event=events.append)
        assert outcome.reply == TEXT and len(server.requests) == 2
        live = [(e.type, e.data["attempt"]) for e in events if e.type in (DELTA, RESET)]
        assert (DELTA, 1) in live and (DELTA, 2) in live
        assert live.index((RESET, 2)) < live.index((DELTA, 2))
        assert max(i for i, k in enumerate(live) if k == (DELTA, 1)) < live.index((RESET, 2))
        message = next(e for e in events if e.type == "agent-text")
        assert _shown(events) == {message.data["messageId"]: TEXT}

    async def test_streaming_off_sends_no_deltas_and_the_same_message(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``ARCHMAX_STREAMING=0``: the request does not stream, nothing live arrives, and
        the message is the same."""
        write_workflow(tmp_path, "writer", WRITER)
        server = scripted(_book(chunks=5, delay_ms=20))
        model = ModelConfig.from_env(
            {
                "ARCHMAX_API_BASE_URL": server.url,
                "ARCHMAX_API_KEY": "sk-test",
                "ARCHMAX_MODEL": "scripted",
                "ARCHMAX_STREAMING": "0",
            }
        )
        events: list[SessionEvent] = []
        async with running_agent(
            client,
            task_queue,
            tmp_path,
            "writer",
            server,
            model=model,
            live=LocalChannel(tmp_path),
        ) as agent:
            outcome = await agent.workflow.send(_sid("off"), "Hi", on_event=events.append)
        assert outcome.reply == TEXT
        assert [e.data["text"] for e in events if e.type == "agent-text"] == [TEXT]
        assert not any(e.type in (DELTA, RESET) for e in events)
        assert all("stream" not in r.body for r in server.requests)

    async def test_the_embedded_default_streams_with_nothing_configured(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``create_agent`` with its own in-process worker: the worker publishes on the
        root's local channel, which the agent follows, with nothing to configure."""
        write_workflow(tmp_path, "writer", WRITER)
        server = scripted(_book(chunks=10, delay_ms=30))
        config = RuntimeConfig(
            root=tmp_path,
            store=tmp_path / "sessions",
            address=client.service_client.config.target_host,
            namespace=client.namespace,
            task_queue=task_queue,
            address_configured=True,
        )
        events: list[SessionEvent] = []
        async with create_agent(
            "writer", config=config, client=client, worker="inprocess", model=model_config(server)
        ) as agent:
            assert isinstance(agent.runtime.live, LocalChannel)
            outcome = await agent.workflow.send(_sid("embedded"), "Hi", on_event=events.append)
        message = next(e for e in events if e.type == "agent-text")
        assert outcome.reply == TEXT
        assert sum(e.type == DELTA for e in events) >= 2
        assert _shown(events) == {message.data["messageId"]: TEXT}


class TestMerging:
    async def test_a_delta_after_its_message_is_dropped(self) -> None:
        """A delta that arrives after its ``agent-text`` (the channel outran by the history)
        is dropped; one of another message is not; deltas take the last durable ``seq``."""
        now = datetime.now(UTC)

        def durable(seq: int, kind: str, data: dict[str, Any]) -> SessionEvent:
            return SessionEvent(type=kind, ts=now, seq=seq, session_id="s", data=data)

        def delta(message: str, text: str) -> LiveEvent:
            return LiveEvent(type=DELTA, session_id="s", message_id=message, text=text, ts=now)

        gate = asyncio.Event()

        async def history() -> AsyncIterator[SessionEvent]:
            yield durable(5, "turn-start", {})
            await gate.wait()
            yield durable(9, "agent-text", {"text": "ab", "messageId": "r:1"})
            await asyncio.sleep(0.05)
            gate.clear()
            await gate.wait()

        async def deltas() -> AsyncIterator[LiveEvent]:
            await asyncio.sleep(0.05)
            yield delta("r:1", "a")
            gate.set()
            await asyncio.sleep(0.02)
            yield delta("r:1", "b-late")
            yield delta("r:2", "c")
            await asyncio.sleep(0.05)
            gate.set()

        got: list[tuple[str, int, str]] = []
        stream = merged(history(), deltas(), "s")
        async for event in stream:
            got.append((event.type, event.seq, str(event.data.get("text"))))
            if len(got) == 4:
                break
        await stream.aclose()
        assert got == [
            ("turn-start", 5, "None"),
            (DELTA, 5, "a"),
            ("agent-text", 9, "ab"),
            (DELTA, 9, "c"),
        ]


class TestHttpStream:
    async def test_every_message_is_named_and_deltas_precede_the_message(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """``GET /v1/sessions/{id}/events``: each SSE message's ``event:`` is its type; the
        deltas of a turn that runs while the stream is open come without an ``id:`` (a
        resumed stream never replays them), then the ``agent-text`` with its id."""
        write_workflow(tmp_path, "writer", WRITER)
        server = scripted(_book(FIRST_QUICK))
        sid = _sid("sse")
        async with http_api(
            client,
            task_queue,
            tmp_path,
            "writer",
            server,
            store=tmp_path / "sessions",
            live=LocalChannel(tmp_path),
        ) as api:
            first = await api.http.post(
                "/v1/workflows/writer/triggers/manual", json={"message": "first", "session": sid}
            )
            assert first.status_code == 200, first.text
            async with api.http.stream("GET", f"/v1/sessions/{sid}/events") as stream:
                messages = sse_messages(stream)
                caught_up = await read_messages(messages, until="agent-text")
                turn = asyncio.create_task(
                    api.http.post(f"/v1/sessions/{sid}/messages", json={"message": "again"})
                )
                events = await read_messages(messages, until="agent-text")
            assert (await turn).status_code == 200
        assert caught_up[-1].data["data"]["text"] == QUICK
        assert all(e.name == e.data["type"] for e in caught_up + events)
        kinds = [e.name for e in events]
        deltas = [e for e in events if e.name == DELTA]
        assert len(deltas) >= 2 and kinds[-1] == "agent-text"
        assert all(e.id is None for e in deltas) and events[-1].id is not None
        assert "".join(e.data["data"]["text"] for e in deltas) == TEXT
        message = events[-1].data["data"]
        assert message["text"] == TEXT
        assert {e.data["data"]["messageId"] for e in deltas} == {message["messageId"]}

    async def test_serve_with_its_in_process_worker_streams_with_nothing_configured(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``archmax serve``'s app with its in-process worker (the model from the
        environment, no channel configured): the stream carries the deltas."""
        write_workflow(tmp_path, "writer", WRITER)
        server = scripted(_book(FIRST_QUICK, chunks=10, delay_ms=30))
        monkeypatch.setenv("ARCHMAX_API_BASE_URL", server.url)
        monkeypatch.setenv("ARCHMAX_API_KEY", "sk-test")
        monkeypatch.setenv("ARCHMAX_MODEL", "scripted")
        monkeypatch.delenv("ARCHMAX_STREAM_URL", raising=False)
        monkeypatch.delenv("ARCHMAX_STREAMING", raising=False)
        app = create_app(
            config=server_config(client, task_queue, tmp_path, tmp_path / "sessions"),
            settings=ServeSettings(),
            worker="inprocess",
        )
        sid = _sid("serve")
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as http:
            first = await http.post(
                "/v1/workflows/writer/triggers/manual", json={"message": "first", "session": sid}
            )
            assert first.status_code == 200, first.text
            async with http.stream("GET", f"/v1/sessions/{sid}/events") as stream:
                messages = sse_messages(stream)
                await read_messages(messages, until="agent-text")
                turn = asyncio.create_task(
                    http.post(f"/v1/sessions/{sid}/messages", json={"message": "again"})
                )
                events = await read_messages(messages, until="agent-text")
            assert (await turn).status_code == 200
        deltas = [e for e in events if e.name == DELTA]
        assert len(deltas) >= 2
        assert "".join(e.data["data"]["text"] for e in deltas) == TEXT
        assert events[-1].data["data"]["text"] == TEXT


def _ready(log: Path) -> bool:
    return log.exists() and b"worker    queue" in log.read_bytes()


def _poll(condition: Any, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class TestRedis:
    async def test_a_worker_process_publishes_and_another_follows(
        self,
        client: Client,
        task_queue: str,
        scripted: Scripted,
        tmp_path: Path,
        redis_url: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """``archmax worker`` in a process of its own with ``ARCHMAX_STREAM_URL``: the host in
        this process (configured the same) gets the deltas through Redis, and a bare Redis
        subscriber sees them on the session's channel."""
        root = tmp_path / "root"
        write_workflow(root, "writer", WRITER)
        server = scripted(_book())
        log = tmp_path / "worker.log"
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "TEMPORAL_NAMESPACE": client.namespace,
            "ARCHMAX_TASK_QUEUE": task_queue,
            "ARCHMAX_ROOT": str(root),
            "ARCHMAX_API_BASE_URL": server.url,
            "ARCHMAX_API_KEY": "sk-test",
            "ARCHMAX_MODEL": "scripted",
            "ARCHMAX_STREAM_URL": redis_url,
        }
        with log.open("wb") as output:
            worker = subprocess.Popen(
                [sys.executable, "-m", "archmax_temporal", "worker"],
                env=env,
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            await asyncio.to_thread(_poll, lambda: _ready(log), 90.0, "the worker")
            assert f"live text {redis_url}" in log.read_text()
            monkeypatch.setenv("ARCHMAX_STREAM_URL", redis_url)
            config = RuntimeConfig(
                root=root,
                store=root / "sessions",
                address=client.service_client.config.target_host,
                namespace=client.namespace,
                task_queue=task_queue,
                address_configured=True,
            )
            sid = _sid("redis")
            bare = RedisChannel(redis_url, client.namespace)
            heard: list[LiveEvent] = []

            async def listen() -> None:
                async with bare.subscribe(sid) as events:
                    async for event in events:
                        heard.append(event)

            listener = asyncio.create_task(listen())
            events: list[SessionEvent] = []
            async with create_agent(
                "writer", config=config, client=client, worker="external"
            ) as agent:
                assert isinstance(agent.runtime.live, RedisChannel)
                outcome = await agent.workflow.send(sid, "Hi", on_event=events.append)
            deadline = asyncio.get_running_loop().time() + 10
            while "".join(e.text for e in heard) != TEXT:  # the bare subscriber drops nothing
                assert asyncio.get_running_loop().time() < deadline, heard
                await asyncio.sleep(0.02)
            listener.cancel()
            await bare.aclose()
        finally:
            worker.kill()
            worker.wait(timeout=10)
        assert outcome.reply == TEXT
        message = next(e for e in events if e.type == "agent-text")
        # Over the network the last delta may come after the message (then it is dropped):
        # what the deltas showed is the message's beginning, the message the whole.
        ((shown_id, shown),) = _shown(events).items()
        assert shown_id == message.data["messageId"] and TEXT.startswith(shown)
        assert len(shown) > len(TEXT) // 2
        assert not (root / ".archmax" / "live").exists()  # nothing went the local way


@pytest.fixture
def cli_env(client: Client, scripted: Scripted, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of ``archmax`` commands on a root with the writer and a slow model,
    nothing configured for live text; the root's background worker stopped afterwards."""
    root = tmp_path / "root"
    write_workflow(root, "writer", WRITER)
    server = scripted(_book(FIRST_QUICK))
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"cli-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_API_BASE_URL": server.url,
        "ARCHMAX_API_KEY": "sk-cli-test",
        "ARCHMAX_MODEL": "scripted",
        "NO_COLOR": "1",
    }
    for name in ("ARCHMAX_WORKER", "ARCHMAX_STREAM_URL", "ARCHMAX_STREAMING"):
        env.pop(name, None)
    yield env
    stop_background_worker(root)


def _archmax(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "archmax_temporal", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


class TestCommands:
    def test_events_follow_gets_the_text_from_the_background_worker(
        self, cli_env: dict[str, str]
    ) -> None:
        """With nothing configured, ``archmax run`` turns run on the root's background worker
        (a process of its own); ``archmax events --follow`` in a third process gets the
        deltas over the local channel, then the ``agent-text``. ``run``'s stdout, not a
        terminal, is the reply alone, as it always was."""
        sid = _sid("cli")
        first = _archmax(cli_env, "run", "writer", "first", "--session", sid)
        assert first.returncode == 0, first.stderr
        assert first.stdout == QUICK + "\n"
        follower = subprocess.Popen(
            [sys.executable, "-m", "archmax_temporal", "events", sid, "--follow"],
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follower.stdout is not None
        lines: list[dict[str, Any]] = []
        try:
            while not lines or lines[-1]["type"] != "agent-text":  # caught up: subscribed
                lines.append(json.loads(follower.stdout.readline()))
            again = _archmax(cli_env, "run", "writer", "again", "--session", sid)
            assert again.returncode == 0, again.stderr
            assert again.stdout == TEXT + "\n"
            later: list[dict[str, Any]] = []
            while not later or later[-1]["type"] != "agent-text":
                later.append(json.loads(follower.stdout.readline()))
        finally:
            follower.kill()
            follower.wait(timeout=10)
        deltas = [e for e in later if e["type"] == DELTA]
        assert len(deltas) >= 2
        assert later[-1]["data"]["text"] == TEXT
        assert _shown(later) == {later[-1]["data"]["messageId"]: TEXT}

    def test_run_on_a_terminal_prints_the_text_as_it_arrives_once(
        self, cli_env: dict[str, str]
    ) -> None:
        """``archmax run`` with stdout on a terminal (a pty): the reply's first words show
        well before its last, and the whole reply shows exactly once."""
        sid = _sid("tty")
        first = _archmax(cli_env, "run", "writer", "first", "--session", sid)
        assert first.returncode == 0, first.stderr
        primary, secondary = pty.openpty()
        received: list[tuple[float, bytes]] = []

        def read() -> None:
            while True:
                try:
                    data = os.read(primary, 4096)
                except OSError:
                    return
                if not data:
                    return
                received.append((time.monotonic(), data))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "archmax_temporal",
                    "run",
                    "writer",
                    "again",
                    "--session",
                    sid,
                ],
                env=cli_env,
                stdout=secondary,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                timeout=180,
            )
        finally:
            os.close(secondary)
        reader.join(timeout=10)
        os.close(primary)
        assert done.returncode == 0, done.stderr
        output = b"".join(data for _, data in received).decode().replace("\r\n", "\n")
        assert output.count(TEXT) == 1, output
        assert output.strip() == TEXT
        head, tail = TEXT[:20], TEXT[-20:]
        seen = b""
        first_at = last_at = None
        for at, data in received:
            seen += data
            text = seen.decode(errors="ignore").replace("\r\n", "\n")
            if first_at is None and head[:5] in text:
                first_at = at
            if last_at is None and tail in text:
                last_at = at
        assert first_at is not None and last_at is not None
        assert last_at - first_at > 0.3, (first_at, last_at)  # 800 ms of writing
