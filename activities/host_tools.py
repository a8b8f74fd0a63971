"""Running the host's Python tools on the worker.

A host tool is a typed callable whose one parameter is a pydantic model: the model's JSON
schema is what the agent is told, and the agent's arguments are validated against it before
the callable runs. What it returns is answered to the model (a string as it is, anything else
as JSON). A tool that raises is an error result the model reads, never a turn failure.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity

from archmax_temporal.workflows.contracts.host_tools import (
    HOST_TOOL_ACTIVITY,
    HostToolCall,
    HostToolResult,
)
from archmax_temporal.workflows.host_tools import check_tool_name
from archmax_temporal.workflows.models import ToolSchema

ToolFunction = Callable[[Any], Any | Awaitable[Any]]


@dataclass(frozen=True)
class HostTool:
    """A registered Python tool: name, description, input model and the callable."""

    name: str
    description: str
    input_model: type[BaseModel]
    function: ToolFunction

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
    """A :class:`HostTool` from a callable whose single parameter is a pydantic model.

    The name defaults to the function's, the description to its docstring.
    """
    parameters = list(inspect.signature(function).parameters.values())
    hints = typing.get_type_hints(function)
    model = hints.get(parameters[0].name) if len(parameters) == 1 else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(
            f"host tool {getattr(function, '__name__', function)!r} must take exactly one "
            "parameter annotated with a pydantic model"
        )
    tool_name = check_tool_name(name or function.__name__)
    text = description or inspect.getdoc(function) or f"The host tool {tool_name}."
    return HostTool(tool_name, text, model, function)


def as_host_tools(tools: Sequence[HostTool | ToolFunction]) -> list[HostTool]:
    """Normalise ``create_agent(tools=[...])``: callables become HostTools; names distinct."""
    built = [t if isinstance(t, HostTool) else host_tool(t) for t in tools]
    names = [t.name for t in built]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"host tools registered twice: {', '.join(duplicates)}")
    return built


class HostToolActivities:
    """The activity that runs host tools by name."""

    def __init__(self, tools: Sequence[HostTool]) -> None:
        self._tools = {tool.name: tool for tool in tools}

    @activity.defn(name=HOST_TOOL_ACTIVITY)
    async def run(self, call: HostToolCall) -> HostToolResult:
        """Validate the arguments, run the tool, render its result."""
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
        try:
            if inspect.iscoroutinefunction(tool.function):
                value = await tool.function(argument)
            else:
                value = await asyncio.to_thread(tool.function, argument)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # the model reads a tool's failure and goes on
            return HostToolResult(
                content=f"Error: {call.tool} failed: {type(exc).__name__}: {exc}", status="error"
            )
        return HostToolResult(content=_render(value))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)
