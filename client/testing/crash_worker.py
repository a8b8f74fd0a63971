"""The worker process a ``crash`` step kills: ``python -m
archmax_temporal.client.testing.crash_worker``, started by
:mod:`archmax_temporal.client.testing.durable`.

The runner starts it before the action a ``crash`` arms and hands it, on stdin, a pickled
:class:`ChildSpec` (its length first, eight bytes big-endian): how to reach the case's
server, the case's task queue, store and model, the suite's host tools and hook executors (by
reference: module-level callables the child imports), and the armed crash. The child builds a worker
like the suite's (no workflow cache, so no sticky queue to wait out), says ``ready`` and waits for
``go``; then it serves the case's queue and counts the activities of the crash's kind its turn
starts. At the ``nth`` it writes where it struck and the task tokens of every activity it holds, and
stops itself (``SIGSTOP``: from that instant it runs, reports and polls nothing), and the runner
kills it (``SIGKILL``): a kill without draining, as when a machine dies. While it runs it writes
every side effect its activities apply (the effect journal's watch,
:mod:`archmax_temporal.activities.effects`) as a JSON line, so the runner can tell whether the retry
applied one again.

Its stdout is that protocol, one JSON object a line: ``{"ready": true}``, ``{"polling": true}``,
``{"event": {...}}`` (an :class:`~archmax_temporal.activities.effects.EffectEvent`), ``{"struck":
"<where>", "tokens": ["<base64>", ...]}``, ``{"error": "<text>"}``. ``stop`` on stdin (a crash that
never struck) shuts its worker down gracefully; stdin closing ends it. It dies with the runner
(``PR_SET_PDEATHSIG`` on Linux), so a stopped child never outlives a killed runner.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import pickle
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from temporalio.service import ConnectConfig
    from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

    from archmax_temporal.activities.effects import EffectEvent
    from archmax_temporal.activities.hook_executors import HookExecutor
    from archmax_temporal.activities.host_tools import HostTool
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.testing.steps import CrashStep

MODULE: Final = "archmax_temporal.client.testing.crash_worker"
"""What the runner runs with ``python -m``."""

PR_SET_PDEATHSIG: Final = 1


@dataclass(frozen=True)
class ChildSpec:
    """What the child needs to serve the case's queue and strike where the crash says."""

    connect: ConnectConfig
    """The case client's connection settings (its runtime left out: the child has its own)."""
    namespace: str
    config: RuntimeConfig
    """The case's configuration: its task queue, store and authoring root."""
    model: ModelConfig | None
    host_tools: Sequence[HostTool]
    hook_executors: Mapping[str, HookExecutor] | None
    sandbox_runtime: Sequence[str] | None
    env: Mapping[str, str] | None
    crash: CrashStep
    parent: int
    """The runner's pid: a child whose runner is gone exits."""


class _Out:
    """The protocol's stdout: whole lines, written at once from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def say(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self._lock:
            os.write(1, data)


class _Strike:
    """The armed crash of this child: its count, the activities it holds, the strike."""

    def __init__(self, crash: CrashStep, out: _Out) -> None:
        self.crash = crash
        self.out = out
        self.count = 0
        self.struck = False
        self.holding: set[bytes] = set()

    def counts(self, kind: str | None) -> bool:
        if kind != self.crash.during or self.struck:
            return False
        self.count += 1
        return self.count == self.crash.nth

    def strike(self, where: str) -> None:
        """Tell the runner where, and what this worker holds; then stop dead (the runner
        SIGKILLs the stopped process)."""
        self.struck = True
        tokens = [base64.b64encode(t).decode() for t in list(self.holding)]
        self.out.say({"struck": where, "tokens": tokens})
        os.kill(os.getpid(), signal.SIGSTOP)


class _Watch:
    """Every effect an activity applies, to the runner; a host tool's or hook executor's
    return is where an ``at: complete`` crash of it strikes (before its answer is
    journaled)."""

    def __init__(self, strike: _Strike, on_return: bool) -> None:
        self._strike = strike
        self.on_return = on_return
        self.struck = False

    def applied(self, event: EffectEvent) -> None:
        self._strike.out.say({"event": dataclasses.asdict(event)})
        if self.on_return and event.source == "callable" and not event.replayed:
            self.struck = True
            label = callable_label(event.tool)
            self._strike.strike(f"after {label} returned, before its answer was journaled")


def callable_label(tool: str) -> str:
    """``host tool 'charge'`` / ``hook executor 'audit'`` from an effect's tool name."""
    kind, _, name = tool.partition(":")
    return f"host tool {name!r}" if kind == "host" else f"hook executor {name!r}"


def _interceptor(strike: _Strike) -> Any:
    """The activity interceptor that counts, watches and strikes (built here so the parent
    never loads the worker module for it)."""
    from temporalio import activity
    from temporalio.worker import ActivityInboundInterceptor, Interceptor

    from archmax_temporal.activities.effects import unwatch_effects, watch_effects
    from archmax_temporal.client.testing.durable import crash_kind

    class Inbound(ActivityInboundInterceptor):
        async def execute_activity(self, input: ExecuteActivityInput) -> Any:
            info = activity.info()
            # A local activity (a short workspace tool, the turn's save) has no task token:
            # killed under it, the process loses the workflow task that ran it, and the next
            # worker runs it again under the same activity id once that task times out.
            task_token = None if info.is_local else info.task_token
            if task_token is not None:
                strike.holding.add(task_token)
            try:
                nth = strike.counts(crash_kind(info.activity_type, input.args))
                at = strike.crash.at if nth else None
                if at == "start":
                    strike.strike(f"as {info.activity_type} started")
                watch = _Watch(strike, on_return=at == "complete")
                token = watch_effects(watch)
                try:
                    result = await super().execute_activity(input)
                finally:
                    unwatch_effects(token)
                if at == "complete" and not watch.struck:
                    label = info.activity_type
                    strike.strike(f"after {label} did its work, before it was reported")
                return result
            finally:
                if task_token is not None:
                    strike.holding.discard(task_token)

    class Counting(Interceptor):
        def intercept_activity(
            self, next: ActivityInboundInterceptor
        ) -> ActivityInboundInterceptor:
            return Inbound(next)

    return Counting()


def _die_with_parent(parent: int) -> None:
    """Be killed when the runner dies (Linux), and leave now if it already has."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


async def _serve(spec: ChildSpec, out: _Out) -> None:
    from temporalio.client import Client
    from temporalio.service import ServiceClient

    from archmax_temporal.client.runtime import WorkerRecipe
    from archmax_temporal.client.testing.durable import quiet_runtime
    from archmax_temporal.connection import DATA_CONVERTER

    loop = asyncio.get_running_loop()
    service = await ServiceClient.connect(
        dataclasses.replace(spec.connect, runtime=quiet_runtime())
    )
    client = Client(service, namespace=spec.namespace, data_converter=DATA_CONVERTER)
    recipe = WorkerRecipe(
        model=spec.model,
        host_tools=spec.host_tools,
        hook_executors=spec.hook_executors,
        sandbox_runtime=spec.sandbox_runtime,
        env=spec.env,
    )
    worker = recipe.build(
        client,
        spec.config,
        max_cached_workflows=0,  # no sticky queue: the fresh worker takes the next task at once
        interceptors=[_interceptor(_Strike(spec.crash, out))],
        graceful_shutdown=timedelta(0),
    )
    out.say({"ready": True})
    command = await loop.run_in_executor(None, sys.stdin.buffer.readline)
    if command.strip() != b"go":
        return
    running = loop.create_task(worker.run())
    await asyncio.sleep(0)
    if running.done() and running.exception() is not None:
        raise running.exception()  # type: ignore[misc]
    out.say({"polling": True})
    await loop.run_in_executor(None, sys.stdin.buffer.readline)  # stop, or the runner gone
    await worker.shutdown()


def main() -> None:
    out = _Out()
    try:
        # loaded before the spec is read: the runner starts this process ahead of its crash
        import archmax_temporal.client.runtime
        import archmax_temporal.client.testing.durable
        import archmax_temporal.worker  # noqa: F401

        size = int.from_bytes(sys.stdin.buffer.read(8), "big")
        if not size:  # the runner ended before it needed this process
            os._exit(0)
        spec = pickle.loads(sys.stdin.buffer.read(size))
        assert isinstance(spec, ChildSpec)
        _die_with_parent(spec.parent)
        asyncio.run(_serve(spec, out))
    except BaseException as exc:  # the runner reads it and says the case's runner failed
        out.say({"error": f"{type(exc).__name__}: {exc}"})
        sys.stderr.flush()
        os._exit(1)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # as the module itself, so the spec's classes are its own
    from archmax_temporal.client.testing import crash_worker

    crash_worker.main()


__all__ = ["MODULE", "ChildSpec", "callable_label", "main"]
