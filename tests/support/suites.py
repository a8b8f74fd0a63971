"""An example's or a test's case suite run by ``run_tests`` against a session on the suite's dev
server, with a scripted model and a cache-less worker (every task replays)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.results import RunTestsResult
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from tests.support.agents import Scripted, model_config, running_agent


async def run_suite(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    root: Path,
    workflow: str,
    playbook: str | Path,
    *,
    tools: Sequence[Any] = (),
    **kwargs: Any,
) -> tuple[RunTestsResult, ScriptedModelServer]:
    """``run_tests`` of ``workflow`` under ``root`` (``kwargs``: its filters and options), each
    case on an agent bound to the test's server and queue; with the model server it talked
    to, for the calls it received."""
    server = scripted(playbook)
    async with running_agent(client, task_queue, root, workflow, server, tools=tools) as agent:

        async def target(_workflow: str, _root: Path) -> Agent:
            return agent

        result = await run_tests(
            workflow, root, create_target=target, model=model_config(server), **kwargs
        )
    return result, server
