"""What outbound notifications say: their ``webhook-id`` and their JSON body.

Two senders share it: ``archmax serve`` (``client/http/notify.py``: ``session.parked`` and
``turn.finished`` when a turn it ran settles) and the worker's ``archmax.notify.send`` activity
(``activities/notify.py``: ``approval.expiring`` and ``approval.expired``, scheduled by the
session when a human state's deadline warns or passes). Both sign with
:func:`archmax_temporal.activities.webhooks.signed_headers`. Pure: the session derives ids in
workflow code.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from archmax_temporal.workflows.models import ApprovalNotice

ID_PREFIX: Final = "ntf_"
"""Every notification's ``webhook-id`` starts so (the standard asks that an id hold no ``.``)."""


def notification_id(session_id: str, key: str) -> str:
    """The ``webhook-id`` of the notification ``key`` names on ``session_id`` (a firing's
    update id; ``approval.expired#3`` for a decision's deadline): the same wherever and
    however often it is sent, and free of the caller's text."""
    digest = hashlib.sha256(f"{session_id}\n{key}".encode()).hexdigest()
    return f"{ID_PREFIX}{digest[:32]}"


def approval_body(notice: ApprovalNotice) -> dict[str, Any]:
    """The JSON body of an approval notification, in archmax's camelCase::

    {"event": "approval.expiring", "sessionId": "...", "workflow": "refund-review",
     "state": "refund-review", "title": "Finance review", "seq": 1,
     "createdAt": "...", "dueAt": "2026-12-07T10:00:00Z", "onTimeout": "refund-closed",
     "transitions": [{"to": "refund-closed", "description": "...", "type": "approve"}],
     "handoff": "Your refund request for ORD-1001 is now with finance."}
    """
    body: dict[str, Any] = notice.model_dump(mode="json", by_alias=True)
    return body


def encoded(body: dict[str, Any]) -> bytes:
    """``body`` as the bytes a notification carries (and signs): compact JSON."""
    return json.dumps(body, separators=(",", ":")).encode()
