"""``archmax.tool.host``: a host's Python tool (``create_agent(tools=[...])``), one activity
dispatched by name; its wire types, timeout and retries, and the call that schedules it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.contracts.base import HEARTBEAT_TIMEOUT, ActivityContract

HOST_TOOL_ACTIVITY: Final = "archmax.tool.host"
"""The one activity every host tool runs as (its UI summary names the tool)."""

HOST_TOOL_TIMEOUT: Final = timedelta(minutes=5)
"""Per-attempt bound on a host tool call."""

HOST_TOOL_HEARTBEAT_TIMEOUT: Final = HEARTBEAT_TIMEOUT
"""A host tool heartbeats while it runs: a worker that died mid-call is noticed within this
and the call retried, the tool told the same idempotency key (``ToolContext``)."""

HOST_TOOL_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
"""A host tool's own errors are answered to the model; only infrastructure failures retry."""


class HostToolCall(BaseModel):
    """One host tool call, its arguments already substituted and governed."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    session_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class HostToolResult(BaseModel):
    """What the model reads back."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    content: str
    status: Literal["ok", "error"] = "ok"
    kept: bool = Field(default=False, exclude_if=lambda value: not value)
    """Whether the activity kept ``content`` in the store under its digest (see
    :class:`~archmax_temporal.workflows.contracts.workspace.WorkspaceToolResult`)."""


CONTRACT: Final = ActivityContract(
    HOST_TOOL_ACTIVITY, HostToolCall, HostToolResult, "a host's Python tool, by name"
)


async def run(call: HostToolCall, *, summary: str) -> HostToolResult:
    """Schedule the host tool ``call.tool`` and wait for its answer (an ``ActivityError``
    when it failed for good)."""
    result: HostToolResult = await workflow.execute_activity(
        HOST_TOOL_ACTIVITY,
        call,
        result_type=HostToolResult,
        start_to_close_timeout=HOST_TOOL_TIMEOUT,
        heartbeat_timeout=HOST_TOOL_HEARTBEAT_TIMEOUT,
        retry_policy=HOST_TOOL_RETRY,
        summary=summary,
    )
    return result
