"""Heartbeating while an activity works, so a worker that dies mid-call is noticed.

Temporal learns that an attempt is lost only when its heartbeat stops (or when the whole
start-to-close budget has run out). Each long activity (workspace tools, placements, the sandbox,
host tools, hook executors) awaits its work through :func:`heartbeating`, which heartbeats every
:data:`HEARTBEAT_EVERY` while the work runs; its contract sets a ``heartbeat_timeout``
(:data:`archmax_temporal.workflows.contracts.base.HEARTBEAT_TIMEOUT`), so a SIGKILLed worker's call
is retried elsewhere within that timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

from archmax_temporal.workflows.contracts.base import HEARTBEAT_EVERY

T = TypeVar("T")


async def heartbeating(work: Awaitable[T]) -> T:
    """Await ``work`` while heartbeating every :data:`HEARTBEAT_EVERY` (only inside a regular
    activity; elsewhere, a local activity included, it simply awaits). Cancelling this
    cancels ``work``."""
    task = asyncio.ensure_future(work)
    if not activity.in_activity() or activity.info().is_local:
        return await task  # a local activity has none: its worker keeps the workflow task alive
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_EVERY.total_seconds())
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()


__all__ = ["HEARTBEAT_EVERY", "heartbeating"]
