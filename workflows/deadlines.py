"""Deadlines on human decisions: this runtime's extension of archmax's format.

A human state may declare ``deadline: {after: 48h, warn: 24h, onTimeout: refund-closed}``
(:class:`~archmax_temporal.workflows.spec.DeadlineSpec`). At the park the due time is fixed once,
absolute, in the pending record (:attr:`PendingDecision.due_at`), so it survives continue-as-new and
an idle checkpoint unchanged, and every reader (the summary, the memo's listing, the CLI, the HTTP
API) shows it. While the session waits, its one durable timer runs to the next instant due:

- ``warn`` before the deadline, the session sends ``approval.expiring`` (once per decision:
  :attr:`SessionState.warned`);
- at the deadline, it sends ``approval.expired`` and takes ``onTimeout`` as the decision, by
  ``deadline``: the same path as a person's ``decide`` (a ``human`` trail step, now with
  ``by: deadline``; a ``[decision]`` note; the turn goes on in the target state).

A person deciding first ends the wait, and with it the timer (cancelled). Notifications are the
worker's ``archmax.notify.send`` activity (:mod:`archmax_temporal.workflows.contracts.notify`), with
a ``webhook-id`` derived from the session, the event and the decision's ``seq``.

Pure: the clock is passed in (``workflow.now()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from archmax_temporal.workflows import notifications
from archmax_temporal.workflows.models import (
    ApprovalEvent,
    ApprovalNotice,
    DecidedBy,
    DecideInput,
    NotifyInput,
    PendingDecision,
    SessionState,
)
from archmax_temporal.workflows.spec import DeadlineSpec, WorkflowSpec

DEADLINE: Final[DecidedBy] = "deadline"
"""Who takes a decision whose deadline passed (a trail step's ``by``, the event's ``by``)."""

EXPIRING: Final[ApprovalEvent] = "approval.expiring"
"""The notification ``warn`` before a deadline."""

EXPIRED: Final[ApprovalEvent] = "approval.expired"
"""The notification when a deadline passes and its ``onTimeout`` is taken."""

HANDOFF_CHARS: Final = 2_000
"""How much of the agent's handoff a notification carries."""


def deadline_of(spec: WorkflowSpec, pending: PendingDecision) -> DeadlineSpec | None:
    """The deadline the parked state declares (None: none, or a state the spec lost)."""
    state = spec.states.get(pending.state)
    return state.deadline if state is not None else None


def due_at(deadline: DeadlineSpec | None, parked_at: datetime) -> datetime | None:
    """When a decision parked at ``parked_at`` is due (None without a deadline)."""
    return None if deadline is None else parked_at + deadline.due_after


@dataclass(frozen=True)
class Timer:
    """The next instant a parked decision's deadline acts at: its warning, or the deadline."""

    kind: Literal["warn", "due"]
    at: datetime
    seq: int
    """The decision it belongs to (:attr:`PendingDecision.seq`)."""

    @property
    def summary(self) -> str:
        """The timer's summary, as the Temporal UI shows it."""
        what = "deadline warning" if self.kind == "warn" else "decision deadline"
        return f"{what} at {self.at.isoformat()}"


def next_timer(spec: WorkflowSpec, s: SessionState, now: datetime) -> Timer | None:
    """What a session parked at a human state waits for besides a person: the warning not
    yet sent (unless the deadline itself has passed too), else the deadline. None when the
    session is not parked at a decision with a due time."""
    pending = s.pending_decision
    if s.status != "awaiting_decision" or pending is None or pending.due_at is None:
        return None
    deadline = deadline_of(spec, pending)
    if deadline is None:  # the state no longer declares one: a person decides
        return None
    warn = deadline.warn_before
    if warn is not None and s.warned != pending.seq and now < pending.due_at:
        return Timer("warn", pending.due_at - warn, pending.seq)
    return Timer("due", pending.due_at, pending.seq)


def timeout(timer: Timer, now: datetime) -> timedelta:
    """How long to wait for ``timer`` from ``now`` (zero when it is already due)."""
    return max(timer.at - now, timedelta(0))


def decision(spec: WorkflowSpec, pending: PendingDecision) -> DecideInput:
    """The decision a passed deadline takes: its ``onTimeout`` edge, with a comment saying
    why (the trail step's reason and the ``[decision]`` note)."""
    deadline = deadline_of(spec, pending)
    assert deadline is not None and pending.due_at is not None  # next_timer checked both
    return DecideInput(
        to=deadline.on_timeout,
        comment=f"no decision by {pending.due_at.isoformat()} (deadline: after {deadline.after})",
    )


def notice(
    event: ApprovalEvent,
    *,
    session_id: str,
    workflow: str,
    spec: WorkflowSpec,
    pending: PendingDecision,
    handoff: str | None,
) -> NotifyInput:
    """The notification ``event`` of the decision ``pending``, under its stable id."""
    deadline = deadline_of(spec, pending)
    assert deadline is not None and pending.due_at is not None
    cut = handoff[:HANDOFF_CHARS] if handoff else None
    return NotifyInput(
        message_id=notifications.notification_id(session_id, f"{event}#{pending.seq}"),
        notice=ApprovalNotice(
            event=event,
            session_id=session_id,
            workflow=workflow,
            state=pending.state,
            title=pending.title,
            seq=pending.seq,
            created_at=pending.created_at,
            due_at=pending.due_at,
            on_timeout=deadline.on_timeout,
            transitions=pending.transitions,
            handoff=cut,
        ),
    )


def notice_summary(request: NotifyInput) -> str:
    """The notification activity's summary, as the Temporal UI shows it."""
    n = request.notice
    return f"{n.event} · {n.state} #{n.seq} → {n.on_timeout}"
