"""Running a session in a test: an agent bound to the test's dev server and task queue with a
cache-less worker, the scripted model it talks to, and the authored trees it runs.

The fixtures that hand these their server and queue (``client``, ``task_queue``, ``scripted``)
are in ``tests/conftest.py``."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeAlias

from temporalio.client import Client

from archmax_temporal.activities.host_tools import as_host_tools
from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.activities.notify import NotifyTarget
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import DEFAULT_IDLE_CLOSE, RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.live import LiveChannel
from archmax_temporal.worker import build_worker
from archmax_temporal.workflows.limits import Limits
from tests.support.paths import EXAMPLES

# The ``scripted`` fixture: starts a scripted model server from a playbook path or YAML text.
Scripted: TypeAlias = Callable[[str | Path], ScriptedModelServer]


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
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("sessions", ".archmax"))
    return target


def write_workflow(root: Path, slug: str, yaml_text: str) -> Path:
    directory = root / "workflows" / slug
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "workflow.yaml").write_text(yaml_text, encoding="utf-8")
    return directory
