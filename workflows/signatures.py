"""Trigger signatures: what a firing must bring (``requires``) and what a session guarantees
when it completes (``returns``).

An entry is a bare name (untyped: any value, ``null`` included) or ``{name, type,
description}`` with one of eight types. Nothing is coerced and a typed entry never takes
``null``. Checked at three places: the firing (refused before any model call), the agent's
write (``archmax_set_variables`` refuses a mistyped return, correctably) and completion (a
terminal state short of its returns is rejected). Pure.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any

from archmax_temporal.workflows.models import Variable
from archmax_temporal.workflows.spec import Signature, SignatureEntry, TriggerSpec

_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_DATE_TIME = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})\Z"
)


def entries(signature: Signature) -> list[tuple[str, str | None]]:
    """``(name, type)`` pairs; ``type`` is None for a bare name."""
    return [
        (entry.name, entry.type) if isinstance(entry, SignatureEntry) else (entry, None)
        for entry in signature
    ]


def conforms(value: Any, type_name: str | None) -> bool:
    """Whether ``value`` is of ``type_name`` (None: anything, ``null`` included)."""
    if type_name is None:
        return True
    if value is None:
        return False
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "file":
        return isinstance(value, str) and bool(value.strip())
    if type_name == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if type_name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if type_name == "number":
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "date":
        return isinstance(value, str) and bool(_DATE.match(value)) and _parses(date, value)
    if type_name == "date-time":
        return isinstance(value, str) and bool(_DATE_TIME.match(value)) and _parses(datetime, value)
    return False


def _parses(kind: type[date] | type[datetime], value: str) -> bool:
    try:
        kind.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return False
    return True


def _arrived(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:120]


def missing_inputs(
    trigger_id: str, declaration: TriggerSpec | None, variables: dict[str, Variable]
) -> list[str]:
    """Why a firing does not satisfy the trigger's ``requires``, one line per variable."""
    if declaration is None:
        return []
    problems = []
    for name, type_name in entries(declaration.requires):
        if name not in variables:
            kind = f" ({type_name})" if type_name else ""
            problems.append(f"trigger {trigger_id!r} requires {name!r}{kind}; it did not arrive")
        elif not conforms(variables[name].value, type_name):
            problems.append(
                f"trigger {trigger_id!r} requires {name!r} of type {type_name}; "
                f"got {_arrived(variables[name].value)}"
            )
    return problems


def return_refusal(declaration: TriggerSpec | None, writes: dict[str, Any]) -> str | None:
    """Why an agent's write breaks a typed return of the current trigger, or None."""
    if declaration is None:
        return None
    for name, type_name in entries(declaration.returns):
        if name in writes and not conforms(writes[name], type_name):
            return f"{name!r} is a return of type {type_name}; got {_arrived(writes[name])}"
    return None


def missing_returns(
    trigger_id: str,
    declaration: TriggerSpec | None,
    state: str,
    variables: dict[str, Variable],
    *,
    allow_unset: bool = False,
) -> str | None:
    """Why a session completing in ``state`` falls short of its returns, or None.

    ``allow_unset`` (a delegated child): an unset return is no shortfall, the caller is told
    instead; a mistyped one still is.
    """
    if declaration is None:
        return None
    for name, type_name in entries(declaration.returns):
        if name not in variables:
            if allow_unset:
                continue
            return (
                f"Completed in state '{state}' without setting '{name}', which trigger "
                f"'{trigger_id}' declares in its 'returns'"
            )
        if not conforms(variables[name].value, type_name):
            return (
                f"Completed in state '{state}' with '{name}' of the wrong type: trigger "
                f"'{trigger_id}' declares {type_name}, got {_arrived(variables[name].value)}"
            )
    return None


_JSON_TYPES: dict[str, dict[str, Any]] = {
    "date": {"type": "string", "format": "date"},
    "date-time": {"type": "string", "format": "date-time"},
    "file": {"type": "string"},
}
_FILE_HINT = (
    "A workspace path (e.g. scratchpad/report.pdf); the file is copied into the "
    "sub-workflow's scratchpad/attachments/."
)


def json_schema(signature: Signature) -> dict[str, Any]:
    """``signature`` as a tool's JSON-schema parameters: every entry required, each typed as
    declared (``date``/``date-time`` as formatted strings, ``file`` a path), untyped ones ``{}``.
    """
    properties: dict[str, Any] = {}
    for entry in signature:
        name, type_name = (
            (entry.name, entry.type) if isinstance(entry, SignatureEntry) else (entry, None)
        )
        prop: dict[str, Any] = dict(
            _JSON_TYPES.get(type_name, {"type": type_name}) if type_name else {}
        )
        described = entry.description if isinstance(entry, SignatureEntry) else None
        if type_name == "file":
            described = f"{described} {_FILE_HINT}" if described else _FILE_HINT
        if described:
            prop["description"] = described
        properties[name] = prop
    return {"type": "object", "properties": properties, "required": list(properties)}
