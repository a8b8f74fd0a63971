"""A case's assertions, evaluated against the session as the nearest action above left it.

Each function here is pure: it reads a :class:`TurnView` (the session's recorded view after an
action, and where that action's turn began in the transcript) and returns the records of one
assertion step. The runner decides what a miss means (a structural one halts the case); this
module only says what happened. ``grade`` is not here: it calls a model (see client.grader).

What the session "recorded" is read from the durable transcript and trail the workflow keeps,
the same view ``archmax sessions`` shows, so an assertion can never see a session the host
could not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from archmax_temporal.client.testing.results import AssertionRecord
from archmax_temporal.client.testing.steps import (
    BlockedToolStep,
    CalledToolStep,
    CaseStep,
    NotCalledToolStep,
    NoTraversalStep,
    ParkedStep,
    RaisedStep,
    RanWorkflowStep,
    ReachedStateStep,
    ReplyStep,
    SucceededStep,
    ToolStep,
    TrailAssertionStep,
    TriggerArrivalStep,
    UsedNoToolsStep,
    VariablesStep,
)
from archmax_temporal.workflows.matching import match_token, partial_match
from archmax_temporal.workflows.models import Message, SessionView, ToolCall
from archmax_temporal.workflows.paths import MISSING, InvalidPathError, resolve_path
from archmax_temporal.workflows.runtime_tools import NOTE


@dataclass(frozen=True)
class TurnView:
    """The session after an action: its whole recorded view, and the transcript index where
    that action's turn began (the messages from there on are the turn's own)."""

    view: SessionView
    turn_start: int

    @property
    def turn_messages(self) -> list[Message]:
        return self.view.transcript[self.turn_start :]


@dataclass(frozen=True)
class RecordedCall:
    """One tool call the agent made, with the status of its answer (None: unanswered)."""

    call: ToolCall
    arguments: Any
    status: str | None
    content: str | None


def recorded_calls(messages: list[Message]) -> list[RecordedCall]:
    """The agent's tool calls in order, runtime notes excluded, each with its answer's status.

    Arguments are read as the model wrote them, so a ``${{name}}`` reference stays a reference.
    """
    answers = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    calls: list[RecordedCall] = []
    for message in messages:
        if message.role != "assistant" or message.note is not None:
            continue
        for call in message.tool_calls:
            if call.name == NOTE:
                continue
            try:
                arguments: Any = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                arguments = call.arguments
            answer = answers.get(call.id)
            calls.append(
                RecordedCall(
                    call=call,
                    arguments=arguments,
                    status=answer.status if answer else None,
                    content=answer.content if answer else None,
                )
            )
    return calls


def assistant_texts(messages: list[Message]) -> list[str]:
    """What the assistant said, message by message (runtime notes are not its words)."""
    return [m.content for m in messages if m.role == "assistant" and m.note is None and m.content]


def _record(
    step: CaseStep, passed: bool, detail: str | None, kind: str | None = None
) -> AssertionRecord:
    return AssertionRecord(
        kind=kind or step.kind,
        status="passed" if passed else "failed",
        detail=None if passed else detail,
        step=step.index,
    )


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


# --- structural ---------------------------------------------------------------------------


def succeeded(step: SucceededStep, turn: TurnView) -> list[AssertionRecord]:
    """The turn completed, without failing or parking (the seed's words).

    A tool call answered as an error is not a failed turn: a refused ``archmax_advance`` (an
    undeclared edge, an unset ``requires``, a hook's veto or in-budget correct) and a tool
    that errored are results the model reads and moves past. Only the session's own status
    says whether the turn failed: raised, rejected, or parked instead of completing.
    """
    summary = turn.view.summary
    detail: str | None = None
    if summary.status == "failed":
        code = summary.exit.code if summary.exit else None
        detail = f"the agent raised {code!r}" + (
            f": {summary.exit.reason}" if summary.exit and summary.exit.reason else ""
        )
    elif summary.status == "rejected":
        detail = f"the turn was rejected: {summary.rejected}"
    elif summary.status in ("awaiting_input", "awaiting_decision"):
        detail = f"the turn parked ({_park_text(turn)}) instead of completing"
    elif summary.status != "completed":
        detail = f"the turn did not complete (status {summary.status})"
    return [_record(step, detail is None, detail)]


def _park(turn: TurnView) -> tuple[str | None, str | None]:
    """The channel and state a parked session waits in, or ``(None, None)``.

    The status says the channel; the state is its own park record's, or, for a session parked
    behind a sub-workflow (its status mirrors the child's), the calling state.
    """
    summary = turn.view.summary
    channels = {"awaiting_input": "input", "awaiting_decision": "decision"}
    channel = channels.get(summary.status)
    if channel is None:
        return None, None
    if channel == "input" and summary.pending_input is not None:
        return channel, summary.pending_input.state
    if channel == "decision" and summary.pending_decision is not None:
        return channel, summary.pending_decision.state
    if summary.delegation is not None:
        return channel, summary.delegation.state
    return channel, summary.state


def _park_text(turn: TurnView) -> str:
    channel, state = _park(turn)
    return f"{channel} at {state!r}" if channel else "not parked"


def parked(step: ParkedStep, turn: TurnView) -> list[AssertionRecord]:
    channel, state = _park(turn)
    wanted = " ".join(
        part
        for part in (
            step.channel and f"channel {step.channel}",
            step.state and f"state {step.state!r}",
        )
        if part
    )
    if channel is None:
        detail = f"the session is not parked (status {turn.view.summary.status})"
        return [_record(step, False, detail)]
    ok = (step.channel is None or step.channel == channel) and (
        step.state is None or step.state == state
    )
    detail = f"expected a park with {wanted}; parked {channel} at {state!r}"
    return [_record(step, ok, detail)]


def raised(step: RaisedStep, turn: TurnView) -> list[AssertionRecord]:
    summary = turn.view.summary
    exit_ = summary.exit
    if summary.status != "failed" or exit_ is None or exit_.code is None:
        return [_record(step, False, f"the session did not raise (status {summary.status})")]
    if step.code is not None and step.code != exit_.code:
        return [_record(step, False, f"expected code {step.code!r}; raised {exit_.code!r}")]
    if step.reason is not None and not partial_match(step.reason, exit_.reason or ""):
        detail = f"raised {exit_.code!r} with reason {exit_.reason!r}, not matching {step.reason!r}"
        return [_record(step, False, detail)]
    return [_record(step, True, None)]


def reached_state(step: ReachedStateStep, turn: TurnView) -> list[AssertionRecord]:
    """A committed, non-trigger trail step entered the state."""
    trail = turn.view.trail
    ok = any(s.kind != "trigger" and s.to == step.state for s in trail)
    entered = [s.to for s in trail if s.kind != "trigger"]
    detail = f"state {step.state!r} was never entered; trail: {' → '.join(entered) or '(none)'}"
    return [_record(step, ok, detail)]


def trail(step: TrailAssertionStep, turn: TurnView) -> list[AssertionRecord]:
    matches = [
        s
        for s in turn.view.trail
        if (step.to is None or s.to == step.to)
        and (step.trail_kind is None or s.kind == step.trail_kind)
        and (step.reason is None or step.reason in (s.reason or ""))
    ]
    fields = ", ".join(
        f"{name}={value!r}"
        for name, value in (("to", step.to), ("kind", step.trail_kind), ("reason", step.reason))
        if value is not None
    )
    detail = f"expected {step.count} trail step(s) with {fields}; found {len(matches)}"
    return [_record(step, len(matches) == step.count, detail)]


def no_traversal(step: NoTraversalStep, turn: TurnView) -> list[AssertionRecord]:
    moved = [s for s in turn.view.trail if s.kind != "trigger"]
    detail = "the trail holds committed transitions: " + ", ".join(
        f"{s.kind} → {s.to}" for s in moved
    )
    return [_record(step, not moved, detail)]


def trigger_arrival(step: TriggerArrivalStep, turn: TurnView) -> list[AssertionRecord]:
    arrivals = [s.reason for s in turn.view.trail if s.kind == "trigger"]
    ok = step.trigger in arrivals
    shown = ", ".join(str(a) for a in arrivals) or "(none)"
    return [_record(step, ok, f"no arrival of trigger {step.trigger!r}; arrivals: {shown}")]


def variables(step: VariablesStep, turn: TurnView) -> list[AssertionRecord]:
    """Deep equality per expected name (through ``path`` where given), lock state per name."""
    store = turn.view.summary.variables
    problems: list[str] = []
    for name, expected in step.expect.items():
        if name not in store:
            problems.append(f"{name}: expected {_shown(expected)}, got (not set)")
            continue
        actual = store[name].value
        path = (step.path or {}).get(name)
        where = name
        if path is not None:
            where = f"{name}.{path}"
            try:
                actual = resolve_path(where, {name: actual})
            except InvalidPathError:
                actual = MISSING
            if actual is MISSING:
                problems.append(
                    f"{where}: expected {_shown(expected)}, got (path does not resolve)"
                )
                continue
        if not _deep_equal(expected, actual):
            problems.append(f"{where}: expected {_shown(expected)}, got {_shown(actual)}")
    for name, locked in (step.locked or {}).items():
        if name not in store:
            problems.append(f"{name}: expected locked={str(locked).lower()}, got (not set)")
        elif store[name].locked != locked:
            problems.append(
                f"{name}: expected locked={str(locked).lower()}, "
                f"got locked={str(store[name].locked).lower()}"
            )
    return [_record(step, not problems, "; ".join(problems))]


def _deep_equal(expected: Any, actual: Any) -> bool:
    """Equality by value, strict about types the way JSON is (``True`` is not ``1``)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(_deep_equal(v, actual[k]) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_deep_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(expected) == float(actual)
    return type(expected) is type(actual) and bool(expected == actual)


# --- content ------------------------------------------------------------------------------


def reply(step: ReplyStep, turn: TurnView) -> list[AssertionRecord]:
    """One record per token, over every assistant message of the session so far."""
    texts = assistant_texts(turn.view.transcript)
    records = []
    for token in step.includes:
        ok = any(match_token(token, text) for text in texts)
        records.append(_record(step, ok, f"no assistant message includes {token!r}"))
    for token in step.excludes:
        leaked = next((text for text in texts if match_token(token, text)), None)
        records.append(
            _record(step, leaked is None, f"an assistant message includes {token!r}: {leaked!r}")
        )
    return records


def _describe_call(step: ToolStep) -> str:
    return step.name + (f" with input {_shown(step.input)}" if step.input is not None else "")


def _matching(step: ToolStep, turn: TurnView) -> list[RecordedCall]:
    return [
        c
        for c in recorded_calls(turn.view.transcript)
        if c.call.name == step.name
        and (step.input is None or partial_match(step.input, c.arguments))
    ]


def called_tool(step: CalledToolStep, turn: TurnView) -> list[AssertionRecord]:
    calls = recorded_calls(turn.view.transcript)
    made = sorted({c.call.name for c in calls})
    detail = f"no recorded call of {_describe_call(step)}; calls: {', '.join(made) or '(none)'}"
    return [_record(step, bool(_matching(step, turn)), detail)]


def not_called_tool(step: NotCalledToolStep, turn: TurnView) -> list[AssertionRecord]:
    found = _matching(step, turn)
    detail = f"{_describe_call(step)} was called {len(found)} time(s)"
    return [_record(step, not found, detail)]


def blocked_tool(step: BlockedToolStep, turn: TurnView) -> list[AssertionRecord]:
    """A matching call was made and governance refused it (not merely never made, and not a
    tool that ran and errored)."""
    found = _matching(step, turn)
    if any(c.status == "blocked" for c in found):
        return [_record(step, True, None)]
    if not found:
        return [_record(step, False, f"{_describe_call(step)} was never called")]
    statuses = ", ".join(sorted({str(c.status) for c in found}))
    return [_record(step, False, f"{_describe_call(step)} was called but not blocked ({statuses})")]


def used_no_tools(step: UsedNoToolsStep, turn: TurnView) -> list[AssertionRecord]:
    calls = recorded_calls(turn.view.transcript)
    detail = f"the session recorded {len(calls)} tool call(s): " + ", ".join(
        c.call.name for c in calls
    )
    return [_record(step, not calls, detail)]


def ran_workflow(step: RanWorkflowStep, turn: TurnView) -> list[AssertionRecord]:
    """Sub-workflow dispatches read from the trail, so a script's dispatch counts too."""
    dispatches = [s for s in turn.view.trail if s.kind == "sub-workflow"]
    matches = [s for s in dispatches if s.workflow == step.workflow and s.status == step.status]
    ok = len(matches) == step.count if step.count is not None else bool(matches)
    wanted = f"exactly {step.count}" if step.count is not None else "at least one"
    seen = ", ".join(f"{s.workflow} ({s.status})" for s in dispatches) or "(none)"
    detail = (
        f"expected {wanted} {step.status} dispatch(es) of {step.workflow!r}; "
        f"found {len(matches)}; dispatches: {seen}"
    )
    return [_record(step, ok, detail)]


Evaluator = Callable[[Any, TurnView], list[AssertionRecord]]

EVALUATORS: dict[str, Evaluator] = {
    "succeeded": succeeded,
    "parked": parked,
    "raised": raised,
    "reachedState": reached_state,
    "trail": trail,
    "noTraversal": no_traversal,
    "triggerArrival": trigger_arrival,
    "variables": variables,
    "reply": reply,
    "calledTool": called_tool,
    "notCalledTool": not_called_tool,
    "blockedTool": blocked_tool,
    "usedNoTools": used_no_tools,
    "ranWorkflow": ran_workflow,
}
"""Every assertion kind but ``grade`` (which calls a model), by its step key."""


def evaluate(step: CaseStep, turn: TurnView) -> list[AssertionRecord]:
    """The records of one (non-grade) assertion step."""
    return EVALUATORS[step.kind](step, turn)


def not_executed(step: CaseStep) -> AssertionRecord:
    """The record of an assertion that never ran (one per step, whatever its token count)."""
    threshold = getattr(step, "at_least", None)
    return AssertionRecord(
        kind="grade.closedQA" if step.kind == "grade" else step.kind,
        status="not-executed",
        threshold=threshold,
        step=step.index,
    )


def iter_failures(records: list[AssertionRecord]) -> Iterator[AssertionRecord]:
    return (r for r in records if r.status == "failed")
