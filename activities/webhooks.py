"""Outbound webhooks, as both senders make them: the Standard Webhooks signature, and which
answers are worth another attempt.

``archmax serve``'s notifier (``client/http/notify.py``) and the worker's
``archmax.notify.send`` activity (:mod:`.notify`) sign every POST with
:func:`signed_headers`: ``webhook-id`` (the message's id, the same on every attempt),
``webhook-timestamp`` (unix seconds of this attempt) and ``webhook-signature: v1,<base64
HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``, the key being the ``whsec_`` secret's base64
decoded (https://www.standardwebhooks.com). Any Standard Webhooks library verifies them.
"""

from __future__ import annotations

import base64
import binascii
import time
from datetime import UTC, datetime
from typing import Final

from standardwebhooks import Webhook

from archmax_temporal.workflows.errors import ConfigurationError

ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"

SECRET_PREFIX: Final = "whsec_"
SECRET_BYTES: Final = (24, 64)
"""The decoded length a secret may have (Standard Webhooks: at least 192 bits, at most 512)."""

RETRYABLE_STATUSES: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
"""Answers a receiver may give to a message it will take later: tried again. Any other
non-2xx answer refuses the message for good."""


def check_secret(secret: str, where: str) -> str:
    """``secret`` when it is a Standard Webhooks secret (``whsec_`` and base64 of 24-64
    bytes); otherwise :class:`ConfigurationError` naming ``where`` (never the secret)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        key = base64.b64decode(padded, validate=True) if secret.startswith(SECRET_PREFIX) else b""
    except (binascii.Error, ValueError):
        key = b""
    low, high = SECRET_BYTES
    if not low <= len(key) <= high:
        raise ConfigurationError(
            f"{where}: a webhook secret is '{SECRET_PREFIX}' and the base64 of {low}-{high} "
            "random bytes (make one with: echo whsec_$(openssl rand -base64 32))"
        )
    return secret


def signed_headers(
    secret: str, body: bytes, *, message_id: str, now: float | None = None
) -> dict[str, str]:
    """The three headers that sign ``body`` as message ``message_id``, sent now."""
    timestamp = int(time.time() if now is None else now)
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(timestamp, UTC), body)
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature,
    }


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header's delay in seconds (never negative), or None when there is
    none or it is not a number of seconds."""
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None
