"""Firing admission: what may fire a session, and whether it may fire it now.

A *firing* is everything the session's run loop serves, one at a time, as a typed union:

- :class:`SendFiring`: a host's ``send`` (a new turn, a delivery into a parked session, or a
  reply at a human state), or a delegated child's own ``manual`` arrival;
- :class:`DeliverFiring`: a delivery (the ``deliver`` update or signal), or the session's own
  timer waking a timed park (trigger ``timer`` with variable ``now``);
- :class:`DecideFiring`: a reviewer's decision at a human state, or its deadline's;
- :class:`ReplyFiring`: a person's reply at a human state;
- :class:`ChildSettled`: a parked sub-workflow's report, by its session id.

Each carries its idempotency key: the update's key its result is kept under (None for a
signal, the timer, a deadline and a child's report, which nobody waits on).

The checks run in the update validators (a refusal writes nothing to the history) and again
in the handlers, over a read-only :class:`Admission` view of the session. They raise the typed
errors of :mod:`archmax_temporal.workflows.errors` as ``ApplicationError`` s. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.exceptions import ApplicationError

from archmax_temporal.workflows import limits, signatures, variables
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    EmptyMessageError,
    InvalidDecisionTargetError,
    InvalidVariableNameError,
    MissingDeliveryTriggerError,
    PayloadTooLargeError,
    SessionAwaitingSubWorkflowError,
    SessionNotAwaitingInputError,
    SessionNotParkedError,
    SessionNotResumableError,
    SpecNeededError,
    TriggerInputError,
    UnknownTriggerError,
    WorkflowDisabledError,
)
from archmax_temporal.workflows.limits import Limits
from archmax_temporal.workflows.models import (
    DecidedBy,
    DecideInput,
    DeliverInput,
    PendingDecision,
    PendingDelegation,
    SendInput,
    SessionInput,
    SessionState,
    SessionStatus,
    TurnSpec,
    Variable,
)
from archmax_temporal.workflows.spec import TIMER_TRIGGER, WorkflowSpec
from archmax_temporal.workflows.zones import ATTACHMENTS

# --- firings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SendFiring:
    """A host's ``send``, or a delegated child's ``manual`` arrival (no key)."""

    send: SendInput
    key: str | None = None


@dataclass(frozen=True)
class DeliverFiring:
    """A delivery into a session parked awaiting input: the update, the signal (no key) or
    the session's timer (no key)."""

    delivery: DeliverInput
    key: str | None = None
    timer: bool = False
    """The session's own timer woke it (nothing outside waits on this firing)."""


@dataclass(frozen=True)
class DecideFiring:
    """A reviewer's decision at a human state, or the one its deadline takes (``by``, no
    key: nobody waits on it, and a run that hands the session on takes it again)."""

    decision: DecideInput
    key: str | None = None
    by: DecidedBy | None = None


@dataclass(frozen=True)
class ReplyFiring:
    """A person's reply at a human state."""

    message: str
    key: str | None = None


@dataclass(frozen=True)
class ChildSettled:
    """A parked sub-workflow's report (kept by the dispatcher), by its session id."""

    child: str
    key: None = None


@dataclass(frozen=True)
class ResumeTurn:
    """A turn a previous run handed on mid-way (continue-as-new between two model calls):
    this run drives it on. Its caller's key is the session's ``inflight.key``."""

    key: None = None


Firing = SendFiring | DeliverFiring | DecideFiring | ReplyFiring | ChildSettled | ResumeTurn
"""Everything the run loop serves."""


def timer_wake(now: datetime) -> DeliverFiring:
    """The session's own delivery when a timed park's ``resume_at`` passes."""
    return DeliverFiring(
        DeliverInput(trigger=TIMER_TRIGGER, variables={"now": now.isoformat()}), timer=True
    )


class FiringRefused(Exception):
    """A firing refused while it was being prepared; the session was not touched."""

    def __init__(self, error: ApplicationError) -> None:
        super().__init__(str(error))
        self.error = error


# --- admission ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admission:
    """What the checks read of a session, and nothing they could change it through."""

    session_id: str
    workflow: str
    spec: WorkflowSpec
    status: SessionStatus
    state: str | None
    variables: dict[str, Variable]
    """The session's variables (read, never written)."""
    pending_decision: PendingDecision | None
    busy: bool
    """A firing is queued or being served."""
    waiting: PendingDelegation | None
    """The sub-workflow call the session waits on, if any."""
    limits: Limits = field(default_factory=Limits)
    """How big a firing may be."""
    revision: str | None = None
    """The revision of the workflow the session holds (:class:`TurnSpec`)."""

    @classmethod
    def of(
        cls,
        input: SessionInput,
        s: SessionState,
        *,
        busy: bool = False,
        waiting: PendingDelegation | None = None,
    ) -> Admission:
        """What the checks read of the session ``input`` and ``s`` describe (an open run's,
        or the one an idle-closed run checkpointed)."""
        return cls(
            session_id=input.session_id,
            workflow=input.workflow,
            spec=input.spec,
            status=s.status,
            state=s.state,
            variables=s.variables,
            pending_decision=s.pending_decision,
            busy=busy,
            waiting=waiting,
            limits=input.limits,
            revision=input.revision,
        )


def wire(error: ArchmaxError) -> ApplicationError:
    """``error`` as it travels: an ``ApplicationError`` typed with its class name."""
    return error.to_application_error()


def check_send(view: Admission, firing: SendInput) -> None:
    """A host's firing: refused mid-turn, with bad names, without a trigger for a parked
    session, at a human state without a reply, on a disabled workflow, under an undeclared
    trigger, or short of the trigger's inputs."""
    _refuse_while_waiting(view)
    _wired(check_send_size, view.limits, firing)
    if view.busy or view.status == "running":
        raise wire(
            SessionNotResumableError(
                f"session {view.session_id!r} is mid-turn; retry after it settles"
            )
        )
    check_names({**firing.variables, **firing.files})
    if view.status == "awaiting_input":
        if not firing.trigger:
            raise wire(MissingDeliveryTriggerError("a delivery needs a trigger id"))
        check_growth(view, _seeds_of(firing), firing.trigger)
        return
    if view.status == "awaiting_decision":
        check_reply(view, firing.message or "")
        return
    turn_spec = spec_to_adopt(view, firing)
    spec = turn_spec.spec if turn_spec is not None else view.spec
    if spec.disabled:
        raise wire(
            WorkflowDisabledError(f"Refusing to start: workflow '{view.workflow}' is disabled.")
        )
    gone = view.state is not None and view.state not in spec.states
    if (view.state is None or gone) and spec.start_state_for(firing.trigger) is None:
        declared = ", ".join(spec.trigger_ids()) or "(none)"
        raise wire(
            UnknownTriggerError(
                f"trigger {firing.trigger!r} is not declared by workflow "
                f"{view.workflow!r}; declared triggers: {declared}"
            )
        )
    incoming = _seeds_of(firing)
    check_growth(view, incoming, firing.trigger)
    seeded = variables.seed(view.variables, incoming, replace_title=False)
    problems = signatures.missing_inputs(firing.trigger, spec.trigger(firing.trigger), seeded)
    if problems:
        raise wire(TriggerInputError("; ".join(problems)))


def _seeds_of(firing: SendInput) -> dict[str, Any]:
    """What a send seeds: its variables, and each file's variable with the placed path (its
    name as given; placement may suffix it, never lengthen it much)."""
    return {
        **firing.variables,
        **{var: f"{ATTACHMENTS}/{f.name}" for var, f in firing.files.items()},
    }


def check_growth(view: Admission, seeds: dict[str, Any], trigger: str) -> None:
    """Refuse, with :class:`PayloadTooLargeError`, a firing whose seeds would take the session
    past ``ARCHMAX_MAX_VARIABLES`` or ``ARCHMAX_MAX_SESSION_VARIABLE_BYTES`` (checked before
    it is accepted, like its own size)."""
    try:
        variables.check_seed_growth(view.limits, view.variables, seeds, trigger)
    except PayloadTooLargeError as refusal:
        raise wire(refusal) from None


def spec_to_adopt(view: Admission, firing: SendInput) -> TurnSpec | None:
    """The workflow a send that opens a turn brings (the host's, as it loaded it), when it
    is another revision than the session's; None: the turn runs under the session's spec.
    A firing that names another revision without carrying it is refused with
    :class:`SpecNeededError` (the host sends it again with the spec)."""
    if firing.revision is None or firing.revision == view.revision:
        return None
    if firing.spec is None or firing.spec.revision != firing.revision:
        raise wire(
            SpecNeededError(
                f"session {view.session_id!r} holds workflow revision {view.revision}; "
                f"send the spec of revision {firing.revision} with the firing"
            )
        )
    return firing.spec


def check_delivery(view: Admission, delivery: DeliverInput) -> None:
    """A delivery: only into a session parked awaiting input, with a trigger, good names."""
    _refuse_while_waiting(view)
    _wired(check_delivery_size, view.limits, delivery)
    if view.busy or view.status != "awaiting_input":
        raise wire(
            SessionNotAwaitingInputError(
                f"session {view.session_id!r} is not parked awaiting input "
                f"(status: {'running' if view.busy else view.status})"
            )
        )
    if not delivery.trigger or not delivery.trigger.strip():
        raise wire(MissingDeliveryTriggerError("a delivery needs a trigger id"))
    check_names(delivery.variables)
    check_growth(view, delivery.variables, delivery.trigger)


def check_human_park(view: Admission) -> PendingDecision:
    """The park a decision or reply answers: refused unless parked at a human state."""
    _refuse_while_waiting(view)
    pending = view.pending_decision
    if view.busy or view.status != "awaiting_decision" or pending is None:
        raise wire(
            SessionNotParkedError(
                f"session {view.session_id!r} is not parked at a human state "
                f"(status: {'running' if view.busy else view.status})"
            )
        )
    return pending


def check_decision(view: Admission, decision: DecideInput) -> None:
    """A decision: one of the parked human state's edges."""
    _wired(check_decision_size, view.limits, decision)
    pending = check_human_park(view)
    if decision.seq is not None and decision.seq != pending.seq:
        raise wire(
            SessionNotParkedError(
                f"session {view.session_id!r} was already decided: the decision this answers "
                f"(#{decision.seq}) was taken, and it now waits at '{pending.state}' "
                f"(decision #{pending.seq})"
            )
        )
    targets = [edge.to for edge in pending.transitions]
    if decision.to not in targets:
        raise wire(
            InvalidDecisionTargetError(
                f"{decision.to!r} is not a transition of '{pending.state}'; "
                f"valid targets: {', '.join(targets)}"
            )
        )


def check_reply(view: Admission, message: str) -> None:
    """A reply: a non-empty message to a session parked at a human state."""
    _wired(check_reply_size, view.limits, message)
    check_human_park(view)
    if not message or not message.strip():
        raise wire(EmptyMessageError("a reply needs a non-empty message"))


def check_send_size(bounds: Limits, firing: SendInput) -> None:
    """A send within its limits, or :class:`PayloadTooLargeError` (the host checks the same
    before it sends, so an oversized firing never reaches Temporal): its own size, and what
    its variables alone would make of an empty session (the validator then checks them
    against the session's own)."""
    limits.check(
        bounds,
        message=firing.message,
        variables=firing.variables,
        files={
            var: (
                f.size if f.ref is not None and f.size is not None else len(f.content),
                len(f.content),
            )
            for var, f in firing.files.items()
        },
        extra={"the trigger id": firing.trigger},
    )
    variables.check_seed_growth(bounds, {}, _seeds_of(firing), firing.trigger)


def check_delivery_size(bounds: Limits, delivery: DeliverInput) -> None:
    """A delivery within its limits, or :class:`PayloadTooLargeError`."""
    limits.check(
        bounds,
        message=delivery.message,
        variables=delivery.variables,
        extra={"the trigger id": delivery.trigger or ""},
    )
    variables.check_seed_growth(bounds, {}, delivery.variables, delivery.trigger or "")


def check_decision_size(bounds: Limits, decision: DecideInput) -> None:
    """A decision within its limits, or :class:`PayloadTooLargeError`."""
    limits.check(bounds, extra={"the comment": decision.comment or "", "`to`": decision.to})


def check_reply_size(bounds: Limits, message: str) -> None:
    """A reply within its limits, or :class:`PayloadTooLargeError`."""
    limits.check(bounds, message=message)


def _wired(check: Callable[[Limits, Any], None], bounds: Limits, firing: Any) -> None:
    try:
        check(bounds, firing)
    except PayloadTooLargeError as refusal:
        raise wire(refusal) from None


def check_names(seeds: dict[str, Any]) -> None:
    """Variable names a firing seeds: ``^[a-z][a-z0-9_]*$``, never ``trigger``."""
    bad = variables.invalid_names(list(seeds))
    if bad:
        raise wire(
            InvalidVariableNameError(
                f"invalid variable name(s): {', '.join(map(str, bad))} "
                "(names match ^[a-z][a-z0-9_]*$; 'trigger' is reserved)"
            )
        )


def _refuse_while_waiting(view: Admission) -> None:
    """Refuse a firing for a session that waits on its child, naming the child."""
    waiting = view.waiting
    if waiting is not None:
        raise wire(
            SessionAwaitingSubWorkflowError(
                f"session {view.session_id!r} waits on its sub-workflow "
                f"{waiting.workflow!r}: deliver to, decide on or reply to session "
                f"{waiting.session_id!r}"
            )
        )
