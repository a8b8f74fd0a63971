"""``ArchmaxSession``: one archmax session as one long-running Temporal workflow.

The workflow id is the session id. A turn is an iteration of the run loop, not a workflow:
a finished turn leaves the workflow waiting for the session's next firing, so transcript,
position, variables and trail simply carry forward.

- ``send`` (update) opens a turn, or, on a session parked by ``archmax_wait``, delivers into
  it; it returns the :class:`Outcome` when the turn settles.
- ``deliver`` (update, typed rejection; and signal, for external systems) resumes a session
  parked awaiting input. Validators run before anything is written: a refused delivery leaves
  no event in the history.
- ``archmax_wait({until})`` parks on ``wait_condition`` with a durable timer; when it fires
  the session delivers itself trigger ``timer`` with variable ``now``.
- Every model call is an activity; the runtime tools are handled here, deterministically.

Workflow code does no I/O and reads no clock but ``workflow.now()``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import (
        contracts,
        delegation,
        governance,
        matching,
        prompt,
        runtime_tools,
        sandbox,
        signatures,
        todos,
        variables,
        workspace_tools,
    )
    from archmax_temporal.workflows import search_attributes as sa
    from archmax_temporal.workflows.durations import InvalidUntilError, resolve_until
    from archmax_temporal.workflows.errors import (
        ArchmaxError,
        EmptyMessageError,
        InvalidDecisionTargetError,
        InvalidVariableNameError,
        MissingDeliveryTriggerError,
        SessionNotAwaitingInputError,
        SessionNotParkedError,
        SessionNotResumableError,
        TriggerInputError,
        UnknownTriggerError,
        WorkflowDisabledError,
    )
    from archmax_temporal.workflows.hook_runner import HookRunner, ScriptDispatcher, journal_entry
    from archmax_temporal.workflows.host_tools import HostToolCall
    from archmax_temporal.workflows.models import (
        DecideInput,
        DecisionEdge,
        DeliverInput,
        Disposition,
        Message,
        ModelCallInput,
        ModelCallResult,
        Outcome,
        OutcomeKind,
        PendingDecision,
        PendingDelegation,
        PendingInput,
        PendingScript,
        PersistTurnInput,
        Raised,
        ReplyInput,
        ScriptJournal,
        SendInput,
        SessionExit,
        SessionInput,
        SessionState,
        SessionSummary,
        SessionView,
        SubWorkflowReport,
        ToolCall,
        ToolSchema,
        TrailKind,
        TrailStep,
        is_finished,
    )
    from archmax_temporal.workflows.paths import MISSING, InvalidPathError, resolve_path
    from archmax_temporal.workflows.spec import TIMER_TRIGGER
    from archmax_temporal.workflows.workspace_tools import (
        FilePlacementInput,
        PlacedFile,
        WorkspaceToolInput,
    )

_Stop = Literal["continue", "raised", "parked", "routed", "rejected"]


@dataclass
class _Request:
    """A queued firing: a host's send, a delivery (update, signal or the session's timer),
    a reviewer's decision, or a person's reply to a human park."""

    key: str | None
    send: SendInput | None = None
    deliver: DeliverInput | None = None
    decide: DecideInput | None = None
    reply: str | None = None
    child: str | None = None
    """A parked sub-workflow's report, by its session id (workflows/delegation.py)."""


@dataclass
class _ToolAnswer:
    content: str
    status: Literal["ok", "error", "blocked"] = "ok"
    rule: str | None = None


class _FiringRefused(Exception):
    """A firing refused while it was being prepared; the session was not touched."""

    def __init__(self, error: ApplicationError) -> None:
        super().__init__(str(error))
        self.error = error


def _mocked_answer(result: Any) -> _ToolAnswer:
    """A mock's answer: its result as text; a mapping with an ``error`` key fails the call."""
    if isinstance(result, dict) and "error" in result:
        return _ToolAnswer(matching.mock_result_text(result["error"]), "error")
    return _ToolAnswer(matching.mock_result_text(result))


@workflow.defn(name=contracts.WORKFLOW_NAME)
class ArchmaxSession:
    """One session: its durable state, its handlers and its turn loop."""

    @workflow.init
    def __init__(self, input: SessionInput) -> None:
        self._input = input
        self._spec = input.spec
        self._s: SessionState = input.carried or SessionState(status="completed")
        self._fresh = input.carried is None
        self._queue: list[_Request] = []
        self._results: dict[str, Outcome | ApplicationError] = {}
        self._busy = False
        self._seq = 0
        self._handled_this_run = 0
        self._follow_up = False
        self._hooks = HookRunner(input)
        self._delegation = delegation.Delegations(self)
        if input.initial is not None and self._fresh:  # a delegated child's manual firing
            self._busy = True
            self._queue.append(_Request(key=None, send=input.initial))

    # --- run loop -------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: SessionInput) -> SessionSummary:
        """Serve the session's firings forever; continue as new when the history grows."""
        limit = input.requests_per_run or contracts.DEFAULT_REQUESTS_PER_RUN
        while True:
            await self._wait_for_work()
            request = self._queue.pop(0)
            outcome: Outcome | ApplicationError
            try:
                outcome = await self._process(request)
            except _FiringRefused as refused:
                outcome = refused.error
            if request.key is not None:
                self._results[request.key] = outcome
            if input.parent is not None and isinstance(outcome, Outcome):
                await self._delegation.report(outcome)
                if is_finished(outcome.status):  # a delegated child ends with its dispatch
                    return await self._end_delegated_run()
            self._busy = bool(self._queue)
            self._handled_this_run += 1
            if (
                not self._queue
                and not self._s.pending_delegations  # never drop a running child
                and (
                    self._handled_this_run >= limit
                    or workflow.info().is_continue_as_new_suggested()
                )
            ):
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() and not self._results
                )
                if not self._queue:
                    workflow.continue_as_new(input.model_copy(update={"carried": self._s}))

    async def _end_delegated_run(self) -> SessionSummary:
        """A finished child returns to its caller; firings queued behind it are refused."""
        for queued in self._queue:
            if queued.key is not None:
                self._results[queued.key] = _wire(
                    SessionNotResumableError(
                        f"sub-workflow session {self._input.session_id!r} has finished"
                    )
                )
        self._queue.clear()
        self._busy = False
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and not self._results
        )
        return self._summary()

    async def _wait_for_work(self) -> None:
        """Wait for the next firing; a timed park also wakes itself when ``resume_at`` passes.

        The wait always passes the park's timeout (None without ``until``) so its shape never
        changes between replays.
        """
        pending = self._s.pending_input
        timeout: timedelta | None = None
        summary: str | None = None
        if self._s.status == "awaiting_input" and pending and pending.resume_at:
            timeout = max(pending.resume_at - workflow.now(), timedelta(0))
            summary = f"archmax_wait until {pending.resume_at.isoformat()}"
        try:
            await workflow.wait_condition(
                lambda: bool(self._queue), timeout=timeout, timeout_summary=summary
            )
        except TimeoutError:
            now = workflow.now()
            self._busy = True
            self._queue.append(
                _Request(
                    key=None,
                    deliver=DeliverInput(trigger=TIMER_TRIGGER, variables={"now": now.isoformat()}),
                )
            )

    async def _process(self, request: _Request) -> Outcome:
        disposition: Disposition
        if request.child is not None:
            if await self._delegation.resume(request.child):
                self._publish()
                await self._drive()
            return await self._settle("deliver")
        if request.decide is not None:
            disposition = "decide"
            await self._decide(request.decide)
            return await self._settle(disposition)
        reply = request.reply
        if request.send is not None and self._s.status == "awaiting_decision":
            reply = request.send.message or ""
        if reply is not None:
            await self._reply(reply)
            return await self._settle("reply")
        if request.send is not None and request.send.files:
            request.send = await self._place_files(request.send)
        if request.send is not None and self._s.status != "awaiting_input":
            disposition = "turn"
            self._open_turn(request.send)
        else:
            disposition = "deliver"
            delivery = request.deliver or DeliverInput(
                trigger=request.send.trigger if request.send else None,
                variables=request.send.variables if request.send else {},
                message=request.send.message if request.send else None,
            )
            self._resume(delivery)
        self._publish()
        await self._drive()
        return await self._settle(disposition)

    async def _place_files(self, firing: SendInput) -> SendInput:
        """Place the firing's files in ``scratchpad/attachments/`` (one session at a time,
        never overwriting) and seed each variable with the placed path. A refused placement
        (a binary file on a text-only store) refuses the firing and writes nothing."""
        try:
            placed = await contracts.workspace.place_files(
                FilePlacementInput(
                    session_id=self._input.session_id,
                    files={
                        var: PlacedFile(name=f.name, content=f.content, encoding=f.encoding)
                        for var, f in firing.files.items()
                    },
                ),
                summary=f"place {len(firing.files)} file(s)",
            )
        except ActivityError as failure:
            cause = failure.cause
            if isinstance(cause, ApplicationError):
                raise _FiringRefused(
                    ApplicationError(cause.message, type=cause.type, non_retryable=True)
                ) from None
            raise _FiringRefused(ApplicationError(str(failure), non_retryable=True)) from None
        return firing.model_copy(
            update={"variables": {**firing.variables, **placed.paths}, "files": {}}
        )

    async def _settle(self, disposition: Disposition) -> Outcome:
        await self._persist()
        self._publish()
        return self._outcome(disposition)

    # --- handlers -------------------------------------------------------------------------

    @workflow.update
    async def send(self, firing: SendInput) -> Outcome:
        """A host's firing: a new turn, or a delivery into a session parked for input."""
        self._check_send(firing)
        return await self._enqueue_and_wait(_Request(key=self._next_key(), send=firing))

    @send.validator
    def _validate_send(self, firing: SendInput) -> None:
        self._check_send(firing)

    @workflow.update
    async def deliver(self, delivery: DeliverInput) -> Outcome:
        """Resume a session parked by ``archmax_wait`` with the event that arrived."""
        self._check_delivery(delivery)
        return await self._enqueue_and_wait(_Request(key=self._next_key(), deliver=delivery))

    @deliver.validator
    def _validate_deliver(self, delivery: DeliverInput) -> None:
        self._check_delivery(delivery)

    @workflow.update
    async def decide(self, decision: DecideInput) -> Outcome:
        """A reviewer picks one of the parked human state's edges; no model interprets it."""
        self._check_decision(decision)
        return await self._enqueue_and_wait(_Request(key=self._next_key(), decide=decision))

    @decide.validator
    def _validate_decide(self, decision: DecideInput) -> None:
        self._check_decision(decision)

    @workflow.update
    async def reply(self, message: ReplyInput) -> Outcome:
        """A person's message to a session parked at a human state: answered, still parked."""
        self._check_reply(message.message)
        return await self._enqueue_and_wait(_Request(key=self._next_key(), reply=message.message))

    @reply.validator
    def _validate_reply(self, message: ReplyInput) -> None:
        self._check_reply(message.message)

    @workflow.signal(name="deliver")
    def deliver_signal(self, delivery: DeliverInput) -> None:
        """Fire-and-forget delivery for external systems (``temporal workflow signal``).

        A signal cannot be refused, so an invalid one is logged and dropped: the session stays
        parked exactly as it was.
        """
        try:
            self._check_delivery(delivery)
        except ApplicationError as refusal:
            workflow.logger.warning("deliver signal refused: %s (%s)", refusal, refusal.type)
            return
        self._busy = True
        self._queue.append(_Request(key=None, deliver=delivery))

    @workflow.signal(name=delegation.SETTLED_SIGNAL)
    def sub_workflow_settled(self, report: SubWorkflowReport) -> None:
        """A delegated child settled a turn: parked (the caller mirrors it) or finished (the
        pending call gets its result and the caller's turn goes on)."""
        if self._delegation.on_report(report):
            self._busy = True
            self._queue.append(_Request(key=None, child=report.session_id))

    @workflow.query
    def summary(self) -> SessionSummary:
        """Status, classification, position, pending park, variables, usage."""
        return self._summary()

    @workflow.query
    def view(self) -> SessionView:
        """The whole recorded session: summary, transcript, trail and the agent's plan."""
        return SessionView(
            summary=self._summary(),
            transcript=self._s.transcript,
            trail=self._s.trail,
            todos=self._s.todos,
        )

    def _check_send(self, firing: SendInput) -> None:
        self._delegation.refuse_firing()
        if self._busy or self._s.status == "running":
            raise _wire(
                SessionNotResumableError(
                    f"session {self._input.session_id!r} is mid-turn; retry after it settles"
                )
            )
        self._check_names({**firing.variables, **firing.files})
        if self._s.status == "awaiting_input":
            if not firing.trigger:
                raise _wire(MissingDeliveryTriggerError("a delivery needs a trigger id"))
            return
        if self._s.status == "awaiting_decision":
            self._check_reply(firing.message or "")
            return
        if self._spec.disabled:
            raise _wire(
                WorkflowDisabledError(
                    f"Refusing to start: workflow '{self._input.workflow}' is disabled."
                )
            )
        if self._s.state is None and self._spec.start_state_for(firing.trigger) is None:
            declared = ", ".join(self._spec.trigger_ids()) or "(none)"
            raise _wire(
                UnknownTriggerError(
                    f"trigger {firing.trigger!r} is not declared by workflow "
                    f"{self._input.workflow!r}; declared triggers: {declared}"
                )
            )
        incoming = {
            **firing.variables,
            **{var: f"scratchpad/attachments/{f.name}" for var, f in firing.files.items()},
        }
        seeded = variables.seed(self._s.variables, incoming, replace_title=False)
        problems = signatures.missing_inputs(
            firing.trigger, self._spec.trigger(firing.trigger), seeded
        )
        if problems:
            raise _wire(TriggerInputError("; ".join(problems)))

    def _check_delivery(self, delivery: DeliverInput) -> None:
        self._delegation.refuse_firing()
        if self._busy or self._s.status != "awaiting_input":
            raise _wire(
                SessionNotAwaitingInputError(
                    f"session {self._input.session_id!r} is not parked awaiting input "
                    f"(status: {'running' if self._busy else self._s.status})"
                )
            )
        if not delivery.trigger or not delivery.trigger.strip():
            raise _wire(MissingDeliveryTriggerError("a delivery needs a trigger id"))
        self._check_names(delivery.variables)

    def _check_human_park(self) -> PendingDecision:
        self._delegation.refuse_firing()
        pending = self._s.pending_decision
        if self._busy or self._s.status != "awaiting_decision" or pending is None:
            raise _wire(
                SessionNotParkedError(
                    f"session {self._input.session_id!r} is not parked at a human state "
                    f"(status: {'running' if self._busy else self._s.status})"
                )
            )
        return pending

    def _check_decision(self, decision: DecideInput) -> None:
        pending = self._check_human_park()
        targets = [edge.to for edge in pending.transitions]
        if decision.to not in targets:
            raise _wire(
                InvalidDecisionTargetError(
                    f"{decision.to!r} is not a transition of '{pending.state}'; "
                    f"valid targets: {', '.join(targets)}"
                )
            )

    def _check_reply(self, message: str) -> None:
        self._check_human_park()
        if not message or not message.strip():
            raise _wire(EmptyMessageError("a reply needs a non-empty message"))

    def _check_names(self, seeds: dict[str, Any]) -> None:
        bad = variables.invalid_names(list(seeds))
        if bad:
            raise _wire(
                InvalidVariableNameError(
                    f"invalid variable name(s): {', '.join(map(str, bad))} "
                    "(names match ^[a-z][a-z0-9_]*$; 'trigger' is reserved)"
                )
            )

    def _next_key(self) -> str:
        self._seq += 1
        return f"r{self._seq}"

    async def _enqueue_and_wait(self, request: _Request) -> Outcome:
        assert request.key is not None
        self._busy = True
        self._queue.append(request)
        key = request.key
        await workflow.wait_condition(lambda: key in self._results)
        result = self._results.pop(key)
        if isinstance(result, ApplicationError):
            raise result
        return result

    # --- turn boundaries ------------------------------------------------------------------

    def _open_turn(self, firing: SendInput) -> None:
        """A turn boundary: reset the turn's own mechanics, keep the conversation."""
        s = self._s
        s.park_counts = {}
        s.raised = None
        s.rejected = None
        self._follow_up = s.state is not None
        if s.state is None:
            start = self._spec.start_state_for(firing.trigger)
            assert start is not None  # the validator refused undeclared triggers
            s.state = start
            s.entry_state = start
        self._new_visit()
        s.trigger = firing.trigger
        s.variables = variables.set_trigger(
            variables.seed(s.variables, firing.variables, replace_title=False), firing.trigger
        )
        self._trail(s.state, "trigger", firing.trigger)
        if firing.message:
            s.transcript.append(Message(role="user", content=firing.message, state=s.state))
        else:
            self._note(
                "opening",
                f"[opening] trigger {firing.trigger!r} fired" + _with_variables(firing.variables),
            )
        s.status = "running"
        s.turns += 1

    def _resume(self, delivery: DeliverInput) -> None:
        """An accepted delivery: seed, record the arrival, and continue in the parked state."""
        s = self._s
        assert delivery.trigger and s.state is not None
        s.trigger = delivery.trigger
        s.variables = variables.set_trigger(
            variables.seed(s.variables, delivery.variables, replace_title=True), delivery.trigger
        )
        self._trail(s.state, "trigger", delivery.trigger)
        self._note(
            "event",
            f"[event] trigger {delivery.trigger!r} delivered" + _with_variables(delivery.variables),
        )
        if delivery.message:
            s.transcript.append(Message(role="user", content=delivery.message, state=s.state))
        s.pending_input = None
        s.status = "running"
        s.deliveries += 1
        self._follow_up = False

    # --- human states ---------------------------------------------------------------------

    async def _decide(self, decision: DecideInput) -> None:
        """Commit the decision, note it, and continue in the target state."""
        s = self._s
        pending = s.pending_decision
        assert pending is not None
        s.pending_decision = None
        s.status = "running"
        comment = decision.comment.strip() if decision.comment else None
        s.state = decision.to
        self._new_visit()
        self._trail(decision.to, "human", comment)
        self._note(
            "decision",
            f"[decision] the reviewer chose '{decision.to}' at '{pending.state}'"
            + (f": {comment}" if comment else "."),
        )
        self._follow_up = False
        self._publish()
        if self._spec.state(decision.to).is_human:
            await self._park_for_decision()
            return
        await self._drive()

    async def _reply(self, message: str) -> None:
        """Answer a person on one tool-less call; the session stays parked, record unchanged."""
        s = self._s
        s.transcript.append(Message(role="user", content=message, state=s.state))
        result = await self._call_model(handoff=True)
        if result is not None and result.content:
            s.transcript.append(Message(role="assistant", content=result.content, state=s.state))

    async def _park_for_decision(self) -> None:
        """Park at the human state the session stands in, after one handoff message."""
        s = self._s
        slug = self._state_slug()
        state = self._spec.state(slug)
        s.decisions += 1
        s.pending_decision = PendingDecision(
            state=slug,
            title=state.title,
            seq=s.decisions,
            transitions=[
                DecisionEdge(to=t.to, description=t.description, type=t.type)
                for t in state.transitions
            ],
            evidence=list(state.evidence),
            created_at=workflow.now(),
        )
        s.status = "awaiting_decision"
        result = await self._call_model(handoff=True)
        if result is not None and result.content:
            s.transcript.append(Message(role="assistant", content=result.content, state=slug))

    # --- the agent loop -------------------------------------------------------------------

    async def _drive(self) -> None:
        """Call the model and run its tool calls until the turn settles."""
        visit_calls = 0
        routes = 0
        while True:
            slug = self._state_slug()
            state = self._spec.state(slug)
            if state.is_human:
                await self._park_for_decision()
                return
            max_calls = state.budget.max_turns or contracts.DEFAULT_MAX_MODEL_CALLS_PER_VISIT
            stop: _Stop = "continue"
            refused = await self._entry_hooks(slug)
            if refused is not None:
                stop = self._turn_failure(refused, routes)
            elif visit_calls >= max_calls:
                stop = self._turn_failure(
                    f"budget.maxTurns ({max_calls}) exhausted in state '{slug}'", routes
                )
            else:
                result = await self._call_model(handoff=False)
                if result is None:
                    stop = self._turn_failure(self._last_model_failure, routes)
                else:
                    visit_calls += 1
                    self._s.transcript.append(
                        Message(
                            role="assistant",
                            content=result.content,
                            tool_calls=result.tool_calls,
                            state=slug,
                        )
                    )
                    if result.tool_calls:
                        stop = await self._run_tool_calls(result.tool_calls)
                        if self._state_slug() != slug:
                            visit_calls = 0
                    else:
                        failure, retry = await self._completion_hooks(slug)
                        if failure is not None:
                            stop = self._turn_failure(failure, routes)
                        elif retry:
                            continue
                        else:
                            shortfall = self._returns_shortfall(slug)
                            if shortfall is not None:
                                self._s.rejected = shortfall
                                self._s.status = "rejected"
                                return
                            self._s.status = "completed"
                            return

            if stop == "routed":
                routes += 1
                visit_calls = 0
                continue
            if stop in ("raised", "parked", "rejected"):
                return

    def _state_slug(self) -> str:
        assert self._s.state is not None
        return self._s.state

    async def _call_model(self, *, handoff: bool) -> ModelCallResult | None:
        """One model call as an activity; None (with the reason kept) when it failed for good."""
        slug = self._state_slug()
        state = self._spec.state(slug)
        system = "\n\n".join(
            [
                prompt.render_system_prompt(self._spec, self._input.prompt, self._input.workflow),
                prompt.render_state_block(
                    self._spec,
                    slug,
                    entry_state=self._s.entry_state,
                    follow_up=self._follow_up,
                    variables=self._s.variables,
                    handoff=handoff,
                    skills={
                        slug_: description
                        for slug_, description in self._input.prompt.skills.items()
                        if slug_ in governance.enabled_skills(self._spec, slug)
                    },
                ),
            ]
        )
        call = ModelCallInput(
            session_id=self._input.session_id,
            state=slug,
            model=state.model or self._spec.settings.model,
            messages=[Message(role="system", content=system), *self._s.transcript],
            tools=self._surface(slug),
            tool_choice="none" if handoff else "auto",
        )
        if state.budget.timeout_ms:
            per_call = timedelta(milliseconds=state.budget.timeout_ms)
            attempt_timeout, deadline = per_call, per_call
        else:
            attempt_timeout = contracts.DEFAULT_MODEL_CALL_TIMEOUT
            deadline = contracts.DEFAULT_MODEL_CALL_DEADLINE
        try:
            result = await contracts.model.complete(
                call,
                summary=f"{'handoff' if handoff else 'model'} · {slug}",
                attempt_timeout=attempt_timeout,
                deadline=deadline,
            )
        except ActivityError as failure:
            cause = failure.cause
            detail = str(cause) if cause is not None else str(failure)
            self._last_model_failure = f"model call failed in state '{slug}': {detail}"
            return None
        self._s.usage = self._s.usage.plus(result.usage)
        return result

    def _surface(self, slug: str) -> list[ToolSchema]:
        """What the model is shown in ``slug``: the runtime tools no denial bans and the
        workspace tools the state discloses."""
        runtime = [
            schema
            for schema in runtime_tools.runtime_tool_schemas(self._spec.state(slug))
            if governance.forbidden_outright(self._spec, slug, schema.name) is None
        ]
        candidates = [
            *workspace_tools.workspace_tool_schemas(),
            *self._input.host_tools,
            *delegation.tool_schemas(self._input.delegates),
        ]
        candidates.insert(len(workspace_tools.WORKSPACE_TOOLS), todos.write_todos_schema())
        candidates.insert(len(workspace_tools.WORKSPACE_TOOLS) + 1, sandbox.archmax_eval_schema())
        if governance.enabled_skills(self._spec, slug):  # a script lives in a skill bundle
            candidates.insert(
                len(workspace_tools.WORKSPACE_TOOLS) + 2, sandbox.archmax_run_schema()
            )
        shown = set(governance.disclosed_tools(self._spec, slug, [s.name for s in candidates]))
        return runtime + [s for s in candidates if s.name in shown]

    async def _run_tool_calls(self, calls: list[ToolCall]) -> _Stop:
        """Answer every call of one assistant message, in order; then park if one waited."""
        advanced_to: str | None = None
        park: PendingInput | None = None
        for position, call in enumerate(calls):
            arguments, parse_error = _arguments(call)
            if parse_error is not None:
                self._answer(call, _ToolAnswer(parse_error, "error"))
                continue
            banned = (
                governance.forbidden_outright(self._spec, self._state_slug(), call.name)
                if call.name in runtime_tools.RUNTIME_TOOLS
                else None
            )
            if banned is not None:
                self._answer(
                    call,
                    _ToolAnswer(
                        f"Blocked by governance ({banned}): {call.name} is forbidden here.",
                        "blocked",
                        rule=banned,
                    ),
                )
                continue
            if call.name == runtime_tools.RAISE:
                if len(calls) > 1:
                    self._answer(
                        call,
                        _ToolAnswer(
                            "archmax_raise refused: it must be the only tool call of its "
                            "message. Nothing was raised.",
                            "error",
                        ),
                    )
                    continue
                refusal = _raise_refusal(arguments)
                if refusal is not None:
                    self._answer(call, _ToolAnswer(f"archmax_raise refused: {refusal}", "error"))
                    continue
                code, reason = str(arguments["code"]), str(arguments["reason"])
                self._answer(call, _ToolAnswer(f"Session ended as failed ({code})."))
                self._s.raised = Raised(code=code, reason=reason, state=self._state_slug())
                self._s.status = "failed"
                return "raised"
            if call.name == runtime_tools.ADVANCE:
                if advanced_to is not None:
                    self._answer(
                        call,
                        _ToolAnswer(
                            "archmax_advance rejected: only one advance per message; this "
                            f"message already advanced to '{advanced_to}'.",
                            "error",
                        ),
                    )
                    continue
                answer, terminal = await self._advance(arguments)
                if answer.status == "ok":
                    advanced_to = self._state_slug()
                self._answer(call, answer)
                if terminal is not None:
                    for later in calls[position + 1 :]:
                        self._answer(
                            later, _ToolAnswer(f"Not run: the turn failed ({terminal}).", "error")
                        )
                    return self._turn_failure(terminal, routes=0)
                continue
            if call.name == runtime_tools.WAIT:
                if park is not None:
                    self._answer(
                        call, _ToolAnswer("archmax_wait refused: already parking.", "error")
                    )
                    continue
                wait_answer, park, failure = self._wait(arguments)
                self._answer(call, wait_answer)
                if failure is not None:
                    for later in calls[position + 1 :]:  # every call needs its result
                        self._answer(
                            later, _ToolAnswer(f"Not run: the turn failed ({failure}).", "error")
                        )
                    return self._turn_failure(failure, routes=0)
                continue
            if call.name == runtime_tools.SET_VARIABLES:
                self._answer(call, self._set_variables(arguments))
                continue
            if call.name == runtime_tools.GET_VARIABLES:
                self._answer(call, self._get_variables(arguments))
                continue
            if call.name == runtime_tools.RESET:
                answer = self._reset(arguments)
                self._answer(call, answer)
                continue
            if call.name == runtime_tools.NOTE:
                self._answer(
                    call, _ToolAnswer("archmax_note is reserved for the runtime.", "blocked")
                )
                continue
            if delegation.target_of(call.name) is not None:
                dispatched = await self._delegation.dispatch(call, arguments)
                terminal = dispatched.terminal
            else:
                governed, terminal = await self._governed_call(call, arguments)
                if governed is not None:
                    self._answer(call, governed)
            if terminal is not None:
                for later in calls[position + 1 :]:
                    self._answer(
                        later, _ToolAnswer(f"Not run: the turn failed ({terminal}).", "error")
                    )
                return self._turn_failure(terminal, routes=0)
        if self._s.pending_delegations:  # a child parked: the session parks with it
            self._delegation.mirror()
            return "parked"
        if park is not None:
            await self._park(park)
            return "parked"
        return "continue"

    async def _governed_call(
        self, call: ToolCall, arguments: dict[str, Any]
    ) -> tuple[_ToolAnswer | None, str | None]:
        """Substitute, govern, then run a non-runtime tool as an activity.

        Every call is decided, disclosed or not. A refusal is answered as blocked with the
        rule that refused it and the model goes on; an unresolvable guard is terminal (the
        second value: the turn-failure reason). A tool that fails is an error result the
        model reads, never a turn failure. No answer (None) for an ``archmax_run`` whose script
        waits on a parked sub-workflow: the session parks, and the answer comes on resume.
        """
        slug = self._state_slug()
        substituted, problem = governance.substitute_references(arguments, self._s.variables)
        if problem is not None:
            return _ToolAnswer(f"{call.name} refused: {problem}", "error"), None
        verdict = governance.decide(self._spec, slug, call.name, substituted, self._s.variables)
        if not verdict.allowed:
            answer = _ToolAnswer(
                f"Blocked by governance ({verdict.rule}): {verdict.reason}",
                "blocked",
                rule=verdict.rule,
            )
            return answer, (verdict.reason if verdict.terminal else None)
        mock = matching.find_mock(self._input.mocks, call.name, substituted)
        if mock is not None:
            return _mocked_answer(mock.result), None
        if call.name == todos.WRITE_TODOS:
            plan, text = todos.write(substituted)
            if plan is None:
                return _ToolAnswer(text, "error"), None
            self._s.todos = plan
            return _ToolAnswer(text), None
        if call.name == sandbox.ARCHMAX_EVAL:
            return _ToolAnswer(*await self._hooks.run_eval(self._s, slug, substituted)), None
        if call.name == sandbox.ARCHMAX_RUN:
            ran = await self._hooks.run_script(
                self._s, slug, substituted, dispatch=self._script_dispatch(call.id, substituted)
            )
            if ran is None:  # a child it dispatched parked: the call is answered on resume
                return None, None
            return _ToolAnswer(*ran), None
        if any(tool.name == call.name for tool in self._input.host_tools):
            return await self._host_tool(call.name, substituted), None
        if call.name not in contracts.workspace.TOOL_ACTIVITIES:
            return _ToolAnswer(
                f"Tool '{call.name}' is not registered on this worker.", "error"
            ), None
        settings = self._spec.settings
        try:
            result = await contracts.workspace.run_tool(
                WorkspaceToolInput(
                    session_id=self._input.session_id,
                    tool=call.name,
                    arguments=substituted,
                    max_result_chars=settings.max_result_chars
                    or workspace_tools.DEFAULT_MAX_RESULT_CHARS,
                    visible_skills=sorted(governance.enabled_skills(self._spec, slug)),
                ),
                summary=_tool_summary(call.name, substituted),
            )
        except ActivityError as failure:
            return _ToolAnswer(f"{call.name} failed: {failure.cause or failure}", "error"), None
        return _ToolAnswer(result.content, result.status), None

    def _script_dispatch(self, run_call_id: str, arguments: dict[str, Any]) -> ScriptDispatcher:
        """How the ``archmax_run`` call ``run_call_id`` carries out its script's sub-workflow
        calls: through the session's dispatcher, parking the session if a child parks."""

        async def dispatch(
            tool: str, tool_arguments: dict[str, Any], made: ScriptJournal
        ) -> tuple[str, delegation.Status] | None:
            script = PendingScript(
                arguments=arguments, journal=made, tool=tool, tool_arguments=tool_arguments
            )
            return await self._delegation.from_script(tool, tool_arguments, script, run_call_id)

        return dispatch

    async def _resume_script(
        self, waiting: PendingDelegation, content: str, status: delegation.Status
    ) -> tuple[str, delegation.Status] | None:
        """A script's parked child finished: run the script on from its journal plus the
        child's answer; its result answers the ``archmax_run`` call (None: it parked again)."""
        script = waiting.script
        assert script is not None
        journal = script.journal.then(
            journal_entry(script.tool, script.tool_arguments, content, status)
        )
        return await self._hooks.run_script(
            self._s,
            waiting.state,
            script.arguments,
            dispatch=self._script_dispatch(waiting.tool_call_id, script.arguments),
            journal=journal,
        )

    async def _host_tool(self, name: str, arguments: dict[str, Any]) -> _ToolAnswer:
        """Run a host's Python tool on the worker (one activity, dispatched by name)."""
        try:
            result = await contracts.host_tools.run(
                HostToolCall(session_id=self._input.session_id, tool=name, arguments=arguments),
                summary=f"host tool · {name}",
            )
        except ActivityError as failure:
            return _ToolAnswer(f"{name} failed: {failure.cause or failure}", "error")
        return _ToolAnswer(result.content, result.status)

    def _answer(self, call: ToolCall, answer: _ToolAnswer) -> None:
        self._s.transcript.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                name=call.name,
                content=answer.content,
                status=answer.status,
                rule=answer.rule,
                state=self._s.state,
            )
        )

    # --- runtime tools --------------------------------------------------------------------

    async def _advance(self, arguments: dict[str, Any]) -> tuple[_ToolAnswer, str | None]:
        """Check and commit an advance: the leaving state's ``requires``, the edge, the
        leaving state's ``after`` hooks, the target's ``before`` hooks, then the commit.

        The second value is a turn failure (a hook that could not run, corrections
        exhausted); every other refusal is answered and the agent goes on, nothing committed.
        """
        slug = self._state_slug()
        state = self._spec.state(slug)
        target = arguments.get("to")
        targets = [t.to for t in state.transitions]
        if not targets:
            return _ToolAnswer(
                f"archmax_advance rejected: state '{slug}' is terminal and has no transitions.",
                "error",
            ), None
        unset = [name for name in state.requires if name not in self._s.variables]
        if unset:
            return _ToolAnswer(
                f"archmax_advance rejected (transition.requires): state '{slug}' requires "
                f"{', '.join(map(repr, unset))} to be set before it may be left; record it with "
                "archmax_set_variables.",
                "error",
                rule="transition.requires",
            ), None
        if not isinstance(target, str) or target not in targets:
            return _ToolAnswer(
                f"archmax_advance rejected: {target!r} is not a transition of '{slug}'. "
                f"Valid targets: {', '.join(targets)}.",
                "error",
            ), None
        raw_reason = arguments.get("reason")
        reason = raw_reason if isinstance(raw_reason, str) and raw_reason else None
        gate = await self._hooks.gate_advance(self._s, slug, target, reason)
        if gate.failure is not None:
            return _ToolAnswer(f"archmax_advance failed: {gate.failure}", "error"), gate.failure
        if gate.refusal is not None:
            refusal = gate.refusal
            return _ToolAnswer(refusal.content, "error", rule=refusal.rule), None
        self._s.state = target
        self._new_visit()
        self._s.before_done = True  # the gate ran the target's before hooks
        self._trail(target, "agent", reason)
        return _ToolAnswer(
            f"Advanced to state '{target}'. You may now use the tools allowed in this state."
        ), None

    # --- lifecycle hooks ------------------------------------------------------------------

    def _new_visit(self) -> None:
        """An entry into the current state: its before hooks are due, corrections reset."""
        self._s.before_done = False
        self._s.hook_corrections = {}

    async def _entry_hooks(self, slug: str) -> str | None:
        """The state's before hooks, once per visit not entered by an advance: the turn
        failure a veto (its reason the turn's reply) or a hook error causes, or None."""
        if self._s.before_done:
            return None
        self._s.before_done = True
        if not self._spec.state(slug).before:
            return None
        entry = await self._hooks.on_entry(self._s, slug)
        if entry.reply is not None:
            self._s.transcript.append(Message(role="assistant", content=entry.reply, state=slug))
        return entry.failure

    async def _completion_hooks(self, slug: str) -> tuple[str | None, bool]:
        """A terminal state's after hooks at completion: ``(turn failure, call again)``."""
        state = self._spec.state(slug)
        if not (state.is_terminal and state.after):
            return None, False
        completion = await self._hooks.at_completion(self._s, slug)
        if completion.note is not None:
            self._note("after", completion.note)
            return None, True
        return completion.failure, False

    def _wait(
        self, arguments: dict[str, Any]
    ) -> tuple[_ToolAnswer, PendingInput | None, str | None]:
        """Check a park: the answer, the park to commit, or the turn failure it causes.

        An unreadable ``until`` refuses the park (the model reads why and goes on); the park
        beyond ``budget.maxParks`` is a turn failure, routed by ``on_error``.
        """
        slug = self._state_slug()
        state = self._spec.state(slug)
        reason = arguments.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            refusal = "archmax_wait refused: `reason` must be a non-empty string."
            return _ToolAnswer(refusal, "error"), None, None
        now = workflow.now()
        resume_at = None
        until = arguments.get("until")
        if until is not None and until != "":
            try:
                resume_at = resolve_until(str(until), now)
            except InvalidUntilError as exc:
                return _ToolAnswer(f"archmax_wait refused: {exc}. Not parked.", "error"), None, None
        max_parks = state.budget.max_parks
        if max_parks is not None and self._s.park_counts.get(slug, 0) >= max_parks:
            failure = f"budget.maxParks ({max_parks}) exhausted in state '{slug}'"
            return _ToolAnswer(f"archmax_wait refused: {failure}.", "error"), None, failure
        park = PendingInput(
            state=slug,
            title=state.title,
            reason=reason.strip(),
            parked_at=now,
            resume_at=resume_at,
        )
        wake = f" It wakes itself at {resume_at.isoformat()}." if resume_at else ""
        return (
            _ToolAnswer(
                f"Parked in state '{slug}': {park.reason}. The session resumes here when an event "
                f"is delivered.{wake}"
            ),
            park,
            None,
        )

    async def _park(self, park: PendingInput) -> None:
        """Commit the park; spend the handoff call only if the agent said nothing yet."""
        s = self._s
        s.park_counts[park.state] = s.park_counts.get(park.state, 0) + 1
        if not _agent_spoke_since_last_opening(s.transcript):
            result = await self._call_model(handoff=True)
            if result is not None and result.content:
                s.transcript.append(
                    Message(role="assistant", content=result.content, state=park.state)
                )
        s.pending_input = park
        s.status = "awaiting_input"

    def _returns_shortfall(self, slug: str) -> str | None:
        """At a terminal state, the reason the session is short of its trigger's returns."""
        trigger = self._s.trigger
        if trigger is None or not self._spec.state(slug).is_terminal:
            return None
        return signatures.missing_returns(
            trigger,
            self._spec.trigger(trigger),
            slug,
            self._s.variables,
            allow_unset=self._input.parent is not None,  # the caller is told instead
        )

    def _set_variables(self, arguments: dict[str, Any]) -> _ToolAnswer:
        writes = arguments.get("variables")
        lock = arguments.get("lock")
        refusal = variables.agent_write_refusal(self._s.variables, writes, lock)
        if refusal is None and isinstance(writes, dict) and self._s.trigger is not None:
            refusal = signatures.return_refusal(self._spec.trigger(self._s.trigger), writes)
        if refusal is not None:
            return _ToolAnswer(
                f"archmax_set_variables refused: {refusal}. Nothing was set.", "error"
            )
        assert isinstance(writes, dict)
        self._s.variables = variables.agent_write(self._s.variables, writes, bool(lock))
        return _ToolAnswer(f"Set {', '.join(sorted(writes))}.")

    def _get_variables(self, arguments: dict[str, Any]) -> _ToolAnswer:
        name = arguments.get("name") or None
        path = arguments.get("path") or None
        store = self._s.variables
        if name is None and path is None:
            return _ToolAnswer(
                json.dumps({n: v.model_dump() for n, v in sorted(store.items())}, default=str)
            )
        if name is not None and name not in store:
            known = ", ".join(sorted(store)) or "(none)"
            return _ToolAnswer(f"Unknown variable {name!r}. Set variables: {known}.", "error")
        target = f"{name}.{path}" if name is not None and path is not None else (path or name)
        try:
            value = resolve_path(str(target), variables.plain(store))
        except InvalidPathError as exc:
            return _ToolAnswer(f"archmax_get_variables refused: {exc}", "error")
        if value is MISSING:
            return _ToolAnswer(f"Path {target!r} does not resolve.", "error")
        return _ToolAnswer(json.dumps(value, default=str))

    def _reset(self, arguments: dict[str, Any]) -> _ToolAnswer:
        s = self._s
        if s.entry_state is None or s.state == s.entry_state:
            return _ToolAnswer(
                "archmax_reset refused: the session is already in the state the conversation "
                "began in.",
                "error",
            )
        s.state = s.entry_state
        self._new_visit()
        reason = arguments.get("reason")
        self._trail(s.entry_state, "reset", reason if isinstance(reason, str) else None)
        return _ToolAnswer(f"Reset to state '{s.entry_state}'.")

    # --- failures -------------------------------------------------------------------------

    _last_model_failure: str = "model call failed"

    def _turn_failure(self, reason: str, routes: int) -> _Stop:
        """Route a turn failure through ``on_error`` with an [error] note, or reject."""
        s = self._s
        slug = self._state_slug()
        target = self._spec.state(slug).on_error
        if target is not None and routes < contracts.MAX_ERROR_ROUTES_PER_TURN:
            self._note("error", f"[error] {reason}; routed to '{target}'")
            s.state = target
            self._new_visit()
            self._trail(target, "on_error", reason)
            s.pending_input = None
            return "routed"
        s.rejected = reason
        s.status = "rejected"
        return "rejected"

    # --- records --------------------------------------------------------------------------

    def _trail(self, to: str, kind: TrailKind, reason: str | None) -> None:
        self._s.trail.append(TrailStep(to=to, kind=kind, reason=reason, ts=workflow.now()))

    def _note(self, kind: Any, text: str) -> None:
        """A runtime note: a synthetic ``archmax_note`` call and its result, both marked."""
        s = self._s
        call_id = f"note_{len(s.transcript)}"
        arguments = json.dumps({"kind": kind})
        s.transcript.append(
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=call_id, name=runtime_tools.NOTE, arguments=arguments)],
                note=kind,
                state=s.state,
            )
        )
        s.transcript.append(
            Message(
                role="tool",
                tool_call_id=call_id,
                name=runtime_tools.NOTE,
                content=text,
                note=kind,
                status="ok",
                state=s.state,
            )
        )

    async def _persist(self) -> None:
        """Rewrite the artifacts; a store outage never fails the session (it is logged)."""
        s = self._s
        try:
            await contracts.store.persist_turn(
                PersistTurnInput(
                    session_id=self._input.session_id,
                    workflow=self._input.workflow,
                    spec_hash=self._input.spec_hash,
                    spec=self._spec,
                    status=s.status,
                    state=s.state,
                    trail=s.trail,
                    variables=s.variables,
                    usage=s.usage,
                    transcript=s.transcript,
                ),
                summary=f"artifacts · {s.status}",
            )
        except ActivityError as failure:
            workflow.logger.warning("artifacts not written: %s", failure.cause or failure)

    def _publish(self) -> None:
        """Keep search attributes and the UI's current details in step with the session."""
        s = self._s
        pending = s.pending_input if s.status == "awaiting_input" else None
        updates: list[SearchAttributeUpdate[Any]] = [
            sa.WORKFLOW.value_set(self._input.workflow),
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
        if self._input.search_attributes:
            workflow.upsert_search_attributes(updates)
        details = [f"**{self._input.workflow}** · `{s.status}` in `{s.state}`"]
        if s.status == "awaiting_decision" and s.pending_decision:
            edges = ", ".join(e.to for e in s.pending_decision.transitions)
            details.append(f"awaiting a decision at `{s.pending_decision.state}`: {edges}")
        if pending:
            details.append(f"waiting for: {pending.reason}")
            if pending.resume_at:
                details.append(f"wakes at {pending.resume_at.isoformat()}")
        waiting = self._delegation.current()
        if waiting is not None:
            details.append(
                f"waiting on sub-workflow `{waiting.workflow}`: session `{waiting.session_id}`"
            )
        if s.raised:
            details.append(f"raised `{s.raised.code}`: {s.raised.reason}")
        if s.rejected:
            details.append(f"rejected: {s.rejected}")
        workflow.set_current_details("\n\n".join(details))

    def _exit(self) -> SessionExit | None:
        s = self._s
        if s.status == "completed":
            return SessionExit(success=True)
        if s.status == "failed" and s.raised is not None:
            return SessionExit(success=False, code=s.raised.code, reason=s.raised.reason)
        return None

    def _outcome(self, disposition: Disposition) -> Outcome:
        s = self._s
        kind: OutcomeKind = {  # type: ignore[assignment]
            "completed": "completed",
            "failed": "failed",
            "rejected": "rejected",
            "awaiting_input": "parked",
            "awaiting_decision": "parked",
        }.get(s.status, "rejected")
        parked = s.status == "awaiting_input"
        deciding = s.status == "awaiting_decision"
        waiting = self._delegation.current()
        return Outcome(
            session_id=self._input.session_id,
            kind=kind,
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
            reply=_last_reply(s.transcript),
            rejected=s.rejected,
            exit=self._exit(),
            variables=s.variables,
            trail=s.trail,
            usage=s.usage,
            delegation=waiting,
        )

    def _summary(self) -> SessionSummary:
        s = self._s
        pending = s.pending_input if s.status == "awaiting_input" else None
        waiting = self._delegation.current()
        return SessionSummary(
            session_id=self._input.session_id,
            workflow=self._input.workflow,
            status="running" if self._busy and s.status != "awaiting_input" else s.status,
            classification="finished" if is_finished(s.status) and not self._busy else "open",
            state=s.state,
            spec_hash=self._input.spec_hash,
            pending_input=pending,
            pending_decision=s.pending_decision if s.status == "awaiting_decision" else None,
            wait_reason=pending.reason
            if pending
            else f"waiting on sub-workflow session {waiting.session_id!r}"
            if waiting
            else None,
            resume_at=pending.resume_at if pending else None,
            exit=self._exit(),
            rejected=s.rejected,
            trigger=s.trigger,
            variables=s.variables,
            usage=s.usage,
            turns=s.turns,
            delegation=waiting,
            parent_session_id=self._input.parent.session_id if self._input.parent else None,
        )


def _wire(error: ArchmaxError) -> ApplicationError:
    return error.to_application_error()


def _tool_summary(tool: str, arguments: dict[str, Any]) -> str:
    """``read_file · scratchpad/notes.md``: what the Temporal UI shows for a tool call."""
    for key in ("file_path", "path", "pattern"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return f"{tool} · {value[:80]}"
    return tool


def _arguments(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    try:
        parsed = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"Arguments of {call.name} are not valid JSON ({exc.msg}). Nothing was done."
    if not isinstance(parsed, dict):
        return {}, f"Arguments of {call.name} must be a JSON object. Nothing was done."
    return parsed, None


def _raise_refusal(arguments: dict[str, Any]) -> str | None:
    code, reason = arguments.get("code"), arguments.get("reason")
    if not isinstance(code, str) or not 1 <= len(code.strip()) <= 64 or "\n" in code:
        return "`code` must be a single-line token of 1-64 characters"
    if not isinstance(reason, str) or not reason.strip():
        return "`reason` must be a non-empty string"
    return None


def _agent_spoke_since_last_opening(transcript: list[Message]) -> bool:
    """Whether the agent wrote any text since the person's last message (or last delivery)."""
    for message in reversed(transcript):
        if message.role == "user" or (
            message.role == "tool" and message.note in ("event", "opening")
        ):
            return False
        if message.role == "assistant" and message.note is None and (message.content or "").strip():
            return True
    return False


def _last_reply(transcript: list[Message]) -> str:
    for message in reversed(transcript):
        if message.role == "assistant" and message.note is None and (message.content or "").strip():
            return message.content or ""
    return ""


def _with_variables(seeds: dict[str, Any]) -> str:
    if not seeds:
        return "."
    return " with variables " + json.dumps(seeds, ensure_ascii=False, default=str, sort_keys=True)
