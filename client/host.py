"""The host API behind ``create_agent(...)``: the :class:`Agent`, one workflow bound to a
runtime, with its ``workflow`` (write) and ``sessions`` (read) surfaces, and
:func:`open_agent`, which assembles it.

``agent.workflow`` fires into sessions (:mod:`archmax_temporal.client.workflow_surface`),
``agent.sessions`` reads them (:mod:`archmax_temporal.client.sessions_surface`); which session a
firing belongs to is :mod:`archmax_temporal.client.session_ids`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.client import Client, WorkflowHandle

from archmax_temporal.activities.hook_executors import check_executors
from archmax_temporal.activities.host_tools import as_host_tools
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.loader import (
    LoadedWorkflow,
    load_delegates,
    load_workflow,
    turn_spec,
)
from archmax_temporal.client.runtime import Runtime, open_runtime
from archmax_temporal.client.session_ids import ResolvedSession as ResolvedSession  # re-exported
from archmax_temporal.client.session_ids import parsed_session_path
from archmax_temporal.client.sessions_surface import SessionsSurface
from archmax_temporal.client.workflow_surface import WorkflowSurface
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.models import DelegateSpec, ToolSchema, TurnSpec

if TYPE_CHECKING:
    from archmax_temporal.client.agent import AgentOptions


class Agent:
    """One workflow of an authoring root, bound to a Temporal client."""

    def __init__(
        self,
        runtime: Runtime,
        loaded: LoadedWorkflow | None,
        *,
        session_path: str | None = None,
        requests_per_run: int | None = None,
        model_calls_per_run: int | None = None,
    ) -> None:
        self.requests_per_run = requests_per_run
        self.model_calls_per_run = model_calls_per_run
        self.host_tools: list[ToolSchema] = []
        self.delegates: dict[str, DelegateSpec] = (
            load_delegates(runtime.config.root, loaded) if loaded is not None else {}
        )
        """The callable workflows, pinned into every session this agent starts."""
        self._turn_spec: TurnSpec | None = None
        if session_path is not None:
            parsed_session_path(session_path)
        self._runtime = runtime
        self._loaded = loaded
        self.session_path = session_path
        self.workflow = WorkflowSurface(self)
        self.sessions = SessionsSurface(self)

    @property
    def client(self) -> Client:
        """The Temporal client."""
        return self._runtime.client

    @property
    def config(self) -> RuntimeConfig:
        """Where this agent runs."""
        return self._runtime.config

    @property
    def runtime(self) -> Runtime:
        """The connection and whatever the agent started (dev server, worker)."""
        return self._runtime

    @property
    def loaded(self) -> LoadedWorkflow:
        """The workflow this agent fires into (required for send)."""
        if self._loaded is None:
            raise ValueError("this agent was created without a workflow; pass workflow=...")
        return self._loaded

    @property
    def turn_spec(self) -> TurnSpec:
        """The workflow as this agent loaded it, as a turn it opens runs under (spec, prose,
        hooks, callees, and the revision digesting them)."""
        if self._turn_spec is None:
            self._turn_spec = turn_spec(self.loaded, self.delegates)
        return self._turn_spec

    def reload(self) -> None:
        """Load the workflow again from the authoring root: the next turn this agent opens,
        on a new session or an existing one, runs under workflow.yaml as it is now. A
        parked session still resumes under the spec it parked with."""
        if self._loaded is None:
            raise ValueError("this agent was created without a workflow; pass workflow=...")
        root = self._runtime.config.root
        self._loaded = load_workflow(root, self._loaded.slug)
        self.delegates = load_delegates(root, self._loaded)
        self._turn_spec = None

    def handle(self, session_id: str) -> WorkflowHandle[Any, Any]:
        """The Temporal handle of a session (its workflow id is the session id)."""
        return self.client.get_workflow_handle(check_session_id(session_id))

    async def close(self) -> None:
        """Stop the in-process worker, if the agent runs one."""
        await self._runtime.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


async def open_agent(workflow: str | None, options: AgentOptions) -> Agent:
    """Open an agent: load the workflow, connect, start what is needed (see
    :func:`archmax_temporal.client.agent.create_agent`, whose keyword arguments ``options``
    holds)."""
    resolved = options.config or RuntimeConfig.from_env(root=options.root)
    loaded = load_workflow(resolved.root, workflow) if workflow else None
    registered = as_host_tools(options.tools)
    runtime = await open_runtime(
        resolved,
        model=options.model,
        worker_mode=options.worker,
        client=options.client,
        worker_cache=options.worker_cache,
        host_tools=registered,
        hook_executors=check_executors(options.hook_executors or {}),
        sandbox_runtime=options.sandbox_runtime,
    )
    agent = Agent(
        runtime,
        loaded,
        session_path=options.session_path,
        requests_per_run=options.requests_per_run,
        model_calls_per_run=options.model_calls_per_run,
    )
    agent.host_tools = [tool.schema() for tool in registered]
    return agent
