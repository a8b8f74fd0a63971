"""A worker's check that it serves only the sessions of its own store.

Every activity of a session that recorded its store carries it
(:data:`~archmax_temporal.workflows.store_binding.STORE_HEADER`); :class:`StoreCheckInterceptor`
compares it with the worker's own store (:mod:`archmax_temporal.activities.store_identity`) before
the activity runs. On a difference nothing runs: the attempt fails with a retryable
``StoreMismatchError`` naming the session and both stores, which Temporal shows as the pending
activity's last failure and ``archmax sessions <id>`` as what the session waits on. The session
waits for a worker of its store and loses nothing (:mod:`archmax_temporal.workflows.store_binding`).
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.workflows.errors import StoreMismatchError
from archmax_temporal.workflows.store_binding import StoreRef, read_store_header

log = get_logger("archmax.store")


def mismatch_message(own: StoreRef, session_id: str, session_store: StoreRef) -> str:
    """What a worker of ``own`` says when handed an activity of a session of another store."""
    where = session_store.description or "that store"
    return (
        f"this worker's store {own.description} ({own.id[:8]}) is not the store session "
        f"{session_id!r} was created in ({session_store.id[:8]}, {where}); start a worker "
        f"with ARCHMAX_STORE={where}: the session waits for one, losing nothing"
    )


class _StoreCheck(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, own: StoreRef) -> None:
        super().__init__(next)
        self._own = own

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            theirs = read_store_header(input.headers)
        except ValueError as unreadable:
            theirs = StoreRef(id="?", description=str(unreadable))
        if theirs is not None and theirs.id != self._own.id:
            info = activity.info()
            message = mismatch_message(self._own, info.workflow_id or "?", theirs)
            log.warning(
                "store mismatch",
                session_id=info.workflow_id,
                activity=info.activity_type,
                attempt=info.attempt,
                worker_store=self._own.id,
                session_store=theirs.id,
            )
            # benign: the SDK logs no traceback per refused attempt (the line above says it)
            raise ApplicationError(
                message,
                type=StoreMismatchError.__name__,
                non_retryable=not StoreMismatchError.retryable,
                category=ApplicationErrorCategory.BENIGN,
            )
        return await super().execute_activity(input)


class StoreCheckInterceptor(Interceptor):
    """A worker's refusal of the activities of sessions created in another store: an activity whose
    :data:`~archmax_temporal.workflows.store_binding.STORE_HEADER` names another store than ``own``
    runs nothing and fails its attempt with a retryable ``StoreMismatchError`` (the pending
    activity's last failure); one without the header (a session of an older version) runs as
    before."""

    def __init__(self, own: StoreRef) -> None:
        self._own = own

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StoreCheck(next, self._own)
