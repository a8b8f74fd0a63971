"""Peer (d) of bench.history: Temporal's OpenAI Agents integration, one tool, the scripted model.

``temporalio.contrib.openai_agents`` (now forwarding to the ``temporalio-openai-agents``
package): ``OpenAIAgentsPlugin`` on the client, with a model provider that speaks Chat
Completions to the scripted model (``OpenAIProvider(use_responses=False)``); the agent's one
tool, ``read_file(file_path)``, is an activity made a tool by ``activity_as_tool``, returning
the chain file's text numbered as archmax's ``read_file`` numbers it. Each run is one
workflow, ``OpenAIAgentsChain``, running ``Runner.run`` with room for every step.

Needs the ``bench`` extra (``pip install -e '.[bench]'``); bench.history reports "n/a" without.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # nothing leaves this machine

# The bench extra is optional: without it mypy sees these modules as Any (and bench.history
# reports this peer "n/a"), hence the ignores.
with workflow.unsafe.imports_passed_through():
    import openai
    from agents import Agent, Runner, set_tracing_disabled  # type: ignore[import-not-found,unused-ignore]
    from agents.models.openai_provider import (  # type: ignore[import-not-found,unused-ignore]
        OpenAIProvider,
    )
    from temporalio.contrib.openai_agents import (  # type: ignore[attr-defined,unused-ignore]
        ModelActivityParameters,
        OpenAIAgentsPlugin,
    )
    from temporalio.contrib.openai_agents.workflow import (  # type: ignore[attr-defined,unused-ignore]
        activity_as_tool,
    )

    from bench.history_bare import numbered

NAME = "openai-agents (temporalio.contrib)"
TOOL_TIMEOUT = timedelta(seconds=60)
INSTRUCTIONS = "Follow the chain of files the message starts with read_file, then answer."

_chain_dir: list[Path] = []


@activity.defn(name="read_file")
async def read_file(file_path: str) -> str:
    """Read a text file of the workspace; returns it with line numbers."""
    name = file_path.removeprefix("scratchpad/")
    return numbered((_chain_dir[0] / name).read_text(encoding="utf-8"))


@workflow.defn(name="BenchHistoryOpenAIAgents")
class OpenAIAgentsChain:
    """One ``Runner.run``: the prompt names the chain's first file."""

    @workflow.run
    async def run(self, prompt: str, max_turns: int) -> str:
        agent = Agent(
            name="bench_history",
            instructions=INSTRUCTIONS,
            model="scripted",
            tools=[activity_as_tool(read_file, start_to_close_timeout=TOOL_TIMEOUT)],
        )
        result = await Runner.run(agent, prompt, max_turns=max_turns)
        return str(result.final_output)


def configure(chain_dir: Path) -> None:
    """Point the tool at the chain files."""
    _chain_dir[:] = [chain_dir]
    set_tracing_disabled(True)


def client_for(client: Client, model_url: str) -> Client:
    """A client on the same connection with the integration's plugin, whose model activity
    calls the scripted model through Chat Completions."""
    provider = OpenAIProvider(
        openai_client=openai.AsyncOpenAI(base_url=model_url, api_key="sk-bench-not-a-secret"),
        use_responses=False,
    )
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=provider,
    )
    return Client(client.service_client, namespace=client.namespace, plugins=[plugin])


def worker(client: Client, task_queue: str, cache: int) -> Worker:
    """A worker for :class:`OpenAIAgentsChain` and its tool (``client`` from
    :func:`client_for`)."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[OpenAIAgentsChain],
        activities=[read_file],
        max_cached_workflows=cache,
    )
