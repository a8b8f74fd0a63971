"""Trigger signatures: typed requires at the firing, typed returns at the write and at
completion (pure checks, then the workflow on the real dev server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client

from archmax_temporal.workflows.errors import TriggerInputError, WorkflowDisabledError
from archmax_temporal.workflows.signatures import conforms
from tests.support.agents import Scripted, running_agent, write_workflow


class TestConforms:
    @pytest.mark.parametrize(
        ("value", "type_name", "expected"),
        [
            ("x", "string", True),
            (4, "integer", True),
            (4.0, "integer", True),
            ("4", "integer", False),
            (True, "integer", False),
            (4.5, "number", True),
            (float("inf"), "number", False),
            (False, "boolean", True),
            (0, "boolean", False),
            ("2026-02-28", "date", True),
            ("2026-02-30", "date", False),
            ("2026-12-02T09:00:00Z", "date-time", True),
            ("2026-12-02T09:00:00+01:00", "date-time", True),
            ("2026-12-02T09:00:00", "date-time", False),
            ({}, "object", True),
            ([], "object", False),
            ([1], "array", True),
            (None, "string", False),
            (None, None, True),
        ],
    )
    def test_each_type_takes_exactly_its_values(
        self, value: object, type_name: str | None, expected: bool
    ) -> None:
        """No coercion, and a typed entry never takes null."""
        assert conforms(value, type_name) is expected


REPORT = """
title: Report
states:
  compile:
    triggers:
      report_requested:
        requires:
          - { name: company, type: string }
          - { name: limit, type: integer }
          - note
        returns:
          - { name: total, type: number }
      manual:
  disabled-check:
    instructions: unused
"""


def _playbook(value: object) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "when": {"state": "compile", "last_tool": "archmax_set_variables"},
                    "reply": {"content": "done"},
                },
                {
                    "when": {"state": "compile"},
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "archmax_set_variables",
                                "arguments": {"variables": {"total": value}},
                            }
                        ]
                    },
                },
            ]
        }
    )


class TestSignaturesOnTheWorkflow:
    async def test_a_mistyped_required_input_is_refused_before_any_model_call(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """The refusal names the trigger, the variable, the type and what arrived."""
        write_workflow(tmp_path, "report", REPORT)
        server = scripted(_playbook(1.5))
        async with running_agent(client, task_queue, tmp_path, "report", server) as agent:
            with pytest.raises(TriggerInputError) as refused:
                await agent.workflow.send(
                    "typed-1",
                    "go",
                    trigger="report_requested",
                    variables={"company": "Acme", "limit": "4", "note": None},
                )
            with pytest.raises(TriggerInputError, match=r"'company'.*did not arrive"):
                await agent.workflow.send(
                    "typed-1b", "go", trigger="report_requested", variables={"limit": 4}
                )
        message = str(refused.value)
        assert "'report_requested'" in message and "'limit'" in message
        assert "integer" in message and "'4'" in message
        assert server.requests == []

    async def test_returns_are_checked_at_the_write_and_at_completion(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A mistyped return is a correctable refusal; completing without it rejects."""
        write_workflow(tmp_path, "report", REPORT)
        server = scripted(_playbook("lots"))
        variables = {"company": "Acme", "limit": 4, "note": None}
        async with running_agent(client, task_queue, tmp_path, "report", server) as agent:
            outcome = await agent.workflow.send(
                "typed-2", "go", trigger="report_requested", variables=variables
            )
            view = await agent.sessions.view("typed-2")
        refusal = next(m for m in view.transcript if m.name == "archmax_set_variables")
        assert refusal.status == "error" and "type number" in (refusal.content or "")
        assert outcome.kind == "rejected"
        assert outcome.rejected is not None
        assert "without setting 'total'" in outcome.rejected
        assert outcome.exit is None

    async def test_a_session_with_its_returns_completes(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """With the typed return set, the terminal state completes."""
        write_workflow(tmp_path, "report", REPORT)
        server = scripted(_playbook(412.5))
        variables = {"company": "Acme", "limit": 4, "note": "x"}
        async with running_agent(client, task_queue, tmp_path, "report", server) as agent:
            outcome = await agent.workflow.send(
                "typed-3", "go", trigger="report_requested", variables=variables
            )
        assert outcome.kind == "completed"
        assert outcome.variables["total"].value == 412.5

    async def test_a_disabled_workflow_starts_no_new_turn(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """disabled: true refuses a new turn through the API as well as the CLI."""
        write_workflow(tmp_path, "report", "disabled: true\n" + REPORT)
        server = scripted(_playbook(1))
        async with running_agent(client, task_queue, tmp_path, "report", server) as agent:
            with pytest.raises(WorkflowDisabledError, match="is disabled"):
                await agent.workflow.send("typed-4", "go")
        assert server.requests == []


DRAINING = """
states:
  wait-here:
    triggers: { manual: }
    instructions: Wait.
"""


async def test_a_workflow_disabled_after_a_park_still_drains_but_starts_no_new_turn(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """Disabling keeps parked sessions deliverable; the next new turn is refused."""
    directory = write_workflow(tmp_path, "drain", DRAINING)
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {"when": {"last_user": "answer"}, "reply": {"content": "resumed"}},
                    {
                        "when": {},
                        "reply": {
                            "content": "waiting",
                            "tool_calls": [{"name": "archmax_wait", "arguments": {"reason": "x"}}],
                        },
                    },
                ]
            }
        )
    )
    async with running_agent(client, task_queue, tmp_path, "drain", server) as agent:
        await agent.workflow.send("drain-1", "go")
    (directory / "workflow.yaml").write_text("disabled: true\n" + DRAINING)
    async with running_agent(client, task_queue, tmp_path, "drain", server) as agent:
        drained = await agent.workflow.send("drain-1", "here is the answer")
        with pytest.raises(WorkflowDisabledError):
            await agent.workflow.send("drain-1", "a new question")
    assert (drained.kind, drained.disposition) == ("completed", "deliver")
