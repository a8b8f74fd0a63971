"""What metrics and tracing cost per model step: the same turns with and without them, in one run.

Run from the repository root::

    .venv/bin/python -m bench.telemetry [--n 20] [--steps 6]

One run starts its own Temporal dev server and a zero-latency scripted model (its handler
sets TCP_NODELAY), and three archmax workers on three task queues, all in this process, on
the same server and event loop:

* **off**: a worker built with ``telemetry=False`` on a client whose Temporal runtime exports
  no metrics (archmax's workflow-side counters still call ``workflow.metric_meter()``, which
  then records nowhere);
* **metrics**: the production worker (its telemetry interceptors) on a client whose runtime
  serves Prometheus (``worker.metrics_runtime``), as ``archmax worker --metrics-address``;
* **metrics + traces**: the same, with an OpenTelemetry SDK tracer provider (a batch span
  processor into an in-memory exporter: everything but the network) and Temporal's
  ``TracingInterceptor`` on the client (``worker.connect`` adds it when a provider is set).

Each sample round runs, for every configuration in rotated order, a 1-step and a K-step turn
of ``bench.overhead``'s ``bench-steps`` workflow on a session of that configuration; per model
step = (turn K − turn 1) / (K − 1), paired. The table prints medians and p90 per configuration
and the difference from **off**; the span count shows tracing really ran. Progress goes to
stderr; the process leaves through ``os._exit`` (sdk-python#300).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import argparse
    import asyncio
    import os
    import shutil
    import socket
    import sys
    import tempfile
    import time
    import uuid
    from collections.abc import Sequence
    from dataclasses import dataclass
    from pathlib import Path

    from temporalio.client import Client

    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.client.agent import create_agent
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.client.devserver import start_local_environment
    from archmax_temporal.client.host import Agent
    from archmax_temporal.client.logs import configure_logging
    from archmax_temporal.client.testing.playbook import Playbook
    from archmax_temporal.worker import (
        DATA_CONVERTER,
        TemporalConnection,
        build_worker,
        connect,
        metrics_runtime,
    )
    from bench.overhead import (
        STEPS_PLAYBOOK,
        STEPS_SLUG,
        STEPS_WORKFLOW,
        Series,
        StampedModelServer,
        timed,
    )

CONFIGURATIONS = ("off", "metrics", "metrics + traces")


@dataclass
class Lane:
    """One configuration: its agent and its figures."""

    name: str
    agent: Agent
    one: Series
    many: Series
    step: Series
    cpu: Series
    """This process's CPU time per model step (worker, client, model server: all here)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _turn(agent: Agent, sid: str, message: str, chain: dict[str, str]) -> tuple[int, int]:
    """The turn's wall time and this process's CPU time over it, in ns."""
    cpu = time.process_time_ns()
    elapsed, outcome = await timed(lambda: agent.workflow.send(sid, message, variables=chain))
    cpu = time.process_time_ns() - cpu
    if getattr(outcome, "status", None) != "completed":
        raise RuntimeError(f"bench-steps turn went wrong: {outcome!r}")
    return elapsed, cpu


async def measure(lanes: Sequence[Lane], n: int, warmup: int, k: int) -> None:
    chain = {f"n{j}": (f"n{j + 1}" if j < k - 1 else "end") for j in range(1, k)}
    for i in range(warmup + n):
        order = [*lanes[i % len(lanes) :], *lanes[: i % len(lanes)]]
        for lane in order:
            sid = f"bench-tel-{uuid.uuid4().hex[:10]}"
            await _turn(lane.agent, sid, "hop end", chain)  # the session's first turn
            first, second = (
                (("hop end", 1), ("hop n1", k)) if i % 2 else (("hop n1", k), ("hop end", 1))
            )
            got: dict[int, tuple[int, int]] = {}
            for message, count in (first, second):
                got[count] = await _turn(lane.agent, sid, message, chain)
            if i >= warmup:
                lane.one.add(got[1][0])
                lane.many.add(got[k][0])
                lane.step.add((got[k][0] - got[1][0]) / (k - 1))
                lane.cpu.add((got[k][1] - got[1][1]) / (k - 1))


def report(lanes: Sequence[Lane], k: int, spans: int, seconds: float) -> str:
    base, base_cpu = lanes[0].step.median_ms, lanes[0].cpu.median_ms
    lines = [
        f"archmax telemetry cost per model step ({len(lanes[0].step.samples)} samples, "
        f"K = {k}, {seconds:.0f} s)",
        "",
        f"{'configuration':<18} {'wall/step':>10} {'p90':>9} {'vs off':>9}"
        f" {'CPU/step':>9} {'vs off':>9} {'turn 1':>9} {f'turn {k}':>9}",
    ]
    for lane in lanes:
        delta, cpu_delta = lane.step.median_ms - base, lane.cpu.median_ms - base_cpu
        lines.append(
            f"{lane.name:<18} {lane.step.median_ms:>8.2f}ms {lane.step.p90_ms:>7.2f}ms"
            f" {delta:>+7.2f}ms {lane.cpu.median_ms:>7.2f}ms {cpu_delta:>+7.2f}ms"
            f" {lane.one.median_ms:>7.2f}ms {lane.many.median_ms:>7.2f}ms"
        )
    lines += ["", f"spans recorded by the traced lane: {spans}"]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> str:
    started = time.monotonic()
    configure_logging(verbose=False)
    scratch = Path(tempfile.mkdtemp(prefix="archmax-bench-telemetry-"))
    root = scratch / "root"
    (root / "workflows" / STEPS_SLUG).mkdir(parents=True)
    (root / "workflows" / STEPS_SLUG / "workflow.yaml").write_text(STEPS_WORKFLOW)
    env = await start_local_environment(DATA_CONVERTER)
    server = StampedModelServer(Playbook.from_yaml(STEPS_PLAYBOOK)).start()
    model = ModelConfig(
        base_url=server.url, api_key="sk-bench-not-a-secret", default_model="scripted"
    )
    target = env.client.service_client.config.target_host
    try:
        plain = Client(
            env.client.service_client, namespace=env.client.namespace, data_converter=DATA_CONVERTER
        )
        runtime = metrics_runtime(f"127.0.0.1:{_free_port()}")
        metered = await connect(TemporalConnection(address=target), runtime=runtime)
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)  # after the two untraced clients connected
        traced = await connect(TemporalConnection(address=target), runtime=runtime)
        clients = {"off": plain, "metrics": metered, "metrics + traces": traced}
        workers = []
        lanes = []
        for name in CONFIGURATIONS:
            queue = f"bench-tel-{uuid.uuid4().hex[:8]}"
            workers.append(
                build_worker(
                    clients[name],
                    task_queue=queue,
                    model=model,
                    store_dir=scratch / "sessions",
                    max_cached_workflows=args.cache,
                    telemetry=name != "off",
                )
            )
            config = RuntimeConfig(
                root=root,
                store=scratch / "sessions",
                address="unused",
                task_queue=queue,
                address_configured=True,
            )
            agent = await create_agent(
                STEPS_SLUG, config=config, client=clients[name], worker="external"
            )
            lanes.append(
                Lane(name, agent, Series("turn 1"), Series("turn K"), Series("step"), Series("cpu"))
            )
        for worker in workers:
            await worker.__aenter__()
        try:
            await measure(lanes, args.n, args.warmup, args.steps)
        finally:
            for worker in workers:
                await worker.__aexit__(None, None, None)
        provider.force_flush()
        return report(
            lanes, args.steps, len(exporter.get_finished_spans()), time.monotonic() - started
        )
    finally:
        server.stop()
        await env.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.telemetry",
        description="The cost of metrics and tracing per model step (see bench/README.md).",
    )
    parser.add_argument("--n", type=int, default=20, help="measured samples per figure (20)")
    parser.add_argument("--steps", type=int, default=6, help="K, model steps of the long turn (6)")
    parser.add_argument("--warmup", type=int, default=3, help="discarded rounds first (3)")
    parser.add_argument(
        "--cache", type=int, default=1000, help="workers' max_cached_workflows (1000, the default)"
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
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
