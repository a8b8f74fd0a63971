"""Determinism: recorded session histories replay against the current workflow code.

A golden history in ``tests/histories/`` guards sessions already in flight: a change to the
order of commands that is not behind ``workflow.patched`` fails here before it reaches them.
"""

from __future__ import annotations

import os
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.conftest import EXAMPLES, running_agent
from worker import workflow_runner
from workflows.session import ArchmaxSession

HISTORIES = Path(__file__).parent / "histories"
GOLDEN = HISTORIES / "support-inbox-park-deliver.json"
ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"


def _replayer() -> Replayer:
    return Replayer(
        workflows=[ArchmaxSession],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )


async def test_a_fresh_park_and_deliver_history_replays(client, task_queue, scripted, tmp_path):
    """A session that parked, was delivered to and answered replays without divergence."""
    server = scripted(PLAYBOOK)
    async with running_agent(
        client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
    ) as agent:
        await agent.workflow.send(
            None,
            "About my order",
            trigger="email_received",
            variables={"conversation_id": "replay-1"},
        )
        await agent.workflow.deliver(
            "replay-1", trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
        )
        history = await agent.handle("replay-1").fetch_history()
    if os.environ.get("ARCHMAX_RECORD_HISTORIES"):
        GOLDEN.write_text(history.to_json())
    result = await _replayer().replay_workflow(history)
    assert result.replay_failure is None


async def test_the_golden_history_replays():
    """The committed history of an earlier version still replays on this code."""
    history = WorkflowHistory.from_json("replay-1", GOLDEN.read_text())
    assert len(history.events) > 20
    result = await _replayer().replay_workflow(history)
    assert result.replay_failure is None
