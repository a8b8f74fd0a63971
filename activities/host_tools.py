"""Running the host's Python tools on the worker.

A host tool is a typed callable whose first parameter is a pydantic model: the model's JSON
schema is what the agent is told, and the agent's arguments are validated against it before
the callable runs. What it returns is answered to the model (a string as it is, anything else
as JSON). A tool that raises is an error result the model reads, never a turn failure; its
message reaches the model with host paths hidden (:func:`hide_host_paths`).

A tool may take a second parameter, a :class:`ToolContext`: its ``idempotency_key`` is the same on
every retry of one call and different for every other call, so a tool that changes something (sends
a mail, books a refund) can make a retry after a crashed worker harmless. Once a tool has returned,
its answer is recorded in the session's effect journal (:mod:`archmax_temporal.activities.effects`):
a retry after that answers from the journal without calling the tool again. The activity heartbeats
while the tool runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import typing
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity

from archmax_temporal.activities.effects import (
    EffectJournal,
    callable_ran,
    digest,
    idempotency_key,
)
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import WorkspaceError, hide_host_paths
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.workflows.contracts.host_tools import (
    HOST_TOOL_ACTIVITY,
    HostToolCall,
    HostToolResult,
)
from archmax_temporal.workflows.host_tools import check_tool_name
from archmax_temporal.workflows.models import ToolSchema

ToolFunction = Callable[..., Any]
"""``fn(arguments)`` or ``fn(arguments, context)``, sync or async."""


@dataclass(frozen=True)
class ToolContext:
    """What a host tool (its optional second parameter) and a custom hook executor (its
    optional third) are told about the call they serve."""

    session_id: str
    idempotency_key: str
    """The same on every retry of this one call, different for every other call
    (``<workflow run id>.<activity id>``): hand it to the system the call changes (an
    ``Idempotency-Key`` header, a unique column) so that a retry after a crash is harmless."""
    attempt: int = 1
    """Which attempt this is (1 the first): more than 1 after a crash or a timeout."""


def tool_context(session_id: str) -> ToolContext:
    """The context of the current activity's call (outside an activity: a fresh key)."""
    key = idempotency_key() or f"local.{uuid.uuid4().hex}"
    attempt = activity.info().attempt if activity.in_activity() else 1
    return ToolContext(session_id=session_id, idempotency_key=key, attempt=attempt)


@dataclass(frozen=True)
class HostTool:
    """A registered Python tool: name, description, input model and the callable."""

    name: str
    description: str
    input_model: type[BaseModel]
    function: ToolFunction
    takes_context: bool = False
    """Whether the callable takes a second parameter, the call's :class:`ToolContext`."""

    def schema(self) -> ToolSchema:
        """The tool as the model is told about it."""
        return ToolSchema(
            name=self.name,
            description=self.description,
            parameters=self.input_model.model_json_schema(),
        )


def host_tool(
    function: ToolFunction, *, name: str | None = None, description: str | None = None
) -> HostTool:
    """A :class:`HostTool` from a callable whose first parameter is a pydantic model and
    whose optional second one takes the call's :class:`ToolContext`.

    The name defaults to the function's, the description to its docstring.
    """
    parameters = list(inspect.signature(function).parameters.values())
    hints = typing.get_type_hints(function)
    model = hints.get(parameters[0].name) if len(parameters) in (1, 2) else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(
            f"host tool {getattr(function, '__name__', function)!r} must take one parameter "
            "annotated with a pydantic model (and optionally a second, its ToolContext)"
        )
    tool_name = check_tool_name(name or function.__name__)
    text = description or inspect.getdoc(function) or f"The host tool {tool_name}."
    return HostTool(tool_name, text, model, function, takes_context=len(parameters) == 2)


def as_host_tools(tools: Sequence[HostTool | ToolFunction]) -> list[HostTool]:
    """Normalise ``create_agent(tools=[...])``: callables become HostTools; names distinct."""
    built = [t if isinstance(t, HostTool) else host_tool(t) for t in tools]
    names = [t.name for t in built]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"host tools registered twice: {', '.join(duplicates)}")
    return built


class HostToolActivities:
    """The activity that runs host tools by name.

    With ``store`` (the worker's session store) each tool's answer is journaled once it
    returns, so a retry after that answers without calling the tool again; ``roots`` are
    the host folders hidden from error messages.
    """

    def __init__(
        self,
        tools: Sequence[HostTool],
        store: SessionStore | None = None,
        roots: Sequence[Path] = (),
        logs: TranscriptLogs | None = None,
    ) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._journal = EffectJournal(store) if store is not None else None
        self._roots = list(roots)
        self._logs = logs
        """Where a long answer is kept by digest (the next model call names it)."""

    @activity.defn(name=HOST_TOOL_ACTIVITY)
    async def run(self, call: HostToolCall) -> HostToolResult:
        """Validate the arguments, run the tool (heartbeating), render its result."""
        tool = self._tools.get(call.tool)
        if tool is None:
            return HostToolResult(
                content=f"Error: tool '{call.tool}' is not registered on this worker.",
                status="error",
            )
        try:
            argument = tool.input_model.model_validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()
            )
            return HostToolResult(content=f"Error: invalid arguments: {problems}", status="error")
        context = tool_context(call.session_id)
        request = digest(call.model_dump(mode="json"))
        recorded = await self._recorded(call.session_id, context, request)
        name, key = f"host:{call.tool}", context.idempotency_key
        if recorded is not None:
            await callable_ran(
                call.session_id, key, name, replayed=True, takes_key=tool.takes_context
            )
            return await self._kept(call.session_id, HostToolResult.model_validate_json(recorded))
        parameters = (argument, context) if tool.takes_context else (argument,)
        try:
            if inspect.iscoroutinefunction(tool.function):
                value = await heartbeating(tool.function(*parameters))
            else:
                value = await heartbeating(asyncio.to_thread(tool.function, *parameters))
                if inspect.isawaitable(value):
                    value = await heartbeating(value)
        except Exception as exc:  # the model reads a tool's failure and goes on
            message = hide_host_paths(f"{type(exc).__name__}: {exc}", self._roots)
            result = HostToolResult(content=f"Error: {call.tool} failed: {message}", status="error")
        else:
            result = HostToolResult(content=_render(value))
        # the tool has done what it does; only its answer is not recorded yet
        await callable_ran(call.session_id, key, name, replayed=False, takes_key=tool.takes_context)
        await self._record(call.session_id, context, call.tool, request, result)
        return await self._kept(call.session_id, result)

    async def _kept(self, session_id: str, result: HostToolResult) -> HostToolResult:
        """``result``, kept in the store under its digest when it is long (``kept``)."""
        if self._logs is None or result.kept:
            return result
        kept = await asyncio.to_thread(self._logs.keep_result, session_id, result.content)
        return result.model_copy(update={"kept": True}) if kept else result

    async def _recorded(self, session_id: str, context: ToolContext, request: str) -> str | None:
        if self._journal is None or context.attempt == 1:
            return None  # a first attempt has nothing recorded
        journal = self._journal
        try:
            return await asyncio.to_thread(
                journal.answer_of, session_id, context.idempotency_key, request
            )
        except WorkspaceError:
            return None

    async def _record(
        self, session_id: str, context: ToolContext, tool: str, request: str, result: HostToolResult
    ) -> None:
        if self._journal is None or not activity.in_activity():
            return
        journal = self._journal
        # the answer goes back even unrecorded: only a crash from here on re-runs the tool
        with contextlib.suppress(WorkspaceError):
            await asyncio.to_thread(
                journal.record_answer,
                session_id,
                context.idempotency_key,
                f"host:{tool}",
                request,
                result.model_dump_json(),
            )


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)
