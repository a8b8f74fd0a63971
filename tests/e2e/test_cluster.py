"""The cluster test: three worker processes on one S3 store, SIGKILLed at random.

Three ``python -m archmax_temporal worker`` processes, each as if on a machine of its own (a
fresh empty working directory, HOME and TMPDIR, its own copy of the authoring root, and only
the environment such a machine's worker gets: Temporal's address and the task queue, the
store's ``s3://`` URL with the S3 server's ``AWS_*`` variables, the model's variables), serve
:data:`SESSIONS` sessions. Each session, on its first message, writes a file and edits it,
parks for an event (``archmax_wait``); the host delivers the event, and the session edits the
file a second time and completes. All the while a killer SIGKILLs a random ready worker every
1-3 s (seeded: ``ARCHMAX_CLUSTER_SEED`` replays a run's choices) and starts a fresh one in a
new empty folder, so one worker at least is always serving. Every second worker, once it
applied an edit, lingers until it is killed (and is spared until then), so kills also land in
the moment a random one rarely hits: an edit written to S3 and not yet reported to Temporal.

Then every session completed; each file, read from S3, is byte for byte what one write and two
edits make (an edit applied twice would repeat its marker); each session's trail and
transcript hold each step once; no effect journal is left; no history holds a
``TranscriptLogDiverged``; and no worker's folder holds anything of a session. The figures
(sessions, kills, outcomes, wall time) are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import IO, Final

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from archmax_temporal.activities.effects import EFFECTS, PAUSE_AFTER_EFFECT_ENV
from archmax_temporal.activities.object_store import open_store
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.client.host import Agent
from archmax_temporal.workflows.models import Outcome, TranscriptLog
from archmax_temporal.workflows.transcript import LOG_DIVERGED, PROMPT_MISSING
from tests.support.activity_events import activities_run, failed_activities
from tests.support.agents import Scripted, running_agent, write_workflow
from tests.support.agents import tool_call as call
from tests.support.s3server import S3Server

SESSIONS: Final = 30
"""Sessions the cluster serves (the floor the issue names)."""

WORKERS: Final = 3
"""Worker processes alive at any time (one killed, one started in its place)."""

IN_FLIGHT: Final = 15
"""Firings the host has in flight at once: the sessions start in batches of this size, a
delivery taking the place of a settled firing."""

KILL_EVERY: Final = (1.0, 3.0)
"""Seconds between two kills: uniform in this range."""

LINGER_EVERY: Final = 2
"""Every second worker, once it applied an edit, lingers before reporting it until it is
killed (the fault tests' hook, ``ARCHMAX_TEST_PAUSE_AFTER_EFFECT``), and the killer spares it
until then: a random kill rarely falls in the milliseconds between an edit's write and its
report, where a retry that edited again would leave the edit twice (without the effect
journal, the random kills alone let that pass); these workers make that moment common."""

MIN_KILLS: Final = 6
"""Kills a run must have made for its verdict to mean anything."""

DEADLINE: Final = 360.0
"""Seconds every session has to complete once the run starts."""

WORKER_START: Final = 90.0
"""Seconds a worker may take to announce itself (imports on two loaded cores)."""

RUN = uuid.uuid4().hex[:8]
"""Workflow ids are namespace-wide: this file's own, never another test's."""

FILE: Final = "scratchpad/report.txt"

SPEC = """
title: Cluster
states:
  draft:
    triggers:
      manual:
      event_arrived:
        description: The event the draft waits for.
    instructions: Write the report, edit it, wait for the event; then edit it again.
    transitions:
      - { to: done, description: Both edits are made. }
  done:
    instructions: Say it is done.
"""

TOKEN = "(?P<tok>[0-9a-f]{12})"

PLAYBOOK = json.dumps(
    {
        "rules": [
            {"when": {"state": "done"}, "reply": {"content": "Done."}},
            {
                "when": {"last_tool": "edit_file", "any_message": "/EVENT-ARRIVED/"},
                "reply": {"tool_calls": [call("archmax_advance", to="done")]},
            },
            {
                "when": {"last_tool": "edit_file"},
                "reply": {
                    "content": "Edited; waiting for the event.",
                    "tool_calls": [call("archmax_wait", reason="the event")],
                },
            },
            {
                "when": {
                    "last_tool": "archmax_note",
                    "last_tool_result": f"/EVENT-ARRIVED {TOKEN}/",
                },
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path=FILE,
                            old_string="END",
                            new_string="EDIT-TWO {tok}\nEND",
                        )
                    ]
                },
            },
            {
                "when": {"last_tool": "write_file", "any_message": f"/Begin {TOKEN}/"},
                "reply": {
                    "tool_calls": [
                        call(
                            "edit_file",
                            file_path=FILE,
                            old_string="body",
                            new_string="body\nEDIT-ONE {tok}",
                        )
                    ]
                },
            },
            {
                "when": {"last_user": f"/Begin {TOKEN}/"},
                "reply": {
                    "tool_calls": [
                        call("write_file", file_path=FILE, content="BEGIN {tok}\nbody\nEND\n")
                    ]
                },
            },
        ]
    }
)
"""Each session's token (in its first message and its event) is in every byte it writes. An
edit's ``old_string`` survives the edit, so an edit applied twice would leave its marker twice
(never fail unseen)."""


TRANSCRIPT: Final = [
    ("user", None),
    ("assistant", "write_file"),
    ("tool", "write_file"),
    ("assistant", "edit_file"),
    ("tool", "edit_file"),
    ("assistant", "archmax_wait"),
    ("tool", "archmax_wait"),
    ("assistant", "archmax_note"),  # the delivered event
    ("tool", "archmax_note"),
    ("assistant", "edit_file"),
    ("tool", "edit_file"),
    ("assistant", "archmax_advance"),
    ("tool", "archmax_advance"),
    ("assistant", None),
]
"""Each session's conversation, each step once: (role, the tool called or answering)."""


def first_write(token: str) -> str:
    return f"BEGIN {token}\nbody\nEND\n"


def expected_file(token: str) -> bytes:
    return f"BEGIN {token}\nbody\nEDIT-ONE {token}\nEDIT-TWO {token}\nEND\n".encode()


class Worker:
    """One worker process as if on a machine of its own, in ``folder`` (its cwd, HOME, TMPDIR
    and authoring root); its output goes to ``log``, outside that folder."""

    def __init__(
        self,
        number: int,
        folder: Path,
        root: Path,
        log: Path,
        env: dict[str, str],
        *,
        lingers: bool,
    ):
        self.number = number
        self.folder = folder
        cwd, home, tmp = folder / "cwd", folder / "home", folder / "tmp"
        for empty in (cwd, home, tmp):
            empty.mkdir(parents=True)
        own_root = folder / "root"
        shutil.copytree(root, own_root)  # each machine has its own checkout
        self.log = log
        self._log: IO[bytes] = log.open("wb")
        self.lingers = lingers
        self.marker = tmp / "applied-edits"
        """Where a lingering worker notes each edit it applied and did not report."""
        env = {**env, "HOME": str(home), "TMPDIR": str(tmp), "ARCHMAX_ROOT": str(own_root)}
        if lingers:
            env[PAUSE_AFTER_EFFECT_ENV] = f"edit_file={self.marker}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "archmax_temporal", "worker"],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._ready = False

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def ready(self) -> bool:
        """Whether the worker announced itself (Temporal lists its poller)."""
        if not self._ready and self.alive:
            self._ready = any(
                line.startswith(b"worker    queue") for line in self.log.read_bytes().splitlines()
            )
        return self._ready and self.alive

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert self.process.wait(timeout=10) == -signal.SIGKILL

    def stop(self) -> None:
        """SIGKILL when still running (by this worker's pid), and close its log."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()

    @property
    def caught_edits(self) -> int:
        """Edits this worker applied and never reported (it lingered until it was killed)."""
        return len(self.marker.read_text().splitlines()) if self.marker.exists() else 0

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class Cluster:
    """:data:`WORKERS` workers; the killer replaces a killed one with a new one."""

    def __init__(self, base: Path, root: Path, env: dict[str, str], seed: int):
        self.base = base
        self.root = root
        self.env = env
        self.random = random.Random(seed)
        self.workers: list[Worker] = []
        self.kills = 0
        (base / "logs").mkdir(parents=True)

    def start(self) -> Worker:
        number = len(self.workers) + 1
        worker = Worker(
            number,
            self.base / "machines" / f"worker-{number}",
            self.root,
            self.base / "logs" / f"worker-{number}.log",
            self.env,
            lingers=number % LINGER_EVERY == 0,
        )
        self.workers.append(worker)
        return worker

    def live(self) -> list[Worker]:
        return [w for w in self.workers if w.alive]

    async def wait_ready(self, count: int) -> None:
        deadline = time.monotonic() + WORKER_START
        while sum(w.ready for w in self.workers) < count:
            for worker in self.workers:
                assert worker.alive or worker.process.returncode == -signal.SIGKILL, (
                    f"worker {worker.number} exited ({worker.process.returncode}):\n"
                    + worker.tail()
                )
            assert time.monotonic() < deadline, "the workers did not start"
            await asyncio.sleep(0.1)

    async def killer(self, stop: asyncio.Event) -> None:
        """Every 1-3 s, SIGKILL a random ready worker and start a fresh one, as long as
        another ready worker stays. A lingering worker is spared until it holds an edit
        applied and unreported: its kill is one at that moment."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.random.uniform(*KILL_EVERY))
                return
            except TimeoutError:
                pass
            ready = [w for w in self.live() if w.ready]
            if len(ready) < 2:
                continue  # never the last ready worker: the queue is always served
            victims = [w for w in ready if not w.lingers or w.caught_edits]
            if not victims:
                continue
            victim = self.random.choice(victims)
            victim.kill()
            self.kills += 1
            self.start()

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def machine_environment(
    client: Client, task_queue: str, s3_server: S3Server, s3_url: str, model_url: str
) -> dict[str, str]:
    """What a worker on another machine gets: no variable of this process but where to find
    Python and this checkout's package."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": task_queue,
        "ARCHMAX_STORE": s3_url,
        "ARCHMAX_API_BASE_URL": model_url,
        "ARCHMAX_API_KEY": "sk-test-not-a-secret",
        "ARCHMAX_MODEL": "scripted",
        **s3_server.environment(),
    }
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


async def run_session(
    agent: Agent, session_id: str, token: str, gate: asyncio.Semaphore
) -> tuple[Outcome, Outcome]:
    """The first message (write, edit, park), then the event (edit again, complete)."""
    async with gate:
        parked = await agent.workflow.send(session_id, f"Begin {token}")
    async with gate:
        done = await agent.workflow.deliver(
            session_id, trigger="event_arrived", variables={"event": f"EVENT-ARRIVED {token}"}
        )
    return parked, done


async def diagnose(agent: Agent, pending: list[str]) -> str:
    """Where the unfinished sessions stand: status and their pending activities."""
    lines = []
    for session_id in pending:
        described = await agent.handle(session_id).describe()
        raw = described.raw_description
        activities = [
            f"{a.activity_type.name} attempt {a.attempt} ({a.last_failure.message[:120]!r})"
            for a in raw.pending_activities
        ]
        lines.append(f"{session_id}: {described.status} {activities}")
    return "\n".join(lines)


def failures_in_history(events: list[HistoryEvent]) -> list[str]:
    """The types of the failures a history records (activities and workflow tasks)."""
    found = []
    for event in events:
        for field in (
            "activity_task_failed_event_attributes",
            "workflow_task_failed_event_attributes",
            "workflow_execution_failed_event_attributes",
        ):
            if event.HasField(field):
                failure = getattr(event, field).failure
                kind = failure.application_failure_info.type or failure.message[:80]
                found.append(kind)
    return found


def retried_after_kill(events: list[HistoryEvent]) -> list[str]:
    """What a dead worker left to others: each activity started more than once (by its last
    attempt's number) and each workflow task that timed out."""
    names = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    found = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if started.attempt > 1:
                found.append(names[started.scheduled_event_id])
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            found.append("workflow task")
    return found


def leftovers(folder: Path, session_ids: list[str]) -> list[str]:
    """Anything under ``folder`` that holds session data: a session's name, a store's."""
    marks = ("sessions", "_store.json", "_specs", "_uploads", "checkpoints", "scratchpad")
    found = []
    for path in folder.rglob("*"):
        name = path.name
        if name in marks or any(sid in name for sid in session_ids):
            found.append(str(path.relative_to(folder)))
        elif path.is_file():
            data = path.read_bytes()
            if any(sid.encode() in data for sid in session_ids):
                found.append(str(path.relative_to(folder)))
    return found


async def test_three_workers_killed_at_random_lose_nothing(
    client: Client,
    task_queue: str,
    scripted: Scripted,
    tmp_path: Path,
    s3_server: S3Server,
    s3_url: str,
) -> None:
    seed = int(os.environ.get("ARCHMAX_CLUSTER_SEED") or random.SystemRandom().randrange(10**9))
    print(f"\ncluster: seed {seed} (ARCHMAX_CLUSTER_SEED={seed} replays the kills' choices)")
    root = tmp_path / "authoring"
    write_workflow(root, "cluster", SPEC)
    server = scripted(PLAYBOOK)
    env = machine_environment(client, task_queue, s3_server, s3_url, server.url)
    cluster = Cluster(tmp_path / "cluster", root, env, seed)
    tokens = {
        f"cluster-{RUN}-{n:02d}-{uuid.uuid4().hex[:6]}": uuid.uuid4().hex[:12]
        for n in range(SESSIONS)
    }
    ids = list(tokens)
    stop = asyncio.Event()
    killer: asyncio.Task[None] | None = None
    began = time.monotonic()
    try:
        for _ in range(WORKERS):
            cluster.start()
        await cluster.wait_ready(WORKERS)
        print(f"cluster: {WORKERS} workers ready in {time.monotonic() - began:.1f} s")
        async with running_agent(
            client, task_queue, root, "cluster", server, store=s3_url, worker=False
        ) as agent:
            started = time.monotonic()
            killer = asyncio.create_task(cluster.killer(stop))
            gate = asyncio.Semaphore(IN_FLIGHT)
            runs = {
                sid: asyncio.create_task(run_session(agent, sid, tokens[sid], gate)) for sid in ids
            }
            done, _ = await asyncio.wait(runs.values(), timeout=DEADLINE)
            wall = time.monotonic() - started
            stop.set()
            await killer
            unfinished = [sid for sid, task in runs.items() if task not in done]
            if unfinished:
                report = await diagnose(agent, unfinished)
                for task in runs.values():
                    task.cancel()
                raise AssertionError(
                    f"{len(unfinished)} sessions unfinished after {DEADLINE:.0f} s "
                    f"({cluster.kills} kills):\n{report}"
                )
            errors = {sid: t.exception() for sid, t in runs.items() if t.exception()}
            assert not errors, errors
            outcomes = {sid: task.result() for sid, task in runs.items()}
            # read back while the last workers still answer queries
            await cluster.wait_ready(1)
            views = {sid: await agent.sessions.view(sid) for sid in ids}
            histories = {sid: list((await agent.handle(sid).fetch_history()).events) for sid in ids}
    finally:
        stop.set()
        if killer is not None and not killer.done():
            killer.cancel()
        cluster.stop()

    kinds = Counter((p.kind, d.kind) for p, d in outcomes.values())
    failures = Counter(f for events in histories.values() for f in failures_in_history(events))
    retried = Counter(kind for events in histories.values() for kind in retried_after_kill(events))
    caught = sum(w.caught_edits for w in cluster.workers)
    print(
        f"cluster: {SESSIONS} sessions, {cluster.kills} kills, {len(cluster.workers)} worker "
        f"processes, outcomes {dict(kinds)}, wall {wall:.1f} s; {caught} edits killed between "
        f"their write and their report; retried after a kill: {dict(retried) or 'nothing'}; "
        f"failures in histories {dict(failures) or 'none'}"
    )
    assert cluster.kills >= MIN_KILLS, f"only {cluster.kills} kills: the run proved little"
    assert retried, "no kill caught a worker at work: the run proved little"
    assert caught, "no kill fell between an edit's write and its report"
    assert kinds == {("parked", "completed"): SESSIONS}
    for sid, (parked, completed) in outcomes.items():
        assert (parked.state, parked.parked_channel) == ("draft", "input"), sid
        assert (completed.state, completed.reply) == ("done", "Done."), sid

    # every file byte-exact, every edit applied once, no journal left, nothing extra
    store = open_store(s3_url)
    logs = TranscriptLogs(store)
    for sid, token in tokens.items():
        data = store.read_bytes(sid, FILE)
        assert data.count(b"EDIT-ONE") == 1 and data.count(b"EDIT-TWO") == 1, (sid, data)
        assert data == expected_file(token), (sid, data)
        files = store.walk(sid, "")
        assert [f for f in files if f.startswith("scratchpad/")] == [FILE], (sid, files)
        assert not [f for f in files if f.startswith(f"{EFFECTS}/")], (sid, files)

    # each step once: the trail, the tool answers, the store's log and trail.json
    for sid, view in views.items():
        assert [(s.kind, s.to, s.reason) for s in view.trail] == [
            ("trigger", "draft", "manual"),
            ("trigger", "draft", "event_arrived"),
            ("agent", "done", None),
        ], (sid, view.trail)
        steps = [
            (m.role, m.name or next((c.name for c in m.tool_calls or []), None))
            for m in view.transcript
        ]
        assert steps == TRANSCRIPT, (sid, steps)
        answers = [(m.name, m.status, m.content) for m in view.transcript if m.role == "tool"]
        edits = [a for a in answers if a[0] in ("write_file", "edit_file")]
        assert edits == [
            ("write_file", "ok", f"Wrote '{FILE}' ({len(first_write(tokens[sid]))} chars)."),
            ("edit_file", "ok", f"Replaced 1 occurrence in '{FILE}'."),
            ("edit_file", "ok", f"Replaced 1 occurrence in '{FILE}'."),
        ], (sid, answers)
        users = [m.content for m in view.transcript if m.role == "user"]
        assert users == [f"Begin {tokens[sid]}"], (sid, users)
        logged = logs.read(sid, TranscriptLog(base=view.logged, base_hash=view.logged_hash))
        assert len(logged) == view.logged, sid
        stored = json.loads(store.read_text(sid, "artifacts/trail.json"))["steps"]
        assert [s["reason"] for s in stored] == ["manual", "event_arrived", None], sid
    assert LOG_DIVERGED not in failures

    # every session ran the same activities (regular or local): a kill adds attempts, never
    # a call; but for a model call a fresh worker refused as PromptMissing because it had not
    # seen the tool list the call names (it reached no model, applied nothing, and was sent
    # again with the list): never a prompt the store lost
    shapes = Counter(
        tuple(activities_run(events, skipping=PROMPT_MISSING)) for events in histories.values()
    )
    assert len(shapes) == 1, shapes
    missing = [
        f.message
        for events in histories.values()
        for f in failed_activities(events)
        if f.application_failure_info.type == PROMPT_MISSING
    ]
    assert all(m.startswith("tool list ") and "known to this worker" in m for m in missing), missing

    # no worker's folder (cwd, HOME, TMPDIR, root) holds anything of a session
    for worker in cluster.workers:
        assert not leftovers(worker.folder, ids), (worker.number, leftovers(worker.folder, ids))
    assert not leftovers(root, ids)
