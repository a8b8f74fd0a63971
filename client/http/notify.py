"""The way out: a signed POST to ``ARCHMAX_NOTIFY_URL`` when a turn the server ran settles.

The body says what a receiver acts on without asking back::

    {"event": "session.parked" | "turn.finished", "sessionId": "...", "kind": "parked",
     "status": "awaiting_input", "state": "clarify", "channel": "input",
     "question": "Which order is this about?", "handoff": null,
     "resumeAt": "2026-01-02T09:00:00Z", "outcome": {...the Outcome...}}

``question`` is the agent's message when it parked for input, ``handoff`` its message to the
person when it parked at a human state. Each POST is signed as Standard Webhooks asks
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; see :mod:`.auth`). Its
``webhook-id`` is derived from the session id and the firing's update id: the same on every
retry of the notification and whichever server process sends it, so a receiver applies it once;
and this process sends one notification per firing, however often the firing is retried.
Network errors, 408, 429 and 5xx are retried with backoff (``Retry-After`` honoured).

This runs host-side, in the server that ran the turn: a notification still retrying when the
server stops is lost; a receiver can reconcile from ``GET /v1/sessions``. (The notifications of
a human state's deadline, ``approval.expiring`` and ``approval.expired``, are durable: the
session schedules them as the worker's ``archmax.notify.send`` activity,
``activities/notify.py``.) The id, the body's encoding and the signature are shared with that
activity (:mod:`archmax_temporal.workflows.notifications`,
:mod:`archmax_temporal.activities.webhooks`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import Any

import httpx

from archmax_temporal.activities.logs import get_logger
from archmax_temporal.activities.webhooks import (
    RETRYABLE_STATUSES,
    retry_after_seconds,
    signed_headers,
)
from archmax_temporal.client.http.wire import to_wire
from archmax_temporal.workflows.models import Outcome, PendingInput
from archmax_temporal.workflows.notifications import encoded
from archmax_temporal.workflows.notifications import notification_id as notification_id

NOTIFY_ATTEMPTS = 5
"""How many times one notification is tried before it is given up (and logged)."""

NOTIFY_BACKOFF_SECONDS = 0.5
"""The first retry's delay; each later one doubles it."""

NOTIFY_MAX_DELAY_SECONDS = 30.0
"""The longest delay between two attempts, ``Retry-After`` included."""

NOTIFY_TIMEOUT_SECONDS = 10.0
"""How long one attempt may take."""

SHUTDOWN_GRACE_SECONDS = 5.0
"""How long a stopping server waits for notifications still in flight."""

SENT_MEMORY = 10_000
"""How many notifications' ids one server process remembers, to send each only once."""

log = get_logger("archmax.http.notify")


def notification(outcome: Outcome) -> dict[str, Any]:
    """The body of the notification ``outcome`` calls for."""
    parked = outcome.kind == "parked"
    pending = outcome.pending
    resume_at = pending.resume_at if isinstance(pending, PendingInput) else None
    said = outcome.reply or None
    return {
        "event": "session.parked" if parked else "turn.finished",
        "sessionId": outcome.session_id,
        "kind": outcome.kind,
        "status": outcome.status,
        "state": outcome.state,
        "channel": outcome.parked_channel,
        "question": said if parked and outcome.parked_channel == "input" else None,
        "handoff": said if parked and outcome.parked_channel == "decision" else None,
        "resumeAt": to_wire(resume_at),
        "outcome": to_wire(outcome),
    }


class Notifier:
    """Sends notifications in the background; :meth:`aclose` waits for those in flight."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        attempts: int = NOTIFY_ATTEMPTS,
        backoff: float = NOTIFY_BACKOFF_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        self._secret = secret
        self._attempts = attempts
        self._backoff = backoff
        self._client = httpx.AsyncClient(timeout=NOTIFY_TIMEOUT_SECONDS, transport=transport)
        self._tasks: set[asyncio.Task[bool]] = set()
        self._sent: OrderedDict[str, None] = OrderedDict()

    def outcome(self, outcome: Outcome, *, key: str) -> None:
        """Notify of ``outcome`` (the settled turn of the firing whose update id is ``key``),
        unless this firing's notification was sent already (a retried firing)."""
        message_id = notification_id(outcome.session_id, key)
        if message_id in self._sent:
            return
        self._sent[message_id] = None
        while len(self._sent) > SENT_MEMORY:
            self._sent.popitem(last=False)
        body = encoded(notification(outcome))
        task = asyncio.get_running_loop().create_task(self.post(body, message_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def post(self, body: bytes, key: str) -> bool:
        """POST ``body`` as message ``key`` until it is taken (2xx) or refused for good;
        whether it was taken. Each attempt is signed anew (its own timestamp)."""
        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            headers = {
                "Content-Type": "application/json",
                **signed_headers(self._secret, body, message_id=key),
            }
            retry_after: float | None = None
            try:
                response = await self._client.post(self._url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                log.warning("notification failed", key=key, attempt=attempt, error=str(exc))
            else:
                if response.is_success:
                    return True
                if response.status_code not in RETRYABLE_STATUSES:
                    log.warning("notification refused", key=key, status=response.status_code)
                    return False
                retry_after = retry_after_seconds(response.headers.get("retry-after"))
                log.warning("notification deferred", key=key, status=response.status_code)
            if attempt < self._attempts:
                await asyncio.sleep(min(retry_after or delay, NOTIFY_MAX_DELAY_SECONDS))
                delay *= 2
        log.error("notification given up", key=key, attempts=self._attempts)
        return False

    async def aclose(self) -> None:
        """Wait a little for notifications in flight, then stop."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=SHUTDOWN_GRACE_SECONDS)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._client.aclose()
