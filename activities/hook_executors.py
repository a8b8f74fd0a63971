"""Custom hook kinds: host callables registered with ``create_agent(hook_executors=...)``,
run on the worker as one activity, dispatched by kind.

An executor is ``executor(config, args)``, sync or async: ``config`` is the hook's declared
value (``{webhook: https://…}`` → the URL) and ``args`` the object a script hook receives.
What it returns is read by :func:`workflows.hooks.custom_verdict`. An executor that raises
vetoes (fail closed) with its error; a kind with no executor vetoes too.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from temporalio import activity

from archmax_temporal.workflows.contracts.sandbox import (
    CUSTOM_HOOK_ACTIVITY,
    CustomHookInput,
    CustomHookResult,
)

HookExecutor = Callable[[Any, dict[str, Any]], Any | Awaitable[Any]]

BUILT_IN_KINDS = frozenset({"script", "rubric", "max_iterations"})


def check_executors(executors: Mapping[str, HookExecutor]) -> dict[str, HookExecutor]:
    """``executors`` as a dict, refusing a built-in kind's name (it would never be reached)."""
    taken = sorted(set(executors) & BUILT_IN_KINDS)
    if taken:
        raise ValueError(f"hook kinds {', '.join(taken)} are built in and cannot be registered")
    return dict(executors)


class HookExecutorActivities:
    """The activity that runs host hook executors by kind."""

    def __init__(self, executors: Mapping[str, HookExecutor]) -> None:
        self._executors = check_executors(executors)

    @activity.defn(name=CUSTOM_HOOK_ACTIVITY)
    async def run(self, call: CustomHookInput) -> CustomHookResult:
        """Run the kind's executor; its failure is a reason to veto, not a retry."""
        executor = self._executors.get(call.kind)
        if executor is None:
            return CustomHookResult(
                error=f"no executor is registered for hook kind {call.kind!r} on this worker"
            )
        try:
            if inspect.iscoroutinefunction(executor):
                value = await executor(call.config, call.args)
            else:
                value = await asyncio.to_thread(executor, call.config, call.args)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # fail closed: the hook vetoes with the error
            return CustomHookResult(error=f"hook {call.kind!r} failed: {type(exc).__name__}: {exc}")
        return CustomHookResult(value=value)
