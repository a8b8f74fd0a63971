"""How a host fires into a session over Temporal, so every call ends in a result or a typed
error, whatever the server is doing.

One firing is one Temporal update whose id is the firing's idempotency key (the caller's,
or a fresh one): a retried call with the same key is the same update, so it applies once and
returns the first call's outcome. The update is first sent up to *accepted* (the session's
validator has said yes, or refused with its typed error, nothing written); then its result is
awaited by id, so a slow turn, a dropped connection or a server restart never reports an
applied firing as failed.

- **Busy.** Temporal admits only a few updates in flight per workflow; the next one gets
  ``RESOURCE_EXHAUSTED``, which is :class:`SessionBusyError` (retryable: nothing applied).
- **Server away.** ``UNAVAILABLE`` and deadline errors are retried with backoff, under the
  same update id, for up to :data:`SERVER_PATIENCE`; then :class:`TemporalUnavailableError`.
- **Run gone.** A session whose run was terminated, timed out or reset under a waiting caller
  is :class:`SessionTerminatedError` at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Final

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.runtime import task_failing, translate
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    SessionBusyError,
    SessionTerminatedError,
    TemporalUnavailableError,
)
from archmax_temporal.workflows.models import Outcome

SERVER_PATIENCE: Final = timedelta(seconds=60)
"""How long a firing waits out an unreachable server (a restart) before it says so."""

RETRY_FIRST: Final = timedelta(milliseconds=200)
"""The first wait before retrying a firing the server could not take; it doubles to 5 s."""

_SERVER_AWAY: Final = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED}
)
_ENDED: Final = frozenset(
    {
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.FAILED,
    }
)


def new_key() -> str:
    """An idempotency key for a caller that gave none."""
    return f"archmax-{uuid.uuid4().hex}"


HANDED_ON_RETRIES: Final = 50
"""How many times a firing follows its turn into a new run (a turn that continues as new
mid-way abandons its caller's update there; the next run answers the same key)."""


async def fire(
    client: Client,
    session_id: str,
    key: str,
    start: Callable[[], Awaitable[WorkflowUpdateHandle[Outcome]]],
) -> Outcome:
    """Send the firing (``start`` issues the update with id ``key``) and await its Outcome.

    A turn that continued as new mid-way leaves its caller's update unanswered in the old
    run: the firing is sent again, with the same key, to the run that now carries the turn,
    which answers it with the turn's outcome (never running it twice)."""
    for _ in range(HANDED_ON_RETRIES):
        handle = await _with_patience(client, session_id, key, start)
        try:
            return await _result(client, session_id, key, handle)
        except _HandedOn:
            continue
    raise TemporalUnavailableError(
        f"session {session_id!r} kept handing its turn on; retry with the same idempotency "
        f"key ({key}) to read its outcome"
    )


class _HandedOn(Exception):
    """The run that accepted the firing closed (continued as new) before answering it."""


async def _with_patience(
    client: Client,
    session_id: str,
    key: str,
    start: Callable[[], Awaitable[WorkflowUpdateHandle[Outcome]]],
) -> WorkflowUpdateHandle[Outcome]:
    delay = RETRY_FIRST.total_seconds()
    deadline = asyncio.get_running_loop().time() + SERVER_PATIENCE.total_seconds()
    while True:
        try:
            return await start()
        except WorkflowUpdateFailedError as exc:
            raise translate(exc, session_id=session_id, namespace=client.namespace) from exc
        except RPCError as exc:
            if exc.status == RPCStatusCode.RESOURCE_EXHAUSTED:
                raise SessionBusyError(
                    f"session {session_id!r} has as many firings in flight as Temporal allows; "
                    "nothing was applied: retry shortly (the same idempotency key is safe)"
                ) from None
            if exc.status not in _SERVER_AWAY and not task_failing(exc):
                raise translate(exc, session_id=session_id, namespace=client.namespace) from exc
            last: BaseException = exc
        except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
            _reraise_cancellation()
            last = exc
        if asyncio.get_running_loop().time() + delay > deadline:
            if isinstance(last, RPCError) and task_failing(last):
                raise translate(last, session_id=session_id, namespace=client.namespace) from None
            raise TemporalUnavailableError(
                f"the Temporal server did not take the firing for session {session_id!r} "
                f"within {SERVER_PATIENCE.total_seconds():.0f} s ({type(last).__name__}); "
                f"retry with the same idempotency key ({key})"
            ) from None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def _result(
    client: Client, session_id: str, key: str, handle: WorkflowUpdateHandle[Outcome]
) -> Outcome:
    """The update's result, polled by id until it comes: a poll that times out (a long
    turn, a restart) polls again; a run that ended under it is a typed error."""
    delay = RETRY_FIRST.total_seconds()
    away_since: float | None = None
    loop = asyncio.get_running_loop()
    while True:
        try:
            return await handle.result()
        except WorkflowUpdateFailedError as exc:
            typed = translate(exc, session_id=session_id, namespace=client.namespace)
            if not isinstance(typed, ArchmaxError):  # not the session's own failure
                if await _continued(client, session_id, handle.workflow_run_id):
                    raise _HandedOn from exc
                typed = await _ended(client, session_id) or typed
            raise typed from exc
        except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as exc:
            _reraise_cancellation()
            if isinstance(exc, RPCError) and exc.status not in _SERVER_AWAY:
                ended = await _ended(client, session_id)
                if ended is not None:
                    raise ended from None
                raise translate(exc, session_id=session_id, namespace=client.namespace) from exc
            away_since = away_since or loop.time()
            if loop.time() - away_since > SERVER_PATIENCE.total_seconds():
                raise TemporalUnavailableError(
                    f"no answer from the Temporal server about session {session_id!r} for "
                    f"{SERVER_PATIENCE.total_seconds():.0f} s; the firing ({key}) may still "
                    "complete: retry with the same idempotency key to read its outcome"
                ) from None
        ended = await _ended(client, session_id)
        if ended is not None:
            raise ended
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)
        handle = client.get_workflow_handle(session_id).get_update_handle(key, result_type=Outcome)


def _reraise_cancellation() -> None:
    """The SDK reports a cancelled call as a timed-out one: when it is the caller that
    cancels (a case timeout, a client that left), stop instead of polling on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _continued(client: Client, session_id: str, run_id: str | None) -> bool:
    """Whether the session runs on in a newer run than the one that took the firing."""
    try:
        described = await client.get_workflow_handle(session_id).describe()
    except Exception:
        return False
    return described.status == WorkflowExecutionStatus.RUNNING and described.run_id != run_id


async def _ended(client: Client, session_id: str) -> SessionTerminatedError | None:
    """A typed error when the session's latest run ended abnormally under the caller."""
    try:
        described = await client.get_workflow_handle(session_id).describe()
    except Exception:  # the server is away: not known to have ended
        return None
    if described.status in _ENDED:
        status = described.status.name.lower().replace("_", " ") if described.status else "?"
        return SessionTerminatedError(
            f"session {session_id!r}: its workflow run was {status} while the firing waited "
            "(by an operator or a server limit); the session's records up to then are in its "
            "history and store"
        )
    return None
