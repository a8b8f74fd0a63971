"""``archmax.store.persist_turn``: the session's artifacts rewritten at the end of a turn;
``archmax.store.checkpoint``: an idle finished session's state written before its run ends."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.contracts.base import HEARTBEAT_TIMEOUT, ActivityContract
from archmax_temporal.workflows.models import CheckpointInput as CheckpointInput
from archmax_temporal.workflows.models import PersistTurnInput as PersistTurnInput

PERSIST_ACTIVITY: Final = "archmax.store.persist_turn"
"""Rewrites the session's artifacts and spec snapshot at the end of every turn."""

PERSIST_TIMEOUT: Final = timedelta(seconds=60)
"""Writing a handful of JSON files (the trajectory grows with the conversation); the
heartbeat notices a dead worker long before."""

PERSIST_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,
)
"""Store writes are idempotent (write, then rename), so they retry freely."""

CONTRACT: Final = ActivityContract(
    PERSIST_ACTIVITY, PersistTurnInput, None, "rewrite the session's artifacts"
)


async def persist_turn(turn: PersistTurnInput, *, summary: str) -> None:
    """Schedule the artifacts' rewrite and wait for it (an ``ActivityError`` when it failed
    for good)."""
    await workflow.execute_activity(
        PERSIST_ACTIVITY,
        turn,
        start_to_close_timeout=PERSIST_TIMEOUT,
        heartbeat_timeout=HEARTBEAT_TIMEOUT,  # a killed worker's write is retried at once
        retry_policy=PERSIST_RETRY,
        summary=summary,
    )


CHECKPOINT_ACTIVITY: Final = "archmax.store.checkpoint"
"""Writes ``<id>/checkpoints/session.json`` before an idle finished session's run ends."""

CHECKPOINT_CONTRACT: Final = ActivityContract(
    CHECKPOINT_ACTIVITY, CheckpointInput, None, "checkpoint an idle session to the store"
)


async def checkpoint(request: CheckpointInput, *, summary: str) -> None:
    """Schedule the checkpoint's write and wait for it (an ``ActivityError`` when it failed
    for good: then the run stays open)."""
    await workflow.execute_activity(
        CHECKPOINT_ACTIVITY,
        request,
        start_to_close_timeout=PERSIST_TIMEOUT,
        retry_policy=PERSIST_RETRY,
        summary=summary,
    )
