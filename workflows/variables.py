"""Session variables: ``name → {value, locked}``, and who may write them.

``locked`` is the whole attribution: a host seed (start variables, a delivery's variables,
the built-in ``trigger``) is locked; the agent's own ``archmax_set_variables`` writes are not,
and can never replace a locked value. Only a host seeding boundary (a turn start or a delivery)
replaces a locked value. ``title`` is agent-owned and never locked. Pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from archmax_temporal.workflows import limits
from archmax_temporal.workflows.errors import PayloadTooLargeError
from archmax_temporal.workflows.limits import MAX_VARIABLE_NAME_CHARS, Limits
from archmax_temporal.workflows.models import Variable
from archmax_temporal.workflows.spec import VARIABLE_NAME

TRIGGER = "trigger"
TITLE = "title"


def invalid_names(names: list[str] | Any) -> list[str]:
    """The names that cannot be seeded or set (not ``^[a-z][a-z0-9_]*$``, longer than 64
    characters, or ``trigger``)."""
    return [
        n
        for n in names
        if not isinstance(n, str)
        or not VARIABLE_NAME.match(n)
        or len(n) > MAX_VARIABLE_NAME_CHARS
        or n == TRIGGER
    ]


_INLINE_RECORD = len('{"value":,"locked":false}') - len("[,false]")
"""What the ``{value, locked}`` record adds over the ``[value, locked]`` pair measured."""


def _surely_inline(value: Any, inline_bytes: int) -> bool:
    """Whether ``value``'s JSON is certainly within ``inline_bytes``, without rendering it
    (a session's checks look at every variable at every firing)."""
    kind = type(value)
    if kind is int:
        return bool(-(10**15) < value < 10**15)
    if kind is str:
        return len(value) * 6 + 2 <= inline_bytes  # every character escaped at worst
    if value is None or isinstance(value, bool | float):
        return True
    if isinstance(value, int):
        return -(10**15) < value < 10**15
    if isinstance(value, str):
        return len(value) * 6 + 2 <= inline_bytes  # every character escaped at worst
    return False


def _json_bytes(value: Any) -> tuple[int, str]:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass")), text


def carried_bytes(variables: Mapping[str, Variable], writes: Mapping[str, tuple[Any, bool]]) -> int:
    """What the session's variables carry (as the continue-as-new input and every turn's
    save step hold them) once ``writes`` (name → (value, locked)) are applied: a value by
    reference its digest and preview, any other its ``{value, locked}`` record. One JSON
    rendering of the inline ones, so a check of thousands of variables stays cheap."""
    inline: dict[str, tuple[Any, bool]] = {}
    total = 0
    inline_bytes = limits.INLINE_VARIABLE_BYTES
    for name, v in variables.items():
        if name in writes:
            continue
        if v.ref is not None:
            total += limits.stored_entry_size(name, v.preview, v.locked)
        else:
            inline[name] = (v.value, v.locked)
    for name, (value, locked) in writes.items():
        if not _surely_inline(value, inline_bytes):
            size, text = _json_bytes(value)
            if size > inline_bytes:
                total += limits.stored_entry_size(name, limits.preview_of(text), locked)
                continue
        inline[name] = (value, locked)
    rendered = json.dumps(inline, ensure_ascii=False, default=str, separators=(",", ":"))
    return total + len(rendered.encode("utf-8", "surrogatepass")) + _INLINE_RECORD * len(inline)


def _check(
    bounds: Limits, variables: Mapping[str, Variable], writes: dict[str, tuple[Any, bool]]
) -> None:
    new = sum(1 for name in writes if name not in variables)
    limits.check_growth(
        bounds,
        count=len(variables) + new,
        new=new,
        carried=carried_bytes(variables, writes) if writes else 0,
    )


def check_seed_growth(
    bounds: Limits, variables: Mapping[str, Variable], seeds: Mapping[str, Any], trigger: str
) -> None:
    """Raise :class:`~archmax_temporal.workflows.errors.PayloadTooLargeError` when seeding ``seeds``
    (and the built-in ``trigger``) would take the session past its variable limits."""
    writes = {name: (value, name != TITLE) for name, value in seeds.items()}
    writes[TRIGGER] = (trigger, True)
    _check(bounds, variables, writes)


def check_agent_growth(
    bounds: Limits, variables: Mapping[str, Variable], writes: Mapping[str, Any], lock: bool
) -> None:
    """Raise :class:`~archmax_temporal.workflows.errors.PayloadTooLargeError` when an agent's
    (otherwise admissible) ``writes`` would take the session past its limits, one of them alone
    included."""
    for name, value in writes.items():
        size = limits.size_of(value)
        if size > bounds.variable_bytes:
            raise PayloadTooLargeError(
                f"variable {name!r} is {size} bytes; the limit is {bounds.variable_bytes} "
                f"({limits.ENV_NAMES['variable_bytes']})"
            )
    _check(
        bounds, variables, {name: (value, lock and name != TITLE) for name, value in writes.items()}
    )


def changed(before: Mapping[str, Variable], after: Mapping[str, Variable]) -> dict[str, Variable]:
    """The variables of ``after`` that ``before`` did not hold as they are now (new or
    changed): what one firing did to the session's variables. A value by reference is the
    same value whether this copy holds it or not (the same reference)."""
    return {name: v for name, v in after.items() if not _same(before.get(name), v)}


def _same(before: Variable | None, after: Variable) -> bool:
    if before is None:
        return False
    if before is after:
        return True
    if before.ref is not None and before.ref == after.ref:
        return before.locked == after.locked
    return before == after


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


# --- values by reference ------------------------------------------------------------------

STORED_VARIABLES = "checkpoints/variables"
"""Where a session's values by reference live, under its folder: ``<ref>.json``, each the
value's JSON (content-named, written once)."""

_REFERENCE = re.compile(r"\$\{\{\s*([a-z][a-z0-9_]*)")
"""The variable a ``${{name…}}`` reference starts from."""


def stored_text(value: Any) -> str:
    """The JSON a value by reference is stored as (ASCII, so any string round-trips)."""
    return json.dumps(value, ensure_ascii=True, default=str)


def reference_of(text: str) -> str:
    """The reference (SHA-256) of a stored value's JSON."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def by_reference(
    variables: dict[str, Variable], inline_bytes: int = limits.INLINE_VARIABLE_BYTES
) -> tuple[dict[str, Variable], dict[str, str]]:
    """``variables`` with every value over ``inline_bytes`` (as JSON) turned into a value by
    reference (holding the value still), and the texts to store (reference → JSON) for
    them. Values already by reference are left as they are."""
    moved: dict[str, Variable] = {}
    texts: dict[str, str] = {}
    for name, variable in variables.items():
        if variable.ref is not None or _surely_inline(variable.value, inline_bytes):
            continue
        size, shown = _json_bytes(variable.value)
        if size <= inline_bytes:
            continue
        text = stored_text(variable.value)
        ref = reference_of(text)
        texts[ref] = text
        moved[name] = variable.model_copy(
            update={"ref": ref, "size": len(text), "preview": limits.preview_of(shown)}
        )
    if not moved:
        return variables, texts
    return {**variables, **moved}, texts


def unloaded(variables: Mapping[str, Variable], names: Iterable[str]) -> dict[str, str]:
    """Of ``names``, those whose value is stored and not held here: name → reference."""
    wanted: dict[str, str] = {}
    for name in names:
        variable = variables.get(name)
        if variable is not None and variable.ref is not None and variable.value is None:
            wanted[name] = variable.ref
    return wanted


def with_values(variables: dict[str, Variable], values: Mapping[str, Any]) -> dict[str, Variable]:
    """``variables`` with the loaded ``values`` (reference → value) held again."""
    return {
        name: v.model_copy(update={"value": values[v.ref]})
        if v.ref is not None and v.value is None and v.ref in values
        else v
        for name, v in variables.items()
    }


def referenced(*texts: str) -> set[str]:
    """The variables ``${{…}}`` references in ``texts`` start from."""
    return {match.group(1) for text in texts for match in _REFERENCE.finditer(text)}


def wire_values(variables: Mapping[str, Variable]) -> dict[str, Any]:
    """Just the values as they travel to an activity: a value by reference is None there
    (the activity reads it from the store, :func:`resolved`)."""
    return {name: None if v.stored else v.value for name, v in variables.items()}


def typed(variables: dict[str, Variable]) -> dict[str, Variable]:
    """``variables`` for a type check (``requires``, ``returns``): a value by reference not
    held here stands in as an empty value of its JSON type (its preview's first character
    says which), so a check never reads a stored string, object or array as missing."""
    if not any(v.ref is not None and v.value is None for v in variables.values()):
        return variables
    return {
        name: v.model_copy(update={"value": _stand_in(v.preview or "")})
        if v.ref is not None and v.value is None
        else v
        for name, v in variables.items()
    }


def _stand_in(preview: str) -> Any:
    return {'"': "…", "{": {}, "[": []}.get(preview[:1])
