"""``create_agent(...)``: the host's one entry point.

::

    async with create_agent("support-inbox", root="examples/support-inbox") as agent:
        outcome = await agent.workflow.send(None, "About my order", trigger="email_received")

``create_agent`` returns an opener: ``async with`` it (the agent is closed on the way out, which
stops a worker it started), or ``await`` it for an :class:`~archmax_temporal.client.host.Agent`
you close yourself. This module imports nothing of the runtime: Temporal, pydantic and the
workflow are loaded when the agent opens, so ``from archmax_temporal import create_agent`` is
quick.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from archmax_temporal.activities.hook_executors import HookExecutor
    from archmax_temporal.activities.host_tools import HostTool
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.host import Agent


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """What :func:`create_agent` is told besides the workflow: its keyword parameters, each
    with its default, in one place (the opener carries them to
    :func:`~archmax_temporal.client.host.open_agent`). ``create_agent``'s signature names the
    same parameters for its users; ``tests/client/test_agent.py`` holds the two equal."""

    root: Path | str | None = None
    config: RuntimeConfig | None = None
    client: Client | None = None
    model: ModelConfig | None = None
    session_path: str | None = None
    worker: str | None = None
    worker_cache: int = 1000
    requests_per_run: int | None = None
    model_calls_per_run: int | None = None
    tools: Sequence[HostTool | Callable[[Any], Any]] = ()
    hook_executors: Mapping[str, HookExecutor] | None = None
    sandbox_runtime: Sequence[str] | None = None


class AgentOpener:
    """What :func:`create_agent` returns: awaitable (the agent) and an async context manager
    (the agent, closed on exit)."""

    def __init__(self, workflow: str | None, options: AgentOptions) -> None:
        self._workflow = workflow
        self._options = options
        self._agent: Agent | None = None

    async def _open(self) -> Agent:
        from archmax_temporal.client.host import open_agent

        return await open_agent(self._workflow, self._options)

    def __await__(self) -> Generator[Any, None, Agent]:
        return self._open().__await__()

    async def __aenter__(self) -> Agent:
        self._agent = await self._open()
        return self._agent

    async def __aexit__(self, *_: object) -> None:
        agent, self._agent = self._agent, None
        if agent is not None:
            await agent.close()


def create_agent(
    workflow: str | None = None,
    *,
    root: Path | str | None = None,
    config: RuntimeConfig | None = None,
    client: Client | None = None,
    model: ModelConfig | None = None,
    session_path: str | None = None,
    worker: str | None = None,
    worker_cache: int = 1000,
    requests_per_run: int | None = None,
    model_calls_per_run: int | None = None,
    tools: Sequence[HostTool | Callable[[Any], Any]] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    sandbox_runtime: Sequence[str] | None = None,
) -> AgentOpener:
    """An agent for ``workflows/<workflow>/`` of the authoring root.

    With no ``client``, it connects to ``TEMPORAL_ADDRESS`` or, with nothing configured, finds or
    starts the embedded dev server. ``worker`` chooses the in-process worker: ``auto`` (only when
    none polls the task queue), ``inprocess`` or ``external``. ``tools`` registers typed
    Python callables (one pydantic-model parameter) as host tools: closed by default, a state
    grants them with ``tools.allow``; they run on the in-process worker, or on yours built
    with ``build_worker(host_tools=...)``. ``hook_executors`` maps a custom hook kind the
    spec declares in ``extensions.hooks`` to ``executor(config, args)``, run on the worker
    (yours: ``build_worker(hook_executors=...)``). ``model_calls_per_run`` makes
    them continue as new mid-turn after that many model calls (Temporal suggests it on its
    own when a history grows long). ``requests_per_run`` makes new sessions
    continue as new after that many firings (Temporal may suggest it sooner).
    ``sandbox_runtime`` is the command line that starts the in-process worker's sandbox
    process for hooks and scripts (see :func:`archmax_temporal.worker.build_worker`).

    ``async with create_agent(...) as agent:`` closes the agent on the way out (stopping a
    worker it started); ``agent = await create_agent(...)`` leaves closing to you.
    """
    # the parameters as called, every one but the workflow: AgentOptions' fields, one for one
    options = {name: value for name, value in locals().items() if name != "workflow"}
    return AgentOpener(workflow, AgentOptions(**options))
