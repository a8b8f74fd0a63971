"""Host tools: typed Python callables a host registers with ``create_agent(tools=[...])``.

The workflow knows them only by their schema (carried in the session input); they run on the
worker as one activity, ``archmax.tool.host``, dispatched by name (its contract:
:mod:`archmax_temporal.workflows.contracts.host_tools`, re-exported here). Like every tool that is
not a runtime control, they are closed by default: a state needs a grant to call one. Pure.
"""

from __future__ import annotations

from typing import Final

from archmax_temporal.workflows.contracts.host_tools import (
    HOST_TOOL_ACTIVITY,
    HOST_TOOL_RETRY,
    HOST_TOOL_TIMEOUT,
    HostToolCall,
    HostToolResult,
)
from archmax_temporal.workflows.errors import ReservedToolNameError
from archmax_temporal.workflows.tools import BUILTINS, REFUSED_NAMES

__all__ = [
    "HOST_TOOL_ACTIVITY",
    "HOST_TOOL_RETRY",
    "HOST_TOOL_TIMEOUT",
    "RESERVED_NAMES",
    "HostToolCall",
    "HostToolResult",
    "check_tool_name",
]

RESERVED_NAMES: Final = frozenset({tool.name for tool in BUILTINS} | REFUSED_NAMES)
"""Every built-in tool's name and the refused ones (``task``, ``eval``): a host tool may take
none of them (nor any ``archmax_*`` name)."""


def check_tool_name(name: str) -> str:
    """``name`` unchanged, or :class:`ReservedToolNameError` for a runtime or built-in name."""
    if name.startswith("archmax_") or name in RESERVED_NAMES or not name.isidentifier():
        raise ReservedToolNameError(
            f"host tool name {name!r} is reserved or invalid (archmax_* and built-in tool "
            "names belong to the runtime; use a Python identifier)"
        )
    return name
