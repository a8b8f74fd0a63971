"""A firing that reaches a session while its workflow task is failing (a worker starved past
Temporal's deadlock detection, or a bad deployment) is not refused with the server's raw
``RPCError``: the host waits, as it waits out an unavailable server, and the firing goes on
once a working worker runs the task."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from archmax_temporal.client.runtime import translate
from archmax_temporal.workflows import contracts
from archmax_temporal.workflows.errors import SessionUnavailableError
from tests.support.agents import Scripted, running_agent, write_workflow

SIMPLE = """
title: Simple
states:
  answer:
    triggers: { manual: {} }
    instructions: Answer.
"""


@workflow.defn(name=contracts.WORKFLOW_NAME, sandboxed=False)
class BrokenSession:
    """A deployment whose session workflow fails every task it is given."""

    @workflow.run
    async def run(self, *_args: object) -> None:
        raise RuntimeError("this worker cannot run sessions")


async def test_a_firing_while_the_workflow_task_fails_waits_and_goes_on_once_fixed(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    write_workflow(tmp_path, "simple", SIMPLE)
    server = scripted(json.dumps({"rules": [{"reply": {"content": "The answer."}}]}))
    sid = f"failing-task-{uuid.uuid4().hex[:8]}"
    async with running_agent(client, task_queue, tmp_path, "simple", server) as agent:
        first = await agent.workflow.send(sid, "hello")
    assert first.reply == "The answer."

    handle = client.get_workflow_handle(sid)
    async with (
        running_agent(client, task_queue, tmp_path, "simple", server, worker=False) as agent,
        Worker(client, task_queue=task_queue, workflows=[BrokenSession]),
    ):
        await handle.signal("archmax-poke-from-test")  # a task the broken worker fails
        deadline = asyncio.get_running_loop().time() + 60
        while True:  # until the server counts a failed attempt of the task
            described = await handle.describe()
            raw = described.raw_description.pending_workflow_task
            if raw.attempt >= 4:
                break
            assert asyncio.get_running_loop().time() < deadline, "the task never failed"
            await asyncio.sleep(0.1)
        turn = asyncio.ensure_future(agent.workflow.send(sid, "again"))
        await asyncio.sleep(1)  # the firing meets the failing task, and waits
        assert not turn.done(), turn.exception() if turn.done() else None
    # the broken worker is gone; a working one takes the task and the firing goes on
    async with running_agent(client, task_queue, tmp_path, "simple", server):
        outcome = await asyncio.wait_for(turn, timeout=90)
    assert (outcome.kind, outcome.reply) == ("completed", "The answer.")


def test_the_servers_refusal_while_a_task_fails_is_a_typed_error() -> None:
    """When the host's patience runs out (or on a path that does not wait), the refusal is
    ``SessionUnavailableError`` naming the session, never the raw ``RPCError``."""
    refusal = RPCError(
        "Unable to perform workflow execution update due to Workflow Task in failed state.",
        RPCStatusCode.FAILED_PRECONDITION,
        b"",
    )
    typed = translate(refusal, session_id="s-1")
    assert isinstance(typed, SessionUnavailableError)
    assert "'s-1'" in str(typed) and "workflow task keeps failing" in str(typed)
    other = RPCError("something else", RPCStatusCode.FAILED_PRECONDITION, b"")
    assert translate(other, session_id="s-1") is other
