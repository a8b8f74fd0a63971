"""Determinism: recorded session histories replay against the current workflow code.

A golden history in ``tests/histories/`` guards sessions already in flight: a change to the
order of commands that is not behind ``workflow.patched`` fails here before it reaches them.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from archmax_temporal.client.host import Agent
from archmax_temporal.client.testing.runner import run_tests
from archmax_temporal.worker import DATA_CONVERTER, workflow_runner
from archmax_temporal.workflows.session import ArchmaxSession
from tests.conftest import EXAMPLES, Scripted, copy_example, model_config, running_agent

HISTORIES = Path(__file__).parent / "histories"
GOLDEN = HISTORIES / "support-inbox-park-deliver.json"
ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"


def _replayer() -> Replayer:
    return Replayer(
        workflows=[ArchmaxSession],
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(),
    )


async def test_a_fresh_park_and_deliver_history_replays(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
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


async def test_the_golden_history_replays() -> None:
    """The committed history of an earlier version still replays on this code."""
    history = WorkflowHistory.from_json("replay-1", GOLDEN.read_text())
    assert len(history.events) > 20
    result = await _replayer().replay_workflow(history)
    assert result.replay_failure is None


# --- hooks, scripts and their sub-workflow calls -------------------------------------------

SUPPORT = "customer-support"
GOLDEN_CASES = {
    # before hooks vetoing at entry, a grade by the judge
    "cross-company-veto": HISTORIES / "order-lookup-cross-company-veto.json",
    # archmax_run whose script dispatches two mocked sub-workflow calls, journal replayed
    "enrichment-fan-out": HISTORIES / "order-lookup-enrichment-fan-out.json",
}


async def test_fresh_hook_and_script_histories_replay(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Sessions that ran hooks and a script's sub-workflow calls replay without divergence."""
    root = copy_example(SUPPORT, tmp_path)
    server = scripted(root / "workflows" / "order-lookup" / "playbook.yaml")
    run = uuid.uuid4().hex[:8]
    async with running_agent(client, task_queue, root, "order-lookup", server) as agent:

        async def target(_workflow: str, _root: Path) -> Agent:
            return agent

        for case, golden in GOLDEN_CASES.items():
            result = await run_tests(
                "order-lookup",
                root,
                filter=case,
                create_target=target,
                model=model_config(server),
                session_id_for_case=lambda c: f"golden-{run}-{c.id}",
            )
            assert [r.verdict.status for r in result.results] == ["passed"]
            history = await agent.handle(f"golden-{run}-{case}").fetch_history()
            if os.environ.get("ARCHMAX_RECORD_HISTORIES"):
                golden.write_text(history.to_json())
            replayed = await _replayer().replay_workflow(history)
            assert replayed.replay_failure is None, case


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
async def test_the_golden_hook_and_script_histories_replay(case: str) -> None:
    """Committed histories of hook vetoes and a script's sub-workflow calls still replay."""
    text = GOLDEN_CASES[case].read_text()
    history = WorkflowHistory.from_json(f"golden-{case}", text)
    result = await _replayer().replay_workflow(history)
    assert result.replay_failure is None
