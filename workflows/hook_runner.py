"""Running lifecycle hooks and ``archmax_run`` scripts from the session workflow.

Workflow code (deterministic): every hook runs as an activity — a script in the sandbox
(``archmax.sandbox.run``), a rubric on the model activity, a custom kind on the host's executor —
and its answer is read by :mod:`archmax_temporal.workflows.hooks`. The session calls three gates and
one tool:

- :meth:`HookRunner.gate_advance`: the leaving state's after hooks, then the target's before
  hooks, during an ``archmax_advance`` (before it commits);
- :meth:`HookRunner.on_entry`: a state's before hooks, once per visit entered another way;
- :meth:`HookRunner.at_completion`: a terminal state's after hooks when the model finishes;
- :meth:`HookRunner.run_script`: ``archmax_run``.

Each gate says what the session must do (answer, fail the turn, note, reply) and mutates only
the session state of the :class:`SessionContext` it works through: the correction counters
and usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import (
        contracts,
        delegation,
        governance,
        hooks,
        matching,
        patches,
        sandbox,
        telemetry,
        variables,
    )
    from archmax_temporal.workflows.context import SessionContext
    from archmax_temporal.workflows.hooks import HookVerdict, Phase
    from archmax_temporal.workflows.models import (
        ModelCallInput,
        SandboxToolCall,
        ScriptJournal,
        SessionInput,
        SessionState,
    )
    from archmax_temporal.workflows.sandbox import (
        CustomHookInput,
        SandboxLimits,
        SandboxRunInput,
        SandboxRunResult,
    )
    from archmax_temporal.workflows.spec import HookSpec, WorkflowSpec

ScriptDispatcher = Callable[
    [str, dict[str, Any], ScriptJournal],
    Awaitable[tuple[str, Literal["ok", "error", "blocked"]] | None],
]
"""Carries out a script's sub-workflow call (tool, arguments, the journal of the calls the
script made before it) and answers it, or None when the child parked (the session parks with it)."""

_SCRIPT_VETOES = frozenset({"SandboxScriptError", "ForbiddenSandboxImportError"})
"""Sandbox errors that are the script's own answer (fail closed: a veto); the others (a
timeout, a memory bomb, a crash, an oversized result) are execution errors."""


@dataclass(frozen=True)
class Refusal:
    """An advance refused by a hook: the answer the agent reads, and its rule."""

    content: str
    rule: str


@dataclass(frozen=True)
class Gate:
    """What a gate came to: pass (both None), a refusal to answer, or a turn failure."""

    refusal: Refusal | None = None
    failure: str | None = None


@dataclass(frozen=True)
class Entry:
    """A before gate on entry: ``failure`` fails the turn; ``reply`` (a veto's reason) is
    what the turn answers the person."""

    failure: str | None = None
    reply: str | None = None


@dataclass(frozen=True)
class Completion:
    """A terminal completion's after gate: a turn failure, or a note and another call."""

    failure: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class AfterStop:
    """The after hook a state's after gate stopped at: its label and answer, and the turn's
    failure when it could not run or its corrections ran out."""

    label: str
    verdict: HookVerdict
    failure: str | None = None


PASS = Gate()


class HookRunner:
    """The hooks of one session run (its input: spec, hook sources, mocks, skills), over the
    session its context holds."""

    def __init__(self, ctx: SessionContext) -> None:
        self._ctx = ctx

    @property
    def _input(self) -> SessionInput:
        """The run's input as it stands (a turn may adopt a newer workflow revision)."""
        return self._ctx.input

    @property
    def _spec(self) -> WorkflowSpec:
        """The spec the current turn runs under."""
        return self._ctx.spec

    # --- gates ----------------------------------------------------------------------------

    async def gate_advance(self, slug: str, target: str, reason: str | None) -> Gate:
        """The leaving state's after hooks, then the target's before hooks, stopping at the
        first that does not pass."""
        s = self._ctx.session
        stop = await self._after_hooks(slug, to_state=target, reason=reason)
        if stop is not None:
            label, verdict = stop.label, stop.verdict
            if stop.failure is not None:
                return Gate(failure=stop.failure)
            if verdict.verdict == "correct":
                return Gate(
                    refusal=Refusal(
                        f"archmax_advance rejected by after hook {label} (correct): "
                        f"{verdict.reason}. Address it, then advance again.",
                        "hook.correct",
                    )
                )
            return Gate(
                refusal=Refusal(
                    f"archmax_advance vetoed by after hook {label}: {verdict.reason}", "hook.veto"
                )
            )
        entered = self._spec.state(target)
        if entered.is_human:
            return PASS
        for index, hook in enumerate(entered.before):
            label = hooks.hook_label(hook, index)
            verdict = hooks.on_entry(
                await self.execute(
                    "before",
                    target,
                    index,
                    hook,
                    from_state=slug,
                    to_state=target,
                    reason=reason,
                )
            )
            if verdict.error:
                return Gate(failure=f"before hook {label} of '{target}' failed: {verdict.reason}")
            if verdict.verdict != "ok" and _bounded(verdict):
                exhausted = take_correction(s, target, hook, "before", index)
                if exhausted is not None:
                    return Gate(failure=f"{exhausted}: {verdict.reason}")
            if verdict.verdict != "ok":
                return Gate(
                    refusal=Refusal(
                        f"archmax_advance rejected: entry to '{target}' vetoed by before hook "
                        f"{label}: {verdict.reason}",
                        "hook.veto",
                    )
                )
        return PASS

    async def on_entry(self, slug: str) -> Entry:
        """The state's before hooks, for an entry other than an advance; a veto rejects."""
        for index, hook in enumerate(self._spec.state(slug).before):
            label = hooks.hook_label(hook, index)
            verdict = hooks.on_entry(await self.execute("before", slug, index, hook))
            if verdict.error:
                return Entry(failure=f"before hook {label} of '{slug}' failed: {verdict.reason}")
            if verdict.verdict != "ok":
                return Entry(
                    failure=f"entry to '{slug}' vetoed by before hook {label}: {verdict.reason}",
                    reply=verdict.reason,
                )
        return Entry()

    async def at_completion(self, slug: str) -> Completion:
        """A terminal state's after hooks when the model finished: a correct within budget
        or a veto is an ``[after]`` note (the model is called again); exhausted corrections
        or a hook that could not run fail the turn."""
        if not self._spec.state(slug).is_terminal:
            return Completion()
        stop = await self._after_hooks(slug)
        if stop is None:
            return Completion()
        if stop.failure is not None:
            return Completion(failure=stop.failure)
        return Completion(
            note=f"[after] hook {stop.label} answered {stop.verdict.verdict}: "
            f"{stop.verdict.reason}. Address it before you finish."
        )

    async def _after_hooks(
        self, slug: str, *, to_state: str | None = None, reason: str | None = None
    ) -> AfterStop | None:
        """The state's after hooks in order, up to the first that does not pass (None: all
        passed). A hook that could not run fails the turn; a ``correct``, or a grader's
        unreadable reply once :data:`UNREADABLE_VERDICT_PATCH` holds, spends one of the hook's
        corrections and fails the turn when none is left; any other answer is the caller's to
        give back (an advance refused, an ``[after]`` note)."""
        s = self._ctx.session
        for index, hook in enumerate(self._spec.state(slug).after):
            label = hooks.hook_label(hook, index)
            verdict = await self.execute(
                "after", slug, index, hook, to_state=to_state, reason=reason
            )
            if verdict.error:
                failure = f"after hook {label} of '{slug}' failed: {verdict.reason}"
                return AfterStop(label, verdict, failure)
            if verdict.verdict == "ok":
                continue
            if verdict.verdict == "correct" or _bounded(verdict):
                exhausted = take_correction(s, slug, hook, "after", index)
                if exhausted is not None:
                    return AfterStop(label, verdict, f"{exhausted}: {verdict.reason}")
            return AfterStop(label, verdict)
        return None

    # --- one hook -------------------------------------------------------------------------

    async def execute(
        self,
        phase: Phase,
        slug: str,
        index: int,
        hook: HookSpec,
        *,
        from_state: str | None = None,
        to_state: str | None = None,
        reason: str | None = None,
    ) -> HookVerdict:
        """Run one hook as an activity and read its answer (fail closed)."""
        s = self._ctx.session
        args = hooks.hook_args(
            state=slug,
            phase=phase,
            trigger=s.trigger,
            variables=s.variables,
            transcript=s.transcript,
            from_state=from_state or (slug if phase == "after" else None),
            to_state=to_state,
            reason=reason,
        )
        summary = hooks.hook_summary(phase, slug, hooks.hook_label(hook, index))
        kind, custom = hooks.hook_kind(hook)
        if kind == "script":
            verdict = await self._script(slug, str(hook.script), args, summary)
        elif kind == "rubric":
            verdict = await self._rubric(slug, hook, args, summary)
        else:
            verdict = await self._custom(custom, hook, args, summary)
        telemetry.hook_verdict(self._ctx, phase, kind, verdict.verdict, bool(verdict.error))
        return verdict

    async def _script(
        self, slug: str, path: str, args: dict[str, Any], summary: str
    ) -> HookVerdict:
        problem = hooks.script_path_problem(path)
        if problem is not None:
            return hooks.veto(problem)
        source = self._input.hook_sources.get(hooks.source_key(path))
        if source is None:
            return hooks.veto(
                f"hook script {path!r} was not found in workflows/{self._input.workflow}/"
            )
        try:
            result = await self._sandbox(
                slug,
                summary,
                label=path,
                kind="hook",
                source=source,
                args=args,
                visible=governance.runtime_skills(self._spec, self._input.prompt.skills),
            )
        except ActivityError as failure:
            cause = failure.cause
            if isinstance(cause, ApplicationError):
                if cause.type in _SCRIPT_VETOES:
                    return hooks.veto(cause.message)
                return hooks.execution_error(cause.message)
            return hooks.execution_error(str(cause or failure))
        failed = result.failed_calls
        if failed:
            return hooks.veto(f"a tool call failed inside the hook: {failed[0].content}")
        return hooks.script_verdict(result.value, result.returned_nothing)

    async def _rubric(
        self, slug: str, hook: HookSpec, args: dict[str, Any], summary: str
    ) -> HookVerdict:
        """The grading model, as a model activity the session's transcript never sees."""
        assert hook.rubric is not None
        call = ModelCallInput(
            session_id=self._input.session_id,
            state=slug,
            model=hook.rubric.model or self._spec.state(slug).model or self._spec.settings.model,
            messages=hooks.rubric_messages(hook.rubric.instructions, args),
            tool_choice="none",
        )
        try:
            result = await contracts.model.complete(call, summary=summary)
        except ActivityError as failure:
            return hooks.execution_error(f"the rubric's grader failed: {failure.cause or failure}")
        s = self._ctx.session
        s.usage = s.usage.plus(result.usage)
        return hooks.rubric_verdict(result.content)

    async def _custom(
        self, kind: str | None, hook: HookSpec, args: dict[str, Any], summary: str
    ) -> HookVerdict:
        """A host-registered executor of a kind ``extensions.hooks`` declares."""
        if kind is None or kind not in self._spec.extensions.hooks:
            return hooks.veto(
                f"hook kind {kind!r} is not declared in extensions.hooks (declared: "
                f"{', '.join(self._spec.extensions.hooks) or 'none'})"
            )
        try:
            result = await contracts.sandbox.custom_hook(
                CustomHookInput(
                    session_id=self._input.session_id,
                    kind=kind,
                    config=hooks.custom_config(hook),
                    args=args,
                    stored={n: v for n, v in self._ctx.session.variables.items() if v.stored},
                ),
                summary=summary,
            )
        except ActivityError as failure:
            detail = failure.cause or failure
            return hooks.execution_error(f"hook executor {kind!r} failed: {detail}")
        if result.error is not None:
            return hooks.veto(result.error)
        return hooks.custom_verdict(result.value)

    # --- archmax_run ----------------------------------------------------------------------

    async def run_script(
        self,
        slug: str,
        arguments: dict[str, Any],
        dispatch: ScriptDispatcher | None = None,
        journal: ScriptJournal | None = None,
    ) -> tuple[str, Literal["ok", "error"]] | None:
        """A skill bundle's script in the sandbox on the agent's authority: the answer the
        model reads (a string as it is, anything else as JSON) and its status.

        A ``tools.archmaxWorkflow<Slug>`` call stops the run (the activity cannot start a
        child); ``dispatch`` carries it out as the agent's call would be, and the script runs
        again from the top with every earlier answer replayed from its journal. None: the
        dispatched child parked, and the session parks with it (``journal`` then resumes it).
        """
        s = self._ctx.session
        path = str(arguments.get("file_path"))
        inner = arguments.get("args")
        script_args = {
            **(inner if isinstance(inner, dict) else {}),
            **arguments,
            **_agent_run_args(s, slug),
        }
        replay = journal or ScriptJournal()
        tools = (
            [delegation.PREFIX + slug for slug in self._input.delegates]
            if dispatch is not None
            else []
        )
        try:
            while True:
                result = await self._sandbox(
                    slug,
                    f"archmax_run · {path[:80]}"
                    + (
                        f" (resumed after {replay.count + len(replay.tail)} calls)"
                        if replay.count or replay.tail
                        else ""
                    ),
                    label=path,
                    kind="script",
                    script_path=path,
                    args=script_args,
                    visible=governance.enabled_skills(self._spec, slug),
                    workflow_tools=tools,
                    journal=replay,
                )
                if result.dispatch is None or dispatch is None or result.journal is None:
                    break
                made = result.journal
                answer = await dispatch(result.dispatch.tool, result.dispatch.arguments, made)
                if answer is None:
                    return None
                replay = made.then(
                    journal_entry(result.dispatch.tool, result.dispatch.arguments, *answer)
                )
        except ActivityError as failure:
            return _failed(sandbox.ARCHMAX_RUN, failure), "error"
        if result.returned_nothing:
            return "(the script returned nothing)", "ok"
        return matching.mock_result_text(result.value), "ok"

    async def run_eval(
        self, slug: str, arguments: dict[str, Any]
    ) -> tuple[str, Literal["ok", "error"]]:
        """``archmax_eval``: the snippet in the sandbox on the agent's authority; the answer
        is its console output, then ``=> `` and its value (a string as it is, else JSON)."""
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return "archmax_eval needs `code`: the JavaScript to evaluate", "error"
        try:
            result = await self._sandbox(
                slug,
                f"archmax_eval · {' '.join(code.split())[:80]}",
                label="archmax_eval",
                kind="eval",
                source=code,
                args=_agent_run_args(self._ctx.session, slug),
                visible=governance.enabled_skills(self._spec, slug),
            )
        except ActivityError as failure:
            return _failed(sandbox.ARCHMAX_EVAL, failure), "error"
        value = "undefined" if result.returned_nothing else matching.mock_result_text(result.value)
        dropped = (
            [f"… {result.output_dropped} more console line(s) not kept"]
            if result.output_dropped
            else []
        )
        return "\n".join([*result.logs, *dropped, f"=> {value}"]), "ok"

    async def _sandbox(
        self,
        slug: str,
        summary: str,
        *,
        label: str,
        kind: Literal["hook", "script", "eval"],
        args: dict[str, Any],
        visible: set[str],
        source: str | None = None,
        script_path: str | None = None,
        workflow_tools: list[str] | None = None,
        journal: ScriptJournal | None = None,
    ) -> SandboxRunResult:
        limits = SandboxLimits.from_settings(self._spec.settings)
        result = await contracts.sandbox.run(
            SandboxRunInput(
                session_id=self._input.session_id,
                label=label,
                kind=kind,
                source=source,
                script_path=script_path,
                args=args,
                spec=self._spec,
                state=slug,
                variables=self._ctx.session.variables,
                mocks=self._ctx.mocks,
                visible_skills=sorted(visible),
                limits=limits,
                workflow_tools=workflow_tools or [],
                journal=journal or ScriptJournal(),
            ),
            summary=summary,
        )
        if result.terminal is not None and kind != "hook":  # a hook's failed call vetoes
            raise governance.TerminalBlock(result.terminal)
        return result


UNREADABLE_VERDICT_PATCH = "archmax-rubric-unreadable-bounded"
"""``workflow.patched`` id: a rubric grader's unreadable reply spends the rubric's
``max_iterations`` like a correct (past them the turn fails), where it was a plain veto the
agent could answer forever."""


def _bounded(verdict: HookVerdict) -> bool:
    """Whether ``verdict`` is a grader's unreadable reply that spends the rubric's budget."""
    return verdict.unreadable and patches.patched(UNREADABLE_VERDICT_PATCH)


def _agent_run_args(s: SessionState, slug: str) -> dict[str, Any]:
    """What a script or snippet the agent runs reads in ``args``: where the session stands
    and its variables' plain values."""
    return {
        "state": slug,
        "trigger": s.trigger,
        "variables": variables.wire_values(s.variables),  # stored ones: the activity's
    }


def _failed(tool: str, failure: ActivityError) -> str:
    """A sandbox run that ended in an error, as the model reads it: the typed error's name
    and message (``archmax_run failed (SandboxTimeoutError): …``)."""
    cause = failure.cause
    kind = cause.type if isinstance(cause, ApplicationError) else None
    detail = cause.message if isinstance(cause, ApplicationError) else str(failure)
    return f"{tool} failed ({kind or 'error'}): {detail}"


def journal_entry(
    tool: str, arguments: dict[str, Any], content: str, status: Literal["ok", "error", "blocked"]
) -> SandboxToolCall:
    """A dispatched sub-workflow call's answer, as the script's journal replays it."""
    return SandboxToolCall(tool=tool, arguments=arguments, status=status, content=content)


def take_correction(
    s: SessionState, slug: str, hook: HookSpec, phase: Phase, index: int
) -> str | None:
    """Spend one of the hook's corrections this visit, or say why none is left."""
    key = hooks.correction_key(phase, index)
    budget = hooks.correction_budget(hook)
    used = s.hook_corrections.get(key, 0)
    if used >= budget:
        return (
            f"corrections exhausted for {phase} hook {hooks.hook_label(hook, index)} of "
            f"'{slug}' (max_iterations: {budget})"
        )
    s.hook_corrections[key] = used + 1
    return None
