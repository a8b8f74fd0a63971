"""``write_todos``: the agent's own plan, as Deep Agents defines the tool and archmax keeps it
among the essential tools (always disclosed and permitted; forbid it to remove it).

Pure and handled inside the workflow: the list lives in the session's state
(:attr:`SessionState.todos`), replaced whole by each call, and costs no activity.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from archmax_temporal.workflows.models import Todo, TodoStatus, ToolSchema
from archmax_temporal.workflows.tools import WRITE_TODOS


class _Item(BaseModel):
    """One item as the model writes it: strict (a :class:`Todo` on the wire ignores unknown
    fields, a call with one is refused)."""

    model_config = ConfigDict(extra="forbid")

    content: str
    status: TodoStatus


class _Call(BaseModel):
    model_config = ConfigDict(extra="forbid")

    todos: list[_Item]


def write_todos_schema() -> ToolSchema:
    """``write_todos`` as the model is told about it."""
    return ToolSchema(
        name=WRITE_TODOS,
        description=(
            "Keep a short plan for multi-step work: pass the whole list each time (it "
            "replaces the previous one). Mark an item in_progress when you start it and "
            "completed as soon as it is done; skip the tool for simple one-step requests."
        ),
        parameters={
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "status": {
                                "type": "string",
                                "enum": ["pending", "in_progress", "completed"],
                            },
                        },
                        "required": ["content", "status"],
                        "additionalProperties": False,
                    },
                }
            },
            "required": ["todos"],
            "additionalProperties": False,
        },
    )


def write(arguments: dict[str, Any]) -> tuple[list[Todo] | None, str]:
    """The new list and the answer, or None and why the call is refused."""
    try:
        items = _Call.model_validate(arguments).todos
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return None, f"write_todos refused: {problems}"
    todos = [Todo(content=item.content, status=item.status) for item in items]
    blank = [i for i, todo in enumerate(todos) if not todo.content.strip()]
    if blank:
        return None, f"write_todos refused: todos.{blank[0]}.content is empty"
    listed = json.dumps([t.model_dump() for t in todos], ensure_ascii=False)
    return todos, f"Updated todo list to {listed}"


__all__ = ["WRITE_TODOS", "Todo", "write", "write_todos_schema"]
