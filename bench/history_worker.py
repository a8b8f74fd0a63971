"""A worker process for bench.history's memory figure.

``python -m bench.history_worker bare``: a worker for :class:`bench.history_bare.BareWaiting`
(the bare waiting workflow), built like archmax's worker (unsandboxed, as archmax's runs
its sessions), on ``TEMPORAL_ADDRESS`` / ``ARCHMAX_TASK_QUEUE``, with ``--cache`` cached workflows.

``python -m bench.history_worker bare-agent``: the same for
:class:`bench.history_bare.BareAgentWaiting` (a bare agent parked after one model call), its
model activity calling ``ARCHMAX_API_BASE_URL`` as archmax's worker does.

``python -m bench.history_worker archmax --cache N``: archmax's worker, from
``archmax_temporal.worker.build_worker``, configured from the same environment variables as
``archmax worker`` (``ARCHMAX_STORE``, ``ARCHMAX_ROOT``, ``ARCHMAX_API_BASE_URL``, ...), but
with a workflow cache of N. ``archmax worker`` itself has the production cache (1000) and no
flag for it; bench.history runs it when every session fits and this one when they do not.

Either prints ``ready`` once polling and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from bench.history_bare import BareAgentModel, BareAgentWaiting, BareWaiting, bare_runner


def _worker(kind: str, client: Client, queue: str, cache: int) -> Worker:
    if kind == "bare":
        return Worker(
            client,
            task_queue=queue,
            workflows=[BareWaiting],
            workflow_runner=bare_runner(),
            max_cached_workflows=cache,
        )
    if kind == "bare-agent":
        model = BareAgentModel(
            os.environ["ARCHMAX_API_BASE_URL"],
            os.environ["ARCHMAX_API_KEY"],
            os.environ["ARCHMAX_MODEL"],
        )
        return Worker(
            client,
            task_queue=queue,
            workflows=[BareAgentWaiting],
            activities=[model.call],
            workflow_runner=bare_runner(),
            max_cached_workflows=cache,
        )
    from archmax_temporal.activities.model import ModelConfig
    from archmax_temporal.worker import build_worker

    root = Path(os.environ.get("ARCHMAX_ROOT") or Path.cwd())
    store = Path(os.environ.get("ARCHMAX_STORE") or root / "sessions")
    return build_worker(
        client,
        task_queue=queue,
        model=ModelConfig(
            base_url=os.environ["ARCHMAX_API_BASE_URL"],
            api_key=os.environ["ARCHMAX_API_KEY"],
            default_model=os.environ["ARCHMAX_MODEL"],
        ),
        store_dir=store,
        max_cached_workflows=cache,
        authoring_root=root,
    )


async def _serve(kind: str, cache: int) -> None:
    client = await Client.connect(
        os.environ["TEMPORAL_ADDRESS"],
        namespace=os.environ.get("TEMPORAL_NAMESPACE") or "default",
        data_converter=pydantic_data_converter,
    )
    worker = _worker(kind, client, os.environ["ARCHMAX_TASK_QUEUE"], cache)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print("ready", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history_worker")
    parser.add_argument("kind", choices=("bare", "bare-agent", "archmax"))
    parser.add_argument("--cache", type=int, default=1000, help="max_cached_workflows (1000)")
    args = parser.parse_args()
    code = 0
    try:
        asyncio.run(_serve(args.kind, args.cache))
    except KeyboardInterrupt:
        code = 130
    sys.stdout.flush()
    os._exit(code)  # sdk-python#300, as bench.overhead


if __name__ == "__main__":
    main()
