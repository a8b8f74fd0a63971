"""Peer (c) of bench.history: pydantic-ai's Temporal durability, one tool, the scripted model.

An ``Agent`` with the ``TemporalDurability`` capability (``pydantic_ai.durable_exec.temporal``)
and one function tool, ``read_file(file_path)``, returning the chain file's text numbered as
archmax's ``read_file`` numbers it. The model is ``OpenAIChatModel`` through the OpenAI
provider, pointed at the scripted model by :func:`configure` (the agent must live at module
level: the workflow sandbox re-imports this module, and the model's activity runs the
worker-side agent). Each run is one workflow, ``PydanticAIChain``, running ``agent.run`` with
no request limit.

Needs the ``bench`` extra (``pip install -e '.[bench]'``); bench.history reports "n/a" without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The bench extra is optional: without it mypy sees these modules as Any (and bench.history
# reports this peer "n/a"), hence the ignores.
with workflow.unsafe.imports_passed_through():
    import openai
    from pydantic_ai import Agent  # type: ignore[import-not-found,unused-ignore]
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, TemporalDurability  # type: ignore[import-not-found,unused-ignore]
    from pydantic_ai.models.openai import OpenAIChatModel  # type: ignore[import-not-found,unused-ignore]
    from pydantic_ai.providers.openai import OpenAIProvider  # type: ignore[import-not-found,unused-ignore]
    from pydantic_ai.usage import UsageLimits  # type: ignore[import-not-found,unused-ignore]

    from bench.history_bare import numbered

NAME = "pydantic-ai (TemporalDurability)"

_chain_dir: list[Path] = []
"""Where ``read_file`` reads (set by :func:`configure`, read in the tool's activity)."""

_openai = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-bench-not-a-secret")


def read_file(file_path: str) -> str:
    """Read a text file of the workspace; returns it with line numbers."""
    name = file_path.removeprefix("scratchpad/")
    return numbered((_chain_dir[0] / name).read_text(encoding="utf-8"))


AGENT: Any = Agent(
    OpenAIChatModel("scripted", provider=OpenAIProvider(openai_client=_openai)),
    name="bench_history",
    instructions="Follow the chain of files the message starts with read_file, then answer.",
    tools=[read_file],
    capabilities=[TemporalDurability()],
)


@workflow.defn(name="BenchHistoryPydanticAI")
class PydanticAIChain:
    """One agent run: the prompt names the chain's first file."""

    __pydantic_ai_agents__ = (AGENT,)

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await AGENT.run(prompt, usage_limits=UsageLimits(request_limit=None))
        return str(result.output)


def configure(model_url: str, chain_dir: Path) -> None:
    """Point the worker-side model at the scripted model and the tool at the chain files."""
    _openai.base_url = model_url  # type: ignore[assignment,unused-ignore]
    _chain_dir[:] = [chain_dir]


def client_for(client: Client) -> Client:
    """A client on the same connection with pydantic-ai's plugin (its payload converter)."""
    return Client(client.service_client, namespace=client.namespace, plugins=[PydanticAIPlugin()])


def worker(client: Client, task_queue: str, cache: int) -> Worker:
    """A worker for :class:`PydanticAIChain` (``client`` from :func:`client_for`)."""
    return Worker(
        client, task_queue=task_queue, workflows=[PydanticAIChain], max_cached_workflows=cache
    )
