"""The built-in tools: every name once, and what serves it.

=====================  ==========  ===============================================================
tool                   handler     served by
=====================  ==========  ===============================================================
archmax_advance, ...   runtime     the workflow itself
                                   (:mod:`archmax_temporal.workflows.runtime_calls`)
ls, read_file, ...     workspace   one activity each, ``archmax.workspace.<tool>``
write_todos            todos       the workflow itself (:mod:`archmax_temporal.workflows.todos`)
archmax_eval/_run      sandbox     the sandbox activity
                                   (:mod:`archmax_temporal.workflows.hook_runner`)
archmax_workflow_<s>   delegation  a child workflow
                                   (:mod:`archmax_temporal.workflows.delegation`)
a host's own tools     host        the host tool activity (``create_agent(tools=...)``)
=====================  ==========  ===============================================================

Everything else that lists tools derives from :data:`BUILTINS`: the runtime and workspace
tool sets, governance's always-on tools and path arguments, the sandbox bridge, the workspace
tool activities, the names a host tool may not take. ``tests/test_registries.py`` fails when a
copy drifts. Pure: the workflow imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Handler = Literal["runtime", "workspace", "todos", "sandbox", "delegation", "host"]
"""What serves a call: see the table above."""

PathUse = Literal["read", "list", "search", "write", "remove", "execute"]
"""How a tool uses a path argument; governance refuses writes and removals outside
scratchpad/ and executions outside a skill's scripts/."""

# --- names ---------------------------------------------------------------------------------

ADVANCE: Final = "archmax_advance"
WAIT: Final = "archmax_wait"
RAISE: Final = "archmax_raise"
RESET: Final = "archmax_reset"
SET_VARIABLES: Final = "archmax_set_variables"
GET_VARIABLES: Final = "archmax_get_variables"
NOTE: Final = "archmax_note"
"""Reserved: the synthetic call that carries runtime notes; never disclosed, never callable."""

LS: Final = "ls"
READ_FILE: Final = "read_file"
WRITE_FILE: Final = "write_file"
EDIT_FILE: Final = "edit_file"
GLOB: Final = "glob"
GREP: Final = "grep"
COPY_FILE: Final = "copy_file"
MOVE_FILE: Final = "move_file"
REMOVE_FILE: Final = "remove_file"

WRITE_TODOS: Final = "write_todos"
ARCHMAX_EVAL: Final = "archmax_eval"
ARCHMAX_RUN: Final = "archmax_run"

WORKFLOW_PREFIX: Final = "archmax_workflow_"
"""A sub-workflow tool is this prefix and the target's slug, verbatim."""

TASK: Final = "task"
"""archmax's own dispatcher: never grantable, never a host tool's name."""

EVAL: Final = "eval"
"""A bare ``eval`` is blocked by a rule no spec can override (``archmax_eval`` is the tool)."""


@dataclass(frozen=True)
class BuiltinTool:
    """One built-in tool: its name, what serves it and how governance treats it."""

    name: str
    handler: Handler
    always_on: bool = False
    """Disclosed and permitted in every state unless forbidden (a state entry narrows it);
    every other tool but the runtime's needs a grant."""
    paths: tuple[tuple[str, PathUse], ...] = ()
    """Its path arguments and how it uses each, as ``(argument, use)`` pairs."""
    optional_path: bool = False
    """Its path argument may be omitted: it then means the workspace root."""
    bridged: bool = False
    """A sandboxed file may call it through ``tools.*`` (camelCased there)."""
    reserved: bool = False
    """Never offered and never run on the agent's behalf (``archmax_note``)."""


BUILTINS: Final[tuple[BuiltinTool, ...]] = (
    BuiltinTool(ADVANCE, "runtime"),
    BuiltinTool(WAIT, "runtime"),
    BuiltinTool(RAISE, "runtime"),
    BuiltinTool(RESET, "runtime"),
    BuiltinTool(SET_VARIABLES, "runtime"),
    BuiltinTool(GET_VARIABLES, "runtime"),
    BuiltinTool(NOTE, "runtime", reserved=True),
    BuiltinTool(LS, "workspace", True, (("path", "list"),), bridged=True),
    BuiltinTool(READ_FILE, "workspace", True, (("file_path", "read"),), bridged=True),
    BuiltinTool(WRITE_FILE, "workspace", True, (("file_path", "write"),), bridged=True),
    BuiltinTool(EDIT_FILE, "workspace", True, (("file_path", "write"),), bridged=True),
    BuiltinTool(GLOB, "workspace", True, (("path", "search"),), True, bridged=True),
    BuiltinTool(GREP, "workspace", True, (("path", "search"),), True, bridged=True),
    BuiltinTool(
        COPY_FILE,
        "workspace",
        True,
        (("source", "read"), ("destination", "write")),
        bridged=True,
    ),
    BuiltinTool(
        MOVE_FILE,
        "workspace",
        True,
        (("source", "remove"), ("destination", "write")),
        bridged=True,
    ),
    BuiltinTool(REMOVE_FILE, "workspace", True, (("file_path", "remove"),), bridged=True),
    BuiltinTool(WRITE_TODOS, "todos", True),
    BuiltinTool(ARCHMAX_EVAL, "sandbox", True),
    BuiltinTool(ARCHMAX_RUN, "sandbox", True, (("file_path", "execute"),)),
)
"""Every built-in tool, in disclosure order within each handler."""

BY_NAME: Final[dict[str, BuiltinTool]] = {tool.name: tool for tool in BUILTINS}


def names(handler: Handler, *, reserved: bool = False) -> tuple[str, ...]:
    """The built-in tools ``handler`` serves, in registry order (reserved ones on request)."""
    return tuple(t.name for t in BUILTINS if t.handler == handler and (reserved or not t.reserved))


RUNTIME_TOOLS: Final[frozenset[str]] = frozenset(names("runtime"))
"""The runtime tools the agent may call (``archmax_note`` is not one)."""

WORKSPACE_TOOLS: Final[tuple[str, ...]] = names("workspace")
"""Every workspace tool, in disclosure order."""

ALWAYS_ON: Final[frozenset[str]] = frozenset(t.name for t in BUILTINS if t.always_on)
"""Disclosed and permitted in every state unless forbidden; a state entry narrows them."""

PATH_ARGS: Final[dict[str, tuple[tuple[str, PathUse], ...]]] = {
    t.name: t.paths for t in BUILTINS if t.paths
}
"""Each built-in tool's path arguments and how it uses each."""

OPTIONAL_PATH_ARGS: Final[frozenset[str]] = frozenset(t.name for t in BUILTINS if t.optional_path)
"""Tools whose path argument may be omitted."""

BRIDGE_TOOLS: Final[tuple[str, ...]] = tuple(t.name for t in BUILTINS if t.bridged)
"""The tools a sandboxed file may call through ``tools.*``. Runtime controls are absent: a
script cannot advance, park or raise."""

REFUSED_NAMES: Final[frozenset[str]] = frozenset({TASK, EVAL})
"""Names that are no tool here but are refused as one (archmax's dispatcher, a bare eval)."""


def workflow_target(tool: str) -> str | None:
    """The workflow slug the sub-workflow tool ``tool`` calls, or None for any other name."""
    prefix = WORKFLOW_PREFIX
    return tool[len(prefix) :] if tool.startswith(prefix) and len(tool) > len(prefix) else None


def handler_of(tool: str, host_tools: Iterable[str] = ()) -> Handler | None:
    """What serves a call of ``tool``: a built-in's handler, ``delegation`` for an
    ``archmax_workflow_<slug>``, ``host`` for a name among ``host_tools``; None otherwise."""
    builtin = BY_NAME.get(tool)
    if builtin is not None:
        return builtin.handler
    if workflow_target(tool) is not None:
        return "delegation"
    if tool in host_tools:
        return "host"
    return None
