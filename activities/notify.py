"""``archmax.notify.send``: the worker POSTs a session's notification to its notification URL.

A human state's ``deadline`` (``workflows/deadlines.py``) sends ``approval.expiring`` (its
``warn``) and ``approval.expired`` (its ``onTimeout`` taken) from timers inside the session:
the session schedules this activity, so the delivery is as durable as the session (retried
by Temporal, handed on across continue-as-new). The worker is configured from its own
environment, at its entry point (:meth:`NotifyTarget.from_env`)::

    ARCHMAX_NOTIFY_URL      where to POST (unset: nothing is sent, nothing fails)
    ARCHMAX_NOTIFY_SECRET   the whsec_ secret that signs each POST (Standard Webhooks)

One attempt is one POST, signed anew (its own timestamp) under the message's ``webhook-id``,
which the session derived from its id and the decision, so every attempt and every run sends
the same id and a receiver applies the message once. A 2xx takes it; network errors, 408,
425, 429 and 5xx fail the attempt for Temporal to retry (``Retry-After`` sets the next
delay); any other answer is final (``NotificationRefusedError``, not retried).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.activities.webhooks import (
    RETRYABLE_STATUSES,
    check_secret,
    retry_after_seconds,
    signed_headers,
)
from archmax_temporal.workflows.contracts.notify import (
    NOTIFY_ACTIVITY,
    NOTIFY_REFUSED,
    NotifyInput,
    NotifyResult,
)
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.notifications import approval_body, encoded

NOTIFY_POST_TIMEOUT_SECONDS = 10.0
"""How long one POST may take (inside the attempt's own timeout)."""

log = get_logger("archmax.notify")


@dataclass(frozen=True)
class NotifyTarget:
    """Where a worker sends notifications, and the secret that signs them."""

    url: str
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        check_secret(self.secret, "ARCHMAX_NOTIFY_SECRET")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NotifyTarget | None:
        """The target ``ARCHMAX_NOTIFY_URL`` and ``ARCHMAX_NOTIFY_SECRET`` name; None when no
        URL is set. A URL without a secret, or a secret that is not a ``whsec_`` one, is a
        :class:`ConfigurationError` (notifications are always signed)."""
        env = os.environ if env is None else env
        url = (env.get("ARCHMAX_NOTIFY_URL") or "").strip()
        if not url:
            return None
        secret = (env.get("ARCHMAX_NOTIFY_SECRET") or "").strip()
        if not secret:
            raise ConfigurationError(
                "ARCHMAX_NOTIFY_URL is set without ARCHMAX_NOTIFY_SECRET: notifications are "
                "always signed"
            )
        return cls(url=url, secret=secret)


class NotifyActivities:
    """The notification activity, with the worker's target (None: it sends nothing)."""

    def __init__(
        self, target: NotifyTarget | None, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._target = target
        self._transport = transport

    @activity.defn(name=NOTIFY_ACTIVITY)
    async def send(self, request: NotifyInput) -> NotifyResult:
        """POST the notification once; raise for Temporal to try again, or to give up."""
        target = self._target
        if target is None:
            return NotifyResult(sent=False)
        body = encoded(approval_body(request.notice))
        headers = {
            "Content-Type": "application/json",
            **signed_headers(target.secret, body, message_id=request.message_id),
        }
        key, event = request.message_id, request.notice.event
        try:
            async with httpx.AsyncClient(
                timeout=NOTIFY_POST_TIMEOUT_SECONDS, transport=self._transport
            ) as client:
                response = await client.post(target.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("notification failed", key=key, notify_event=event, error=str(exc))
            raise ApplicationError(
                f"notification {key} not delivered: {type(exc).__name__}",
                type="NotificationFailedError",
            ) from None
        status = response.status_code
        if response.is_success:
            return NotifyResult(sent=True, status=status)
        if status in RETRYABLE_STATUSES:
            log.warning("notification deferred", key=key, notify_event=event, status=status)
            delay = retry_after_seconds(response.headers.get("retry-after"))
            raise ApplicationError(
                f"notification {key} deferred by the receiver (HTTP {status})",
                type="NotificationFailedError",
                next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
            )
        log.warning("notification refused", key=key, notify_event=event, status=status)
        raise ApplicationError(
            f"notification {key} refused by the receiver (HTTP {status})",
            type=NOTIFY_REFUSED,
            non_retryable=True,
        )
