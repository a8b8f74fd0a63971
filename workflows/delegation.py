"""Sub-workflows: ``archmax_workflow_<slug>`` calls another workflow of the authoring root as a
Temporal child workflow (harness §6).

Each call is one child ``ArchmaxSession`` with its own session id
(``<caller>.<slug>-<n>``), files, artifacts and spec. The callee's spec cannot be read from
workflow code, so the caller carries a pinned snapshot of every workflow it can reach
(``SessionInput.delegates``, resolved by the client loader when the session starts).

- **The tool** takes the target's ``manual`` ``requires`` as parameters, typed as declared,
  and answers ``{message, returns}`` (the closing message alone when the target declares no
  ``returns``). A missing or mistyped argument, an unknown, undelegatable or disabled target,
  a cycle or a chain deeper than :data:`MAX_DEPTH` is a *blocked* call: no child starts.
- **What crosses**: down go the arguments (file arguments are copied into the child's
  ``scratchpad/attachments/`` first) and the caller's workflow-wide denials, which
  accumulate down the chain. Up come the message and the declared returns (file returns are
  copied into the caller's attachments and answer with the caller's path).
- **Lifecycle**: the child starts with its ``manual`` firing as :attr:`SessionInput.initial`,
  and signals every settled turn to the caller (:data:`SETTLED_SIGNAL`). A finished child
  ends its workflow run; the caller awaits it, so the parent's history shows the child's
  start and completion. A parked child parks the caller with it: the caller's status mirrors
  the child's park and its pending call waits; a delivery or decision goes to the child's
  session id, and when the child finishes its result answers the call and the caller's turn
  goes on.
- **From a script**: :meth:`Delegations.from_script` runs a script's
  ``tools.archmaxWorkflow<Slug>`` call the same way and answers the script; a child that
  parks parks the session with the script's journal in the pending call, and its end runs
  the script on (the turn engine's ``resume_script``, handed to :meth:`Delegations.resume`)
  before the ``archmax_run`` call is answered.
- **Record**: every dispatch (a mocked one included) is a ``sub-workflow`` trail step on the
  calling state with ``status`` ok or error; a resumed call also gets a
  ``[sub-workflow: <slug>]`` note.

The dispatcher works through the session's :class:`SessionContext` (state, input, spec,
records), never the workflow itself. Deterministic: no I/O here but activities and child
workflows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import (
        contracts,
        governance,
        matching,
        patches,
        signatures,
        telemetry,
    )
    from archmax_temporal.workflows import search_attributes as sa
    from archmax_temporal.workflows.context import SessionContext, ToolAnswer
    from archmax_temporal.workflows.models import (
        DelegateSpec,
        DelegationLink,
        NoteKind,
        Outcome,
        PendingDelegation,
        PendingScript,
        SendInput,
        SessionInput,
        SessionSummary,
        SubWorkflowReport,
        ToolCall,
        ToolSchema,
        TrailStep,
    )
    from archmax_temporal.workflows.sandbox import ARCHMAX_RUN
    from archmax_temporal.workflows.spec import MANUAL_TRIGGER, TriggerSpec, WorkflowSpec
    from archmax_temporal.workflows.tools import WORKFLOW_PREFIX, workflow_target
    from archmax_temporal.workflows.workspace_tools import (
        FilePlacementInput,
        SessionFileRef,
    )

PREFIX: Final = WORKFLOW_PREFIX
"""A sub-workflow tool is this prefix and the target's slug, verbatim (the registry's)."""

SETTLED_SIGNAL: Final = "archmax.sub_workflow.settled"
"""The signal a delegated child sends its caller after every settled turn."""

SCRIPT_TERMINAL_PATCH: Final = "archmax-script-terminal-block"
"""A script's sub-workflow call refused for good (an unresolvable guard) fails the turn, as the
agent's own call does; before it, the script was answered ``blocked`` and ran on."""

MAX_DEPTH: Final = 3
"""Children below children: a call that would start a session deeper than this is refused."""

Status = Literal["ok", "error", "blocked"]


def target_of(tool: str) -> str | None:
    """The workflow slug ``tool`` calls, or None when it is no sub-workflow tool."""
    return workflow_target(tool)


def granted_targets(spec: WorkflowSpec) -> list[str]:
    """Every slug any state (or the root) grants an ``archmax_workflow_<slug>`` for."""
    entries = [*spec.tools.allow_always]
    for state in spec.states.values():
        entries.extend(state.tools.allow)
    names = [entry if isinstance(entry, str) else entry.tool for entry in entries]
    return list(dict.fromkeys(t for t in (target_of(n) for n in names) if t is not None))


def manual_of(delegate: DelegateSpec) -> TriggerSpec | None:
    """The target's ``manual`` declaration (None: not delegatable)."""
    if delegate.spec is None:
        return None
    return delegate.spec.trigger(MANUAL_TRIGGER)


def tool_schema(delegate: DelegateSpec) -> ToolSchema | None:
    """The call as the model sees it: ``manual.description`` first, then title, inputs and
    what comes back; never the target's instructions."""
    manual = manual_of(delegate)
    if manual is None or delegate.spec is None:
        return None
    returns = [name for name, _ in signatures.entries(manual.returns)]
    lines = [
        manual.description or f"Run the workflow '{delegate.workflow}' as a sub-workflow.",
        f"Workflow: {delegate.spec.title or delegate.workflow}.",
    ]
    inputs = [name for name, _ in signatures.entries(manual.requires)]
    if inputs:
        lines.append(f"Inputs: {', '.join(inputs)}.")
    lines.append(
        f"Answers {{message, returns}} with returns {', '.join(returns)}."
        if returns
        else "Answers with the sub-workflow's closing message."
    )
    return ToolSchema(
        name=PREFIX + delegate.workflow,
        description=" ".join(lines),
        parameters=signatures.json_schema(manual.requires),
    )


def tool_schemas(delegates: dict[str, DelegateSpec]) -> list[ToolSchema]:
    """Every delegate's tool; governance decides which a state discloses."""
    schemas = [tool_schema(d) for _, d in sorted(delegates.items())]
    return [s for s in schemas if s is not None]


def child_session_id(caller: str, slug: str, number: int) -> str:
    """``<caller>.<slug>-<n>``: readable, and the same on every replay."""
    return f"{caller}.{slug}-{number}"


def _merged(own: list[Any], inherited: list[Any]) -> list[Any]:
    return [*own, *(entry for entry in inherited if entry not in own)]


def inherited_spec(caller: WorkflowSpec, callee: WorkflowSpec) -> WorkflowSpec:
    """``callee`` with the caller's workflow-wide denials added: they accumulate down the
    chain (the caller's own spec already carries its callers')."""
    return callee.model_copy(
        update={
            "tools": callee.tools.model_copy(
                update={
                    "forbid_always": _merged(callee.tools.forbid_always, caller.tools.forbid_always)
                }
            ),
            "skills": callee.skills.model_copy(
                update={
                    "forbid_always": _merged(
                        callee.skills.forbid_always, caller.skills.forbid_always
                    )
                }
            ),
            "mounts": callee.mounts.model_copy(
                update={
                    "forbid_always": _merged(
                        callee.mounts.forbid_always, caller.mounts.forbid_always
                    )
                }
            ),
        }
    )


def inherited_hash(spec_hash: str, caller: WorkflowSpec) -> str:
    """The child's spec hash: the callee's own, unless denials were inherited (then the
    snapshot differs, so the hash does too)."""
    inherited = {
        "tools": caller.tools.model_dump(mode="json")["forbid_always"],
        "skills": caller.skills.forbid_always,
        "mounts": caller.mounts.forbid_always,
    }
    if not any(inherited.values()):
        return spec_hash
    canonical = json.dumps(inherited, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(f"{spec_hash}:{canonical}".encode()).hexdigest()[:16]
    return digest


def argument_refusal(manual: TriggerSpec, arguments: dict[str, Any]) -> tuple[str, str] | None:
    """``(rule, reason)`` for a missing argument (reported first) or a mistyped one."""
    declared = signatures.entries(manual.requires)
    for name, type_name in declared:
        if name not in arguments:
            kind = f" ({type_name})" if type_name else ""
            return "sub-workflow.missing-param", f"required argument '{name}'{kind} is missing"
    for name, type_name in declared:
        if not signatures.conforms(arguments[name], type_name):
            got = json.dumps(arguments[name], default=str)[:120]
            return (
                "sub-workflow.invalid-param",
                f"argument '{name}' must be of type {type_name}; got {got}",
            )
    return None


def result_text(
    manual: TriggerSpec, message: str, returns: dict[str, Any], note: str | None
) -> str:
    """``{message, returns}`` as JSON, or the message alone when nothing is declared."""
    if not manual.returns:
        return message
    body: dict[str, Any] = {"message": message, "returns": returns}
    if note:
        body["note"] = note
    return json.dumps(body, ensure_ascii=False, default=str)


def _unset_note(manual: TriggerSpec, returns: dict[str, Any]) -> str | None:
    unset = [name for name, _ in signatures.entries(manual.returns) if name not in returns]
    if not unset:
        return None
    return "Not all return variables were set by the sub-workflow: " + ", ".join(
        f"'{name}' was not set." for name in unset
    )


ScriptResumer = Callable[[PendingDelegation, str, Status], Awaitable[tuple[str, Status] | None]]
"""Runs a script on after its parked child finished (the waiting call, the child's answer and
its status); its result answers the ``archmax_run`` call, None when it parked again."""


@dataclass
class Dispatched:
    """How one call went: answered (possibly with a terminal guard), or parked on a child."""

    parked: bool = False
    terminal: str | None = None


@dataclass
class _Caller:
    """Who made a sub-workflow call and where its answer goes: the agent's call (answered in
    the transcript, may park the session) or a script's (answered to the script)."""

    call: ToolCall
    answer: Callable[[str, Status, str | None], None]
    script: PendingScript | None = None
    """A script's call: the script to run again when a parked child ends."""
    run_call_id: str | None = None
    """A script's call: the ``archmax_run`` call that ran it."""


@dataclass
class _Returned:
    content: str
    status: Status


class Delegations:
    """The caller's side (dispatch, park, resume) and the child's side (report) of every
    sub-workflow call of one session."""

    def __init__(self, ctx: SessionContext) -> None:
        self._ctx = ctx
        self._reports: dict[str, SubWorkflowReport] = {}
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, SessionSummary]] = {}

    # --- the caller ---------------------------------------------------------------------

    def current(self) -> PendingDelegation | None:
        """The parked call the session presents (the oldest), if it waits on a child."""
        pending = self._ctx.session.pending_delegations
        return pending[0] if pending else None

    def mirror(self) -> None:
        """The caller's status follows the child's park."""
        waiting = self.current()
        if waiting is not None:
            self._ctx.session.status = (
                "awaiting_input" if waiting.channel == "input" else "awaiting_decision"
            )

    def on_report(self, report: SubWorkflowReport) -> bool:
        """Keep a child's report; True when it concerns a parked call (the session must
        process it as a firing of its own)."""
        self._reports[report.session_id] = report
        return any(p.session_id == report.session_id for p in self._ctx.session.pending_delegations)

    async def dispatch(self, call: ToolCall, arguments: dict[str, Any]) -> Dispatched:
        """Govern, check and run the agent's ``archmax_workflow_<slug>`` call; its answer is
        appended to the transcript."""

        def answer(content: str, status: Status, rule: str | None) -> None:
            self._ctx.answer(call, ToolAnswer(content, status, rule))

        return await self._dispatch(_Caller(call, answer), arguments)

    async def from_script(
        self, tool: str, arguments: dict[str, Any], script: PendingScript, run_call_id: str
    ) -> tuple[str, Status] | None:
        """Carry out a script's ``tools.archmaxWorkflow<Slug>`` call exactly as the agent's
        (governed, mocked, a child workflow, on the trail) and return its answer for the
        script; None when the child parked: the session parks with it, holding ``script``
        (with the ``archmax_run`` call ``run_call_id``) to run the script on when it ends."""
        answers: list[tuple[str, Status]] = []
        number = sum(1 for step in self._ctx.session.trail if step.kind == "sub-workflow") + 1
        call = ToolCall(id=f"{run_call_id}.dispatch-{number}", name=tool)
        caller = _Caller(
            call,
            lambda content, status, _rule: answers.append((content, status)),
            script=script,
            run_call_id=run_call_id,
        )
        dispatched = await self._dispatch(caller, arguments)
        if dispatched.parked:
            return None
        if dispatched.terminal is not None and patches.patched(SCRIPT_TERMINAL_PATCH):
            raise governance.TerminalBlock(dispatched.terminal)  # as for the agent's own call
        if dispatched.terminal is not None and not answers:
            return f"{tool} refused: {dispatched.terminal}", "blocked"
        return answers[-1] if answers else (f"{tool} did not answer", "error")

    async def _dispatch(self, caller: _Caller, arguments: dict[str, Any]) -> Dispatched:
        call = caller.call
        ctx = self._ctx
        s = ctx.session
        state = ctx.state_slug()
        slug = target_of(call.name) or ""
        verdict = governance.govern(
            ctx.spec,
            state,
            call.name,
            arguments,
            s.variables,
            ctx.mocks,
            origin="agent" if caller.script is None else "script",
        )
        if isinstance(verdict, governance.Blocked | governance.Unresolved):
            caller.answer(verdict.text, "blocked", verdict.rule)
            return Dispatched(terminal=verdict.reason if verdict.terminal else None)
        substituted = verdict.arguments
        delegate = ctx.input.delegates.get(slug)
        refused = self._target_refusal(slug, delegate, substituted)
        if refused is not None:  # the target's refusal (a disabled one) wins over a mock
            rule, reason = refused
            caller.answer(f"Blocked ({rule}): {call.name}: {reason}.", "blocked", rule)
            return Dispatched()
        assert delegate is not None and delegate.spec is not None
        manual = manual_of(delegate)
        assert manual is not None
        if isinstance(verdict, governance.Mocked):
            returned = await self._mocked(manual, verdict.result)
            caller.answer(returned.content, returned.status, None)
            self._trail(state, slug, returned.status, "mocked")
            return Dispatched()
        return await self._start(caller, state, slug, delegate, manual, substituted)

    def _target_refusal(
        self, slug: str, delegate: DelegateSpec | None, arguments: dict[str, Any]
    ) -> tuple[str, str] | None:
        own = self._ctx.input
        chain = [*own.ancestors, own.workflow]
        if slug in chain:
            return "sub-workflow.cycle", f"workflow {slug!r} is already in the chain " + (
                " → ".join([*chain, slug])
            )
        if delegate is None:
            known = ", ".join(sorted(own.delegates)) or "(none)"
            return "sub-workflow.unknown-workflow", f"no workflow {slug!r} (known: {known})"
        if delegate.spec is None:
            return "sub-workflow.unknown-workflow", f"workflow {slug!r} did not load: " + (
                delegate.load_error or "unknown error"
            )
        manual = manual_of(delegate)
        if manual is None:
            return "sub-workflow.not-delegatable", f"workflow {slug!r} declares no manual trigger"
        if delegate.spec.disabled:
            return "sub-workflow.disabled", f"workflow {slug!r} is disabled"
        if len(chain) > MAX_DEPTH:
            return "sub-workflow.depth-exceeded", f"the chain would exceed depth {MAX_DEPTH}"
        return argument_refusal(manual, arguments)

    async def _start(
        self,
        caller: _Caller,
        state: str,
        slug: str,
        delegate: DelegateSpec,
        manual: TriggerSpec,
        arguments: dict[str, Any],
    ) -> Dispatched:
        call = caller.call
        s = self._ctx.session
        own = self._ctx.input
        assert delegate.spec is not None
        number = s.dispatches.get(slug, 0) + 1
        s.dispatches[slug] = number
        child_id = child_session_id(own.session_id, slug, number)
        declared = signatures.entries(manual.requires)
        seeds = {name: arguments[name] for name, _ in declared}
        files = {
            name: SessionFileRef(session_id=own.session_id, path=str(seeds[name]))
            for name, type_name in declared
            if type_name == "file"
        }
        if files:
            placed = await self._place(child_id, files, f"{slug}: file arguments")
            if isinstance(placed, str):
                caller.answer(f"{call.name} failed: {placed}", "error", None)
                self._trail(state, slug, "error", child_id)
                return Dispatched()
            seeds.update(placed)
        child = SessionInput(
            session_id=child_id,
            workflow=slug,
            spec=inherited_spec(self._ctx.spec, delegate.spec),
            spec_hash=inherited_hash(delegate.spec_hash or "", self._ctx.spec),
            prompt=delegate.prompt,
            requests_per_run=own.requests_per_run,
            host_tools=own.host_tools,
            search_attributes=own.search_attributes,
            delegates=own.delegates,
            parent=DelegationLink(
                session_id=own.session_id,
                workflow=own.workflow,
                state=state,
                tool_call_id=call.id,
            ),
            ancestors=[*own.ancestors, own.workflow],
            initial=SendInput(trigger=MANUAL_TRIGGER, variables=seeds),
            store_id=own.store_id,  # the child's folder is in its caller's store
            store_description=own.store_description,
        )
        try:
            handle = await workflow.start_child_workflow(
                contracts.WORKFLOW_NAME,
                child,
                id=child_id,
                result_type=SessionSummary,
                static_summary=f"archmax sub-workflow · {slug} (called by {own.session_id})",
                static_details=(
                    f"Workflow `{slug}` (spec {child.spec_hash}), called from state `{state}` "
                    f"of session `{own.session_id}` (`{own.workflow}`)."
                ),
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(sa.WORKFLOW, slug),
                        SearchAttributePair(sa.STATUS, "running"),
                    ]
                )
                if own.search_attributes
                else None,
            )
        except (WorkflowAlreadyStartedError, ApplicationError) as failure:  # id taken
            caller.answer(
                f"{call.name} failed: could not start {child_id}: {failure}", "error", None
            )
            self._trail(state, slug, "error", child_id)
            return Dispatched()
        self._children[child_id] = handle
        await workflow.wait_condition(lambda: child_id in self._reports or handle.done())
        report = self._reports.pop(child_id, None)
        if report is not None and report.outcome.kind == "parked":
            outcome = report.outcome
            s.pending_delegations.append(
                PendingDelegation(
                    state=state,
                    workflow=slug,
                    session_id=child_id,
                    tool_call_id=caller.run_call_id or call.id,
                    tool=ARCHMAX_RUN if caller.script else call.name,
                    channel=outcome.parked_channel or "input",
                    pending=outcome.pending,
                    script=caller.script,
                )
            )
            return Dispatched(parked=True)
        returned = await self._finished(slug, manual, child_id, report)
        caller.answer(returned.content, returned.status, None)
        self._trail(state, slug, returned.status, child_id)
        return Dispatched()

    async def resume(self, child_id: str, resume_script: ScriptResumer) -> bool:
        """Apply a parked child's report; True when the caller's turn goes on (every pending
        call answered), False when it stays parked (or the report changed nothing). A call a
        script made runs the script on through ``resume_script``."""
        s = self._ctx.session
        report = self._reports.pop(child_id, None)
        waiting = next((p for p in s.pending_delegations if p.session_id == child_id), None)
        if report is None or waiting is None:
            return False
        if report.outcome.kind == "parked":
            waiting.channel = report.outcome.parked_channel or waiting.channel
            waiting.pending = report.outcome.pending
            self.mirror()
            return False
        delegate = self._ctx.input.delegates[waiting.workflow]
        manual = manual_of(delegate)
        assert manual is not None
        returned = await self._finished(waiting.workflow, manual, child_id, report)
        s.pending_delegations.remove(waiting)
        self._trail(waiting.state, waiting.workflow, returned.status, child_id)
        answer: tuple[str, Status] | None = (returned.content, returned.status)
        if waiting.script is not None:  # the script runs on, the child's answer replayed
            answer = await resume_script(waiting, returned.content, returned.status)
        if answer is not None:
            content, status = answer
            call = ToolCall(id=waiting.tool_call_id, name=waiting.tool)
            self._ctx.answer(call, ToolAnswer(content, status))
        if s.pending_delegations:
            self.mirror()
            return False
        s.status = "running"
        kind: NoteKind = "sub-workflow"
        self._ctx.note(
            kind,
            f"[sub-workflow: {waiting.workflow}] session '{child_id}' finished "
            f"({report.outcome.kind}); its result answers the pending call.",
        )
        return True

    async def _finished(
        self, slug: str, manual: TriggerSpec, child_id: str, report: SubWorkflowReport | None
    ) -> _Returned:
        """The call's answer from the child's final outcome; the child's run is awaited so
        its completion is in the caller's history."""
        handle = self._children.pop(child_id, None)
        failure: str | None = None
        if handle is not None:
            try:
                await handle
            except ChildWorkflowError as error:
                failure = str(error.cause or error)
        if report is None:
            return _Returned(
                f"Sub-workflow '{slug}' (session {child_id}) failed: {failure or 'no result'}",
                "error",
            )
        outcome = report.outcome
        if outcome.kind == "failed" and outcome.exit is not None:
            return _Returned(
                f"Sub-workflow '{slug}' (session {child_id}) raised {outcome.exit.code}: "
                f"{outcome.exit.reason}",
                "error",
            )
        if outcome.kind != "completed":
            return _Returned(
                f"Sub-workflow '{slug}' (session {child_id}) was rejected: {outcome.rejected}",
                "error",
            )
        returns = {
            name: outcome.variables[name].value
            for name, _ in signatures.entries(manual.returns)
            if name in outcome.variables
        }
        return await self._with_files(manual, outcome.reply, returns, child_id)

    async def _mocked(self, manual: TriggerSpec, result: Any) -> _Returned:
        """A declared mock answers the call: ``result.message`` and ``result.returns`` (file
        returns name files of this session, copied into its attachments like a child's)."""
        if isinstance(result, dict) and "error" in result:
            return _Returned(matching.mock_result_text(result["error"]), "error")
        if isinstance(result, dict):
            message = str(result.get("message") or "")
            raw = result.get("returns")
            returns = dict(raw) if isinstance(raw, dict) else {}
        else:
            message, returns = matching.mock_result_text(result), {}
        for name, type_name in signatures.entries(manual.returns):
            if name in returns and not signatures.conforms(returns[name], type_name):
                return _Returned(
                    f"mocked return '{name}' must be of type {type_name}; got "
                    f"{json.dumps(returns[name], default=str)[:120]}",
                    "error",
                )
        return await self._with_files(manual, message, returns, self._ctx.session_id)

    async def _with_files(
        self, manual: TriggerSpec, message: str, returns: dict[str, Any], source: str
    ) -> _Returned:
        """Copy the file returns from ``source`` into this session's attachments; the
        answer names the placed paths."""
        files = {
            name: SessionFileRef(session_id=source, path=str(returns[name]))
            for name, type_name in signatures.entries(manual.returns)
            if type_name == "file" and name in returns
        }
        if files:
            placed = await self._place(self._ctx.session_id, files, "file returns")
            if isinstance(placed, str):
                return _Returned(f"Sub-workflow file returns not placed: {placed}", "error")
            returns = {**returns, **placed}
        return _Returned(result_text(manual, message, returns, _unset_note(manual, returns)), "ok")

    async def _place(
        self, session_id: str, files: dict[str, SessionFileRef], summary: str
    ) -> dict[str, str] | str:
        """Copy files into ``session_id``'s attachments; the placed paths, or why not."""
        try:
            placed = await contracts.workspace.place_files(
                FilePlacementInput(session_id=session_id, copies=files),
                summary=f"place {len(files)} file(s) · {summary}",
            )
        except ActivityError as failure:
            cause = failure.cause
            return cause.message if isinstance(cause, ApplicationError) else str(failure)
        return placed.paths

    # --- the child ----------------------------------------------------------------------

    async def report(self, outcome: Outcome) -> None:
        """Tell the caller how this child's turn settled (parked or finished)."""
        link = self._ctx.input.parent
        if link is None:
            return
        try:
            await workflow.get_external_workflow_handle(link.session_id).signal(
                SETTLED_SIGNAL,
                SubWorkflowReport(session_id=self._ctx.session_id, outcome=outcome),
            )
        except FailureError as failure:  # the caller is gone: nobody waits any more
            workflow.logger.warning(
                "sub-workflow report not delivered: %s",
                failure,
                extra=telemetry.log_extra(self._ctx),
            )

    # --- records ------------------------------------------------------------------------

    def _trail(self, state: str, slug: str, status: Status, reason: str) -> None:
        """A ``sub-workflow`` step on the calling state, ok or error."""
        self._ctx.session.trail.append(
            TrailStep(
                to=state,
                kind="sub-workflow",
                reason=reason,
                workflow=slug,
                status="ok" if status == "ok" else "error",
                ts=workflow.now(),
            )
        )
