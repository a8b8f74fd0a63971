"""Builds and runs the Temporal worker that executes archmax sessions.

One worker serves every session on its task queue: the ``ArchmaxSession`` workflow, the model
activity (the worker's endpoint and key, never the workflow's) and the store activity (the
worker's session store). Any worker can resume any session, so a fleet scales by starting more
of them. A worker shuts down cleanly on SIGTERM/SIGINT, handing its sticky sessions over at
once instead of leaving them for the ~10 s sticky timeout.
"""

from __future__ import annotations

if __name__ not in ("archmax_temporal.worker", "__main__"):  # pragma: no cover
    raise ImportError(
        "worker.py is the module archmax_temporal.worker: import archmax_temporal.worker"
        f" (not {__name__}), so one file is one module"
    )

import asyncio
import contextlib
import hashlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import __version__ as TEMPORALIO_VERSION
from temporalio.worker import (
    Interceptor,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerDeploymentConfig,
    WorkerDeploymentVersion,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from archmax_temporal.activities.folder_store import FilesystemSessionStore
from archmax_temporal.activities.hook_executors import HookExecutor, HookExecutorActivities
from archmax_temporal.activities.host_tools import HostTool, HostToolActivities
from archmax_temporal.activities.logs import LogContextInterceptor
from archmax_temporal.activities.model import ModelActivities, ModelConfig
from archmax_temporal.activities.notify import NotifyActivities, NotifyTarget
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store import PACKAGE_VERSION, StoreActivities
from archmax_temporal.activities.store_check import StoreCheckInterceptor
from archmax_temporal.activities.store_identity import describe_store, session_store_ref
from archmax_temporal.activities.telemetry import ModelCallMetricsInterceptor
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.connection import DATA_CONVERTER as DATA_CONVERTER
from archmax_temporal.connection import DEFAULT_ADDRESS as DEFAULT_ADDRESS
from archmax_temporal.connection import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE
from archmax_temporal.connection import EPHEMERAL_IDENTITY_PREFIX as EPHEMERAL_IDENTITY_PREFIX
from archmax_temporal.connection import SERVICE_IDENTITY_PREFIX as SERVICE_IDENTITY_PREFIX
from archmax_temporal.connection import SafeTextPayloadConverter as SafeTextPayloadConverter
from archmax_temporal.connection import TemporalConnection as TemporalConnection
from archmax_temporal.connection import connect as connect
from archmax_temporal.connection import core_logging, poller_listed
from archmax_temporal.connection import worker_identity as worker_identity
from archmax_temporal.live import LiveChannel
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import build_deferred
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.store_binding import StoreBindingInterceptor
from archmax_temporal.workflows.telemetry import WorkflowTelemetryInterceptor

GRACEFUL_SHUTDOWN = timedelta(seconds=15)
"""How long running activities (a model call) get to finish when the worker stops."""

PASSTHROUGH_MODULES: Sequence[str] = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "yaml",
    "opentelemetry",  # when installed: spans from workflow code share the host's provider
)
"""The pure third-party modules :func:`checking_runner`'s sandbox shares instead of
re-importing them for every workflow run. archmax's own workflow code is not among them: that
sandbox exists to check it."""


def telemetry_interceptors() -> list[Interceptor]:
    """What every worker runs its sessions with: the session's fields bound on activity log
    lines, archmax's metrics from workflow and activity code."""
    return [LogContextInterceptor(), ModelCallMetricsInterceptor(), WorkflowTelemetryInterceptor()]


def workflow_interceptors() -> list[Interceptor]:
    """The interceptors that decide commands of the session workflow, so every worker and every
    replayer runs them: a session's store in its activities' headers, and an activity that workers
    of another store refused scheduled again (:mod:`archmax_temporal.workflows.store_binding`)."""
    return [StoreBindingInterceptor()]


def workflow_runner() -> UnsandboxedWorkflowRunner:
    """How every worker and replayer runs the session workflow: unsandboxed, once every
    project model is built (:func:`build_deferred`).

    The workflow is archmax's own code, never a user's (authored hooks and scripts run in
    activities), and its determinism is held by the golden histories CI replays, in
    :func:`checking_runner`'s sandbox too. Temporal's sandbox checks a workflow's calls only in
    modules it re-imports for every run; archmax's worker used to pass its own code through
    (re-importing it cost about 1 MiB and a compile per cached session), so that sandbox
    checked nothing of it, and it still cost every activation a trip through its importer and
    an ``exec`` per payload (bench/README.md, fourth round)."""
    build_deferred()
    return UnsandboxedWorkflowRunner()


def checking_runner() -> SandboxedWorkflowRunner:
    """Temporal's sandbox with archmax's workflow code inside it, re-imported for every run:
    a call to the clock, randomness, the environment or a file from workflow code fails the
    workflow task instead of running. Too slow to serve sessions with; CI replays every golden
    history and every fresh recording in it (``tests/e2e/test_replay.py``)."""
    build_deferred()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


def deployment_from_env(env: Mapping[str, str] | None = None) -> WorkerDeploymentVersion | None:
    """The Worker Deployment version a long-lived worker registers as: ``ARCHMAX_DEPLOYMENT``
    (the deployment's name; unset: no Worker Versioning) and ``ARCHMAX_BUILD_ID`` (default:
    the package version)."""
    env = os.environ if env is None else env
    name = env.get("ARCHMAX_DEPLOYMENT", "").strip()
    if not name:
        return None
    build = env.get("ARCHMAX_BUILD_ID", "").strip() or PACKAGE_VERSION
    return WorkerDeploymentVersion(deployment_name=name, build_id=build)


def code_build_id() -> str:
    """The build id of a worker that is not versioned: archmax's and temporalio's versions and
    a digest of the source of every ``archmax_temporal`` module loaded, so a change to the
    code gives a new id. (The SDK's default digests the bytecode of every loaded module, a few
    hundred milliseconds at each worker start: most of a short command's worker start-up.)"""
    digest = hashlib.md5(usedforsecurity=False)
    digest.update(f"archmax {PACKAGE_VERSION} temporalio {TEMPORALIO_VERSION}".encode())
    for name in sorted(sys.modules.copy()):
        if name != "archmax_temporal" and not name.startswith("archmax_temporal."):
            continue
        origin = getattr(getattr(sys.modules[name], "__spec__", None), "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        try:
            with open(origin, "rb") as source:
                digest.update(name.encode() + b"\0" + source.read())
        except OSError:
            continue
    return f"archmax-{PACKAGE_VERSION}-{digest.hexdigest()[:16]}"


def build_worker(
    client: Client,
    *,
    task_queue: str,
    model: ModelConfig,
    store_dir: Path | None = None,
    store: SessionStore | None = None,
    store_description: str | None = None,
    max_cached_workflows: int = 1000,
    identity: str | None = None,
    authoring_root: Path | None = None,
    host_tools: Sequence[HostTool] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    sandbox_runtime: Sequence[str] | None = None,
    interceptors: Sequence[Interceptor] = (),
    max_concurrent_workflow_tasks: int | None = None,
    max_concurrent_activities: int | None = None,
    graceful_shutdown: timedelta = GRACEFUL_SHUTDOWN,
    telemetry: bool = True,
    deployment: WorkerDeploymentVersion | None = None,
    build_id: str | None = None,
    notify: NotifyTarget | None = None,
    live: LiveChannel | None = None,
) -> Worker:
    """A worker for ``task_queue`` with the session workflow and its activities.

    With ``deployment`` the worker uses Worker Versioning as that version: a session's run is pinned
    to the version it started on, and a parked session that wakes when another version is current
    continues as new onto it (:data:`archmax_temporal.workflows.session.UPGRADE_PATCH`). Without
    one, the worker reports ``build_id`` (default: :func:`code_build_id`).

    ``authoring_root`` serves the read-only mounts (``skills/``, ``AGENTS.md``) of the
    workspace tools; sessions' own files live in ``store`` (any session store: an object
    store, a folder), or the folder store at ``store_dir``.
    ``hook_executors`` serve the custom hook kinds a spec declares in ``extensions.hooks``.
    ``notify`` is where the sessions' notifications go (a human state's deadline:
    ``approval.expiring``, ``approval.expired``; :meth:`NotifyTarget.from_env` reads
    ``ARCHMAX_NOTIFY_URL`` and ``ARCHMAX_NOTIFY_SECRET``); None: the worker sends none.
    ``live`` is where the model calls' text goes while it is written (``agent-text-delta``:
    :func:`archmax_temporal.live.live_channel` reads ``ARCHMAX_STREAM_URL``, else the local
    sockets of the root); None: nowhere (followers get the whole messages only). ``sandbox_runtime``
    is the command line that starts a hook's or script's sandbox process (default: this Python
    running ``activities/sandbox_child.py``); it speaks that child's protocol on stdin and stdout,
    so a host can wrap it (a container, a jail). The worker registers exactly the activities
    :mod:`archmax_temporal.workflows.contracts` records (a missing, extra or doubled one is a
    ``ValueError``). It reads (or creates) its store's identity first and refuses the activities of
    sessions created in another store (:mod:`archmax_temporal.activities.store_identity`).
    ``interceptors`` run after the store's and the telemetry ones every worker has
    (:func:`telemetry_interceptors`; ``telemetry=False`` leaves them out: no session fields on
    activity log lines, and of archmax's metrics only those workflow code records itself, as
    ``bench/telemetry.py`` compares).
    """
    from archmax_temporal.workflows import contracts

    if store is None:
        if store_dir is None:
            raise ValueError("build_worker needs a session store (store) or its folder (store_dir)")
        store = FilesystemSessionStore(store_dir)
    # The store's identity, read (or created) before any work: this worker runs only the
    # activities of sessions created in it (activities.store_identity).
    where = store_description or (str(store_dir) if store_dir is not None else "")
    own_store = session_store_ref(store, describe=describe_store(where or type(store).__name__))
    root = authoring_root or (store_dir.parent if store_dir is not None else Path.cwd())
    logs = TranscriptLogs(store)  # the conversation logs, and the tool results they name
    workspace = WorkspaceActivities(store, root, logs)
    hidden = [p for p in (store_dir, root) if p is not None]  # never named in a tool's answer
    store_activities = StoreActivities(store, logs)
    implementations = [
        ModelActivities(model, logs=logs, live=live).complete,
        store_activities.persist_turn,
        store_activities.checkpoint,
        store_activities.put_variables,
        store_activities.load_variables,
        *workspace.activities(),
        HostToolActivities(host_tools, store, hidden, logs).run,
        SandboxActivities(workspace, sandbox_runtime).run,
        HookExecutorActivities(hook_executors or {}, store, hidden).run,
        NotifyActivities(notify).send,
    ]
    # Each implementation under the name its @activity.defn registers; the worker serves
    # exactly the contracts' activities (a missing, extra or doubled one raises here).
    names = [getattr(fn, "__temporal_activity_definition").name for fn in implementations]
    contracts.check_registered(names)
    by_name = dict(zip(names, implementations, strict=True))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ArchmaxSession],
        activities=[by_name[c.name] for c in contracts.ACTIVITIES],
        workflow_runner=workflow_runner(),
        max_cached_workflows=max_cached_workflows,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        max_concurrent_activities=max_concurrent_activities,
        graceful_shutdown_timeout=graceful_shutdown,
        identity=identity,
        build_id=None if deployment is not None else build_id or code_build_id(),
        interceptors=[
            StoreCheckInterceptor(own_store),  # a refused activity runs nothing, counts nothing
            *(telemetry_interceptors() if telemetry else []),
            *workflow_interceptors(),
            *interceptors,
        ],
        deployment_config=WorkerDeploymentConfig(
            version=deployment,
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )
        if deployment is not None
        else None,
    )


class WorkerOptions(BaseModel):
    """How a long-lived worker runs: its slots, cache, drain grace and endpoints.

    Read from the environment by :meth:`from_env`; ``archmax worker`` flags override it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrent_workflow_tasks: int | None = Field(default=None, gt=0)
    """Workflow tasks run at once (``ARCHMAX_MAX_CONCURRENT_WORKFLOW_TASKS``; SDK default)."""
    max_concurrent_activities: int | None = Field(default=None, gt=0)
    """Activities (model calls, tools, hooks) at once (``ARCHMAX_MAX_CONCURRENT_ACTIVITIES``)."""
    max_cached_workflows: int = Field(default=1000, ge=0)
    """Sessions kept in memory between tasks (``ARCHMAX_MAX_CACHED_WORKFLOWS``)."""
    graceful_shutdown: timedelta = Field(default=GRACEFUL_SHUTDOWN, ge=timedelta(0))
    """How long running activities get to finish on SIGTERM (``ARCHMAX_SHUTDOWN_GRACE``,
    seconds); a second signal exits at once."""
    metrics_address: str | None = None
    """``host:port`` of the Prometheus endpoint (``ARCHMAX_METRICS_ADDRESS``); none: off."""
    health_address: str | None = None
    """``host:port`` of ``/healthz`` and ``/readyz`` (``ARCHMAX_HEALTH_ADDRESS``); none: off."""

    ENV: ClassVar[Mapping[str, str]] = {
        "max_concurrent_workflow_tasks": "ARCHMAX_MAX_CONCURRENT_WORKFLOW_TASKS",
        "max_concurrent_activities": "ARCHMAX_MAX_CONCURRENT_ACTIVITIES",
        "max_cached_workflows": "ARCHMAX_MAX_CACHED_WORKFLOWS",
        "graceful_shutdown": "ARCHMAX_SHUTDOWN_GRACE",
        "metrics_address": "ARCHMAX_METRICS_ADDRESS",
        "health_address": "ARCHMAX_HEALTH_ADDRESS",
    }
    """Each option's environment variable."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> WorkerOptions:
        """The options the environment sets, with ``overrides`` (not None) winning; a bad
        value is a :class:`ConfigurationError` naming its variable or flag."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            field: env[name] for field, name in cls.ENV.items() if env.get(name, "").strip()
        }
        grace = values.get("graceful_shutdown")
        if isinstance(grace, str):  # seconds, as the flag takes them
            try:
                values["graceful_shutdown"] = timedelta(seconds=float(grace))
            except ValueError:
                raise ConfigurationError(
                    f"invalid worker option: ARCHMAX_SHUTDOWN_GRACE: {grace!r} is not seconds"
                ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{cls.ENV.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigurationError(f"invalid worker option: {problems}") from None


def metrics_runtime(address: str) -> Runtime:
    """A Temporal runtime exporting Temporal's SDK metrics and archmax's own on
    ``http://<address>/metrics`` (Prometheus; counters end in ``_total``, durations are
    seconds). Connect the worker's client with it (:func:`connect`)."""
    return Runtime(
        telemetry=TelemetryConfig(
            logging=core_logging(),
            metrics=PrometheusConfig(
                bind_address=address, counters_total_suffix=True, durations_as_seconds=True
            ),
        )
    )


class HealthServer:
    """``/healthz`` and ``/readyz`` for an orchestrator, on a plain asyncio HTTP server.

    ``/healthz`` is 200 while the worker runs (or is still starting), 503 once it stopped or
    failed; ``/readyz`` is 200 only while it runs, Temporal lists its poller (``polling``), it
    is not draining, and Temporal answered a health check within :data:`READY_CHECK_TIMEOUT`.
    Bodies are one JSON object.
    """

    READY_CHECK_TIMEOUT: ClassVar[float] = 2.0

    def __init__(self, address: str, worker: Worker, client: Client) -> None:
        self._host, _, port = address.rpartition(":")
        self._port = int(port)
        self._worker = worker
        self._client = client
        self._server: asyncio.Server | None = None
        self.draining = False
        """Set when the worker drains: not ready any more, still alive."""
        self.polling = False
        """Set once Temporal lists the worker's poller: not ready before."""

    @property
    def port(self) -> int:
        """The bound port (useful when the address asked for port 0)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self._host.strip("[]") or "0.0.0.0", self._port
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _ready(self) -> tuple[bool, str]:
        if self.draining:
            return False, "draining"
        if not self._worker.is_running:
            return False, "stopped" if self._worker.is_shutdown else "starting"
        if not self.polling:
            return False, "starting"
        try:
            await asyncio.wait_for(
                self._client.service_client.check_health(), self.READY_CHECK_TIMEOUT
            )
        except Exception:
            return False, "temporal unreachable"
        return True, "ready"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            parts = request.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            if path == "/healthz":
                alive = not self._worker.is_shutdown
                code, status = (200, "ok") if alive else (503, "stopped")
            elif path == "/readyz":
                ready, status = await self._ready()
                code = 200 if ready else 503
            else:
                code, status = 404, "not found"
            body = f'{{"status": "{status}"}}'.encode()
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (OSError, TimeoutError, UnicodeDecodeError):
            pass
        finally:
            writer.close()


POLLER_WAIT_SECONDS = 30.0
"""How long a starting worker waits to see its poller listed before it announces itself
anyway (saying it was not seen)."""


async def await_poller(
    client: Client, task_queue: str, identity: str, timeout: float = POLLER_WAIT_SECONDS
) -> bool:
    """Wait (polling ``DescribeTaskQueue``) until Temporal lists this worker's poller on
    ``task_queue``; whether it did within ``timeout``. A worker runs a while (validation,
    the first poll's round trip; seconds on a loaded host) before commands can see it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.05
    while True:
        try:
            if await poller_listed(client, task_queue, identity):
                return True
        except Exception:  # a server that cannot describe queues: nothing to wait for
            return True
        if loop.time() + delay > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def run_until_signalled(
    worker: Worker,
    *,
    on_drain: Callable[[], None] | None = None,
    announce: Callable[[str], None] | None = None,
    on_running: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Run ``worker`` until SIGTERM or SIGINT, then drain it: new work stops at once, running
    activities get the worker's grace period. A second signal exits at once. ``on_running``
    runs once the worker runs (cut short by a signal)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def first(sig: signal.Signals) -> None:
        if announce is not None:
            announce(f"worker    {sig.name}: draining (again to exit at once)")
        if on_drain is not None:
            on_drain()
        stop.set()
        for again in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(again, os._exit, 128 + again)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, first, sig)
    try:
        async with worker:
            started: asyncio.Task[None] | None = (
                asyncio.create_task(on_running()) if on_running is not None else None
            )
            try:
                await stop.wait()
            finally:
                if started is not None:
                    started.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await started
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def serve(
    client: Client,
    *,
    task_queue: str,
    model: ModelConfig,
    store_dir: Path | None = None,
    store: SessionStore | None = None,
    store_description: str | None = None,
    authoring_root: Path,
    host_tools: Sequence[HostTool] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    announce: Callable[[str], None] | None = None,
    options: WorkerOptions | None = None,
    deployment: WorkerDeploymentVersion | None = None,
    notify: NotifyTarget | None = None,
    live: LiveChannel | None = None,
) -> None:
    """The body of ``archmax worker`` and ``archmax dev``: a long-lived worker (its identity
    marks it as one, so commands leave the queue to it) until SIGTERM or SIGINT, with the
    health endpoints ``options`` ask for. (Metrics are the client's runtime's: connect it
    with :func:`metrics_runtime`.)"""
    options = options or WorkerOptions()
    identity = worker_identity(SERVICE_IDENTITY_PREFIX)
    worker = build_worker(
        client,
        task_queue=task_queue,
        model=model,
        store_dir=store_dir,
        store=store,
        store_description=store_description,
        identity=identity,
        authoring_root=authoring_root,
        host_tools=host_tools,
        hook_executors=hook_executors,
        max_cached_workflows=options.max_cached_workflows,
        max_concurrent_workflow_tasks=options.max_concurrent_workflow_tasks,
        max_concurrent_activities=options.max_concurrent_activities,
        graceful_shutdown=options.graceful_shutdown,
        deployment=deployment,
        notify=notify,
        live=live,
    )
    health: HealthServer | None = None
    if options.health_address:
        health = HealthServer(options.health_address, worker, client)
        await health.start()

    async def running() -> None:
        # Announced (and ready) once Temporal lists the poller, so a command run right after
        # the banner sees this worker serving the queue.
        seen = await await_poller(client, task_queue, identity)
        if health is not None:
            health.polling = True
        if announce is None:
            return
        version = (
            f"  ·  deployment {deployment.deployment_name} build {deployment.build_id}"
            if deployment
            else ""
        )
        announce(f"worker    queue {task_queue}{version}  ·  SIGTERM or Ctrl-C stops it")
        if notify is not None:
            announce(f"notify    {notify.url}")
        if live is not None:
            announce(f"live text {live.describe()}")
        if not seen:
            announce(f"worker    its poller is not listed on {task_queue} yet")
        if options.metrics_address:
            announce(f"metrics   http://{options.metrics_address}/metrics")
        if health is not None:
            announce(f"health    http://{options.health_address}/healthz  ·  /readyz")

    def draining() -> None:
        if health is not None:
            health.draining = True

    try:
        await run_until_signalled(worker, on_drain=draining, announce=announce, on_running=running)
    finally:
        if health is not None:
            await health.stop()
    if announce is not None:
        announce("worker stopped")
