"""Real HTTP for the ``archmax serve`` tests: the app under uvicorn in a background thread on
a free 127.0.0.1 port (its own event loop and Temporal client, as a separate server process
would have), requests with httpx, and a small SSE reader.

The session worker runs on the test's own loop (``running_agent``), so tests talk to the server
with ``httpx.AsyncClient`` and keep that loop free to serve the turns.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp
from temporalio.client import Client

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.http import ServeSettings, create_app
from archmax_temporal.client.http.protocol import uvicorn_config
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.live import LiveChannel
from tests.support.agents import running_agent

START_TIMEOUT = 20.0
"""How long a test waits for the server to answer before failing."""


@asynccontextmanager
async def serving(app: ASGIApp) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn_config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while not server.started:
        if not thread.is_alive() or loop.time() > deadline:
            raise RuntimeError("the HTTP server did not start")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 10)
        sock.close()


def server_config(client: Client, task_queue: str, root: Path, store: Path) -> RuntimeConfig:
    """The runtime configuration of a server talking to the test's Temporal server."""
    return RuntimeConfig(
        root=root,
        store=store,
        address=client.service_client.config.target_host,
        namespace=client.namespace,
        task_queue=task_queue,
        address_configured=True,
    )


@dataclass
class Api:
    """A running server: an HTTP client at its base URL, and the test's own agent."""

    http: httpx.AsyncClient
    agent: Agent
    base: str


ApiFor = Callable[..., AbstractAsyncContextManager[Api]]
"""A test's opener of :func:`http_api` over its own root and model (a fixture returns one);
called with the settings to serve under, if any."""


@asynccontextmanager
async def http_api(
    client: Client,
    task_queue: str,
    root: Path,
    workflow: str,
    model: ScriptedModelServer,
    *,
    store: Path,
    settings: ServeSettings | None = None,
    live: LiveChannel | None = None,
) -> AsyncIterator[Api]:
    """A worker for ``workflow`` on the test's loop and the HTTP API over the same root
    (``live``: where the worker's model calls publish their text as it is written)."""
    async with running_agent(
        client, task_queue, root, workflow, model, store=store, live=live
    ) as agent:
        app = create_app(
            config=server_config(client, task_queue, root, store),
            settings=settings or ServeSettings(),
            worker="external",
        )
        async with (
            serving(app) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as http,
        ):
            yield Api(http=http, agent=agent, base=base)


@dataclass
class SseEvent:
    id: str | None
    data: dict[str, Any]
    name: str | None = None
    """The message's ``event:`` field."""


async def sse_messages(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """The SSE messages of an open response, one by one (its ``id:``, ``event:`` and JSON
    ``data:``), to read in several steps."""
    event_id: str | None = None
    name: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith(":"):
            continue
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            yield SseEvent(event_id, json.loads("\n".join(data)), name)
            event_id, name, data = None, None, []


async def read_events(
    response: httpx.Response, *, count: int | None = None, until: str | None = None
) -> list[SseEvent]:
    """Read events off an open SSE response: ``count`` of them, or up to and including the
    first of type ``until``, or to the end of the stream."""
    return await read_messages(sse_messages(response), count=count, until=until)


async def read_messages(
    messages: AsyncIterator[SseEvent], *, count: int | None = None, until: str | None = None
) -> list[SseEvent]:
    """:func:`read_events` off :func:`sse_messages` (which may be read on afterwards)."""
    found: list[SseEvent] = []
    async for event in messages:
        found.append(event)
        if count is not None and len(found) >= count:
            break
        if until is not None and event.data["type"] == until:
            break
    return found


__all__ = [
    "Api",
    "SseEvent",
    "http_api",
    "read_events",
    "read_messages",
    "server_config",
    "serving",
    "sse_messages",
]
