"""The answers of the runtime tools: ``archmax_advance``, ``archmax_wait``, ``archmax_raise``,
``archmax_reset``, ``archmax_set_variables`` and ``archmax_get_variables``.

Each checks one call against the session (through its :class:`SessionContext`), commits what it may
and says what the agent reads. They run inside the workflow and cost no activity; only an advance
runs hooks (the leaving state's after hooks, the target's before hooks). The turn engine
(:mod:`archmax_temporal.workflows.turn`) decides what a refusal or a failure does to the turn.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import patches, signatures, variables
    from archmax_temporal.workflows.context import SessionContext, ToolAnswer
    from archmax_temporal.workflows.durations import InvalidUntilError, resolve_until
    from archmax_temporal.workflows.errors import PayloadTooLargeError
    from archmax_temporal.workflows.hook_runner import HookRunner
    from archmax_temporal.workflows.models import PendingInput, Raised, Variable
    from archmax_temporal.workflows.paths import MISSING, InvalidPathError, resolve_path


def raise_session(
    ctx: SessionContext, arguments: dict[str, Any], *, alone: bool
) -> tuple[ToolAnswer, bool]:
    """``archmax_raise``: end the session as failed. The answer, and whether it was raised
    (it must be the only call of its message, with a token ``code`` and a ``reason``)."""
    if not alone:
        return ToolAnswer(
            "archmax_raise refused: it must be the only tool call of its message. "
            "Nothing was raised.",
            "error",
        ), False
    refusal = raise_refusal(arguments)
    if refusal is not None:
        return ToolAnswer(f"archmax_raise refused: {refusal}", "error"), False
    code, reason = str(arguments["code"]), str(arguments["reason"])
    ctx.session.raised = Raised(code=code, reason=reason, state=ctx.state_slug())
    ctx.session.status = "failed"
    return ToolAnswer(f"Session ended as failed ({code})."), True


def raise_refusal(arguments: dict[str, Any]) -> str | None:
    """Why ``archmax_raise``'s arguments are refused, or None."""
    code, reason = arguments.get("code"), arguments.get("reason")
    if not isinstance(code, str) or not 1 <= len(code.strip()) <= 64 or "\n" in code:
        return "`code` must be a single-line token of 1-64 characters"
    if not isinstance(reason, str) or not reason.strip():
        return "`reason` must be a non-empty string"
    return None


async def advance(
    ctx: SessionContext,
    hooks: HookRunner,
    arguments: dict[str, Any],
    *,
    advanced_to: str | None,
) -> tuple[ToolAnswer, str | None]:
    """``archmax_advance``: check and commit an advance — once per message, the leaving
    state's ``requires``, the edge, the leaving state's ``after`` hooks, the target's
    ``before`` hooks, then the commit.

    The second value is a turn failure (a hook that could not run, corrections exhausted);
    every other refusal is answered and the agent goes on, nothing committed.
    """
    if advanced_to is not None:
        return ToolAnswer(
            "archmax_advance rejected: only one advance per message; this "
            f"message already advanced to '{advanced_to}'.",
            "error",
        ), None
    s = ctx.session
    slug = ctx.state_slug()
    state = ctx.spec.state(slug)
    target = arguments.get("to")
    targets = [t.to for t in state.transitions]
    if not targets:
        return ToolAnswer(
            f"archmax_advance rejected: state '{slug}' is terminal and has no transitions.",
            "error",
        ), None
    unset = [name for name in state.requires if name not in s.variables]
    if unset:
        return ToolAnswer(
            f"archmax_advance rejected (transition.requires): state '{slug}' requires "
            f"{', '.join(map(repr, unset))} to be set before it may be left; record it with "
            "archmax_set_variables.",
            "error",
            rule="transition.requires",
        ), None
    if not isinstance(target, str) or target not in targets:
        return ToolAnswer(
            f"archmax_advance rejected: {target!r} is not a transition of '{slug}'. "
            f"Valid targets: {', '.join(targets)}.",
            "error",
        ), None
    raw_reason = arguments.get("reason")
    reason = raw_reason if isinstance(raw_reason, str) and raw_reason else None
    gate = await hooks.gate_advance(slug, target, reason)
    if gate.failure is not None:
        return ToolAnswer(f"archmax_advance failed: {gate.failure}", "error"), gate.failure
    if gate.refusal is not None:
        refusal = gate.refusal
        return ToolAnswer(refusal.content, "error", rule=refusal.rule), None
    s.state = target
    ctx.new_visit()
    s.before_done = True  # the gate ran the target's before hooks
    ctx.trail(target, "agent", reason)
    return ToolAnswer(
        f"Advanced to state '{target}'. You may now use the tools allowed in this state."
    ), None


def wait(
    ctx: SessionContext, arguments: dict[str, Any], now: datetime, *, parking: bool
) -> tuple[ToolAnswer, PendingInput | None, str | None]:
    """``archmax_wait``: check a park. The answer, the park to commit, or the turn failure
    it causes.

    One park per message. An unreadable ``until`` (an empty string included: the agent asked
    for a schedule it did not give) refuses the park (the model reads why and
    goes on); the park beyond ``budget.maxParks`` is a turn failure, routed by ``on_error``.
    """
    if parking:
        return ToolAnswer("archmax_wait refused: already parking.", "error"), None, None
    slug = ctx.state_slug()
    state = ctx.spec.state(slug)
    reason = arguments.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        refusal = "archmax_wait refused: `reason` must be a non-empty string."
        return ToolAnswer(refusal, "error"), None, None
    resume_at = None
    until = arguments.get("until")
    if until is not None:  # absent (or null) parks with no schedule; any value must parse
        if not isinstance(until, str) or not until.strip():
            refusal = (
                f"archmax_wait refused: `until` {until!r} is not a relative duration (30m, 2h, "
                "1d) or an ISO-8601 instant; omit it to wait with no schedule. Not parked."
            )
            return ToolAnswer(refusal, "error"), None, None
        try:
            resume_at = resolve_until(until, now)
        except InvalidUntilError as exc:
            return ToolAnswer(f"archmax_wait refused: {exc}. Not parked.", "error"), None, None
    max_parks = state.budget.max_parks
    if max_parks is not None and ctx.session.park_counts.get(slug, 0) >= max_parks:
        failure = f"budget.maxParks ({max_parks}) exhausted in state '{slug}'"
        return ToolAnswer(f"archmax_wait refused: {failure}.", "error"), None, failure
    park = PendingInput(
        state=slug,
        title=state.title,
        reason=reason.strip(),
        parked_at=now,
        resume_at=resume_at,
    )
    wake = f" It wakes itself at {resume_at.isoformat()}." if resume_at else ""
    return (
        ToolAnswer(
            f"Parked in state '{slug}': {park.reason}. The session resumes here when an event "
            f"is delivered.{wake}"
        ),
        park,
        None,
    )


def reset(ctx: SessionContext, arguments: dict[str, Any]) -> ToolAnswer:
    """``archmax_reset``: back to the state the conversation began in (a new visit)."""
    s = ctx.session
    if s.entry_state is None or s.state == s.entry_state:
        return ToolAnswer(
            "archmax_reset refused: the session is already in the state the conversation began in.",
            "error",
        )
    s.state = s.entry_state
    ctx.new_visit()
    reason = arguments.get("reason")
    ctx.trail(s.entry_state, "reset", reason if isinstance(reason, str) else None)
    return ToolAnswer(f"Reset to state '{s.entry_state}'.")


def set_variables(ctx: SessionContext, arguments: dict[str, Any]) -> ToolAnswer:
    """``archmax_set_variables``: record whole values, unless a name is locked (the host's)
    or a declared return is mistyped; the whole call is refused then."""
    s = ctx.session
    writes = arguments.get("variables")
    lock = arguments.get("lock")
    refusal = variables.agent_write_refusal(s.variables, writes, lock)
    if refusal is None and isinstance(writes, dict) and s.trigger is not None:
        refusal = signatures.return_refusal(ctx.spec.trigger(s.trigger), writes)
    if refusal is None and isinstance(writes, dict):
        refusal = _growth_refusal(ctx, writes, bool(lock))
    if refusal is not None:
        return ToolAnswer(f"archmax_set_variables refused: {refusal}. Nothing was set.", "error")
    assert isinstance(writes, dict)
    s.variables = variables.agent_write(s.variables, writes, bool(lock))
    return ToolAnswer(f"Set {', '.join(sorted(writes))}.")


VARIABLE_LIMITS_PATCH = "archmax-agent-variable-limits"
"""``workflow.patched`` id: an agent's ``archmax_set_variables`` is held to the session's
variable limits (one value, how many, how much in all), like a host's seeds."""


def _growth_refusal(ctx: SessionContext, writes: dict[str, Any], lock: bool) -> str | None:
    """Why the agent's writes would take the session past its variable limits (None: they
    fit). A session whose history predates the limits keeps taking them."""
    try:
        variables.check_agent_growth(ctx.input.limits, ctx.session.variables, writes, lock)
    except PayloadTooLargeError as refusal:
        if patches.patched(VARIABLE_LIMITS_PATCH):
            return str(refusal)
    return None


GET_ALL_BYTES = 32 * 1024
"""How much ``archmax_get_variables`` with no name answers whole; past it, each variable is
listed with a preview and read by name (the answer enters the history with the transcript)."""

LISTED_NAMES = 50
"""How many names an unknown-variable answer lists."""


def _all_variables(store: dict[str, Variable]) -> str:
    """Every variable as JSON, or, when that is over :data:`GET_ALL_BYTES`, each one's name,
    lock and a preview as far as the budget goes, and how to read the rest whole."""
    whole = json.dumps({n: _shown(v) for n, v in sorted(store.items())}, default=str)
    if len(whole) <= GET_ALL_BYTES:
        return whole
    lines = [
        f"{len(store)} variables, too many to show whole: read one with "
        "archmax_get_variables({name}) (and a dotted `path` into it)."
    ]
    used = len(lines[0])
    for shown, (n, v) in enumerate(sorted(store.items())):
        text = (v.preview or "") if v.stored else json.dumps(v.value, default=str)
        line = f"- {n}{' (locked)' if v.locked else ''}: {text[:80]}{'…' if len(text) > 80 else ''}"
        if used + len(line) > GET_ALL_BYTES:
            lines.append(f"… and {len(store) - shown} more")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _shown(variable: Variable) -> dict[str, Any]:
    """One variable in the all-variables answer: its value, or for a large one (kept by
    reference) its size and preview, read whole by name."""
    if variable.stored:
        return {
            "locked": variable.locked,
            "size": variable.size,
            "preview": variable.preview,
            "note": "large value: read it whole with archmax_get_variables({name})",
        }
    return {"value": variable.value, "locked": variable.locked}


def _names(store: dict[str, Variable]) -> str:
    """The session's variable names for an answer: the first :data:`LISTED_NAMES`."""
    names = sorted(store)
    if not names:
        return "(none)"
    more = f", … and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else ""
    return ", ".join(names[:LISTED_NAMES]) + more


def get_variables(store: dict[str, Variable], arguments: dict[str, Any]) -> ToolAnswer:
    """``archmax_get_variables``: all variables, one by name, or a dotted path into one."""
    name = arguments.get("name") or None
    path = arguments.get("path") or None
    if name is None and path is None:
        return ToolAnswer(_all_variables(store))
    if name is not None and name not in store:
        return ToolAnswer(f"Unknown variable {name!r}. Set variables: {_names(store)}.", "error")
    target = f"{name}.{path}" if name is not None and path is not None else (path or name)
    try:
        value = resolve_path(str(target), variables.plain(store))
    except InvalidPathError as exc:
        return ToolAnswer(f"archmax_get_variables refused: {exc}", "error")
    if value is MISSING:
        return ToolAnswer(f"Path {target!r} does not resolve.", "error")
    return ToolAnswer(json.dumps(value, default=str))
