"""The session workflow's seams: firing admission over a read-only view (the typed refusals,
exactly as the wire carries them), the context's records, and no collaborator reaching into
the workflow's private members."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from archmax_temporal.workflows import firing
from archmax_temporal.workflows.context import SessionContext, ToolAnswer
from archmax_temporal.workflows.firing import Admission
from archmax_temporal.workflows.models import (
    DecideInput,
    DecisionEdge,
    DeliverInput,
    FileUpload,
    PendingDecision,
    PendingDelegation,
    PromptParts,
    SendInput,
    SessionInput,
    SessionState,
    ToolCall,
)
from archmax_temporal.workflows.spec import WorkflowSpec, parse_spec
from tests.support.paths import REPO

WORKFLOWS = REPO / "workflows"
NOW = datetime(2026, 1, 2, tzinfo=UTC)

SPEC = parse_spec(
    {
        "states": {
            "triage": {
                "triggers": {"email": {"requires": ["customer"]}, "manual": None},
                "transitions": [{"to": "review", "description": "needs a person"}],
            },
            "review": {
                "type": "human",
                "transitions": [
                    {"to": "approve", "description": "ok"},
                    {"to": "deny", "description": "no"},
                ],
            },
            "approve": {},
            "deny": {},
        },
    }
)


def view(**changes: Any) -> Admission:
    """A fresh session's admission view, with ``changes``."""
    base: dict[str, Any] = {
        "session_id": "s-1",
        "workflow": "support",
        "spec": SPEC,
        "status": "completed",
        "state": None,
        "variables": {},
        "pending_decision": None,
        "busy": False,
        "waiting": None,
    }
    return Admission(**{**base, **changes})


def refused(check: Any, *args: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        check(*args)
    return raised.value


DECISION = PendingDecision(
    state="review",
    seq=1,
    transitions=[DecisionEdge(to="approve"), DecisionEdge(to="deny")],
    created_at=NOW,
)
WAITING = PendingDelegation(
    state="triage",
    workflow="enrich",
    session_id="s-1.enrich-1",
    tool_call_id="c1",
    tool="archmax_workflow_enrich",
    channel="input",
)


class TestAdmission:
    """Each check raises the typed error, with the message, the validators always raised."""

    def test_a_first_send_under_a_declared_trigger_is_admitted(self) -> None:
        firing.check_send(view(), SendInput(trigger="manual", message="hi"))
        firing.check_send(view(), SendInput(trigger="email", variables={"customer": "ada"}))

    def test_a_send_mid_turn_is_refused(self) -> None:
        error = refused(firing.check_send, view(busy=True), SendInput(message="hi"))
        assert error.type == "SessionNotResumableError"
        assert error.message == "session 's-1' is mid-turn; retry after it settles"

    def test_a_send_under_an_undeclared_trigger_names_the_declared_ones(self) -> None:
        error = refused(firing.check_send, view(), SendInput(trigger="sms"))
        assert error.type == "UnknownTriggerError"
        assert error.message == (
            "trigger 'sms' is not declared by workflow 'support'; declared triggers: "
            + ", ".join(SPEC.trigger_ids())
        )

    def test_a_send_short_of_its_inputs_is_refused(self) -> None:
        error = refused(firing.check_send, view(), SendInput(trigger="email"))
        assert error.type == "TriggerInputError"

    def test_a_file_satisfies_an_input_by_its_placed_path(self) -> None:
        files = {"customer": FileUpload(name="ada.txt", content="x")}
        firing.check_send(view(), SendInput(trigger="email", files=files))

    def test_bad_variable_names_are_refused(self) -> None:
        error = refused(firing.check_send, view(), SendInput(variables={"Bad": 1}))
        assert error.type == "InvalidVariableNameError"
        assert "Bad" in str(error)

    def test_a_disabled_workflow_refuses_a_new_turn(self) -> None:
        disabled = SPEC.model_copy(update={"disabled": True})
        error = refused(firing.check_send, view(spec=disabled), SendInput())
        assert error.type == "WorkflowDisabledError"
        assert error.message == "Refusing to start: workflow 'support' is disabled."

    def test_a_delivery_needs_a_parked_session_and_a_trigger(self) -> None:
        error = refused(firing.check_delivery, view(), DeliverInput(trigger="email"))
        assert error.type == "SessionNotAwaitingInputError"
        assert error.message == "session 's-1' is not parked awaiting input (status: completed)"
        parked = view(status="awaiting_input", state="triage")
        error = refused(firing.check_delivery, parked, DeliverInput(trigger=" "))
        assert error.type == "MissingDeliveryTriggerError"
        firing.check_delivery(parked, DeliverInput(trigger="email"))

    def test_a_decision_must_name_an_edge_of_the_parked_state(self) -> None:
        parked = view(status="awaiting_decision", state="review", pending_decision=DECISION)
        firing.check_decision(parked, DecideInput(to="deny"))
        error = refused(firing.check_decision, parked, DecideInput(to="triage"))
        assert error.type == "InvalidDecisionTargetError"
        assert (
            error.message
            == "'triage' is not a transition of 'review'; valid targets: approve, deny"
        )
        error = refused(firing.check_decision, view(busy=True), DecideInput(to="deny"))
        assert error.type == "SessionNotParkedError"
        assert error.message == "session 's-1' is not parked at a human state (status: running)"

    def test_a_reply_needs_a_message(self) -> None:
        parked = view(status="awaiting_decision", state="review", pending_decision=DECISION)
        assert refused(firing.check_reply, parked, "  ").type == "EmptyMessageError"
        firing.check_reply(parked, "Why?")

    def test_a_session_waiting_on_its_child_refuses_every_firing(self) -> None:
        waiting = view(status="awaiting_input", state="triage", waiting=WAITING)
        for check, arg in [
            (firing.check_send, SendInput(trigger="email")),
            (firing.check_delivery, DeliverInput(trigger="email")),
            (firing.check_decision, DecideInput(to="deny")),
            (firing.check_reply, "hi"),
        ]:
            error = refused(check, waiting, arg)
            assert error.type == "SessionAwaitingSubWorkflowError"
            assert error.message == (
                "session 's-1' waits on its sub-workflow 'enrich': deliver to, decide on or "
                "reply to session 's-1.enrich-1'"
            )

    def test_the_timer_wakes_the_session_with_a_delivery(self) -> None:
        wake = firing.timer_wake(NOW)
        assert wake.key is None
        assert wake.delivery == DeliverInput(trigger="timer", variables={"now": NOW.isoformat()})


class TestContext:
    """The context keeps the records every collaborator shares."""

    @staticmethod
    def context() -> SessionContext:
        spec: WorkflowSpec = SPEC
        ctx = SessionContext(
            SessionInput(session_id="s-1", workflow="support", spec=spec, spec_hash="h")
        )
        ctx.session = SessionState(status="running", state="triage")
        return ctx

    def test_a_note_is_a_marked_call_and_result(self) -> None:
        ctx = self.context()
        ctx.note("event", "[event] arrived.")
        call, result = ctx.session.transcript
        assert call.note == result.note == "event"
        assert call.tool_calls[0].name == result.name == "archmax_note"
        assert result.tool_call_id == call.tool_calls[0].id == "note_0"

    def test_an_answer_carries_status_rule_and_state(self) -> None:
        ctx = self.context()
        ctx.answer(ToolCall(id="c1", name="ls"), ToolAnswer("no", "blocked", rule="tool.x"))
        (message,) = ctx.session.transcript
        assert (message.role, message.status, message.rule, message.state) == (
            "tool",
            "blocked",
            "tool.x",
            "triage",
        )

    def test_a_new_visit_makes_the_before_hooks_due(self) -> None:
        ctx = self.context()
        ctx.session.before_done = True
        ctx.session.hook_corrections = {"after#0": 1}
        ctx.new_visit()
        assert not ctx.session.before_done and ctx.session.hook_corrections == {}


class TestSharedSpec:
    """Sessions of one workflow hold one parsed spec and prose, never another's."""

    @staticmethod
    def start(spec: WorkflowSpec, prose: str, *, sid: str) -> SessionContext:
        raw = SessionInput(
            session_id=sid,
            workflow="support",
            spec=spec,
            spec_hash="shared-h",
            prompt=PromptParts(agents_md=prose),
            revision="shared-r",
        ).model_dump_json()  # each session parses its own input, as a worker does
        return SessionContext(SessionInput.model_validate_json(raw))

    def test_equal_parts_are_one_object(self) -> None:
        first = self.start(SPEC, "Be kind.", sid="shared-1")
        second = self.start(SPEC, "Be kind.", sid="shared-2")
        assert second.spec is first.spec and second.input.spec is first.input.spec
        assert second.input.prompt is first.input.prompt
        assert second.session_id == "shared-2"

    def test_parts_that_differ_under_one_digest_stay_apart(self) -> None:
        """The spec hash leaves ``metadata`` out: a session whose spec differs there keeps
        its own, and prose is compared too."""
        first = self.start(SPEC, "Be kind.", sid="shared-3")
        other = SPEC.model_copy(update={"metadata": {"owner": "someone else"}})
        second = self.start(other, "Be brief.", sid="shared-4")
        assert second.spec.metadata == {"owner": "someone else"}
        assert second.spec is not first.spec and first.spec.metadata is None
        assert second.input.prompt.agents_md == "Be brief."


def test_no_collaborator_reaches_into_the_workflow() -> None:
    """Outside session.py no module touches the workflow's private members: turn, hooks and
    delegation work through the SessionContext."""
    private = re.compile(r"\b(?:host|_host|ArchmaxSession)\._[a-z]")
    offenders = [
        f"{path.name}:{number}"
        for path in sorted(WORKFLOWS.rglob("*.py"))
        if path.name != "session.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if private.search(line)
    ]
    assert offenders == []
