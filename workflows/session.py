"""``ArchmaxSession``: one archmax session as one long-running Temporal workflow.

The workflow id is the session id. A turn is an iteration of the run loop, not a workflow:
a finished turn leaves the workflow waiting for the session's next firing, so transcript,
position, variables and trail simply carry forward.

- ``send`` (update) opens a turn, or, on a session parked by ``archmax_wait``, delivers into
  it; it returns the :class:`Outcome` when the turn settles.
- ``deliver`` (update, typed rejection; and signal ``deliver_signal``, for external systems)
  resumes a session parked awaiting input; both queue the same ``DeliverFiring`` for the run loop.
  Validators run before anything is written: a refused delivery leaves no event in the history
  (a refused signal, which cannot be refused to its sender, is dropped and recorded in the memo).
- ``archmax_wait({until})`` parks on ``wait_condition`` with a durable timer; when it fires
  the session delivers itself trigger ``timer`` with variable ``now``.
- A human state's ``deadline`` parks on the same kind of timer: at ``warn`` the session sends
  ``approval.expiring``, at the deadline ``approval.expired``, and takes ``onTimeout`` as the
  decision, by ``deadline`` (:mod:`archmax_temporal.workflows.deadlines`).

This module is the shell: handlers, validators, queries, the run loop and continue-as-new. What a
firing may be and whether it is admitted is :mod:`archmax_temporal.workflows.firing`; what it does,
the turn engine (:mod:`archmax_temporal.workflows.turn`); what the session shows,
:mod:`archmax_temporal.workflows.projections`. They share the session through one
:class:`SessionContext` (:mod:`archmax_temporal.workflows.context`).

Workflow code does no I/O and reads no clock but ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import (
        contracts,
        deadlines,
        delegation,
        firing,
        patches,
        projections,
        signatures,
        store_binding,
        stored_variables,
        telemetry,
        transcript,
        variables,
    )
    from archmax_temporal.workflows.context import SessionContext
    from archmax_temporal.workflows.errors import SessionNotResumableError
    from archmax_temporal.workflows.firing import (
        Admission,
        ChildSettled,
        DecideFiring,
        DeliverFiring,
        Firing,
        FiringRefused,
        ReplyFiring,
        ResumeTurn,
        SendFiring,
    )
    from archmax_temporal.workflows.hook_runner import HookRunner
    from archmax_temporal.workflows.models import (
        RECENT_FIRINGS,
        ApprovalEvent,
        CheckpointInput,
        DecideInput,
        DeliverInput,
        Disposition,
        InflightTurn,
        NotifyInput,
        Outcome,
        ReplyInput,
        SendInput,
        SessionInput,
        SessionSummary,
        SessionView,
        SubWorkflowReport,
        Variable,
        is_finished,
    )
    from archmax_temporal.workflows.spec import MANUAL_TRIGGER
    from archmax_temporal.workflows.turn import ContinueMidTurn, TurnEngine


FIRST_FIRING_PATCH = "archmax-first-firing-grace"
"""``workflow.patched`` id: runs that admitted no firing end after a grace period."""

REFUSED_SIGNAL_PATCH = "archmax-refused-signal-memo"
"""``workflow.patched`` id: a refused ``deliver`` signal is recorded in the memo."""

TURN_SPEC_PATCH = "archmax-turn-spec"
"""``workflow.patched`` id: a send that opens a turn under another workflow revision than
the session's (the host's, as it loaded it) runs the turn under that revision."""

IDLE_CLOSE_PATCH = "archmax-idle-close"
"""``workflow.patched`` id: a finished session idle for ``idle_close_s`` checkpoints its state
to the store and its run ends."""

UPGRADE_PATCH = "archmax-upgrade-on-wake"
"""``workflow.patched`` id: a parked session woken (a delivery, a decision, its timer) while
another Worker Deployment version is current continues as new onto it first, so the new code
runs the resumed turn (a turn in flight finishes on the code it began with)."""

REFUSED_SIGNAL_MEMO = contracts.REFUSED_SIGNAL_MEMO
"""The memo key a refused ``deliver`` signal is recorded under (``signal``: its number among
this run's ``deliver`` signals; ``type`` and ``reason``: the refusal)."""


@workflow.defn(name=contracts.WORKFLOW_NAME)
class ArchmaxSession:
    """One session: its durable state, its handlers and its turn loop."""

    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        self._ctx = SessionContext(input)
        self._queue: list[Firing] = []
        self._results: dict[str, Outcome | ApplicationError] = {}
        self._busy = False
        self._seq = 0
        self._handled_this_run = 0
        self._deliver_signals = 0
        self._delegation = delegation.Delegations(self._ctx)
        self._turn = TurnEngine(self._ctx, HookRunner(self._ctx), self._delegation)
        self._trail_from = 0
        """The trail index the firing being served started at (its outcome's trail)."""
        self._disposition: Disposition = "turn"
        """What the firing being served is to the session (its outcome's disposition)."""
        self._variables_from: dict[str, Variable] = {}
        """The variables as the firing being served found them (its outcome carries what it
        changed)."""
        self._sending: set[asyncio.Task[None]] = set()
        """The notifications this run is sending (each also in the session's ``outbox``)."""
        self._turn.may_hand_over = lambda: (
            not self._queue and not (self._ctx.session.pending_delegations)
        )
        if input.initial is not None and input.carried is None:  # a delegated child's firing
            self._busy = True
            self._queue.append(SendFiring(input.initial))
        if input.carried is not None and input.carried.inflight is not None:
            self._busy = True  # a turn the last run handed on mid-way: drive it on first
            self._queue.append(ResumeTurn())

    @property
    def store(self) -> store_binding.StoreRef | None:
        """The session store this session was created in: every activity it schedules carries it,
        and workers of another store refuse them
        (:mod:`archmax_temporal.workflows.store_binding`)."""
        return store_binding.session_store(self._ctx.input)

    # --- run loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: SessionInput) -> SessionSummary:
        """Serve the session's firings forever; continue as new when the history grows."""
        limit = input.requests_per_run or contracts.DEFAULT_REQUESTS_PER_RUN
        patches.generation()  # first thing: see its docstring
        for handed_on in list(self._ctx.session.outbox):  # in flight when the last run ended
            self._start_sending(handed_on.model_copy(update={"resent": True}))
        while True:
            if not await self._wait_for_work():
                return self._summary()  # started for a refused firing: ends without a trace
            if self._upgrades_on_wake():
                self._continue_onto_current_version()
            next_firing = self._queue.pop(0)
            telemetry.firing_started(self._ctx, next_firing)
            outcome: Outcome | ApplicationError
            try:
                outcome = await self._process(next_firing)
            except FiringRefused as refused:
                outcome = refused.error
            except ContinueMidTurn:
                self._hand_over(next_firing)
            inflight = self._ctx.session.inflight
            if isinstance(next_firing, ResumeTurn) and inflight is not None:
                self._ctx.session.inflight = None
                if inflight.key is not None and isinstance(outcome, Outcome):
                    self._remember(inflight.key, outcome)
            if next_firing.key is not None:
                self._results[next_firing.key] = outcome
                if isinstance(outcome, Outcome):
                    self._remember(next_firing.key, outcome)
            if input.parent is not None and isinstance(outcome, Outcome):
                await self._delegation.report(await self._for_caller(outcome))
                if is_finished(outcome.status):  # a delegated child ends with its dispatch
                    return await self._end_delegated_run()
            self._busy = bool(self._queue)
            self._handled_this_run += 1
            if (
                not self._queue
                and not self._ctx.session.pending_delegations  # never drop a running child
                and (
                    self._handled_this_run >= limit
                    or workflow.info().is_continue_as_new_suggested()
                )
            ):
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() and not self._results
                )
                if not self._queue:  # the input as it stands: the spec the turns adopted
                    workflow.continue_as_new(
                        self._ctx.input.model_copy(update={"carried": self._ctx.session})
                    )

    def _upgrades_on_wake(self) -> bool:
        """Whether the firing about to be served wakes a parked session while another Worker
        Deployment version is the target: then this run hands the session on to it before
        resuming. Only when every queued firing survives the hand-over (an update, whose
        caller sends it again to the next run, or the session's own timer, which the next
        run fires again); never for a session parked on a sub-workflow."""
        s = self._ctx.session
        if s.status not in ("awaiting_input", "awaiting_decision") or s.pending_delegations:
            return False
        wakes = isinstance(self._queue[0], DeliverFiring | DecideFiring | SendFiring)
        survives = all(
            f.key is not None
            or (isinstance(f, DeliverFiring) and f.timer)
            or (isinstance(f, DecideFiring) and f.by is not None)  # its deadline: due again
            for f in self._queue
        )
        return (
            wakes
            and survives
            and workflow.info().is_target_worker_deployment_version_changed()
            and patches.patched(UPGRADE_PATCH)
        )

    def _continue_onto_current_version(self) -> NoReturn:
        """Continue as new, parked as it is, on the current version (upgrade on
        continue-as-new); the woken firing's caller re-sends it there (same key)."""
        workflow.logger.info("parked session continues as new onto the current version")
        workflow.continue_as_new(
            self._ctx.input.model_copy(update={"carried": self._ctx.session}),
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    def _hand_over(self, serving: Firing) -> NoReturn:
        """Continue as new with the turn in flight: the next run drives it on, and its caller
        (whose update this run abandons) gets the outcome from the next run by its key."""
        s = self._ctx.session
        if s.inflight is None:  # a turn handed on twice keeps its first caller's key
            s.inflight = InflightTurn(
                key=serving.key,
                disposition=self._disposition,
                trail_from=self._trail_from,
                changed=sorted(variables.changed(self._variables_from, s.variables)),
            )
        else:  # handed on again: what it changed in this run joins what it changed before
            changed = variables.changed(self._variables_from, s.variables)
            s.inflight.changed = sorted({*s.inflight.changed, *changed})
        workflow.continue_as_new(self._ctx.input.model_copy(update={"carried": s}))

    async def _end_delegated_run(self) -> SessionSummary:
        """A finished child returns to its caller; firings queued behind it are refused."""
        for queued in self._queue:
            if queued.key is not None:
                self._results[queued.key] = firing.wire(
                    SessionNotResumableError(
                        f"sub-workflow session {self._ctx.session_id!r} has finished"
                    )
                )
        self._queue.clear()
        self._busy = False
        await workflow.wait_condition(  # a run's end would drop a notification still sending
            lambda: workflow.all_handlers_finished() and not self._results and not self._sending
        )
        return self._summary()

    async def _wait_for_work(self) -> bool:
        """Wait for the next firing; a timed park also wakes itself when ``resume_at`` passes,
        and a decision with a deadline is warned of and taken when its times come.
        False when the run should end instead: it started for a firing that was refused
        (an update-with-start whose update the validator refused) and none came since.

        The wait always passes the park's timeout (None without ``until`` or a deadline) so
        its shape never changes between replays.
        """
        s = self._ctx.session
        if (
            s.status == "new"
            and not self._queue
            and self._ctx.input.parent is None
            and patches.patched(FIRST_FIRING_PATCH)
        ):
            return await self._await_first_firing()
        while True:
            pending = s.pending_input
            timeout: timedelta | None = None
            summary: str | None = None
            idle = False
            deadline: deadlines.Timer | None = None
            if s.status == "awaiting_input" and pending and pending.resume_at:
                timeout = max(pending.resume_at - workflow.now(), timedelta(0))
                summary = f"archmax_wait until {pending.resume_at.isoformat()}"
            elif (deadline := deadlines.next_timer(self._ctx.spec, s, workflow.now())) is not None:
                timeout = deadlines.timeout(deadline, workflow.now())
                summary = deadline.summary
            elif self._may_close_when_idle():
                assert self._ctx.input.idle_close_s is not None
                timeout = timedelta(seconds=self._ctx.input.idle_close_s)
                summary = f"idle close after {timeout}"
                idle = True
            try:
                await workflow.wait_condition(
                    lambda: bool(self._queue), timeout=timeout, timeout_summary=summary
                )
            except TimeoutError:
                if idle:
                    return not await self._close_idle()
                if deadline is not None:
                    if self._deadline_reached(deadline):
                        continue  # warned: wait on for the deadline (or a person)
                    return True
                self._busy = True
                self._queue.append(firing.timer_wake(workflow.now()))
            return True

    def _deadline_reached(self, timer: deadlines.Timer) -> bool:
        """A parked decision's deadline timer fired: at ``warn``, send ``approval.expiring``
        and say the wait goes on (True); at the deadline, queue its decision (False). A firing
        that came meanwhile (a person's) is served first, and the wait after it looks again."""
        if self._queue:
            return False
        s = self._ctx.session
        pending = s.pending_decision
        assert pending is not None  # next_timer found it
        if timer.kind == "warn":
            s.warned = pending.seq
            self._notify(deadlines.EXPIRING)
            return True
        self._busy = True
        decision = deadlines.decision(self._ctx.spec, pending)
        self._queue.append(DecideFiring(decision, by=deadlines.DEADLINE))
        return False

    def _notify(self, event: ApprovalEvent) -> None:
        """Send notification ``event`` of the decision the session is parked at: kept in its
        ``outbox`` until the activity is done with it, so a run that hands the session on
        mid-way leaves it to the next."""
        ctx = self._ctx
        s = ctx.session
        assert s.pending_decision is not None
        request = deadlines.notice(
            event,
            session_id=ctx.session_id,
            workflow=ctx.input.workflow,
            spec=ctx.spec,
            pending=s.pending_decision,
            handoff=projections.last_reply(s) or None,
        )
        s.outbox.append(request)
        self._start_sending(request)

    def _start_sending(self, request: NotifyInput) -> None:
        task = asyncio.create_task(self._send(request))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, request: NotifyInput) -> None:
        """Schedule the notification activity; once it is done (delivered, not configured on
        the worker, refused or given up), the outbox lets go of it."""
        try:
            await contracts.notify.send(request, summary=deadlines.notice_summary(request))
        except ActivityError as failure:
            workflow.logger.warning(
                "notification %s not delivered: %s",
                request.message_id,
                failure.cause or failure,
                extra=telemetry.log_extra(self._ctx),
            )
        s = self._ctx.session
        s.outbox = [r for r in s.outbox if r.message_id != request.message_id]

    def _may_close_when_idle(self) -> bool:
        """Whether this wait may end the run when nothing comes for ``idle_close_s``: a
        finished top-level session waiting on nothing (parked ones stay open: their timers
        and waits are the point; a delegated child ends with its dispatch anyway)."""
        s = self._ctx.session
        return (
            self._ctx.input.idle_close_s is not None
            and is_finished(s.status)
            and self._ctx.input.parent is None
            and not s.pending_delegations
            and not self._queue
            and patches.patched(IDLE_CLOSE_PATCH)
        )

    async def _close_idle(self) -> bool:
        """Checkpoint the session in the store (``<id>/checkpoints/``) and say whether the
        run may end: not when the write failed (it waits again) or a firing came meanwhile
        (it is served). The next firing on the id starts a run from the checkpoint."""
        ctx = self._ctx
        if self._sending:  # the checkpoint holds no notification the closing run still sends
            await workflow.wait_condition(lambda: not self._sending)
        try:
            await contracts.store.checkpoint(
                CheckpointInput(
                    session_id=ctx.session_id,
                    checkpoint=ctx.input.model_copy(update={"carried": ctx.session}),
                ),
                summary=f"idle · checkpoint {ctx.session.status} session, close the run",
            )
        except ActivityError as failure:
            workflow.logger.warning("idle checkpoint not written: %s", failure.cause or failure)
            return False
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and not self._results
        )
        return not self._queue

    async def _await_first_firing(self) -> bool:
        """A run that has admitted no firing yet waits :data:`contracts.FIRST_FIRING_GRACE`
        for one, then ends: a refused first firing leaves no session behind (not listed, not
        ``completed``), and the next firing on that id starts afresh under the workflow as
        it is then."""
        try:
            await workflow.wait_condition(
                lambda: bool(self._queue),
                timeout=contracts.FIRST_FIRING_GRACE,
                timeout_summary="no firing admitted yet",
            )
        except TimeoutError:
            return False
        return True

    async def _process(self, next_firing: Firing) -> Outcome:
        """Serve one firing until the session settles, and say what it came to."""
        turn = self._turn
        turn.awaited = next_firing.key is not None  # an update's caller waits on it
        disposition: Disposition
        self._trail_from = transcript.trail_total(self._ctx.session)
        self._variables_from = dict(self._ctx.session.variables)
        match next_firing:
            case ResumeTurn():
                inflight = self._ctx.session.inflight
                self._disposition = inflight.disposition if inflight else "turn"
                self._trail_from = inflight.trail_from if inflight else self._trail_from
                if inflight is not None:  # what it changed before the hand-over counts
                    for name in inflight.changed:
                        self._variables_from.pop(name, None)
                await turn.drive(resuming=True)
                return await self._settle(self._disposition)
            case ChildSettled(child=child):
                self._disposition = "deliver"
                if await self._delegation.resume(child, turn.resume_script):
                    turn.publish()
                    await turn.drive()
                return await self._settle("deliver")
            case DecideFiring(decision=decision, by=by):
                self._disposition = "decide"
                if by is not None:  # the deadline passed: say so before the turn goes on
                    self._notify(deadlines.EXPIRED)
                await turn.decide(decision, by=by)
                return await self._settle("decide")
            case ReplyFiring(message=message):
                await turn.reply(message)
                return await self._settle("reply")
            case SendFiring(send=send) if self._ctx.session.status == "awaiting_decision":
                await turn.reply(send.message or "")  # a send at a human state is a reply
                return await self._settle("reply")
            case SendFiring(send=send):
                disposition = await self._open_or_deliver(send)
            case DeliverFiring(delivery=delivery):
                disposition = "deliver"
                turn.resume(delivery)
        self._disposition = disposition
        await stored_variables.keep(self._ctx)  # large seeds go to the store before the turn
        turn.publish()
        await turn.drive()
        return await self._settle(disposition)

    async def _open_or_deliver(self, send: SendInput) -> Disposition:
        """A host's send, its files placed first: a new turn, or a delivery into a session
        parked awaiting input."""
        if send.files:
            send = await self._turn.place_files(send)
        if self._ctx.session.status != "awaiting_input":
            turn_spec = firing.spec_to_adopt(self._admission(), send)
            if turn_spec is not None and patches.patched(TURN_SPEC_PATCH):
                self._ctx.adopt(turn_spec)  # the turn runs under the host's workflow
            self._turn.open_turn(send)
            return "turn"
        self._turn.resume(
            DeliverInput(
                trigger=send.trigger,
                variables=send.variables,
                message=send.message,
                mocks=send.mocks,
            )
        )
        return "deliver"

    async def _settle(self, disposition: Disposition) -> Outcome:
        """The artifacts rewritten, the search attributes published, the outcome."""
        await self._turn.persist()
        self._turn.publish()
        telemetry.settled(self._ctx, disposition)
        s = self._ctx.session
        return projections.outcome(
            s,
            self._ctx.input,
            self._delegation.current(),
            disposition,
            self._trail_from,
            variables_from=self._variables_from,
        )

    async def _for_caller(self, outcome: Outcome) -> Outcome:
        """A delegated child's outcome as its caller reads it: with the variables its
        ``manual`` trigger returns, whenever the child set them, whole (a value by reference
        is loaded: the caller reads it from its own store folder, not the child's)."""
        manual = self._ctx.spec.trigger(MANUAL_TRIGGER)
        if manual is None or not manual.returns:
            return outcome
        names = [name for name, _ in signatures.entries(manual.returns)]
        await stored_variables.load(self._ctx, names)
        held = self._ctx.session.variables
        returned = {
            name: Variable(value=held[name].value, locked=held[name].locked)
            for name in names
            if name in held
        }
        return outcome.model_copy(update={"variables": {**outcome.variables, **returned}})

    # --- handlers -------------------------------------------------------------------------

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def send(self, request: SendInput) -> Outcome:
        """A host's firing: a new turn, or a delivery into a session parked for input."""
        return await self._fire(
            lambda view: firing.check_send(view, request),
            lambda key: SendFiring(request, key=key),
        )

    @send.validator
    def _validate_send(self, request: SendInput) -> None:
        self._validate(lambda view: firing.check_send(view, request))

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def deliver(self, delivery: DeliverInput) -> Outcome:
        """Resume a session parked by ``archmax_wait`` with the event that arrived."""
        return await self._fire(
            lambda view: firing.check_delivery(view, delivery),
            lambda key: DeliverFiring(delivery, key=key),
        )

    @deliver.validator
    def _validate_deliver(self, delivery: DeliverInput) -> None:
        self._validate(lambda view: firing.check_delivery(view, delivery))

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def decide(self, decision: DecideInput) -> Outcome:
        """A reviewer picks one of the parked human state's edges; no model interprets it."""
        return await self._fire(
            lambda view: firing.check_decision(view, decision),
            lambda key: DecideFiring(decision, key=key),
        )

    @decide.validator
    def _validate_decide(self, decision: DecideInput) -> None:
        self._validate(lambda view: firing.check_decision(view, decision))

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def reply(self, message: ReplyInput) -> Outcome:
        """A person's message to a session parked at a human state: answered, still parked."""
        return await self._fire(
            lambda view: firing.check_reply(view, message.message),
            lambda key: ReplyFiring(message.message, key=key),
        )

    @reply.validator
    def _validate_reply(self, message: ReplyInput) -> None:
        self._validate(lambda view: firing.check_reply(view, message.message))

    async def _fire(
        self, check: Callable[[Admission], None], queued: Callable[[str], Firing]
    ) -> Outcome:
        """Every update's one path: a key seen before continue-as-new answers its outcome
        again; the caller of a turn a previous run handed on waits for that turn's outcome;
        any other firing is checked against the session as it stands now (the validator ran
        on the session as it was) and queued under its key."""
        remembered = self._remembered()
        if remembered is not None:
            return remembered
        handed_on = self._handed_on()
        if handed_on is not None:
            return await self._outcome_of_handed_on(handed_on)
        check(self._admission())
        return await self._enqueue_and_wait(queued(self._next_key()))

    def _validate(self, check: Callable[[Admission], None]) -> None:
        """An update's validator: what :meth:`_fire` would refuse, refused before anything is
        written (a remembered or handed-on key is answered, never refused)."""
        if self._remembered() is None and self._handed_on() is None:
            check(self._admission())

    @workflow.signal(name="deliver")
    def deliver_signal(self, delivery: DeliverInput) -> None:
        """Fire-and-forget delivery for external systems (``temporal workflow signal``).

        A signal cannot be refused, so an invalid one is dropped: the session stays parked
        exactly as it was, and the refusal is recorded (a memo upsert naming the signal's
        number in this run, its error type and reason) so the session's events report it as
        refused, never as delivered.
        """
        self._deliver_signals += 1
        try:
            firing.check_delivery(self._admission(), delivery)
        except ApplicationError as refusal:
            workflow.logger.warning(
                "deliver signal refused: %s (%s)",
                refusal,
                refusal.type,
                extra=telemetry.log_extra(self._ctx),
            )
            telemetry.signal_refused(self._ctx, refusal.type or "ApplicationError")
            if patches.patched(REFUSED_SIGNAL_PATCH):
                workflow.upsert_memo(
                    {
                        REFUSED_SIGNAL_MEMO: {
                            "signal": self._deliver_signals,
                            "type": refusal.type,
                            "reason": str(refusal),
                        }
                    }
                )
            return
        telemetry.signal_delivered(self._ctx)
        self._busy = True
        self._queue.append(DeliverFiring(delivery))

    @workflow.signal(name=delegation.SETTLED_SIGNAL)
    def sub_workflow_settled(self, report: SubWorkflowReport) -> None:
        """A delegated child settled a turn: parked (the caller mirrors it) or finished (the
        pending call gets its result and the caller's turn goes on)."""
        if self._delegation.on_report(report):
            self._busy = True
            self._queue.append(ChildSettled(report.session_id))

    @workflow.query
    def summary(self) -> SessionSummary:
        """Status, classification, position, pending park, variables, usage."""
        return self._summary()

    @workflow.query
    def view(self) -> SessionView:
        """The whole recorded session: summary, transcript, trail and the agent's plan."""
        ctx = self._ctx
        return projections.view(ctx.session, ctx.input, self._delegation.current(), busy=self._busy)

    def _summary(self) -> SessionSummary:
        ctx = self._ctx
        return projections.summary(
            ctx.session, ctx.input, self._delegation.current(), busy=self._busy
        )

    # --- admission ------------------------------------------------------------------------

    def _admission(self) -> Admission:
        """What the admission checks read of the session, as it stands now."""
        return Admission.of(
            self._ctx.input,
            self._ctx.session,
            busy=self._busy,
            waiting=self._delegation.current(),
        )

    def _next_key(self) -> str:
        """The firing's key: its update id, the caller's idempotency key (unique in a run:
        Temporal hands a repeated id the first result without calling the handler)."""
        info = workflow.current_update_info()
        if info is not None:
            return info.id
        self._seq += 1
        return f"r{self._seq}"

    def _remembered(self) -> Outcome | None:
        """The outcome a retried firing (its key seen before continue-as-new) gets again."""
        info = workflow.current_update_info()
        return self._ctx.session.recent_firings.get(info.id) if info is not None else None

    def _handed_on(self) -> str | None:
        """The key of this update when it is the caller of a turn a previous run handed on
        (the caller re-sent it to this run): it waits for that turn's outcome."""
        info = workflow.current_update_info()
        inflight = self._ctx.session.inflight
        if info is not None and inflight is not None and inflight.key == info.id:
            return info.id
        return None

    async def _outcome_of_handed_on(self, key: str) -> Outcome:
        recent = self._ctx.session.recent_firings
        await workflow.wait_condition(lambda: key in recent)
        return recent[key]

    def _remember(self, key: str, outcome: Outcome) -> None:
        recent = self._ctx.session.recent_firings
        recent[key] = projections.remembered(outcome)
        while len(recent) > RECENT_FIRINGS:
            del recent[next(iter(recent))]

    async def _enqueue_and_wait(self, queued: Firing) -> Outcome:
        """Queue an update's firing and wait for what it came to (a refusal is raised)."""
        key = queued.key
        assert key is not None
        self._busy = True
        self._queue.append(queued)
        await workflow.wait_condition(lambda: key in self._results)
        result = self._results.pop(key)
        if isinstance(result, ApplicationError):
            raise result
        return result
