"""Custom hook kinds: host callables registered with ``create_agent(hook_executors=...)``,
run on the worker as one activity, dispatched by kind.

An executor is ``executor(config, args)`` or ``executor(config, args, context)``, sync or async:
``config`` is the hook's declared value (``{webhook: https://…}`` → the URL), ``args`` the object a
script hook receives, ``context`` a :class:`~archmax_temporal.activities.host_tools.ToolContext`
whose ``idempotency_key`` is the same on every retry of one call (so a webhook can be sent with an
idempotency key). What it returns is read by
:func:`archmax_temporal.workflows.hooks.custom_verdict`. An executor that raises vetoes (fail
closed) with its error, host paths hidden; a kind with no executor vetoes too. The activity
heartbeats while the executor runs, and with a store its result is journaled once known, so a retry
after that does not call it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio import activity

from archmax_temporal.activities.effects import EffectJournal, callable_ran, digest
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.host_tools import ToolContext, tool_context
from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import WorkspaceError, hide_host_paths
from archmax_temporal.activities.stored_variables import fill_stored
from archmax_temporal.workflows.contracts.sandbox import (
    CUSTOM_HOOK_ACTIVITY,
    CustomHookInput,
    CustomHookResult,
)

HookExecutor = Callable[..., Any]
"""``executor(config, args)`` or ``executor(config, args, context)``, sync or async."""

BUILT_IN_KINDS = frozenset({"script", "rubric", "max_iterations"})


def check_executors(executors: Mapping[str, HookExecutor]) -> dict[str, HookExecutor]:
    """``executors`` as a dict, refusing a built-in kind's name (it would never be reached)."""
    taken = sorted(set(executors) & BUILT_IN_KINDS)
    if taken:
        raise ValueError(f"hook kinds {', '.join(taken)} are built in and cannot be registered")
    return dict(executors)


def takes_context(executor: HookExecutor) -> bool:
    """Whether ``executor`` takes a third parameter (the call's :class:`ToolContext`)."""
    try:
        parameters = list(inspect.signature(executor).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return True
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 3


class HookExecutorActivities:
    """The activity that runs host hook executors by kind (see :class:`HostToolActivities`
    for ``store`` and ``roots``)."""

    def __init__(
        self,
        executors: Mapping[str, HookExecutor],
        store: SessionStore | None = None,
        roots: Sequence[Path] = (),
    ) -> None:
        self._executors = check_executors(executors)
        self._journal = EffectJournal(store) if store is not None else None
        self._store = store
        self._roots = list(roots)

    @activity.defn(name=CUSTOM_HOOK_ACTIVITY)
    async def run(self, call: CustomHookInput) -> CustomHookResult:
        """Run the kind's executor; its failure is a reason to veto, not a retry."""
        executor = self._executors.get(call.kind)
        if executor is None:
            return CustomHookResult(
                error=f"no executor is registered for hook kind {call.kind!r} on this worker"
            )
        context = tool_context(call.session_id)
        request = digest(call.model_dump(mode="json"))
        recorded = await self._recorded(context, request)
        name, key, keyed = f"hook:{call.kind}", context.idempotency_key, takes_context(executor)
        if recorded is not None:
            await callable_ran(call.session_id, key, name, replayed=True, takes_key=keyed)
            return recorded
        args = call.args
        if call.stored and self._store is not None:  # stored values, read back whole
            args = await asyncio.to_thread(
                fill_stored, self._store, call.session_id, args, call.stored
            )
        parameters: tuple[Any, ...] = (call.config, args)
        if keyed:
            parameters = (*parameters, context)
        try:
            if inspect.iscoroutinefunction(executor):
                value = await heartbeating(executor(*parameters))
            else:
                value = await heartbeating(asyncio.to_thread(executor, *parameters))
                if inspect.isawaitable(value):
                    value = await heartbeating(value)
        except Exception as exc:  # fail closed: the hook vetoes with the error
            message = hide_host_paths(f"{type(exc).__name__}: {exc}", self._roots)
            result = CustomHookResult(error=f"hook {call.kind!r} failed: {message}")
        else:
            result = CustomHookResult(value=value)
        # the executor has done what it does; only its answer is not recorded yet
        await callable_ran(call.session_id, key, name, replayed=False, takes_key=keyed)
        await self._record(context, call.kind, request, result)
        return result

    async def _recorded(self, context: ToolContext, request: str) -> CustomHookResult | None:
        if self._journal is None or context.attempt == 1:
            return None
        journal = self._journal
        try:
            text = await asyncio.to_thread(
                journal.answer_of, context.session_id, context.idempotency_key, request
            )
        except WorkspaceError:
            return None
        return None if text is None else CustomHookResult.model_validate_json(text)

    async def _record(
        self, context: ToolContext, kind: str, request: str, result: CustomHookResult
    ) -> None:
        if self._journal is None or not activity.in_activity():
            return
        journal = self._journal
        with contextlib.suppress(WorkspaceError, TypeError, ValueError):  # unrecorded: re-run
            await asyncio.to_thread(
                journal.record_answer,
                context.session_id,
                context.idempotency_key,
                f"hook:{kind}",
                request,
                result.model_dump_json(),
            )
