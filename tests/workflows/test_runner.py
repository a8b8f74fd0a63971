"""How the session workflow is run: unsandboxed by every worker and replayer, and in
Temporal's sandbox, with archmax's workflow code inside it, by CI's replays
(``tests/e2e/test_replay.py``). A sandbox checks only the code it imports for each run; these
tests hold that the checking one does import archmax's and refuses a clock read made through
it, which is what the replays rely on."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.worker import Worker, WorkflowRunner

from archmax_temporal.worker import PASSTHROUGH_MODULES, checking_runner, workflow_runner
from archmax_temporal.workflows import deadlines
from tests.support.runner_probe import RunnerProbe


async def probe(client: Client, task_queue: str, runner: WorkflowRunner) -> list[str]:
    async with Worker(
        client, task_queue=task_queue, workflows=[RunnerProbe], workflow_runner=runner
    ):
        return await client.execute_workflow(
            RunnerProbe.run, id(deadlines), id=f"probe-{uuid.uuid4().hex}", task_queue=task_queue
        )


async def test_the_checking_sandbox_imports_archmax_code_and_refuses_the_clock(
    client: Client, task_queue: str
) -> None:
    assert await probe(client, task_queue, checking_runner()) == [
        "imported for the run",
        "clock refused",
    ]
    assert not any(name.startswith("archmax_temporal") for name in PASSTHROUGH_MODULES)


async def test_the_worker_runs_the_workflow_code_it_imported(
    client: Client, task_queue: str
) -> None:
    """No copy per run: one module, one table of shared spec parts for every cached session."""
    assert await probe(client, task_queue, workflow_runner()) == ["shared module", "clock read"]
