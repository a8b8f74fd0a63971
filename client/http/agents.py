"""Where the server's agents come from.

The app asks an *agent factory* for the agent of a workflow slug (``None``: any agent, for the
routes that address a session by id). :class:`RootAgents` is the default: one Temporal
connection and one runtime for the whole server, and one :class:`Agent` per workflow of the
authoring root, loaded on first use. A host mounting the app in its own ASGI application can
pass any ``async (slug | None) -> Agent`` instead, e.g. ``lambda slug: create_agent(slug, ...)``
(the app keeps each agent it is given and closes it with the app).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio.client import Client

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.host import Agent
from archmax_temporal.client.loader import load_workflow, workflow_slugs
from archmax_temporal.client.runtime import Runtime, WorkerMode, open_runtime
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    TemporalUnavailableError,
    UnknownWorkflowError,
)

AgentFactory = Callable[[str | None], Awaitable[Agent]]
"""``await factory(slug)`` → the agent firing into ``workflows/<slug>/``; ``factory(None)`` → an
agent for session-addressed routes (it needs no workflow)."""


class RootAgents:
    """The default factory: every workflow of one authoring root over one runtime.

    The runtime opens on first use (connecting, and starting what ``worker`` asks for); when
    Temporal cannot be reached the call raises :class:`TemporalUnavailableError` and the next
    one tries again. A workflow is loaded on first use and again when its folder's files
    (workflow.yaml, WORKFLOW.md, hooks/) or AGENTS.md changed since: each new turn runs under
    the workflow as it is when the turn begins (a parked turn keeps the spec it parked with).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        *,
        worker: WorkerMode | None = None,
        client: Client | None = None,
        session_path: str | None = None,
        worker_cache: int = 1000,
    ) -> None:
        self.config = config
        self._worker = worker
        self._client = client
        self._session_path = session_path
        self._worker_cache = worker_cache
        self._runtime: Runtime | None = None
        self._agents: dict[str | None, Agent] = {}
        self._stamps: dict[str, tuple[tuple[str, int], ...]] = {}
        self._lock = asyncio.Lock()

    async def __call__(self, workflow: str | None) -> Agent:
        if workflow in self._agents:
            agent = self._agents[workflow]
            if workflow is None or self._stamps.get(workflow) == self._stamp(workflow):
                return agent
            async with self._lock:  # edited since it was loaded: load it again
                agent.reload()
                self._stamps[workflow] = self._stamp(workflow)
                return agent
        async with self._lock:
            if workflow in self._agents:
                return self._agents[workflow]
            runtime = await self._open()
            loaded = None
            if workflow is not None:
                known = workflow_slugs(self.config.root)
                if workflow not in known:
                    raise UnknownWorkflowError(
                        f"no workflow {workflow!r} (workflows: {', '.join(known) or '(none)'})"
                    )
                loaded = load_workflow(self.config.root, workflow)
            agent = Agent(runtime, loaded, session_path=self._session_path)
            self._agents[workflow] = agent
            if workflow is not None:
                self._stamps[workflow] = self._stamp(workflow)
            return agent

    def _stamp(self, workflow: str) -> tuple[tuple[str, int], ...]:
        """What the workflow's files look like (names and modification times): a change
        means an edit to load."""
        root = self.config.root
        folder = root / "workflows" / workflow
        files = [root / "AGENTS.md", *sorted(p for p in folder.rglob("*") if p.is_file())]
        stamped: list[tuple[str, int]] = []
        for path in files:
            if path.is_relative_to(folder / "tests"):
                continue  # cases are no part of the workflow a turn runs under
            try:
                stamped.append((str(path), path.stat().st_mtime_ns))
            except OSError:
                continue
        return tuple(stamped)

    async def _open(self) -> Runtime:
        if self._runtime is None:
            try:
                self._runtime = await open_runtime(
                    self.config,
                    worker_mode=self._worker,
                    client=self._client,
                    worker_cache=self._worker_cache,
                )
            except ArchmaxError:
                raise
            except Exception as exc:
                raise TemporalUnavailableError(
                    f"cannot reach Temporal at {self.config.address}: {exc}"
                ) from exc
        return self._runtime

    async def aclose(self) -> None:
        """Stop the in-process worker, if the runtime runs one."""
        runtime, self._runtime = self._runtime, None
        self._agents.clear()
        if runtime is not None:
            await runtime.close()
