"""The runtime tools the agent steers its session with, as the model sees them.

They are handled deterministically inside the workflow (no activity): they change only the
session's own durable state. ``archmax_note`` is reserved and never disclosed: it carries the
runtime's notes, so the model has no way to call it.
"""

from __future__ import annotations

from archmax_temporal.workflows.models import ToolSchema
from archmax_temporal.workflows.spec import StateSpec
from archmax_temporal.workflows.tools import (
    ADVANCE,
    GET_VARIABLES,
    NOTE,
    RAISE,
    RESET,
    RUNTIME_TOOLS,
    SET_VARIABLES,
    WAIT,
)

__all__ = [
    "ADVANCE",
    "GET_VARIABLES",
    "NOTE",
    "RAISE",
    "RESET",
    "RUNTIME_TOOLS",
    "SET_VARIABLES",
    "WAIT",
    "runtime_tool_schemas",
]


def runtime_tool_schemas(state: StateSpec) -> list[ToolSchema]:
    """The runtime tools disclosed in ``state``: terminal states hide ``archmax_advance``."""
    schemas: list[ToolSchema] = []
    if not state.is_terminal:
        # One enum value per target: two edges to one state are one choice for the model.
        targets = list(dict.fromkeys(t.to for t in state.transitions))
        schemas.append(
            ToolSchema(
                name=ADVANCE,
                description=(
                    "Move the session along one of the current state's transitions. "
                    "Only the listed targets are valid; at most one advance per message."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "to": {"type": "string", "enum": targets, "description": "Target state."},
                        "reason": {"type": "string", "description": "Why this edge applies."},
                    },
                    "required": ["to"],
                },
            )
        )
    schemas.extend(
        [
            ToolSchema(
                name=WAIT,
                description=(
                    "Park the session in this state until an event is delivered (a reply, a "
                    "webhook) or until `until` passes. Call it in the same message as the "
                    "question it waits on."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string", "description": "What you are waiting for."},
                        "until": {
                            "type": "string",
                            "description": "Optional wake-up: 30m, 2h, 1d, or an ISO-8601 instant.",
                        },
                    },
                    "required": ["reason"],
                },
            ),
            ToolSchema(
                name=RAISE,
                description=(
                    "End the session as failed because the work cannot be done. Must be the "
                    "only tool call of its message."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "code": {
                            "type": "string",
                            "description": "A short token, e.g. orders-unavailable (1-64 chars).",
                        },
                        "reason": {"type": "string", "description": "What went wrong."},
                    },
                    "required": ["code", "reason"],
                },
            ),
            ToolSchema(
                name=RESET,
                description=(
                    "Return to the state the conversation began in, keeping transcript, "
                    "variables and files. Refused while already there."
                ),
                parameters={
                    "type": "object",
                    "properties": {"reason": {"type": "string"}},
                },
            ),
            ToolSchema(
                name=GET_VARIABLES,
                description=(
                    "Read session variables: all of them, one by name, or a dotted path into one."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "path": {"type": "string", "description": "e.g. items.-1.sku"},
                    },
                },
            ),
            ToolSchema(
                name=SET_VARIABLES,
                description=(
                    "Record variables you established (whole values). Locked variables, set by "
                    "the host, are refused; the whole call is refused if any name is."
                ),
                parameters={
                    "type": "object",
                    "properties": {
                        "variables": {"type": "object", "description": "name → value"},
                        "lock": {"type": "boolean"},
                    },
                    "required": ["variables"],
                },
            ),
        ]
    )
    return schemas
