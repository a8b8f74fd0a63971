"""Builds and runs the Temporal worker that executes archmax sessions.

One worker serves every session on its task queue: the ``ArchmaxSession`` workflow, the model
activity (the worker's endpoint and key, never the workflow's) and the store activity (the
worker's session store). Any worker can resume any session, so a fleet scales by starting more
of them. A worker shuts down cleanly on SIGTERM/SIGINT, handing its sticky sessions over at
once instead of leaving them for the ~10 s sticky timeout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.worker import Worker, WorkerDeploymentConfig, WorkerDeploymentVersion
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from archmax_temporal.activities.hook_executors import HookExecutor, HookExecutorActivities
from archmax_temporal.activities.host_tools import HostTool, HostToolActivities
from archmax_temporal.activities.model import ModelActivities, ModelConfig
from archmax_temporal.activities.sandbox import SandboxActivities
from archmax_temporal.activities.session_store import FilesystemSessionStore
from archmax_temporal.activities.store import PACKAGE_VERSION, StoreActivities
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.activities.workspace import WorkspaceActivities
from archmax_temporal.workflows import text
from archmax_temporal.workflows.session import ArchmaxSession

GRACEFUL_SHUTDOWN = timedelta(seconds=15)
"""How long running activities (a model call) get to finish when the worker stops."""

PASSTHROUGH_MODULES: Sequence[str] = ("pydantic", "pydantic_core", "annotated_types", "yaml")
"""Pure third-party modules the workflow sandbox shares instead of re-importing per run."""


EPHEMERAL_IDENTITY_PREFIX = "archmax-cli:"
"""Identity prefix of the worker a command runs in-process; others never count on it."""

SERVICE_IDENTITY_PREFIX = "archmax-worker:"
"""Identity prefix of long-lived workers (``archmax worker``, ``archmax dev``)."""


class SafeTextPayloadConverter(PydanticPayloadConverter):
    """Pydantic's payload converter, made total over text: a value holding a lone UTF-16
    surrogate (which no UTF-8 encoder takes) is written with each one replaced by U+FFFD
    instead of failing. Without it, one such string from a model, a host tool or a script
    fails every workflow task that schedules it, forever. The turn engine cleans (and says
    so to the model) where it can; this is the net under everything else."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        try:
            return super().to_payloads(values)
        except Exception as exc:
            if "surrogate" not in str(exc):
                raise
            return super().to_payloads([_without_surrogates(value) for value in values])


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, BaseModel):
        cleaned, _ = text.clean(value.model_dump(mode="python", round_trip=True))
        return type(value).model_validate(cleaned)
    return text.clean(value)[0]


DATA_CONVERTER: Final = DataConverter(payload_converter_class=SafeTextPayloadConverter)
"""The project's one data converter: pydantic models on the wire, total over text."""


async def connect(address: str, namespace: str) -> Client:
    """A client with the project's one data converter."""
    return await Client.connect(address, namespace=namespace, data_converter=DATA_CONVERTER)


def worker_identity(prefix: str) -> str:
    """``<prefix><pid>@<host>``: lets a later command tell a dead local worker from a live one."""
    return f"{prefix}{os.getpid()}@{socket.gethostname()}"


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox with the project's pure dependencies passed through."""
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


def build_worker(
    client: Client,
    *,
    task_queue: str,
    model: ModelConfig,
    store_dir: Path,
    max_cached_workflows: int = 1000,
    identity: str | None = None,
    authoring_root: Path | None = None,
    host_tools: Sequence[HostTool] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    sandbox_runtime: Sequence[str] | None = None,
    deployment: WorkerDeploymentVersion | None = None,
) -> Worker:
    """A worker for ``task_queue`` with the session workflow and its activities.

    With ``deployment`` the worker uses Worker Versioning as that version: a session's run is
    pinned to the version it started on, and a parked session that wakes when another
    version is current continues as new onto it (:data:`workflows.session.UPGRADE_PATCH`).

    ``authoring_root`` serves the read-only mounts (``skills/``, ``AGENTS.md``) of the
    workspace tools; sessions' own files live in the store under ``store_dir``.
    ``hook_executors`` serve the custom hook kinds a spec declares in ``extensions.hooks``.
    ``sandbox_runtime`` is the command line that starts a hook's or script's sandbox process
    (default: this Python running ``activities/sandbox_child.py``); it speaks that child's
    protocol on stdin and stdout, so a host can wrap it (a container, a jail).
    The worker registers exactly the activities :mod:`workflows.contracts` records (a
    missing, extra or doubled one is a ``ValueError``).
    """
    from archmax_temporal.workflows import contracts

    store = FilesystemSessionStore(store_dir)
    root = authoring_root or store_dir.parent
    workspace = WorkspaceActivities(store, root)
    hidden = [store_dir, root]  # host folders never named in what a tool answers
    logs = TranscriptLogs(store_dir)
    store_activities = StoreActivities(store_dir, logs)
    implementations = [
        ModelActivities(model, logs=logs).complete,
        store_activities.persist_turn,
        store_activities.checkpoint,
        *workspace.activities(),
        HostToolActivities(host_tools, store, hidden).run,
        SandboxActivities(workspace, sandbox_runtime).run,
        HookExecutorActivities(hook_executors or {}, store, hidden).run,
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
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        identity=identity,
        deployment_config=WorkerDeploymentConfig(
            version=deployment,
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )
        if deployment is not None
        else None,
    )


async def run_until_signalled(worker: Worker) -> None:
    """Run ``worker`` until SIGTERM or SIGINT, then shut it down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        await stop.wait()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)


async def serve(
    client: Client,
    *,
    task_queue: str,
    model: ModelConfig,
    store_dir: Path,
    authoring_root: Path,
    host_tools: Sequence[HostTool] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    announce: Callable[[str], None] | None = None,
    deployment: WorkerDeploymentVersion | None = None,
) -> None:
    """The body of ``archmax worker`` and ``archmax dev``: a long-lived worker (its identity
    marks it as one, so commands leave the queue to it) until SIGTERM or SIGINT."""
    worker = build_worker(
        client,
        task_queue=task_queue,
        model=model,
        store_dir=store_dir,
        identity=worker_identity(SERVICE_IDENTITY_PREFIX),
        authoring_root=authoring_root,
        host_tools=host_tools,
        hook_executors=hook_executors,
        deployment=deployment,
    )
    if announce is not None:
        version = (
            f"  ·  deployment {deployment.deployment_name} build {deployment.build_id}"
            if deployment
            else ""
        )
        announce(f"worker    queue {task_queue}{version}  ·  SIGTERM or Ctrl-C stops it")
    await run_until_signalled(worker)
    if announce is not None:
        announce("worker stopped")
