"""A timed ``archmax_wait`` wakes the session itself: a many-day durable timer, proven on
Temporal's time-skipping test server (a 3-day timer fires in milliseconds).

The test server implements no operator service, so custom search attributes cannot be
registered on it: these sessions run with ``search_attributes=False``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.workflows.models import PendingInput
from tests.support.agents import Scripted, running_agent, write_workflow

BANK = """
title: Bank check
states:
  check-bank:
    triggers: { manual: }
    instructions: Look for the transaction; wait a day and retry if it has not posted.
    transitions:
      - { to: reconcile, description: The transaction was found. }
  reconcile:
    instructions: Confirm the reconciliation.
"""

PLAYBOOK = {
    "rules": [
        {
            "name": "woken-by-the-timer",
            "when": {
                "state": "check-bank",
                "last_tool": "archmax_note",
                "last_tool_result": "/trigger 'timer'/",
            },
            "reply": {
                "tool_calls": [{"name": "archmax_advance", "arguments": {"to": "reconcile"}}]
            },
        },
        {
            "name": "wait-three-days",
            "when": {"state": "check-bank"},
            "reply": {
                "content": "Not posted yet; I will look again in three days.",
                "tool_calls": [
                    {"name": "archmax_wait", "arguments": {"reason": "posting", "until": "3d"}}
                ],
            },
        },
        {"when": {"state": "reconcile"}, "reply": {"content": "Reconciled."}},
    ]
}


async def test_a_three_day_wait_wakes_itself_with_trigger_timer(
    skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """When resume_at passes, the session delivers itself trigger `timer` with variable `now`
    and continues in the parked state."""
    write_workflow(tmp_path, "bank", BANK)
    server = scripted(json.dumps(PLAYBOOK))
    client = skipping_env.client
    async with running_agent(
        client, task_queue, tmp_path, "bank", server, search_attributes=False
    ) as agent:
        parked = await agent.workflow.send("timed-1", "Has the payment posted?")
        assert parked.kind == "parked"
        assert isinstance(parked.pending, PendingInput) and parked.pending.resume_at is not None
        assert parked.pending.resume_at - parked.pending.parked_at == timedelta(days=3)
        await skipping_env.sleep(timedelta(days=3, minutes=1))
        summary = await agent.sessions.get("timed-1")
        view = await agent.sessions.view("timed-1")
        history = await agent.handle("timed-1").fetch_history()
    assert summary.status == "completed"
    assert summary.state == "reconcile"
    assert summary.variables["trigger"].value == "timer"
    now = summary.variables["now"]
    assert now.locked
    assert str(now.value) >= parked.pending.resume_at.isoformat()[:16]
    assert [(s.kind, s.reason) for s in view.trail] == [
        ("trigger", "manual"),
        ("trigger", "timer"),
        ("agent", None),
    ]
    timers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert len(timers) == 1
    assert [r.rule for r in server.requests] == [
        "wait-three-days",
        "woken-by-the-timer",
        "rules[2]",
    ]


async def test_a_delivery_before_resume_at_wins_and_the_timer_never_fires(
    skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """resume_at is advice: an event arriving first resumes the session, and the cancelled
    timer does not wake it a second time."""
    write_workflow(tmp_path, "bank", BANK)
    server = scripted(json.dumps(PLAYBOOK))
    client = skipping_env.client
    async with running_agent(
        client,
        task_queue,
        tmp_path,
        "bank",
        server,
        search_attributes=False,
        idle_close=None,  # only the parks' timers in this history
    ) as agent:
        await agent.workflow.send("timed-2", "Has the payment posted?")
        resumed = await agent.workflow.deliver("timed-2", trigger="bank_webhook")
        await skipping_env.sleep(timedelta(days=4))
        summary = await agent.sessions.get("timed-2")
        history = await agent.handle("timed-2").fetch_history()
    assert resumed.kind == "parked"  # a non-timer arrival: the playbook waits again
    fired = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    cancelled = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_TIMER_CANCELED]
    assert len(cancelled) == 1  # the delivery won; the first park's timer was cancelled
    assert len(fired) == 1  # only the second park's timer fired
    assert summary.status == "completed"
    assert summary.variables["trigger"].value == "timer"


LEDGER = """
title: Ledger
states:
  ledger:
    triggers: { manual: }
    skills: { allow: [ledger] }
    instructions: Run the reconciliation script.
    tools:
      allow:
        - { tool: archmax_run, paths: ["skills/ledger/scripts/**"] }
        - archmax_workflow_bank
"""

RECONCILE_JS = """export default async ({ tools }) => {
  const bank = await tools.archmaxWorkflowBank({});
  return { bank };
};
"""


async def test_a_scripts_sub_workflow_that_waits_days_wakes_and_the_script_runs_on(
    skipping_env: WorkflowEnvironment, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """A script dispatches the bank check, which parks on a 3-day timer: the caller parks
    with it, the child wakes itself three days on, and its answer resumes the script."""
    write_workflow(tmp_path, "bank", BANK)
    write_workflow(tmp_path, "ledger", LEDGER)
    skill = tmp_path / "skills" / "ledger"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: ledger\ndescription: Reconciliation.\n---\n")
    (skill / "scripts" / "reconcile.js").write_text(RECONCILE_JS)
    run = {"file_path": "skills/ledger/scripts/reconcile.js"}
    rules = [
        {"when": {"state": "ledger", "last_tool": "archmax_run"}, "reply": {"content": "Done."}},
        {
            "when": {"state": "ledger", "any_message": "/answers the pending call/"},
            "reply": {"content": "Done."},
        },
        {
            "when": {"state": "ledger"},
            "reply": {"tool_calls": [{"name": "archmax_run", "arguments": run}]},
        },
        *PLAYBOOK["rules"],
    ]
    server = scripted(json.dumps({"rules": rules}))
    async with running_agent(
        skipping_env.client, task_queue, tmp_path, "ledger", server, search_attributes=False
    ) as agent:
        parked = await agent.workflow.send("ledger-1", "Reconcile the ledger.")
        await skipping_env.sleep(timedelta(days=3, minutes=1))
        summary = await agent.sessions.get("ledger-1")
        view = await agent.sessions.view("ledger-1")
        child = await agent.sessions.get("ledger-1.bank-1")
    assert parked.kind == "parked" and parked.delegation is not None
    assert parked.delegation.session_id == "ledger-1.bank-1"
    assert child.status == "completed" and child.variables["trigger"].value == "timer"
    assert summary.status == "completed"
    [answer] = [m for m in view.transcript if m.role == "tool" and m.name == "archmax_run"]
    assert json.loads(answer.content or "") == {"bank": "Reconciled."}
