"""The turn engine: what one firing does to a session, from its opening to its settling.

A turn opens (``open_turn``), a parked session resumes (``resume``), a reviewer decides
(``decide``) or a person is answered (``reply``); then :meth:`TurnEngine.drive` calls the model
and answers its tool calls until the turn settles: completed, rejected, raised, or parked
(awaiting input, a decision, or a sub-workflow).

Each tool call is served by the handler the registry (:mod:`archmax_temporal.workflows.tools`)
names: the runtime tools here (their answers in :mod:`archmax_temporal.workflows.runtime_calls`), a
sub-workflow through the dispatcher (:mod:`archmax_temporal.workflows.delegation`), everything else
governed first and then run: ``write_todos`` in the workflow, ``archmax_eval`` / ``archmax_run`` in
the sandbox, a host tool or a workspace tool as its activity.

The engine works through the session's :class:`SessionContext` and schedules activities only through
:mod:`archmax_temporal.workflows.contracts`. Deterministic: the only clock is ``workflow.now()``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import (
        contracts,
        deadlines,
        delegation,
        governance,
        patches,
        projections,
        prompt,
        runtime_calls,
        runtime_tools,
        sandbox,
        signatures,
        stored_variables,
        telemetry,
        text,
        todos,
        tools,
        transcript,
        variables,
        workspace_tools,
    )
    from archmax_temporal.workflows.context import SessionContext, ToolAnswer
    from archmax_temporal.workflows.contracts.host_tools import HostToolCall
    from archmax_temporal.workflows.contracts.workspace import (
        DEFAULT_MAX_RESULT_CHARS,
        FilePlacementInput,
        PlacedFile,
        WorkspaceToolInput,
    )
    from archmax_temporal.workflows.firing import FiringRefused
    from archmax_temporal.workflows.hook_runner import HookRunner, ScriptDispatcher, journal_entry
    from archmax_temporal.workflows.known_texts import KNOWN_TEXTS
    from archmax_temporal.workflows.models import (
        DecidedBy,
        DecideInput,
        DecisionEdge,
        DeliverInput,
        ListedSession,
        Message,
        ModelCallInput,
        ModelCallResult,
        PendingDecision,
        PendingDelegation,
        PendingInput,
        PendingScript,
        PersistTurnInput,
        ScriptJournal,
        SendInput,
        ToolCall,
        ToolSchema,
    )

Stop = Literal["continue", "raised", "parked", "routed", "rejected"]
"""How a step of the drive loop left the turn."""

MID_TURN_PATCH = "archmax-continue-as-new-mid-turn"
"""``workflow.patched`` id: a turn may continue as new between two model calls."""

LISTED_MEMO_PATCH = "archmax-listed-memo"
"""``workflow.patched`` id: a settled turn publishes its listing in the memo."""

ANSWER_LOGGED_PATCH = "archmax-answer-logged"
"""``workflow.patched`` id: the model activity appends the agent's answer to the store's log
itself (``ModelCallInput.log_answer``), so the next call does not carry it again."""

RESULT_REFS_PATCH = "archmax-tool-result-refs"
"""``workflow.patched`` id: a model call names the tool results the store keeps by digest
instead of carrying them (``ModelCallInput.refs``)."""

UNHELD_PROMPT_PATCH = "archmax-unheld-prompt-sent-again"
"""``workflow.patched`` id: a model call a worker of a version before ``PromptMissing`` failed
for a prompt its store lacks (``TranscriptLogDiverged``, detail ``prompt``) is sent again with
the texts, as a ``PromptMissing`` is (such a history may end the turn there instead). Asked only
on that failure, so no other run carries it."""


class ContinueMidTurn(Exception):
    """Raised between two model calls when the turn should go on in a new run (the
    session's history is long): the shell continues as new with the turn in flight."""


@dataclass
class _Batch:
    """One assistant message's tool calls, answered in order: what they committed so far."""

    calls: list[ToolCall]
    advanced_to: str | None = None
    """Where an ``archmax_advance`` of this message landed (one per message)."""
    park: PendingInput | None = None
    """The park an ``archmax_wait`` of this message asked for (committed after the last call)."""


@dataclass(frozen=True)
class _Step:
    """How one runtime call went: it ended the session (raised), or failed the turn."""

    raised: bool = False
    terminal: str | None = None


class TurnEngine:
    """Drives one session's turns: the model, the tool calls, the parks and the failures."""

    def __init__(
        self, ctx: SessionContext, hooks: HookRunner, delegations: delegation.Delegations
    ) -> None:
        self._ctx = ctx
        self._hooks = hooks
        self._delegation = delegations
        self._last_model_failure = "model call failed"
        """Why the last model call failed for good (the turn failure's reason)."""
        self._spec_persisted: str | None = None
        """The spec hash this run last handed to the store activity (it keeps a snapshot of
        each, ``_specs/<hash>.json``)."""
        self._listed: ListedSession | None = None
        """The listing this run last published in the memo (re-published when it changes)."""
        self._calls_this_run = 0
        """The agent's model calls in this run (``model_calls_per_run``)."""
        self._stopped: str | None = None
        """A resumed script's terminal block: the turn fails as soon as it goes on."""
        self._local_effects = False
        """A local activity changed files since the last model call was scheduled: it may not
        be in the history yet, so the turn's save (which prunes the effect journal) must be a
        regular activity (contracts.store.persist_turn)."""
        self.awaited = False
        """An update drove the turn being served: its completion records how the turn ended,
        so the save may be a local activity (whose input the history does not keep). A turn
        no update drove (a signal, a timer, a child's report) is read off the save's input
        (client.events), which only a regular activity records."""
        self.may_hand_over: Callable[[], bool] = lambda: True
        """Whether the shell can continue as new now (nothing else queued or waiting)."""

    # --- turn boundaries ------------------------------------------------------------------

    def open_turn(self, firing: SendInput) -> None:
        """A turn boundary: reset the turn's own mechanics, keep the conversation."""
        ctx = self._ctx
        s = ctx.session
        s.park_counts = {}
        s.raised = None
        s.rejected = None
        s.follow_up = s.state is not None
        start = ctx.spec.start_state_for(firing.trigger)
        if s.state is None:
            assert start is not None  # the validator refused undeclared triggers
            s.state = start
            s.entry_state = start
        elif s.state not in ctx.spec.states:
            assert start is not None  # the validator refused undeclared triggers
            ctx.note(
                "error",
                f"[error] state '{s.state}' no longer exists in workflow "
                f"'{ctx.input.workflow}' (spec {ctx.input.spec_hash}); this turn opens at "
                f"'{start}', where trigger '{firing.trigger}' enters",
            )
            s.state = start
            s.entry_state = start
        elif s.entry_state is not None and s.entry_state not in ctx.spec.states:
            s.entry_state = start or s.state  # archmax_reset returns where this trigger enters
        ctx.new_visit()
        if firing.mocks is not None:  # a case's mocks apply to its own firings
            s.mocks = firing.mocks
        s.trigger = firing.trigger
        s.variables = variables.set_trigger(
            variables.seed(s.variables, firing.variables, replace_title=False), firing.trigger
        )
        ctx.trail(s.state, "trigger", firing.trigger, spec_hash=ctx.input.spec_hash)
        if firing.message:
            transcript.append(s, Message(role="user", content=firing.message, state=s.state))
        else:
            ctx.note(
                "opening",
                f"[opening] trigger {firing.trigger!r} fired" + _with_variables(firing.variables),
            )
        s.status = "running"
        s.turns += 1

    def resume(self, delivery: DeliverInput) -> None:
        """An accepted delivery: seed, record the arrival, and continue in the parked state."""
        ctx = self._ctx
        s = ctx.session
        assert delivery.trigger and s.state is not None
        if delivery.mocks is not None:
            s.mocks = delivery.mocks
        s.trigger = delivery.trigger
        s.variables = variables.set_trigger(
            variables.seed(s.variables, delivery.variables, replace_title=True), delivery.trigger
        )
        ctx.trail(s.state, "trigger", delivery.trigger)
        ctx.note(
            "event",
            f"[event] trigger {delivery.trigger!r} delivered" + _with_variables(delivery.variables),
        )
        if delivery.message:
            transcript.append(s, Message(role="user", content=delivery.message, state=s.state))
        s.pending_input = None
        s.status = "running"
        s.deliveries += 1
        ctx.session.follow_up = False

    async def place_files(self, firing: SendInput) -> SendInput:
        """Place the firing's files in ``scratchpad/attachments/`` (one session at a time,
        never overwriting) and seed each variable with the placed path. A refused placement
        (a binary file on a text-only store) refuses the firing and writes nothing."""
        try:
            placed = await contracts.workspace.place_files(
                FilePlacementInput(
                    session_id=self._ctx.session_id,
                    files={
                        var: PlacedFile(
                            name=f.name, content=f.content, encoding=f.encoding, ref=f.ref
                        )
                        for var, f in firing.files.items()
                    },
                ),
                summary=f"place {len(firing.files)} file(s)",
            )
        except ActivityError as failure:
            cause = failure.cause
            if isinstance(cause, ApplicationError):
                raise FiringRefused(
                    ApplicationError(cause.message, type=cause.type, non_retryable=True)
                ) from None
            raise FiringRefused(ApplicationError(str(failure), non_retryable=True)) from None
        return firing.model_copy(
            update={"variables": {**firing.variables, **placed.paths}, "files": {}}
        )

    # --- human states ---------------------------------------------------------------------

    async def decide(self, decision: DecideInput, *, by: DecidedBy | None = None) -> None:
        """Commit the decision, note it, and continue in the target state. ``by`` names who
        took it when no person did (``deadline``: the state's deadline passed)."""
        ctx = self._ctx
        s = ctx.session
        pending = s.pending_decision
        assert pending is not None
        s.pending_decision = None
        s.status = "running"
        if decision.mocks is not None:
            s.mocks = decision.mocks
        comment = decision.comment.strip() if decision.comment else None
        s.state = decision.to
        ctx.new_visit()
        ctx.trail(decision.to, "human", comment, by=by)
        who = "the reviewer chose" if by is None else f"the {by} took"
        ctx.note(
            "decision",
            f"[decision] {who} '{decision.to}' at '{pending.state}'"
            + (f": {comment}" if comment else "."),
        )
        ctx.session.follow_up = False
        self.publish()
        if ctx.spec.state(decision.to).is_human:
            await self.park_for_decision()
            return
        await self.drive()

    async def reply(self, message: str) -> None:
        """Answer a person on one tool-less call; the session stays parked, record unchanged."""
        s = self._ctx.session
        transcript.append(s, Message(role="user", content=message, state=s.state))
        result = await self.call_model(handoff=True)
        if result is not None and result.content:
            transcript.append(s, Message(role="assistant", content=result.content, state=s.state))

    async def park_for_decision(self) -> None:
        """Park at the human state the session stands in, after one handoff message."""
        ctx = self._ctx
        s = ctx.session
        slug = ctx.state_slug()
        state = ctx.spec.state(slug)
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
            due_at=deadlines.due_at(state.deadline, workflow.now()),
        )
        s.status = "awaiting_decision"
        result = await self.call_model(handoff=True)
        if result is not None and result.content:
            transcript.append(s, Message(role="assistant", content=result.content, state=slug))

    # --- the agent loop -------------------------------------------------------------------

    async def drive(self, *, resuming: bool = False) -> None:
        """Call the model and run its tool calls until the turn settles. Between two model
        calls, when Temporal suggests it (or the run made its ``model_calls_per_run``), the
        turn continues as new: :class:`ContinueMidTurn` carries it to the next run, where
        ``drive(resuming=True)`` goes on from the same place."""
        ctx = self._ctx
        s = ctx.session
        if not resuming:
            s.visit_calls = 0
            s.routes = 0
        while True:
            stopped, self._stopped = self._stopped, None
            if stopped is not None:  # a resumed script's call was refused for good
                if self._turn_failure(stopped, s.routes) != "routed":
                    return
                s.routes += 1
                s.visit_calls = 0
                continue
            if self._should_continue_as_new():
                raise ContinueMidTurn
            visit_calls, routes = s.visit_calls, s.routes
            slug = ctx.state_slug()
            state = ctx.spec.state(slug)
            if state.is_human:
                await self.park_for_decision()
                return
            max_calls = state.budget.max_turns or contracts.DEFAULT_MAX_MODEL_CALLS_PER_VISIT
            stop: Stop = "continue"
            refused = await self._entry_hooks(slug)
            if refused is not None:
                stop = self._turn_failure(refused, routes)
            elif visit_calls >= max_calls:
                stop = self._turn_failure(
                    f"budget.maxTurns ({max_calls}) exhausted in state '{slug}'", routes
                )
            else:
                result = await self.call_model(handoff=False)
                if result is None:
                    stop = self._turn_failure(self._last_model_failure, routes)
                else:
                    visit_calls += 1  # call_model added the answer to the conversation
                    self._calls_this_run += 1
                    if result.tool_calls:
                        stop = await self._run_tool_calls(result.tool_calls)
                        if ctx.state_slug() != slug:
                            visit_calls = 0
                    else:
                        failure, retry = await self._completion_hooks(slug)
                        if failure is not None:
                            stop = self._turn_failure(failure, routes)
                        elif retry:
                            s.visit_calls = visit_calls
                            continue
                        else:
                            shortfall = self._returns_shortfall(slug)
                            if shortfall is not None:
                                s.rejected = shortfall
                                s.status = "rejected"
                                return
                            s.status = "completed"
                            return

            s.visit_calls, s.routes = visit_calls, routes
            if stop == "routed":
                s.routes += 1
                s.visit_calls = 0
                continue
            if stop in ("raised", "parked", "rejected"):
                return

    def _should_continue_as_new(self) -> bool:
        """Whether to hand the turn to a new run here, at a model-call boundary."""
        if self._calls_this_run == 0 or not self.may_hand_over():
            return False  # a new run makes progress before it hands on again
        limit = self._ctx.input.model_calls_per_run
        if limit is not None and self._calls_this_run >= limit:
            return patches.patched(MID_TURN_PATCH)
        return workflow.info().is_continue_as_new_suggested() and patches.patched(MID_TURN_PATCH)

    async def call_model(self, *, handoff: bool) -> ModelCallResult | None:
        """One model call as an activity; None (with the reason kept) when it failed for good.
        The agent's answer (not a handoff's: its caller keeps the text, if any) joins the
        conversation here, logged by the activity itself (``log_answer``)."""
        ctx = self._ctx
        s = ctx.session
        slug = ctx.state_slug()
        state = ctx.spec.state(slug)
        system = "\n\n".join(
            [
                prompt.render_system_prompt(ctx.spec, ctx.input.prompt, ctx.input.workflow),
                prompt.render_state_block(
                    ctx.spec,
                    slug,
                    entry_state=s.entry_state,
                    follow_up=s.follow_up,
                    variables=s.variables,
                    handoff=handoff,
                    skills={
                        slug_: description
                        for slug_, description in ctx.input.prompt.skills.items()
                        if slug_ in governance.enabled_skills(ctx.spec, slug)
                    },
                ),
            ]
        )
        offered = self.surface(slug)
        short = patches.generation()
        system_digest = transcript.name_of(system, short=short)
        tools_digest = None
        if offered:
            tools_text = transcript.schemas_text(offered)
            tools_digest = transcript.name_of(tools_text, short=short)
            # for this worker's model activity (known_texts); nothing here reads it back
            KNOWN_TEXTS.put(tools_digest, tools_text)
        messages, refs = transcript.unlogged(s), dict[int, str]()
        if s.result_refs and patches.patched(RESULT_REFS_PATCH):
            messages, refs = transcript.unlogged_by_ref(s)
        log_answer = not handoff and patches.patched(ANSWER_LOGGED_PATCH)
        call = ModelCallInput(
            session_id=ctx.session_id,
            state=slug,
            model=state.model or ctx.spec.settings.model,
            messages=messages,
            tools=[],  # named by digest (tools_digest), from a session's first call on
            tool_choice="none" if handoff else "auto",
            budget_ms=state.budget.timeout_ms,
            log=transcript.log_of(s),
            system=system if system_digest not in s.prompts_kept else None,
            system_digest=system_digest,
            tools_digest=tools_digest,
            refs=refs,
            log_answer=log_answer,
        )
        summary = f"{'handoff' if handoff else 'model'} · {slug}"
        self._local_effects = False  # recorded when this call's scheduling is
        try:
            while True:
                try:
                    result = await contracts.model.complete(call, summary=summary)
                    break
                except ActivityError as failure:
                    again = self._sent_again(call, failure, system, offered)
                    if again is None:
                        raise
                    call = again
        except ActivityError as failure:
            cause = failure.cause
            if isinstance(cause, ApplicationError) and cause.type == contracts.BUDGET_EXHAUSTED:
                self._last_model_failure = (
                    f"budget.timeoutMs ({state.budget.timeout_ms} ms) exhausted in state '{slug}'"
                )
                return None
            detail = str(cause) if cause is not None else str(failure)
            self._last_model_failure = f"model call failed in state '{slug}': {detail}"
            return None
        s.usage = s.usage.plus(result.usage)
        # a tool list is always named by digest (known_texts): only the system prompt's counts
        transcript.kept_prompts(s, [system_digest])
        answer = Message(
            role="assistant", content=result.content, tool_calls=result.tool_calls, state=slug
        )
        if log_answer:  # the activity logged the answer: it joins the conversation logged
            transcript.append(s, answer)
        if result.logged is not None and result.log_hash is not None:
            transcript.logged(s, result.logged, result.log_hash)
        if not handoff and not log_answer:
            transcript.append(s, answer)
        return result

    def _sent_again(
        self,
        call: ModelCallInput,
        failure: ActivityError,
        system: str,
        offered: list[ToolSchema],
    ) -> ModelCallInput | None:
        """The call to send again after ``failure``, carrying what the store did not give
        back: the tool results' text (``ToolResultMissing``) or the system prompt and the
        tool schemas (``PromptMissing``); None when the failure is another, or the call
        already carries what the store lost (each fallback is taken at most once)."""
        if call.refs and _is_error(failure, transcript.RESULT_MISSING):
            self._ctx.session.result_refs = {}
            return call.model_copy(
                update={"messages": transcript.unlogged(self._ctx.session), "refs": {}}
            )
        if not (call.system is None or (offered and not call.tools)):
            return None  # the call carries its texts: nothing the store lost is named
        if _is_error(failure, transcript.PROMPT_MISSING) or (
            _unheld_prompt(failure) and patches.patched(UNHELD_PROMPT_PATCH)
        ):
            return call.model_copy(update={"system": system, "tools": offered})
        return None

    def surface(self, slug: str) -> list[ToolSchema]:
        """What the model is shown in ``slug``: the runtime tools no denial bans, then the
        workspace tools, ``write_todos``, ``archmax_eval``, ``archmax_run`` (where a skill is
        enabled), the host's tools and the sub-workflows, as far as the state discloses them."""
        spec, input = self._ctx.spec, self._ctx.input
        runtime = [
            schema
            for schema in runtime_tools.runtime_tool_schemas(spec.state(slug))
            if governance.forbidden_outright(spec, slug, schema.name) is None
        ]
        scripts = governance.enabled_skills(spec, slug)  # a script lives in a skill bundle
        candidates = [
            *workspace_tools.workspace_tool_schemas(),
            todos.write_todos_schema(),
            sandbox.archmax_eval_schema(),
            *([sandbox.archmax_run_schema()] if scripts else []),
            *input.host_tools,
            *delegation.tool_schemas(input.delegates),
        ]
        shown = set(governance.disclosed_tools(spec, slug, [s.name for s in candidates]))
        return runtime + [s for s in candidates if s.name in shown]

    # --- tool calls -----------------------------------------------------------------------

    async def _run_tool_calls(self, calls: list[ToolCall]) -> Stop:
        """Answer every call of one assistant message, in order; then park if one waited."""
        ctx = self._ctx
        batch = _Batch(calls)
        host_tools = [tool.name for tool in ctx.input.host_tools]
        for position, call in enumerate(calls):
            arguments, parse_error, cleaned = _arguments(call)
            if parse_error is not None:
                ctx.answer(call, ToolAnswer(parse_error, "error"))
                continue
            if cleaned:
                ctx.cleaned_calls.add(call.id)
            await stored_variables.load(
                ctx, stored_variables.needed_by_call(ctx, call.name, arguments)
            )
            handler = tools.handler_of(call.name, host_tools)
            terminal: str | None
            if handler == "runtime":
                step = await self._runtime_call(call, arguments, batch)
                if step.raised:
                    return "raised"
                terminal = step.terminal
            elif handler == "delegation":
                terminal = (await self._delegation.dispatch(call, arguments)).terminal
            else:
                governed, terminal = await self._governed_call(call, arguments)
                if governed is not None:
                    ctx.answer(call, governed)
            if terminal is not None:
                for later in calls[position + 1 :]:  # every call needs its result
                    ctx.answer(
                        later, ToolAnswer(f"Not run: the turn failed ({terminal}).", "error")
                    )
                return self._turn_failure(terminal, routes=0)
        if ctx.session.pending_delegations:  # a child parked: the session parks with it
            self._delegation.mirror()
            return "parked"
        if batch.park is not None:
            await self._park(batch.park)
            return "parked"
        return "continue"

    async def _runtime_call(
        self, call: ToolCall, arguments: dict[str, Any], batch: _Batch
    ) -> _Step:
        """A runtime tool's call, unless a bare denial bans the tool here; ``archmax_note``
        is never the agent's to call."""
        ctx = self._ctx
        if tools.BY_NAME[call.name].reserved:
            ctx.answer(call, ToolAnswer("archmax_note is reserved for the runtime.", "blocked"))
            return _Step()
        banned = governance.forbidden_outright(ctx.spec, ctx.state_slug(), call.name)
        if banned is not None:
            ctx.answer(
                call,
                ToolAnswer(
                    f"Blocked by governance ({banned}): {call.name} is forbidden here.",
                    "blocked",
                    rule=banned,
                ),
            )
            return _Step()
        match call.name:
            case tools.RAISE:
                answer, raised = runtime_calls.raise_session(
                    ctx, arguments, alone=len(batch.calls) == 1
                )
                ctx.answer(call, answer)
                return _Step(raised=raised)
            case tools.ADVANCE:
                answer, terminal = await runtime_calls.advance(
                    ctx, self._hooks, arguments, advanced_to=batch.advanced_to
                )
                if answer.status == "ok":
                    batch.advanced_to = ctx.state_slug()
                ctx.answer(call, answer)
                return _Step(terminal=terminal)
            case tools.WAIT:
                answer, park, failure = runtime_calls.wait(
                    ctx, arguments, workflow.now(), parking=batch.park is not None
                )
                if batch.park is None:
                    batch.park = park
                ctx.answer(call, answer)
                return _Step(terminal=failure)
            case tools.SET_VARIABLES:
                answer = runtime_calls.set_variables(ctx, arguments)
                await stored_variables.keep(ctx)  # a large value goes to the store at once
            case tools.GET_VARIABLES:
                answer = runtime_calls.get_variables(ctx.session.variables, arguments)
            case _:
                assert call.name == tools.RESET
                answer = runtime_calls.reset(ctx, arguments)
        ctx.answer(call, answer)
        return _Step()

    async def _governed_call(
        self, call: ToolCall, arguments: dict[str, Any]
    ) -> tuple[ToolAnswer | None, str | None]:
        """Decide (:func:`governance.govern`), then run a tool that is no runtime control.

        Every call is decided, disclosed or not. A refusal (an unresolved reference in the
        arguments included) is answered as blocked with the rule that refused it and the model
        goes on; an unresolvable guard is terminal (the second value: the turn-failure reason).
        A tool that fails is an error result the model reads, never a turn failure. No answer
        (None) for an ``archmax_run`` whose script waits on a parked sub-workflow: the session
        parks, and the answer comes on resume.
        """
        ctx = self._ctx
        s = ctx.session
        slug = ctx.state_slug()
        verdict = governance.govern(
            ctx.spec, slug, call.name, arguments, s.variables, ctx.mocks, origin="agent"
        )
        if isinstance(verdict, governance.Blocked | governance.Unresolved):
            answer = ToolAnswer(verdict.text, "blocked", rule=verdict.rule)
            return answer, (verdict.reason if verdict.terminal else None)
        if isinstance(verdict, governance.Mocked):
            status, content = verdict.answer()
            return ToolAnswer(content, status), None
        substituted = verdict.arguments
        handler = tools.handler_of(call.name, [tool.name for tool in ctx.input.host_tools])
        if handler == "todos":
            plan, text = todos.write(substituted)
            if plan is None:
                return ToolAnswer(text, "error"), None
            s.todos = plan
            return ToolAnswer(text), None
        if handler == "sandbox":
            try:
                if call.name == tools.ARCHMAX_EVAL:
                    return ToolAnswer(*await self._hooks.run_eval(slug, substituted)), None
                ran = await self._hooks.run_script(
                    slug, substituted, dispatch=self._script_dispatch(call.id, substituted)
                )
            except governance.TerminalBlock as stop:  # one of its calls: as for the agent's
                return _stopped(call.name, stop.reason), stop.reason
            if ran is None:  # a child it dispatched parked: the call is answered on resume
                return None, None
            return ToolAnswer(*ran), None
        if handler == "host":
            return await self._host_tool(call.name, substituted), None
        if handler != "workspace":
            return ToolAnswer(
                f"Tool '{call.name}' is not registered on this worker.", "error"
            ), None
        settings = ctx.spec.settings
        self._local_effects |= contracts.workspace.local_effect(call.name, substituted)
        try:
            result = await contracts.workspace.run_tool(
                WorkspaceToolInput(
                    session_id=ctx.session_id,
                    tool=call.name,
                    arguments=substituted,
                    max_result_chars=settings.max_result_chars or DEFAULT_MAX_RESULT_CHARS,
                    visible_skills=sorted(governance.enabled_skills(ctx.spec, slug)),
                ),
                summary=_tool_summary(call.name, substituted),
            )
        except ActivityError as failure:
            return ToolAnswer(f"{call.name} failed: {failure.cause or failure}", "error"), None
        return ToolAnswer(result.content, result.status, kept=result.kept), None

    async def _host_tool(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        """Run a host's Python tool on the worker (one activity, dispatched by name)."""
        try:
            result = await contracts.host_tools.run(
                HostToolCall(session_id=self._ctx.session_id, tool=name, arguments=arguments),
                summary=f"host tool · {name}",
            )
        except ActivityError as failure:
            return ToolAnswer(f"{name} failed: {failure.cause or failure}", "error")
        return ToolAnswer(result.content, result.status, kept=result.kept)

    # --- scripts and their sub-workflow calls ---------------------------------------------

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

    async def resume_script(
        self, waiting: PendingDelegation, content: str, status: delegation.Status
    ) -> tuple[str, delegation.Status] | None:
        """A script's parked child finished: run the script on from its journal plus the
        child's answer; its result answers the ``archmax_run`` call (None: it parked again)."""
        script = waiting.script
        assert script is not None
        journal = script.journal.then(
            journal_entry(script.tool, script.tool_arguments, content, status)
        )
        try:
            return await self._hooks.run_script(
                waiting.state,
                script.arguments,
                dispatch=self._script_dispatch(waiting.tool_call_id, script.arguments),
                journal=journal,
            )
        except governance.TerminalBlock as stop:  # the turn fails when it goes on (drive)
            self._stopped = stop.reason
            return _stopped(waiting.tool, stop.reason).content, "blocked"

    # --- lifecycle hooks, parks and failures ----------------------------------------------

    async def _entry_hooks(self, slug: str) -> str | None:
        """The state's before hooks, once per visit not entered by an advance: the turn
        failure a veto (its reason the turn's reply) or a hook error causes, or None."""
        s = self._ctx.session
        if s.before_done:
            return None
        s.before_done = True
        if not self._ctx.spec.state(slug).before:
            return None
        entry = await self._hooks.on_entry(slug)
        if entry.reply is not None:
            transcript.append(s, Message(role="assistant", content=entry.reply, state=slug))
        return entry.failure

    async def _completion_hooks(self, slug: str) -> tuple[str | None, bool]:
        """A terminal state's after hooks at completion: ``(turn failure, call again)``."""
        state = self._ctx.spec.state(slug)
        if not (state.is_terminal and state.after):
            return None, False
        completion = await self._hooks.at_completion(slug)
        if completion.note is not None:
            self._ctx.note("after", completion.note)
            return None, True
        return completion.failure, False

    async def _park(self, park: PendingInput) -> None:
        """Commit the park; spend the handoff call only if the agent said nothing yet."""
        s = self._ctx.session
        s.park_counts[park.state] = s.park_counts.get(park.state, 0) + 1
        if not transcript.agent_spoke_since_opening(s):
            result = await self.call_model(handoff=True)
            if result is not None and result.content:
                transcript.append(
                    s, Message(role="assistant", content=result.content, state=park.state)
                )
        s.pending_input = park
        s.status = "awaiting_input"

    def _returns_shortfall(self, slug: str) -> str | None:
        """At a terminal state, the reason the session is short of its trigger's returns."""
        ctx = self._ctx
        trigger = ctx.session.trigger
        if trigger is None or not ctx.spec.state(slug).is_terminal:
            return None
        return signatures.missing_returns(
            trigger,
            ctx.spec.trigger(trigger),
            slug,
            variables.typed(ctx.session.variables),
            allow_unset=ctx.input.parent is not None,  # the caller is told instead
        )

    def _turn_failure(self, reason: str, routes: int) -> Stop:
        """Route a turn failure through ``on_error`` with an [error] note, or reject."""
        ctx = self._ctx
        s = ctx.session
        slug = ctx.state_slug()
        target = ctx.spec.state(slug).on_error
        if target is not None and routes < contracts.MAX_ERROR_ROUTES_PER_TURN:
            ctx.note("error", f"[error] {reason}; routed to '{target}'")
            s.state = target
            ctx.new_visit()
            ctx.trail(target, "on_error", reason)
            s.pending_input = None
            return "routed"
        s.rejected = reason
        s.status = "rejected"
        return "rejected"

    # --- records --------------------------------------------------------------------------

    async def persist(self) -> None:
        """Rewrite the artifacts; a store outage never fails the session (it is logged)."""
        ctx = self._ctx
        s = ctx.session
        try:
            await contracts.store.persist_turn(
                PersistTurnInput(
                    session_id=ctx.session_id,
                    workflow=ctx.input.workflow,
                    spec_hash=ctx.input.spec_hash,
                    spec=None if self._spec_persisted == ctx.input.spec_hash else ctx.spec,
                    status=s.status,
                    state=s.state,
                    trail=transcript.trail_unpersisted(s),
                    trail_base=s.trail_persisted,
                    variables=s.variables,
                    usage=s.usage,
                    transcript=transcript.unlogged(s),
                    log=transcript.log_of(s),
                ),
                summary=f"artifacts · {s.status}",
                local=self.awaited and not self._local_effects,
            )
            self._spec_persisted = ctx.input.spec_hash
            transcript.trail_persisted(s, transcript.trail_total(s))
        except ActivityError as failure:
            workflow.logger.warning(
                "artifacts not written: %s",
                failure.cause or failure,
                extra=telemetry.log_extra(self._ctx),
            )

    def publish(self) -> None:
        """Keep search attributes and the UI's current details in step with the session."""
        ctx = self._ctx
        if ctx.input.search_attributes:
            workflow.upsert_search_attributes(
                projections.search_attribute_updates(ctx.session, ctx.input)
            )
        workflow.set_current_details(
            projections.current_details(ctx.session, ctx.input, self._delegation.current())
        )
        listed = projections.listed(ctx.session, ctx.input, self._delegation.current())
        if listed != self._listed and patches.patched(LISTED_MEMO_PATCH):
            workflow.upsert_memo({contracts.LISTED_MEMO: listed.model_dump(mode="json")})
            self._listed = listed


def _is_error(failure: ActivityError, error_type: str) -> bool:
    """Whether an activity failed for good with an ``ApplicationError`` of ``error_type``."""
    cause = failure.cause
    return isinstance(cause, ApplicationError) and cause.type == error_type


def _unheld_prompt(failure: ActivityError) -> bool:
    """Whether a model activity of a version before ``PromptMissing`` (a worker not yet
    upgraded) failed the call for a prompt it names that its store does not hold: a
    ``TranscriptLogDiverged`` whose detail is :data:`transcript.UNHELD_PROMPT`."""
    cause = failure.cause
    if not isinstance(cause, ApplicationError) or cause.type != transcript.LOG_DIVERGED:
        return False
    return bool(cause.details) and cause.details[0] == transcript.UNHELD_PROMPT


def _stopped(tool: str, reason: str) -> ToolAnswer:
    """The answer to a script or snippet one of whose calls got a terminal block."""
    return ToolAnswer(
        f"{tool} stopped: Blocked by governance ({governance.UNRESOLVED_GUARD}): {reason}",
        "blocked",
        rule=governance.UNRESOLVED_GUARD,
    )


def _tool_summary(tool: str, arguments: dict[str, Any]) -> str:
    """``read_file · scratchpad/notes.md``: what the Temporal UI shows for a tool call."""
    for key in ("file_path", "path", "pattern"):
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return f"{tool} · {value[:80]}"
    return tool


def _arguments(call: ToolCall) -> tuple[dict[str, Any], str | None, bool]:
    """The call's arguments as a JSON object with every string valid UTF-8, or the answer
    that says why they are not an object; the third value says whether a lone surrogate
    (``"\\ud800"`` is valid JSON) had to be replaced."""
    try:
        parsed = json.loads(call.arguments or "{}")
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
        return (
            {},
            f"Arguments of {call.name} are not valid JSON ({reason}). Nothing was done.",
            False,
        )
    if not isinstance(parsed, dict):
        return {}, f"Arguments of {call.name} must be a JSON object. Nothing was done.", False
    cleaned, altered = text.clean(parsed)
    return cleaned, None, altered


NOTE_VALUE_CHARS = 200
"""How much of each variable's value an ``[event]`` or ``[opening]`` note copies: the whole
value is in the session's variables (``archmax_get_variables``); a note never copies a large
one verbatim."""


def _with_variables(seeds: dict[str, Any]) -> str:
    """`` with variables {...}`` for a note (sorted, each value previewed), or a full stop."""
    if not seeds:
        return "."
    shown = {
        name: value
        if text.preview(value, NOTE_VALUE_CHARS) == _json(value)
        else text.preview(value, NOTE_VALUE_CHARS)
        for name, value in seeds.items()
    }
    return " with variables " + json.dumps(shown, ensure_ascii=False, default=str, sort_keys=True)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
