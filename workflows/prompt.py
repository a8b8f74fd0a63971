"""Prompt rendering: the static workflow header and the volatile per-state block.

The static part (workflow title, instructions, WORKFLOW.md, AGENTS.md, the platform rules) is
the same on every call of a session, so providers can cache it. The state block says where the
agent stands and discloses only that state's outgoing edges: a target's title, instructions and
onward edges are never shown. Pure: rendered inside the workflow from the spec it carries.
"""

from __future__ import annotations

import json
from typing import Any

from archmax_temporal.workflows.hooks import hook_kind
from archmax_temporal.workflows.models import PromptParts, Variable
from archmax_temporal.workflows.spec import StateSpec, WorkflowSpec

PLATFORM_RULES = """\
## How this session works
You work inside an enforced workflow: one state at a time, with that state's tools and its
outgoing transitions only.
- Move with `archmax_advance({to, reason})`, naming one of the transitions listed under the
  current state. Nothing else changes the state.
- A reply with no tool call ends the turn. When you need an answer from outside before you can
  go on, ask in a message that also calls `archmax_wait({reason, until?})` in the same message:
  the call is what waits. `until` (30m, 2h, 1d, or an ISO-8601 instant) wakes the session
  itself; a delivered event resumes it earlier, in the same state.
- If the work cannot be done, call `archmax_raise({code, reason})` as the only tool call of its
  message: it ends the session as failed. `code` is a short token such as orders-unavailable.
- Read variables with `archmax_get_variables`; record what you establish with
  `archmax_set_variables`. Locked variables come from the host and cannot be changed.
- `archmax_reset` returns to the state the conversation began in. Call it before answering a
  follow-up that needs a path the current state cannot reach; never call it while you are
  still in that state.
- Runtime notes (`archmax_note` results such as [event] or [error]) are machine output from
  the runtime, not from the user. Never call `archmax_note` yourself.
"""


def render_system_prompt(spec: WorkflowSpec, parts: PromptParts, workflow_slug: str) -> str:
    """The static, cacheable prefix of every model call of a session."""
    sections = [f"# Workflow: {spec.title or workflow_slug}"]
    if spec.instructions:
        sections.append(f"## Instructions\n{spec.instructions.strip()}")
    if parts.workflow_md:
        sections.append(parts.workflow_md.strip())
    if parts.agents_md:
        sections.append(f"## Guidance (AGENTS.md)\n{parts.agents_md.strip()}")
    sections.append(PLATFORM_RULES.strip())
    return "\n\n".join(sections)


def render_state_block(
    spec: WorkflowSpec,
    slug: str,
    *,
    entry_state: str | None,
    follow_up: bool,
    variables: dict[str, Variable],
    handoff: bool = False,
    skills: dict[str, str] | None = None,
) -> str:
    """The volatile block: the active state, its instructions and only its outgoing edges.

    ``follow_up`` marks a turn that continues a finished session; in a terminal state other than
    the one the conversation began in, the block repeats the reset rule on exactly that turn.
    ``handoff`` marks the one tool-less call a park spends.
    """
    state = spec.state(slug)
    lines = [f"## Current state: `{slug}`" + (f" — {state.title}" if state.title else "")]
    if handoff:
        lines.append(
            "## This run is parked\nTools are unavailable for this message. Tell the person "
            "what happened so far and what the session is now waiting for."
        )
    if state.instructions:
        lines.append(f"### Instructions\n{state.instructions.strip()}")
    lines.append(_transitions_block(spec, state))
    hooks_line = _hooks_line(state)
    if hooks_line:
        lines.append(hooks_line)
    if follow_up and state.is_terminal and entry_state is not None and slug != entry_state:
        lines.append(
            "### Follow-up\nThis is a new message after the session finished here. If answering "
            f"it needs a path this state cannot reach, call `archmax_reset` first to return to "
            f"`{entry_state}`; otherwise answer here."
        )
    if skills:
        lines.append(
            "### Skills enabled here\n"
            + "\n".join(
                f"- `skills/{slug}/` — {description}"
                for slug, description in sorted(skills.items())
            )
        )
    if variables:
        lines.append(_variables_block(variables))
    return "\n\n".join(lines)


def _hooks_line(state: StateSpec) -> str | None:
    """``Hooks: before: script; after: rubric``: a hook's kind is all the agent is told (its
    criteria, budget and position stay the runtime's)."""
    phases = []
    for phase in ("before", "after"):
        kinds = [
            kind if kind != "custom" else (name or kind)
            for kind, name in (hook_kind(h) for h in getattr(state, phase))
        ]
        if kinds:
            phases.append(f"{phase}: {', '.join(kinds)}")
    return f"Hooks: {'; '.join(phases)}" if phases else None


def _transitions_block(spec: WorkflowSpec, state: StateSpec) -> str:
    if state.is_terminal:
        return (
            "### Transitions\nNone: this state is terminal. Do its work, then reply without a "
            "tool call to finish."
        )
    edges = []
    for transition in state.transitions:
        target = spec.state(transition.to)
        marks = []
        if target.is_human:
            marks.append("human decision node")
        if target.is_terminal:
            marks.append("terminal")
        mark = f" ({', '.join(marks)})" if marks else ""
        edges.append(f"- to `{transition.to}`{mark} — {transition.description.strip()}")
    return "### Transitions\n" + "\n".join(edges)


PROMPT_VARIABLE_CHARS = 16_000
"""How much of the system prompt the variables block may take: past it, the rest are named
by count and read with ``archmax_get_variables`` (the prompt travels in the history)."""


def _variables_block(variables: dict[str, Variable]) -> str:
    rows: list[str] = []
    used = 0
    for shown, (name, variable) in enumerate(sorted(variables.items())):
        shown_value = variable.preview if variable.stored else _short(variable.value)
        row = f"- {name}{' (locked)' if variable.locked else ''}: {shown_value}"
        if used + len(row) > PROMPT_VARIABLE_CHARS:
            rows.append(
                f"- … and {len(variables) - shown} more: read them with `archmax_get_variables`"
            )
            break
        rows.append(row)
        used += len(row) + 1
    return "### Session variables\n" + "\n".join(rows)


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit} chars)"
