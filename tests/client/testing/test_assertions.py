"""Each assertion kind of the case format, passing and failing, against a recorded session
view: the step is parsed from case YAML exactly as an author writes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar, TypedDict

import pytest

from archmax_temporal.client.testing import assertions
from archmax_temporal.client.testing.assertions import TurnView
from archmax_temporal.client.testing.cases import parse_case
from archmax_temporal.client.testing.results import AssertionRecord
from archmax_temporal.client.testing.steps import CaseStep
from archmax_temporal.workflows.models import (
    Message,
    PendingDecision,
    PendingDelegation,
    PendingInput,
    SessionExit,
    SessionSummary,
    SessionView,
    ToolCall,
    TrailStep,
    Variable,
)

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def step(yaml_step: str) -> CaseStep:
    """The one assertion after a ``send`` in a case document."""
    document = parse_case(
        "t.test.yaml",
        f"title: t\ndescription: d\nsteps:\n  - send: hi\n  - {yaml_step}\n",
    )
    return document.steps[1]


def call(
    name: str, status: str | None = "ok", call_id: str | None = None, **arguments: Any
) -> list[Message]:
    cid = call_id or f"c{abs(hash((name, json.dumps(arguments, sort_keys=True)))) % 10**8}"
    messages = [
        Message(
            role="assistant",
            tool_calls=[ToolCall(id=cid, name=name, arguments=json.dumps(arguments))],
        )
    ]
    if status is not None:
        messages.append(
            Message(role="tool", tool_call_id=cid, name=name, content="r", status=status)
        )
    return messages


def say(text: str) -> Message:
    return Message(role="assistant", content=text)


def trail(*steps: tuple[str, str, str | None]) -> list[TrailStep]:
    return [TrailStep(kind=kind, to=to, reason=reason, ts=NOW) for kind, to, reason in steps]


def turn(
    *,
    status: str = "completed",
    transcript: list[Message] | None = None,
    steps: list[TrailStep] | None = None,
    variables: dict[str, Variable] | None = None,
    turn_start: int = 0,
    **summary: Any,
) -> TurnView:
    view = SessionView(
        summary=SessionSummary(
            session_id="s",
            workflow="w",
            status=status,
            classification="open" if status.startswith("awaiting") else "finished",
            spec_hash="h",
            variables=variables or {},
            **summary,
        ),
        transcript=transcript or [],
        trail=steps or [],
    )
    return TurnView(view=view, turn_start=turn_start)


def outcome(records: list[AssertionRecord]) -> list[str]:
    return [r.status for r in records]


def evaluate(yaml_step: str, view: TurnView) -> list[str]:
    return outcome(assertions.evaluate(step(yaml_step), view))


def detail(yaml_step: str, view: TurnView) -> str:
    records = assertions.evaluate(step(yaml_step), view)
    return "; ".join(r.detail or "" for r in records)


INPUT_PARK = PendingInput(state="clarify", reason="order id", parked_at=NOW)
DECISION_PARK = PendingDecision(state="review", seq=1, transitions=[], created_at=NOW)


class Park(TypedDict, total=False):
    """The park fields of a session summary, as ``turn(**park)`` takes them."""

    pending_input: PendingInput
    pending_decision: PendingDecision


class TestSucceeded:
    def test_a_completed_turn_passes(self) -> None:
        assert evaluate("succeeded: true", turn(transcript=[say("done")])) == ["passed"]

    def test_a_raise_fails_naming_the_code(self) -> None:
        view = turn(status="failed", exit=SessionExit(success=False, code="NO_DATA", reason="x"))
        assert "raised 'NO_DATA'" in detail("succeeded: true", view)

    def test_a_park_fails(self) -> None:
        view = turn(status="awaiting_input", pending_input=INPUT_PARK)
        assert "parked (input at 'clarify')" in detail("succeeded: true", view)

    def test_a_turn_that_completed_passes_whatever_its_tool_calls_answered(self) -> None:
        """Seed: "succeeded: true — The turn completed, without failing or parking." A refused
        or errored call is an answer the model read and moved past, not a failed turn."""
        blocked = turn(transcript=[*call("read_file", status="blocked"), say("ok")])
        assert evaluate("succeeded: true", blocked) == ["passed"]
        errored = turn(transcript=[*call("read_file", status="error"), say("ok")])
        assert evaluate("succeeded: true", errored) == ["passed"]

    @pytest.mark.parametrize(
        "refusal",
        [
            "archmax_advance rejected: 'nowhere' is not a transition of 'intake'.",
            "archmax_advance rejected (transition.requires): state 'intake' requires 'x'",
            "Hook hooks/check.js vetoed the advance: not yet",
            "Hook hooks/check.js asks for a correction: name the order",
        ],
    )
    def test_a_refused_advance_is_no_failed_turn(self, refusal: str) -> None:
        """Every refused ``archmax_advance`` (an undeclared edge, an unset ``requires``, a hook's
        veto or in-budget correct) is answered as an error the model reads."""
        transcript = [
            *call("archmax_advance", status=None, call_id="a1", to="nowhere"),
            Message(
                role="tool",
                tool_call_id="a1",
                name="archmax_advance",
                content=refusal,
                status="error",
            ),
            say("I will stay here."),
        ]
        assert evaluate("succeeded: true", turn(transcript=transcript)) == ["passed"]

    def test_a_rejected_turn_fails(self) -> None:
        view = turn(status="rejected", rejected="budget.maxTurns (6) exhausted")
        assert "rejected: budget.maxTurns" in detail("succeeded: true", view)


class TestParked:
    @pytest.mark.parametrize(
        ("form", "status", "park", "expected"),
        [
            ("parked: true", "awaiting_input", {"pending_input": INPUT_PARK}, "passed"),
            ("parked: true", "awaiting_decision", {"pending_decision": DECISION_PARK}, "passed"),
            ("parked: true", "completed", {}, "failed"),
            ("parked: input", "awaiting_input", {"pending_input": INPUT_PARK}, "passed"),
            ("parked: input", "awaiting_decision", {"pending_decision": DECISION_PARK}, "failed"),
            (
                "parked: decision",
                "awaiting_decision",
                {"pending_decision": DECISION_PARK},
                "passed",
            ),
            (
                "parked: { channel: input, state: clarify }",
                "awaiting_input",
                {"pending_input": INPUT_PARK},
                "passed",
            ),
            (
                "parked: { state: answer }",
                "awaiting_input",
                {"pending_input": INPUT_PARK},
                "failed",
            ),
        ],
    )
    def test_the_three_forms(self, form: str, status: str, park: Park, expected: str) -> None:
        assert evaluate(form, turn(status=status, **park)) == [expected]

    @pytest.mark.parametrize(
        ("form", "expected"),
        [
            ("parked: true", "passed"),
            ("parked: input", "passed"),
            ("parked: decision", "failed"),
            ("parked: { channel: input, state: intake }", "passed"),
        ],
    )
    def test_a_session_parked_behind_its_sub_workflow_is_parked(
        self, form: str, expected: str
    ) -> None:
        """A session whose outcome is parked is parked, in the channel its status says: the
        caller of a parked sub-workflow mirrors the child's status and has no park record of
        its own."""
        delegation = PendingDelegation(
            state="intake",
            workflow="enrich",
            session_id="s.enrich-1",
            tool_call_id="c1",
            tool="archmax_workflow_enrich",
            channel="input",
        )
        view = turn(status="awaiting_input", state="intake", delegation=delegation)
        assert evaluate(form, view) == [expected]


class TestRaised:
    RAISED: ClassVar[dict[str, Any]] = {
        "status": "failed",
        "exit": SessionExit(success=False, code="NO_DATA", reason="orders unavailable"),
    }

    @pytest.mark.parametrize(
        ("form", "expected"),
        [
            ("raised: true", "passed"),
            ("raised: NO_DATA", "passed"),
            ("raised: OTHER", "failed"),
            ("raised: { code: NO_DATA, reason: orders unavailable }", "passed"),
            ("raised: { reason: '/unavail/i' }", "passed"),
            ("raised: { reason: '/^nope$/' }", "failed"),
        ],
    )
    def test_the_three_forms(self, form: str, expected: str) -> None:
        assert evaluate(form, turn(**self.RAISED)) == [expected]

    def test_a_miss_names_the_raised_code_or_says_there_was_none(self) -> None:
        assert "raised 'NO_DATA'" in detail("raised: OTHER", turn(**self.RAISED))
        assert "did not raise" in detail("raised: true", turn())


TRAIL = trail(
    ("trigger", "refund-request", "manual"),
    ("agent", "refund-review", "written up"),
    ("human", "refund-request", "refine"),
    ("agent", "refund-review", "again"),
    ("trigger", "refund-review", "email_reply"),
)


class TestTrail:
    def test_reached_state_ignores_the_trigger_step(self) -> None:
        steps = trail(("trigger", "intake", "manual"))
        assert evaluate("reachedState: intake", turn(steps=steps)) == ["failed"]
        assert evaluate("reachedState: refund-review", turn(steps=TRAIL)) == ["passed"]

    def test_trail_counts_exactly_over_the_accumulated_trail(self) -> None:
        assert evaluate("trail: { to: refund-review, count: 2 }", turn(steps=TRAIL)) == ["failed"]
        assert evaluate(
            "trail: { to: refund-review, kind: agent, count: 2 }", turn(steps=TRAIL)
        ) == ["passed"]
        assert evaluate("trail: { kind: trigger, count: 2 }", turn(steps=TRAIL)) == ["passed"]
        assert evaluate("trail: { reason: refine, count: 1 }", turn(steps=TRAIL)) == ["passed"]
        assert "found 3" in detail("trail: { to: refund-review, count: 1 }", turn(steps=TRAIL))

    def test_trail_reason_matches_as_a_plain_substring(self) -> None:
        """Seed: /pattern/flags is read in exactly three places (reply tokens, tool-assertion
        inputs, a mock's whenInput); "anything else matches as a plain substring". A reason
        that would be a malformed regex is text like any other."""
        steps = trail(("trigger", "intake", "manual"), ("on_error", "escalate", "budget (/( 6)"))
        assert evaluate('trail: { reason: "/(/", count: 0 }', turn(steps=steps)) == ["passed"]
        assert evaluate('trail: { reason: "(/(", count: 1 }', turn(steps=steps)) == ["passed"]
        assert evaluate('trail: { reason: "/budget/i", count: 0 }', turn(steps=steps)) == ["passed"]

    def test_no_traversal_holds_only_for_trigger_arrivals(self) -> None:
        only = trail(("trigger", "intake", "manual"))
        assert evaluate("noTraversal: true", turn(steps=only)) == ["passed"]
        assert evaluate("noTraversal: true", turn(steps=TRAIL)) == ["failed"]

    def test_trigger_arrival_includes_one_delivered_into_a_park(self) -> None:
        assert evaluate("triggerArrival: email_reply", turn(steps=TRAIL)) == ["passed"]
        assert "arrivals: manual, email_reply" in detail("triggerArrival: timer", turn(steps=TRAIL))

    def test_ran_workflow_reads_sub_workflow_steps(self) -> None:
        steps = [
            TrailStep(
                kind="sub-workflow", to="enrich", workflow="enrich-order", status="ok", ts=NOW
            ),
            TrailStep(
                kind="sub-workflow", to="enrich", workflow="enrich-order", status="ok", ts=NOW
            ),
            TrailStep(
                kind="sub-workflow", to="enrich", workflow="enrich-order", status="error", ts=NOW
            ),
        ]
        view = turn(steps=steps)
        assert evaluate("ranWorkflow: { workflow: enrich-order }", view) == ["passed"]
        assert evaluate("ranWorkflow: { workflow: enrich-order, count: 2 }", view) == ["passed"]
        assert evaluate("ranWorkflow: { workflow: enrich-order, count: 3 }", view) == ["failed"]
        assert evaluate(
            "ranWorkflow: { workflow: enrich-order, status: error, count: 1 }", view
        ) == ["passed"]
        assert evaluate("ranWorkflow: { workflow: reconcile }", view) == ["failed"]


class TestVariables:
    STORE: ClassVar[dict[str, Variable]] = {
        "company": Variable(value="Acme Corp", locked=True),
        "order": Variable(value={"items": [{"sku": "A"}, {"sku": "B"}], "total": 3}),
    }

    def test_deep_equality_per_name(self) -> None:
        view = turn(variables=self.STORE)
        assert evaluate("variables: { expect: { company: Acme Corp } }", view) == ["passed"]
        assert evaluate(
            "variables: { expect: { order: { total: 3, items: [{sku: A}, {sku: B}] } } }", view
        ) == ["passed"]
        assert evaluate("variables: { expect: { order: { total: 3 } } }", view) == ["failed"]

    def test_path_addresses_into_a_value(self) -> None:
        view = turn(variables=self.STORE)
        assert evaluate(
            "variables: { expect: { order: B }, path: { order: items.-1.sku } }", view
        ) == ["passed"]
        assert "(path does not resolve)" in detail(
            "variables: { expect: { order: B }, path: { order: items.5.sku } }", view
        )

    def test_locked_and_not_set(self) -> None:
        view = turn(variables=self.STORE)
        assert evaluate(
            "variables: { expect: { company: Acme Corp }, locked: { company: true } }", view
        ) == ["passed"]
        assert "expected locked=true, got locked=false" in detail(
            "variables: { expect: { order: { total: 3, items: [{sku: A}, {sku: B}] } }, "
            "locked: { order: true } }",
            view,
        )
        assert 'missing: expected "x", got (not set)' in detail(
            "variables: { expect: { missing: x } }", view
        )

    def test_types_are_strict(self) -> None:
        view = turn(variables={"flag": Variable(value=1)})
        assert evaluate("variables: { expect: { flag: true } }", view) == ["failed"]


class TestContent:
    def test_reply_has_one_record_per_token_over_every_assistant_message(self) -> None:
        view = turn(transcript=[say("Your refund for ORD-1001"), say("is approved.")])
        assert evaluate("reply: { includes: [ORD-1001, '/APPROV/i', nope] }", view) == [
            "passed",
            "passed",
            "failed",
        ]
        assert evaluate("reply: { excludes: [ORD-2001, approved] }", view) == ["passed", "failed"]

    def test_reply_ignores_runtime_notes(self) -> None:
        note = Message(role="assistant", content="ORD-9", note="event")
        assert evaluate("reply: { includes: ORD-9 }", turn(transcript=[note])) == ["failed"]

    def test_called_tool_matches_input_partially_and_as_written(self) -> None:
        transcript = call("read_file", file_path="skills/order-data/assets/orders.json", limit=5)
        transcript += call("write_file", file_path="scratchpad/${{company}}/report.json")
        view = turn(transcript=transcript)
        assert evaluate("calledTool: { name: read_file }", view) == ["passed"]
        assert evaluate(
            "calledTool: { name: read_file, input: { file_path: '/orders\\.json$/' } }", view
        ) == ["passed"]
        assert evaluate(
            "calledTool: { name: write_file, "
            "input: { file_path: 'scratchpad/${{company}}/report.json' } }",
            view,
        ) == ["passed"]
        assert evaluate("calledTool: { name: read_file, input: { limit: 6 } }", view) == ["failed"]
        assert evaluate("notCalledTool: { name: grep }", view) == ["passed"]
        assert evaluate("notCalledTool: { name: read_file }", view) == ["failed"]

    def test_blocked_tool_is_distinct_from_never_called_and_from_errored(self) -> None:
        blocked = turn(transcript=call("read_file", status="blocked", file_path="skills/x/a"))
        errored = turn(transcript=call("read_file", status="error", file_path="skills/x/a"))
        assert evaluate("blockedTool: { name: read_file }", blocked) == ["passed"]
        assert "was never called" in detail("blockedTool: { name: read_file }", turn())
        assert "called but not blocked (error)" in detail(
            "blockedTool: { name: read_file }", errored
        )

    def test_used_no_tools_covers_earlier_turns_and_ignores_notes(self) -> None:
        note = [
            Message(
                role="assistant",
                note="event",
                tool_calls=[ToolCall(id="n1", name="archmax_note", arguments="{}")],
            )
        ]
        assert evaluate("usedNoTools: true", turn(transcript=note)) == ["passed"]
        earlier = [*call("ls"), say("x")]
        assert evaluate("usedNoTools: true", turn(transcript=earlier, turn_start=2)) == ["failed"]


def test_a_not_executed_record_keeps_its_step_index_and_grade_threshold() -> None:
    grade = step("grade: { closedQA: tells the customer, atLeast: 0.7 }")
    record = assertions.not_executed(grade)
    assert (record.kind, record.status, record.threshold, record.step) == (
        "grade.closedQA",
        "not-executed",
        0.7,
        1,
    )
