"""``archmax.notify.send``: one outbound notification (``approval.expiring``,
``approval.expired``) POSTed by the worker to its ``ARCHMAX_NOTIFY_URL``, signed with its
``ARCHMAX_NOTIFY_SECRET`` (``activities/notify.py``); a worker with no URL sends nothing and
answers ``sent: false``."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.contracts.base import ActivityContract
from archmax_temporal.workflows.models import NotifyInput as NotifyInput
from archmax_temporal.workflows.models import NotifyResult as NotifyResult

NOTIFY_ACTIVITY: Final = "archmax.notify.send"
"""POSTs one signed notification to the worker's notification URL."""

NOTIFY_ATTEMPT_TIMEOUT: Final = timedelta(seconds=30)
"""One attempt: one POST (the client gives up on a silent receiver after 10 s)."""

NOTIFY_GIVE_UP: Final = timedelta(hours=24)
"""How long a notification is retried before it is given up (and logged by the session): a
receiver down for a day has a deadline's worth of news to reconcile from the session list."""

NOTIFY_REFUSED: Final = "NotificationRefusedError"
"""The error type of a receiver's final refusal (a 4xx other than 408, 425 and 429): not
retried."""

NOTIFY_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=10),
    non_retryable_error_types=[NOTIFY_REFUSED],
)
"""Network errors, 408, 425, 429 and 5xx are tried again (a ``Retry-After`` sets the next
delay) until :data:`NOTIFY_GIVE_UP`; every attempt carries the same ``webhook-id``, so a
receiver that took an earlier one applies the message once."""

CONTRACT: Final = ActivityContract(
    NOTIFY_ACTIVITY, NotifyInput, NotifyResult, "send an outbound notification"
)


async def send(request: NotifyInput, *, summary: str) -> NotifyResult:
    """Schedule the notification's delivery and wait for it (an ``ActivityError`` when it
    was refused or given up)."""
    result: NotifyResult = await workflow.execute_activity(
        NOTIFY_ACTIVITY,
        request,
        result_type=NotifyResult,
        start_to_close_timeout=NOTIFY_ATTEMPT_TIMEOUT,
        schedule_to_close_timeout=NOTIFY_GIVE_UP,
        retry_policy=NOTIFY_RETRY,
        summary=summary,
    )
    return result
