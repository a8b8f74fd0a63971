"""Session variables: ``name → {value, locked}``, and who may write them.

``locked`` is the whole attribution: a host seed (start variables, a delivery's variables,
the built-in ``trigger``) is locked; the agent's own ``archmax_set_variables`` writes are not,
and can never replace a locked value. Only a host seeding boundary (a turn start or a delivery)
replaces a locked value. ``title`` is agent-owned and never locked. Pure.
"""

from __future__ import annotations

from typing import Any

from archmax_temporal.workflows.models import Variable
from archmax_temporal.workflows.spec import VARIABLE_NAME

TRIGGER = "trigger"
TITLE = "title"


def invalid_names(names: list[str] | Any) -> list[str]:
    """The names that cannot be seeded or set (not ``^[a-z][a-z0-9_]*$``, or ``trigger``)."""
    return [
        n for n in names if not isinstance(n, str) or not VARIABLE_NAME.match(n) or n == TRIGGER
    ]


def seed(
    variables: dict[str, Variable], seeds: dict[str, Any], *, replace_title: bool
) -> dict[str, Variable]:
    """``variables`` with the host's ``seeds`` written locked (``title`` excepted).

    A seeded title does not overwrite an existing one unless ``replace_title`` (a delivery).
    """
    merged = dict(variables)
    for name, value in seeds.items():
        if name == TITLE:
            if replace_title or TITLE not in merged:
                merged[TITLE] = Variable(value=value, locked=False)
            continue
        merged[name] = Variable(value=value, locked=True)
    return merged


def set_trigger(variables: dict[str, Variable], trigger_id: str) -> dict[str, Variable]:
    """``variables`` with the built-in ``trigger`` set, locked, to ``trigger_id``."""
    return {**variables, TRIGGER: Variable(value=trigger_id, locked=True)}


def agent_write_refusal(variables: dict[str, Variable], writes: Any, lock: Any) -> str | None:
    """Why an ``archmax_set_variables`` call must be refused whole, or None when it may apply."""
    if not isinstance(writes, dict) or not writes:
        return "`variables` must be a non-empty object of name → value"
    if lock is not None and not isinstance(lock, bool):
        return "`lock` must be a boolean"
    bad = invalid_names(list(writes))
    if bad:
        return f"invalid variable name(s): {', '.join(map(str, bad))} (use ^[a-z][a-z0-9_]*$)"
    locked = [n for n in writes if n in variables and variables[n].locked]
    if locked:
        return f"locked variable(s) cannot be changed: {', '.join(locked)}"
    if TITLE in writes:
        title = writes[TITLE]
        if lock:
            return "`title` can never be locked"
        if not isinstance(title, str) or not title.strip() or "\n" in title or len(title) > 200:
            return "`title` must be a non-empty single line of at most 200 characters"
    return None


def agent_write(
    variables: dict[str, Variable], writes: dict[str, Any], lock: bool
) -> dict[str, Variable]:
    """``variables`` with the agent's (already checked) ``writes`` applied."""
    merged = dict(variables)
    for name, value in writes.items():
        stored = value.strip() if name == TITLE and isinstance(value, str) else value
        merged[name] = Variable(value=stored, locked=bool(lock) and name != TITLE)
    return merged


def plain(variables: dict[str, Variable]) -> dict[str, Any]:
    """Just the values, for path resolution and display."""
    return {name: variable.value for name, variable in variables.items()}
