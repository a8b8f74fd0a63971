"""A session's activities carry its store: what keeps a worker from serving a session whose
store it lacks.

A session records the identity of the session store it was created in (:attr:`SessionInput.store_id
<archmax_temporal.workflows.models.SessionInput.store_id>`, from the store's ``_store.json``:
:mod:`archmax_temporal.activities.store_identity`). The workflow interceptor here puts it in the
:data:`STORE_HEADER` header of every activity the session schedules; the worker's activity
interceptor compares it with its own store's and, on a difference, runs nothing and fails the
attempt with a retryable ``StoreMismatchError`` naming both stores (the pending activity's last
failure in the Temporal UI, and ``waiting on …`` in ``archmax sessions <id>``).

A local activity (a short tool, the turn's save: :func:`contracts.base.local_first`) carries
the header too; refused by its own worker, it goes on as the regular activity, which waits
for a worker of the session's store like any other.

The session waits for a worker of its store and loses nothing: an activity whose attempts a
mismatch used up (most contracts retry a bounded number of times) is scheduled again, with
retries at :data:`STORE_WAIT_INTERVAL`, until a worker of the right store runs it; the turn
never sees the refusal. Activities that retry without a count (the model call, values by
reference) simply keep retrying. A session without a store id (started by an older version)
carries no header and runs anywhere, as before.

Headers are not commands: adding one changes nothing a replay compares. Scheduling again
after a mismatch does add commands, behind :data:`STORE_WAIT_PATCH`. What a session sends is
decided by its input alone, so replay sees the same headers and the same waits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import (
    Interceptor,
    StartActivityInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows import patches
    from archmax_temporal.workflows.errors import StoreMismatchError
    from archmax_temporal.workflows.models import SessionInput

STORE_HEADER: Final = "archmax-store"
"""The activity header naming the store of the session that scheduled the activity."""

STORE_WAIT_PATCH: Final = "archmax-store-wait"
"""``workflow.patched`` id: an activity whose attempts a ``StoreMismatchError`` used up is
scheduled again instead of failing its caller."""

STORE_WAIT_INTERVAL: Final = timedelta(seconds=60)
"""The interval between the attempts of an activity scheduled again after a mismatch: a worker
of the right store that starts picks the activity up within it, and a session that waits for
days adds one scheduling (about six events) per used-up round of attempts, not per minute."""

MISMATCH: Final = StoreMismatchError.__name__
"""The ``ApplicationError`` type a worker of another store fails an attempt with."""


class StoreRef(BaseModel):
    """A session's store as its activities carry it: the store's id and where the host that
    created the session found it (no credentials)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    description: str = ""


def session_store(input: SessionInput) -> StoreRef | None:
    """The store ``input``'s session was created in; None for a session that recorded none."""
    if not input.store_id:
        return None
    return StoreRef(id=input.store_id, description=input.store_description or "")


def store_header(ref: StoreRef) -> Payload:
    """``ref`` as the :data:`STORE_HEADER` payload (plain JSON)."""
    return Payload(metadata={"encoding": b"json/plain"}, data=ref.model_dump_json().encode())


def read_store_header(headers: Mapping[str, Payload]) -> StoreRef | None:
    """The store an activity's headers name; None when they name none (a session started by
    an older version). An unreadable header is a ``ValueError``."""
    payload = headers.get(STORE_HEADER)
    if payload is None:
        return None
    try:
        return StoreRef.model_validate_json(payload.data)
    except ValidationError as exc:
        raise ValueError(f"unreadable {STORE_HEADER} header: {exc}") from None


def refused_by_store(failure: BaseException) -> bool:
    """Whether an activity failed because workers of another store refused it."""
    cause = failure.cause if isinstance(failure, ActivityError) else None
    return isinstance(cause, ApplicationError) and cause.type == MISMATCH


def waiting_retry(policy: RetryPolicy | None) -> RetryPolicy:
    """``policy`` for an activity scheduled again after a mismatch: the same attempts and
    non-retryable types, at :data:`STORE_WAIT_INTERVAL`."""
    base = policy or RetryPolicy()
    return dataclasses.replace(
        base,
        initial_interval=STORE_WAIT_INTERVAL,
        backoff_coefficient=1.0,
        maximum_interval=STORE_WAIT_INTERVAL,
    )


def _current_store() -> StoreRef | None:
    """The store of the session this workflow code runs (its instance's ``store``)."""
    store = getattr(workflow.instance(), "store", None)
    return store if isinstance(store, StoreRef) else None


ActivityInput = StartActivityInput | StartLocalActivityInput


class _StoreBoundHandle(workflow.ActivityHandle[Any]):
    """An activity of a session with a store: the activity as scheduled, and scheduled again
    each time workers of another store used up its attempts (:func:`refused_by_store`)."""

    def __init__(
        self, schedule: Callable[[Any], workflow.ActivityHandle[Any]], input: ActivityInput
    ) -> None:
        self._schedule = schedule
        self._input = input
        self._current = schedule(input)  # scheduled now: the command keeps its place
        self._awaiting = False
        super().__init__(self._served())

    async def _served(self) -> Any:
        while True:
            self._awaiting = True
            try:
                return await self._current
            except ActivityError as failure:
                if not refused_by_store(failure) or not patches.patched(STORE_WAIT_PATCH):
                    raise
                workflow.logger.warning(
                    "activity %s refused by a worker of another store; scheduled again: %s",
                    self._input.activity,
                    failure.cause,
                )
            finally:
                self._awaiting = False
            self._input = dataclasses.replace(
                self._input, retry_policy=waiting_retry(self._input.retry_policy)
            )
            self._current = self._schedule(self._input)

    def cancel(self, msg: Any | None = None) -> bool:
        # Awaited, the activity is cancelled through the await; before this task first ran
        # (or between two schedulings) it is cancelled here, so no activity is left behind.
        if not self._awaiting and not self._current.done():
            self._current.cancel(msg)
        return super().cancel(msg)


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        store = _current_store()
        if store is None:
            return super().start_activity(input)
        input.headers = {**input.headers, STORE_HEADER: store_header(store)}
        return _StoreBoundHandle(super().start_activity, input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        # A local activity runs on this very worker: the header lets the worker's check
        # refuse it when its store is another, and scheduling it again here would only be
        # refused again. The caller goes on with the regular activity (contracts.base
        # local_first), bound as above, which reaches a worker of the session's store.
        store = _current_store()
        if store is not None:
            input.headers = {**input.headers, STORE_HEADER: store_header(store)}
        return super().start_local_activity(input)


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))


class StoreBindingInterceptor(Interceptor):
    """Puts the session's store in the header of every activity it schedules, and schedules again an
    activity workers of another store refused (the workflow half; the worker's check is
    :class:`archmax_temporal.activities.store_check.StoreCheckInterceptor`). Workers and replayers
    both run it: it decides commands."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound
