"""The sandbox as the model is told about it: the ``archmax_run`` and ``archmax_eval``
schemas.

One activity (``archmax.sandbox.run``, :mod:`archmax_temporal.workflows.contracts.sandbox`) runs a
hand-written file in a QuickJS process of its own, with the run's ``tools.*`` calls served
inside the same activity: governed by the same kernel as the agent's calls (on runtime
authority for a hook), answered by the case's mocks, or run against the workspace. Its
contract (limits, wire types, timeouts, retries) lives there and is re-exported here. Pure:
the workflow imports it.
"""

from __future__ import annotations

from archmax_temporal.workflows.contracts.sandbox import (
    ACTIVITY_MARGIN,
    CUSTOM_HOOK_ACTIVITY,
    CUSTOM_HOOK_RETRY,
    CUSTOM_HOOK_TIMEOUT,
    DEFAULT_MAX_PTC_CALLS,
    DEFAULT_MAX_RESULT_CHARS,
    DEFAULT_MEMORY_LIMIT_BYTES,
    DEFAULT_TIMEOUT_MS,
    SANDBOX_ACTIVITY,
    SANDBOX_ERRORS,
    SANDBOX_RETRY,
    CustomHookInput,
    CustomHookResult,
    SandboxDispatch,
    SandboxLimits,
    SandboxRunInput,
    SandboxRunResult,
    activity_timeout,
)
from archmax_temporal.workflows.models import ToolSchema
from archmax_temporal.workflows.tools import (
    ARCHMAX_EVAL,
    ARCHMAX_RUN,
    BRIDGE_TOOLS,
)

__all__ = [
    "ACTIVITY_MARGIN",
    "ARCHMAX_EVAL",
    "ARCHMAX_RUN",
    "BRIDGE_TOOLS",
    "CUSTOM_HOOK_ACTIVITY",
    "CUSTOM_HOOK_RETRY",
    "CUSTOM_HOOK_TIMEOUT",
    "DEFAULT_MAX_PTC_CALLS",
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MEMORY_LIMIT_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "SANDBOX_ACTIVITY",
    "SANDBOX_ERRORS",
    "SANDBOX_RETRY",
    "CustomHookInput",
    "CustomHookResult",
    "SandboxDispatch",
    "SandboxLimits",
    "SandboxRunInput",
    "SandboxRunResult",
    "activity_timeout",
    "archmax_eval_schema",
    "archmax_run_schema",
]


def archmax_run_schema() -> ToolSchema:
    """``archmax_run`` as the model is told about it."""
    return ToolSchema(
        name=ARCHMAX_RUN,
        description=(
            "Run a JavaScript file from an enabled skill bundle (skills/<slug>/scripts/…) in a "
            "sandbox and return its result as text (JSON unless it returns a string). The "
            "script reads `args` (your arguments plus the session's variables) and may call "
            "the workspace tools through `tools.*`; it may `await` at its top level, and its "
            "result is its last expression (awaited) or what it returns."
        ),
        parameters={
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "The script, e.g. 'skills/order-data/scripts/total.js'.",
                },
                "args": {"type": "object", "description": "Arguments the script reads."},
            },
            "required": ["file_path"],
            "additionalProperties": False,
        },
    )


def archmax_eval_schema() -> ToolSchema:
    """``archmax_eval`` as the model is told about it."""
    return ToolSchema(
        name=ARCHMAX_EVAL,
        description=(
            "Evaluate JavaScript in a sandbox and return the value of its last expression "
            "(as JSON unless it is a string), after any console output. Each call starts "
            "afresh: nothing carries over between calls. `tools.*` calls the workspace tools "
            "(readFile, writeFile, glob, ...) under your own permissions, and `await` works at "
            "the top level, e.g. `const a = JSON.parse(await tools.readFile({file_path: "
            "'scratchpad/a.json'})); a.total`. The value is the last expression's, awaited."
        ),
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The JavaScript source."}},
            "required": ["code"],
            "additionalProperties": False,
        },
    )
