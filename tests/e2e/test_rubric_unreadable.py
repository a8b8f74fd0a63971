"""A rubric's grader that answers no ``{"verdict", "reason"}`` JSON: the session vetoes with a
snippet of the reply (as archmax does), the ``rubric-result`` event names the failure, and the
agent's retries are bounded by the rubric's ``max_iterations`` (past them the turn fails), not
by ``maxTurns``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.workflows import hooks
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call

GRADED = """
title: Graded
states:
  reply:
    triggers: {{ manual: }}
    budget: {{ maxTurns: 20 }}
    after:
      rubric: {{ instructions: "The reply must be polite."{budget} }}
    transitions:
      - {{ to: done, description: Replied. }}
  done:
    instructions: Say goodbye.
"""

UNREADABLE = "Looks polite enough to me, I would let it through."


def _playbook() -> str:
    return json.dumps(
        {
            "rules": [
                {"when": {"any_message": "strict grader"}, "reply": {"content": UNREADABLE}},
                {
                    "when": {"state": "reply"},
                    "reply": {"tool_calls": [call("archmax_advance", to="done", reason="ok")]},
                },
                {"when": {"state": "done"}, "reply": {"content": "Goodbye."}},
            ]
        }
    )


class TestTheVerdict:
    def test_an_unreadable_reply_is_a_named_veto_with_a_snippet(self) -> None:
        verdict = hooks.rubric_verdict(UNREADABLE)
        assert (verdict.verdict, verdict.unreadable, verdict.error) == ("veto", True, False)
        assert verdict.reason == (
            "unreadable-verdict: the rubric's grader gave no verdict: " + UNREADABLE
        )

    def test_a_readable_reply_is_not_marked(self) -> None:
        verdict = hooks.rubric_verdict('{"verdict": "veto", "reason": "rude"}')
        assert (verdict.verdict, verdict.reason, verdict.unreadable) == ("veto", "rude", False)


@pytest.mark.parametrize(("budget", "graded"), [("", 1), (", max_iterations: 2", 3)])
async def test_retries_are_bounded_by_the_rubrics_budget_and_the_event_names_the_failure(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    budget: str,
    graded: int,
) -> None:
    """With ``max_iterations: n`` the agent is refused n times, then the turn fails: the
    grader is asked n + 1 times, never up to ``maxTurns``."""
    write_workflow(tmp_path, "graded", GRADED.format(budget=budget))
    server = scripted(_playbook())
    sid = f"graded-{graded}-{uuid.uuid4().hex[:8]}"  # the suite shares one server
    async with running_agent(client, task_queue, tmp_path, "graded", server) as agent:
        outcome = await agent.workflow.send(sid, "Hi")
        events = [e async for e in agent.sessions.events(sid)]
    results = [e for e in events if e.type == "rubric-result"]
    assert len(results) == graded
    assert results[0].level == "warn"
    assert results[0].data == {
        "phase": "after",
        "state": "reply",
        "hook": "rubric#0",
        "verdict": "veto",
        "reason": f"unreadable-verdict: the rubric's grader gave no verdict: {UNREADABLE}",
        "failure": "unreadable-verdict",
    }
    grader_calls = [r for r in server.requests if "strict grader" in json.dumps(r.body)]
    assert len(grader_calls) == graded
    assert len(server.requests) == 2 * graded  # one agent call per grading, no more
    assert outcome.status in ("failed", "rejected") and outcome.state == "reply"
    assert "corrections exhausted for after hook rubric#0" in (outcome.rejected or outcome.reply)
    print("rubric-result:", json.dumps(results[-1].model_dump(mode="json", by_alias=True)))
