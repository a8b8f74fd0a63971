"""What a session shows the outside: the :class:`Outcome` of a settled firing, the
:class:`SessionSummary` and :class:`SessionView` queries answer, the UI's current details and
the search attributes.

Pure functions of the session state, the run's input and the delegation view (the parked
sub-workflow call the session waits on, if any); the workflow publishes what they compute.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from temporalio.common import SearchAttributeUpdate

from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows import transcript, variables
from archmax_temporal.workflows.models import (
    Disposition,
    ListedSession,
    Outcome,
    OutcomeKind,
    PendingDelegation,
    PendingInput,
    SessionExit,
    SessionInput,
    SessionState,
    SessionSummary,
    SessionView,
    Variable,
    is_finished,
)

_KINDS: dict[str, OutcomeKind] = {
    "completed": "completed",
    "failed": "failed",
    "rejected": "rejected",
    "awaiting_input": "parked",
    "awaiting_decision": "parked",
}
"""A settled session's status → the outcome's kind (a running one would be rejected)."""


def exit_of(s: SessionState) -> SessionExit | None:
    """How the agent ended a finished turn: success, or the code and reason it raised."""
    if s.status == "completed":
        return SessionExit(success=True)
    if s.status == "failed" and s.raised is not None:
        return SessionExit(success=False, code=s.raised.code, reason=s.raised.reason)
    return None


def last_reply(s: SessionState) -> str:
    """The agent's latest text (runtime notes are never a reply)."""
    return transcript.last_reply(s) or ""


def outcome(
    s: SessionState,
    input: SessionInput,
    waiting: PendingDelegation | None,
    disposition: Disposition,
    trail_from: int = 0,
    variables_from: dict[str, Variable] | None = None,
) -> Outcome:
    """What a settled firing came to, as ``send`` / ``deliver`` / ``decide`` / ``reply``
    return it. With ``variables_from`` (the variables as the firing found them), it carries
    only the variables the firing changed (``variables_delta``); without, all of them."""
    parked = s.status == "awaiting_input"
    deciding = s.status == "awaiting_decision"
    return Outcome(
        session_id=input.session_id,
        kind=_KINDS.get(s.status, "rejected"),
        disposition=disposition,
        status=s.status,
        state=s.state,
        parked_channel="input" if parked else "decision" if deciding else None,
        pending=waiting.pending
        if waiting
        else s.pending_input
        if parked
        else s.pending_decision
        if deciding
        else None,
        reply=last_reply(s),
        rejected=s.rejected,
        exit=exit_of(s),
        variables=s.variables
        if variables_from is None
        else variables.changed(variables_from, s.variables),
        variables_delta=variables_from is not None,
        variable_count=None if variables_from is None else len(s.variables),
        trail=transcript.trail_since(s, trail_from),
        trail_offset=max(trail_from, s.trail_offset),
        usage=s.usage,
        delegation=waiting,
        spec_hash=input.spec_hash,
    )


def classification(status: str, *, busy: bool = False) -> Classification:
    """``new`` (no firing admitted yet), ``finished`` or ``open``, as a summary says."""
    if busy:
        return "open"
    return "new" if status == "new" else "finished" if is_finished(status) else "open"


def wait_reason(pending: PendingInput | None, waiting: PendingDelegation | None) -> str | None:
    """Why a parked session waits: its park's reason, or the sub-workflow it waits on."""
    if pending is not None:
        return pending.reason
    return f"waiting on sub-workflow session {waiting.session_id!r}" if waiting else None


def summary(
    s: SessionState, input: SessionInput, waiting: PendingDelegation | None, *, busy: bool
) -> SessionSummary:
    """Status (running while a firing is served), classification, position, pending park,
    variables, usage."""
    pending = s.pending_input if s.status == "awaiting_input" else None
    return SessionSummary(
        session_id=input.session_id,
        workflow=input.workflow,
        status="running" if busy and s.status != "awaiting_input" else s.status,
        classification=classification(s.status, busy=busy),
        state=s.state,
        spec_hash=input.spec_hash,
        pending_input=pending,
        pending_decision=s.pending_decision if s.status == "awaiting_decision" else None,
        wait_reason=wait_reason(pending, waiting),
        resume_at=pending.resume_at if pending else None,
        exit=exit_of(s),
        rejected=s.rejected,
        trigger=s.trigger,
        variables=s.variables,
        usage=s.usage,
        turns=s.turns,
        delegation=waiting,
        parent_session_id=input.parent.session_id if input.parent else None,
        handoff=handoff(s),
    )


Classification = Literal["new", "open", "finished"]

LISTED_TEXT_CHARS = 200
"""How much of a reason, an edge's description or an exit's reason the memo carries."""

HANDOFF_CHARS = 160
"""How much of the handoff's first line a summary carries."""

LISTED_VARIABLES = 64
"""How many variable names the memo carries."""


def _cut(text: str | None, limit: int = LISTED_TEXT_CHARS) -> str | None:
    return text if text is None or len(text) <= limit else text[: limit - 1] + "…"


def handoff(s: SessionState) -> str | None:
    """At a human state, the first line of the agent's handoff (its last reply)."""
    if s.status != "awaiting_decision":
        return None
    lines = last_reply(s).strip().splitlines()
    return _cut(lines[0], HANDOFF_CHARS) if lines else None


class PublishedListing(ListedSession):
    """The listing as the session publishes it (memo ``archmax.summary``): :class:`ListedSession`
    and which of the named variables are locked (seeded by the host), so a listing read from
    visibility shows the locks ``sessions.get`` shows. Values are never published. A host
    reading a memo written before this field sees no locks until the session's next settled
    turn; one that does not know the field ignores it (wire models ignore unknown fields)."""

    locked_names: list[str] = Field(default_factory=list)
    """The locked ones of ``variable_names`` (a subset: the same cut)."""


def listed(
    s: SessionState, input: SessionInput, waiting: PendingDelegation | None
) -> PublishedListing:
    """What the session publishes in its memo for a host that lists it from visibility
    (the first :data:`LISTED_VARIABLES` names of its variables and which are locked, no
    values)."""
    brief = summary(s, input, waiting, busy=False)
    pending_input = brief.pending_input
    if pending_input is not None:
        pending_input = pending_input.model_copy(
            update={"reason": _cut(pending_input.reason), "title": _cut(pending_input.title)}
        )
    decision = brief.pending_decision
    if decision is not None:
        edges = [
            e.model_copy(update={"description": _cut(e.description)})
            for e in decision.transitions[:32]
        ]
        decision = decision.model_copy(
            update={"transitions": edges, "evidence": [], "title": _cut(decision.title)}
        )
    exit = brief.exit
    if exit is not None:
        exit = exit.model_copy(update={"reason": _cut(exit.reason)})
    names = sorted(n for n in s.variables if n != "trigger")[:LISTED_VARIABLES]
    return PublishedListing(
        status=brief.status,
        state=brief.state,
        spec_hash=input.spec_hash,
        trigger=s.trigger,
        turns=s.turns,
        pending_input=pending_input,
        pending_decision=decision,
        delegation=waiting,
        handoff=brief.handoff,
        exit=exit,
        rejected=_cut(s.rejected),
        variable_names=names,
        locked_names=[n for n in names if s.variables[n].locked],
        usage=s.usage,
        parent_session_id=brief.parent_session_id,
    )


def view(
    s: SessionState, input: SessionInput, waiting: PendingDelegation | None, *, busy: bool
) -> SessionView:
    """The whole recorded session: summary, transcript, trail and the agent's plan."""
    return SessionView(
        summary=summary(s, input, waiting, busy=busy),
        transcript=s.transcript,
        trail=s.trail,
        todos=s.todos,
        transcript_offset=s.transcript_offset,
        logged=s.logged,
        logged_hash=s.logged_hash,
        trail_offset=s.trail_offset,
        trail_persisted=s.trail_persisted,
    )


def search_attribute_updates(
    s: SessionState, input: SessionInput
) -> list[SearchAttributeUpdate[Any]]:
    """The Archmax* search attributes as the session stands (``ArchmaxResumeAt`` unset unless
    a timed park waits)."""
    pending = s.pending_input if s.status == "awaiting_input" else None
    return [
        sa.WORKFLOW.value_set(input.workflow),
        sa.STATUS.value_set(s.status),
        sa.STATE.value_set(s.state or ""),
        sa.PARKED_CHANNEL.value_set(
            "input"
            if s.status == "awaiting_input"
            else "decision"
            if s.status == "awaiting_decision"
            else ""
        ),
        sa.RESUME_AT.value_set(pending.resume_at)
        if pending and pending.resume_at
        else sa.RESUME_AT.value_unset(),
    ]


def current_details(s: SessionState, input: SessionInput, waiting: PendingDelegation | None) -> str:
    """Where the session stands, as the Temporal UI's current details (Markdown)."""
    pending = s.pending_input if s.status == "awaiting_input" else None
    details = [f"**{input.workflow}** · `{s.status}` in `{s.state}`"]
    if s.status == "awaiting_decision" and s.pending_decision:
        edges = ", ".join(e.to for e in s.pending_decision.transitions)
        details.append(f"awaiting a decision at `{s.pending_decision.state}`: {edges}")
        if s.pending_decision.due_at is not None:
            details.append(f"decision due at {s.pending_decision.due_at.isoformat()}")
    if pending:
        details.append(f"waiting for: {pending.reason}")
        if pending.resume_at:
            details.append(f"wakes at {pending.resume_at.isoformat()}")
    if waiting is not None:
        details.append(
            f"waiting on sub-workflow `{waiting.workflow}`: session `{waiting.session_id}`"
        )
    if s.raised:
        details.append(f"raised `{s.raised.code}`: {s.raised.reason}")
    if s.rejected:
        details.append(f"rejected: {s.rejected}")
    return "\n\n".join(details)


def remembered(outcome: Outcome) -> Outcome:
    """``outcome`` as the session remembers it by its key across continue-as-new: without
    variables (a retry's host reads the session's), so the memory stays small."""
    return outcome.model_copy(
        update={"variables": {}, "variables_delta": True, "variable_count": None}
    )
