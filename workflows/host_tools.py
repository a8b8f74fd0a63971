"""Host tools: typed Python callables a host registers with ``create_agent(tools=[...])``.

The workflow knows them only by their schema (carried in the session input); they run on the
worker as one activity, ``archmax.tool.host``, dispatched by name. Like every tool that is
not a runtime control, they are closed by default: a state needs a grant to call one. Pure.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.errors import ReservedToolNameError
from archmax_temporal.workflows.tools import BUILTINS, REFUSED_NAMES

HOST_TOOL_ACTIVITY: Final = "archmax.tool.host"
"""The one activity every host tool runs as (its UI summary names the tool)."""

HOST_TOOL_TIMEOUT: Final = timedelta(minutes=5)
"""Per-attempt bound on a host tool call."""

HOST_TOOL_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
"""A host tool's own errors are answered to the model; only infrastructure failures retry."""

RESERVED_NAMES: Final = frozenset({tool.name for tool in BUILTINS} | REFUSED_NAMES)
"""Every built-in tool's name and the refused ones (``task``, ``eval``): a host tool may take
none of them (nor any ``archmax_*`` name)."""


class HostToolCall(BaseModel):
    """One host tool call, its arguments already substituted and governed."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class HostToolResult(BaseModel):
    """What the model reads back."""

    model_config = ConfigDict(extra="forbid")

    content: str
    status: Literal["ok", "error"] = "ok"


def check_tool_name(name: str) -> str:
    """``name`` unchanged, or :class:`ReservedToolNameError` for a runtime or built-in name."""
    if name.startswith("archmax_") or name in RESERVED_NAMES or not name.isidentifier():
        raise ReservedToolNameError(
            f"host tool name {name!r} is reserved or invalid (archmax_* and built-in tool "
            "names belong to the runtime; use a Python identifier)"
        )
    return name
