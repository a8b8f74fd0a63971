"""Load: N sessions parked at once, then delivered to at once, beside a bare Temporal
workflow doing the same round trip.

Run from the repository root::

    .venv/bin/python -m bench.load                  # N = 100, 300, 1,000
    .venv/bin/python -m bench.load --ns 100 --concurrency 32    # a quick look

One process starts the Temporal dev server (``WorkflowEnvironment.start_local``, archmax's
search attributes registered), a scripted model on 127.0.0.1, an ``archmax worker``
subprocess (the production worker: its cache of 1,000) and, for the baseline, an in-process
worker of a bare workflow. For each N:

- **archmax park**: N firings ``send(<new id>, "park")`` (update-with-start; the model calls
  ``archmax_wait``), ``--concurrency`` in flight; **archmax deliver**: N ``deliver`` updates
  into those parked sessions (the model answers; the turn completes and persists).
- **bare park**: N ``start_workflow`` + an update that returns once the workflow waits;
  **bare deliver**: N updates that release it and return after one activity (the model
  call's stand-in).

For each phase: throughput (firings per second, wall clock), p50 and p99 latency of one
firing, the errors and the share of them that are typed archmax errors (every non-success
must be one), and the archmax worker's RSS after the park (per parked session, and the cache
bound that keeps the worker's parked sessions under 300 MB). The table goes to stdout,
progress to stderr; the process leaves through ``os._exit`` (sdk-python#300).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from archmax_temporal import create_agent
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.workflows.errors import ArchmaxError
from bench.history import API_KEY, MODEL, quiet_logs, start_worker, vm_rss_kib
from bench.history_bare import BareLoad, bare_load_step, bare_runner

SLUG = "bench-load"

WORKFLOW = """\
# bench.load: a session that parks at once and answers the delivery.
title: Bench load
instructions: Wait for the release, then say released.
states:
  wait:
    title: Wait
    triggers:
      manual:
    instructions: Call archmax_wait; once released, answer "released".
"""

PLAYBOOK = """\
rules:
  - name: park
    when: { last_user: "/^park/" }
    reply:
      tool_calls:
        - { name: archmax_wait, arguments: { reason: "bench: parked until released" } }
  - name: release
    when: { last_user: "/^release/" }
    reply: { content: released }
default:
  content: "[bench] unexpected request"
"""

MEMORY_BUDGET_MIB = 300
"""The worker memory the cache bound is computed for (the issue's target)."""


def log(message: str) -> None:
    print(f"[bench.load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Phase:
    kind: str
    phase: str
    n: int
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    typed: int = 0
    rss_mib: float | None = None
    kib_each: float | None = None

    @property
    def failures(self) -> int:
        return sum(self.errors.values())

    def quantile(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_phase(
    phase: Phase, calls: Sequence[Callable[[], Awaitable[object]]], concurrency: int
) -> Phase:
    gate = asyncio.Semaphore(concurrency)

    async def one(call: Callable[[], Awaitable[object]]) -> None:
        async with gate:
            started = time.perf_counter()
            try:
                await call()
            except Exception as exc:  # counted: the share of typed ones is a figure
                name = type(exc).__name__
                phase.errors[name] = phase.errors.get(name, 0) + 1
                if isinstance(exc, ArchmaxError):
                    phase.typed += 1
                return
            phase.latencies_ms.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(one(call) for call in calls))
    phase.seconds = time.perf_counter() - started
    log(
        f"  {phase.kind} {phase.phase} N={phase.n}: {phase.n / phase.seconds:.1f}/s, "
        f"p50 {phase.quantile(0.5) or 0:.0f} ms, p99 {phase.quantile(0.99) or 0:.0f} ms, "
        f"{phase.failures} errors"
    )
    return phase


def rss_mib(pid: int) -> float:
    return vm_rss_kib(pid) / 1024


async def run(args: argparse.Namespace) -> list[Phase]:
    quiet_logs()
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-load-"))
    root = scratch / "root"
    (root / "workflows" / SLUG).mkdir(parents=True)
    (root / "workflows" / SLUG / "workflow.yaml").write_text(WORKFLOW, encoding="utf-8")
    store = scratch / "store"
    env = await start_local_environment(pydantic_data_converter)
    model = ScriptedModelServer(Playbook.from_yaml(PLAYBOOK))
    model.start()
    client: Client = env.client
    queue, bare_queue = f"bench-load-{uuid.uuid4().hex[:6]}", f"bench-bare-{uuid.uuid4().hex[:6]}"
    repo = Path(__file__).resolve().parents[1]
    worker_env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "TEMPORAL_NAMESPACE": client.namespace,
        "ARCHMAX_ROOT": str(root),
        "ARCHMAX_STORE": str(store),
        "ARCHMAX_TASK_QUEUE": queue,
        "ARCHMAX_API_BASE_URL": model.url,
        "ARCHMAX_API_KEY": API_KEY,
        "ARCHMAX_MODEL": MODEL,
        "ARCHMAX_LOG_LEVEL": "error",
        "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH")) if p),
    }
    archmax_worker = start_worker(
        "archmax", ["-m", "archmax_temporal", "worker"], worker_env, scratch
    )
    os.environ["ARCHMAX_TASK_QUEUE"] = queue
    os.environ["ARCHMAX_STORE"] = str(store)
    phases: list[Phase] = []
    try:
        agent = await create_agent(SLUG, root=root, client=client, worker="external")
        bare = Worker(
            client,
            task_queue=bare_queue,
            workflows=[BareLoad],
            activities=[bare_load_step],
            workflow_runner=bare_runner(),
            max_cached_workflows=max(args.ns) * 2,
        )
        async with bare:
            warm = [f"load-warm-{uuid.uuid4().hex[:6]}-{i}" for i in range(args.warmup)]
            await run_phase(  # the worker's imports and first sessions, before the baseline
                Phase("archmax", "warm-up", args.warmup),
                [partial(agent.workflow.send, sid, "park") for sid in warm],
                args.concurrency,
            )
            await asyncio.sleep(args.settle)
            baseline = rss_mib(archmax_worker.pid)
            for n in args.ns:
                tag = uuid.uuid4().hex[:6]
                ids = [f"load-{n}-{tag}-{i:05d}" for i in range(n)]
                parked = await run_phase(
                    Phase("archmax", "park", n),
                    [partial(agent.workflow.send, sid, "park") for sid in ids],
                    args.concurrency,
                )
                await asyncio.sleep(args.settle)
                parked.rss_mib = rss_mib(archmax_worker.pid)
                parked.kib_each = (parked.rss_mib - baseline) * 1024 / n
                phases.append(parked)
                phases.append(
                    await run_phase(
                        Phase("archmax", "deliver", n),
                        [partial(agent.workflow.send, sid, "release") for sid in ids],
                        args.concurrency,
                    )
                )
                bare_ids = [f"bare-{n}-{tag}-{i:05d}" for i in range(n)]

                async def bare_park(workflow_id: str) -> None:
                    handle = await client.start_workflow(
                        BareLoad.run, id=workflow_id, task_queue=bare_queue
                    )
                    await handle.execute_update(BareLoad.ready)

                async def bare_release(workflow_id: str) -> str:
                    return await client.get_workflow_handle(workflow_id).execute_update(
                        BareLoad.release
                    )

                phases.append(
                    await run_phase(
                        Phase("bare", "park", n),
                        [partial(bare_park, w) for w in bare_ids],
                        args.concurrency,
                    )
                )
                phases.append(
                    await run_phase(
                        Phase("bare", "deliver", n),
                        [partial(bare_release, w) for w in bare_ids],
                        args.concurrency,
                    )
                )
    finally:
        archmax_worker.stop()
        model.stop()
        await env.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    return phases


def render(phases: Sequence[Phase], args: argparse.Namespace) -> str:
    lines = [
        f"bench.load: concurrency {args.concurrency}, archmax worker `archmax worker` "
        "(cache 1,000), bare worker in-process; one dev server, one scripted model",
        "",
        "| N | kind | phase | firings/s | p50 ms | p99 ms | errors | typed | worker RSS |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in phases:
        typed = f"{100 * p.typed / p.failures:.0f} %" if p.failures else "-"
        rss = f"{p.rss_mib:.0f} MiB ({p.kib_each:.0f} KiB each)" if p.rss_mib else ""
        lines.append(
            f"| {p.n:,} | {p.kind} | {p.phase} | {p.n / p.seconds:.1f} | "
            f"{p.quantile(0.5) or 0:.0f} | {p.quantile(0.99) or 0:.0f} | {p.failures} | "
            f"{typed} | {rss} |"
        )
    by_n = {(p.n, p.kind, p.phase): p for p in phases}
    lines += ["", "| N | archmax ÷ bare, park p50 | deliver p50 | deliver firings/s |"]
    lines.append("| ---: | ---: | ---: | ---: |")
    for n in args.ns:
        a_park, b_park = by_n.get((n, "archmax", "park")), by_n.get((n, "bare", "park"))
        a_del, b_del = by_n.get((n, "archmax", "deliver")), by_n.get((n, "bare", "deliver"))
        if not (a_park and b_park and a_del and b_del):
            continue
        lines.append(
            f"| {n:,} | {_ratio(a_park.quantile(0.5), b_park.quantile(0.5))} | "
            f"{_ratio(a_del.quantile(0.5), b_del.quantile(0.5))} | "
            f"{_ratio(b_del.seconds, a_del.seconds)} |"
        )
    each = [p.kib_each for p in phases if p.kib_each]
    if each:
        per = statistics.median(each)
        bound = int(MEMORY_BUDGET_MIB * 1024 / per) if per > 0 else 0
        lines += [
            "",
            f"worker RSS per cached parked session: {per:.0f} KiB (median over N); a cache of "
            f"{bound:,} keeps the parked sessions under {MEMORY_BUDGET_MIB} MiB "
            "(`max_cached_workflows`; an evicted session replays on its next task)",
        ]
    errors = sorted({name for p in phases for name in p.errors})
    lines += ["", f"errors seen: {', '.join(errors) if errors else 'none'}"]
    return "\n".join(lines)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f} x" if a and b else "-"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--ns", default="100,300,1000", help="session counts, comma-separated (100,300,1000)"
    )
    parser.add_argument("--concurrency", type=int, default=64, help="firings in flight (64)")
    parser.add_argument("--warmup", type=int, default=20, help="sessions parked first (20)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before the RSS reading")
    args = parser.parse_args(argv)
    args.ns = [int(n) for n in args.ns.split(",") if n]
    code = 0
    try:
        print(render(asyncio.run(run(args)), args), flush=True)
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
