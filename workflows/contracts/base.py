"""What one activity contract is: its name, its wire types and what it does; and how a short
activity runs as a local activity first (:func:`local_first`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, FailureError

from archmax_temporal.workflows import patches
from archmax_temporal.workflows.errors import StoreMismatchError

HEARTBEAT_EVERY: Final = timedelta(seconds=2)
"""How often a long activity heartbeats while it works (activities.heartbeat). Temporal
forwards at most one heartbeat per 80% of the timeout, so this only needs to be well under
:data:`HEARTBEAT_TIMEOUT`."""

HEARTBEAT_TIMEOUT: Final = timedelta(seconds=10)
"""How long an attempt may go without a heartbeat before Temporal deems its worker dead and
retries it: a worker SIGKILLed mid-call is noticed, and the call running again on another
worker, within about this (plus the retry's first backoff), not at the end of its
start-to-close budget. Five heartbeats fit in it, so a busy worker is never mistaken for a
dead one."""


@dataclass(frozen=True)
class ActivityContract:
    """One activity as every history records it.

    ``name`` is a contract: renaming it breaks every session in flight. ``input`` and
    ``result`` are the wire types both sides import (``result`` None: the activity answers
    nothing).
    """

    name: str
    input: type[BaseModel]
    result: type[BaseModel] | None
    does: str
    """One line for the reader: what the activity does."""


# --- short activities as local activities -------------------------------------------------

LOCAL_PATCH: Final = "archmax-local-activities"
"""``workflow.patched`` id: the short workspace tools and the turn's save run as local
activities first (:func:`local_first`). A run without it (its history began before) keeps
scheduling them as regular activities, so it replays."""

LOCAL_TIMEOUT: Final = timedelta(seconds=5)
"""Bound on a local activity, its attempts together (each one's too, and its
``local_retry_threshold``: they all run inside the workflow task, with no timer between them).
A short tool or a save takes milliseconds; one that takes seconds is no short one, and goes on
as a regular activity, heartbeating."""

LOCAL_ATTEMPTS: Final = 3
"""Attempts of a local activity (a transient store error) before it is handed to a regular
one."""

MISMATCH: Final = StoreMismatchError.__name__
"""A worker of another store refused the local activity: only a regular activity, through
the task queue, can reach a worker of the session's store."""


def local_retry(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` for the local attempts: a few, close together, and a store mismatch final
    (it would be refused again by the same worker)."""
    refused = list(policy.non_retryable_error_types or ())
    return dataclasses.replace(
        policy,
        maximum_interval=timedelta(seconds=1),
        maximum_attempts=LOCAL_ATTEMPTS,
        non_retryable_error_types=[*refused, MISMATCH],
    )


def local_activity_id() -> str:
    """A new local activity's id, unique in the run: ``l`` and its place among the run's local
    activities (``l7``) in a run of :func:`~archmax_temporal.workflows.patches.generation`,
    else ``local-`` and 32 hex digits from the workflow's random (30 bytes more in every short
    tool's marker). The order local activities are scheduled in is the workflow's, so a replay
    counts the same. The idempotency key adds the run's id
    (:func:`archmax_temporal.activities.effects.idempotency_key`), so the next run of a
    continue-as-new chain, counting from ``l1`` again, reuses no key."""
    if not patches.generation():
        return f"local-{workflow.uuid4().hex}"
    instance = workflow.instance()
    n = int(getattr(instance, _COUNTED, 0)) + 1
    setattr(instance, _COUNTED, n)
    return f"l{n}"


_COUNTED: Final = "_archmax_local_activities"
"""The workflow instance's attribute that counts its run's local activities."""


async def local_first(
    activity: str,
    arg: BaseModel,
    *,
    result_type: type[Any] | None,
    start_to_close_timeout: timedelta,
    heartbeat_timeout: timedelta | None,
    retry_policy: RetryPolicy,
    summary: str,
) -> Any:
    """Run ``activity`` as a local activity on this worker, without a round trip through the
    server; when that fails in any way (a timeout, a store mismatch, used-up attempts, a
    refusal), as the regular activity the contract describes (``start_to_close_timeout``,
    ``heartbeat_timeout``, ``retry_policy``), which fails as it always did (an
    ``ActivityError``) if it fails too. Only a cancellation is raised as it is.

    Both carry the same activity id (unique in the run: :func:`local_activity_id`),
    so both have the same idempotency key
    (:func:`archmax_temporal.activities.effects.idempotency_key`): a local attempt that applied its
    change before it timed out, or whose worker died before the workflow task completed (the next
    worker runs it again, the same id, on replay), is answered from the effect journal, never
    applied twice.
    """
    activity_id = local_activity_id()
    try:
        return await workflow.execute_local_activity(
            activity,
            arg,
            result_type=result_type,
            activity_id=activity_id,
            start_to_close_timeout=LOCAL_TIMEOUT,
            schedule_to_close_timeout=LOCAL_TIMEOUT,
            local_retry_threshold=LOCAL_TIMEOUT,
            retry_policy=local_retry(retry_policy),
            summary=summary,
        )
    except FailureError as failure:  # an ActivityError, or the activity's own error
        if cancelled(failure):
            raise
        workflow.logger.warning(
            "local activity %s did not complete (%s); running it as a regular activity",
            activity,
            failure.cause if isinstance(failure, ActivityError) else failure,
        )
    return await workflow.execute_activity(
        activity,
        arg,
        result_type=result_type,
        activity_id=activity_id,
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
        summary=summary,
    )


def cancelled(failure: FailureError) -> bool:
    """Whether a local activity's failure is its cancellation (the workflow's own)."""
    cause = failure.cause if isinstance(failure, ActivityError) else failure
    return isinstance(cause, CancelledError)
