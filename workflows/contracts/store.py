"""``archmax.store.persist_turn``: the session's artifacts rewritten at the end of a turn;
``archmax.store.checkpoint``: an idle finished session's state written before its run ends;
``archmax.store.put_variables`` / ``archmax.store.load_variables``: values by reference
written to and read from the store (:mod:`archmax_temporal.workflows.variables`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows import patches
from archmax_temporal.workflows.contracts.base import (
    HEARTBEAT_TIMEOUT,
    LOCAL_PATCH,
    ActivityContract,
    local_first,
)
from archmax_temporal.workflows.models import CheckpointInput as CheckpointInput
from archmax_temporal.workflows.models import LoadVariablesInput as LoadVariablesInput
from archmax_temporal.workflows.models import LoadVariablesResult as LoadVariablesResult
from archmax_temporal.workflows.models import PersistTurnInput as PersistTurnInput
from archmax_temporal.workflows.models import StoreVariablesInput as StoreVariablesInput

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


async def persist_turn(turn: PersistTurnInput, *, summary: str, local: bool = False) -> None:
    """Schedule the artifacts' rewrite and wait for it (an ``ActivityError`` when it failed
    for good).

    ``local``: run it as a local activity first (:func:`~.base.local_first`), stamped with
    the workflow's time (its place in the session's order of saves: a local activity's own
    schedule time is its worker's clock). The caller allows it only when every local
    activity with an effect before it has been recorded in the history (a regular activity,
    the model call, came after them): the save prunes the effect journal of the run, and a
    local activity not yet recorded runs again if the worker dies before the workflow task
    completes, where it needs its journal entry. Otherwise the save is a regular activity,
    whose scheduling records them first."""
    if local and patches.patched(LOCAL_PATCH):
        stamped = turn.model_copy(update={"scheduled_at": workflow.now()})
        await local_first(
            PERSIST_ACTIVITY,
            stamped,
            result_type=None,
            start_to_close_timeout=PERSIST_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=PERSIST_RETRY,
            summary=summary,
        )
        return
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


PUT_VARIABLES_ACTIVITY: Final = "archmax.store.put_variables"
"""Writes values by reference (``<id>/checkpoints/variables/<ref>.json``, once each)."""

LOAD_VARIABLES_ACTIVITY: Final = "archmax.store.load_variables"
"""Reads values by reference back for the workflow (a run that did not receive them)."""

VARIABLES_PER_CALL: Final = 16
"""How many values one put or load carries: 16 values of at most 64 KiB keep its payload
near 1 MiB, under Temporal's 2 MB."""

VARIABLES_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)
"""A session cannot go on without its values: a store outage is waited out (visibly, as an
activity retrying), never turned into a value that silently reads as null."""

PUT_VARIABLES_CONTRACT: Final = ActivityContract(
    PUT_VARIABLES_ACTIVITY, StoreVariablesInput, None, "store large variable values"
)
LOAD_VARIABLES_CONTRACT: Final = ActivityContract(
    LOAD_VARIABLES_ACTIVITY,
    LoadVariablesInput,
    LoadVariablesResult,
    "read large variable values back",
)


async def put_variables(request: StoreVariablesInput, *, summary: str) -> None:
    """Schedule the values' write and wait for it (retried: a write is idempotent)."""
    await workflow.execute_activity(
        PUT_VARIABLES_ACTIVITY,
        request,
        start_to_close_timeout=PERSIST_TIMEOUT,
        retry_policy=VARIABLES_RETRY,
        summary=summary,
    )


async def load_variables(request: LoadVariablesInput, *, summary: str) -> LoadVariablesResult:
    """Schedule the values' read and wait for it."""
    loaded: LoadVariablesResult = await workflow.execute_activity(
        LOAD_VARIABLES_ACTIVITY,
        request,
        result_type=LoadVariablesResult,
        start_to_close_timeout=PERSIST_TIMEOUT,
        retry_policy=VARIABLES_RETRY,
        summary=summary,
    )
    return loaded
