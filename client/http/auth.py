"""Who may call: bearer tokens on the API routes, provider-style signatures on trigger routes.

A signed request carries two headers::

    X-Archmax-Timestamp: 1767225600               # unix seconds when it was sent
    X-Archmax-Signature: sha256=<hex>              # HMAC-SHA256(secret, "<timestamp>." + body)

The timestamp is inside what is signed, so a captured request cannot be replayed with a fresh
one; it must be within five minutes of the server's clock. The comparison is constant-time
(:func:`hmac.compare_digest`). Notifications the server sends are signed the same way with
``ARCHMAX_NOTIFY_SECRET``, so a receiver verifies them with the same few lines.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Collection, Mapping

from archmax_temporal.client.http.problems import (
    AuthenticationRequiredError,
    SignatureRejectedError,
)

SIGNATURE_HEADER = "X-Archmax-Signature"
TIMESTAMP_HEADER = "X-Archmax-Timestamp"
SCHEME = "sha256="


def signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Archmax-Signature`` value of ``body`` sent at ``timestamp``."""
    message = f"{timestamp}.".encode() + body
    return SCHEME + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The two headers that sign ``body`` now."""
    timestamp = int(time.time() if now is None else now)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


def verify_signature(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    window: int,
    now: float | None = None,
) -> None:
    """Return when ``body`` is signed with ``secret`` within the replay window; otherwise
    :class:`SignatureRejectedError` (the reason names no secret material)."""
    raw_timestamp = headers.get(TIMESTAMP_HEADER.lower()) or headers.get(TIMESTAMP_HEADER)
    given = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER)
    if not raw_timestamp or not given:
        raise SignatureRejectedError(
            f"a signed request needs both {TIMESTAMP_HEADER} and {SIGNATURE_HEADER}"
        )
    try:
        timestamp = int(raw_timestamp)
    except ValueError:
        raise SignatureRejectedError(f"{TIMESTAMP_HEADER} must be unix seconds") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > window:
        raise SignatureRejectedError(
            f"{TIMESTAMP_HEADER} is outside the {window // 60}-minute replay window"
        )
    expected = signature(secret, raw_timestamp, body)
    if not hmac.compare_digest(expected.encode(), given.strip().encode()):
        raise SignatureRejectedError("the signature does not match the body")


def check_bearer(tokens: Collection[str], authorization: str | None) -> None:
    """Return when ``authorization`` is ``Bearer <token>`` with a configured token."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationRequiredError("this route needs 'Authorization: Bearer <token>'")
    offered = token.strip().encode()
    # Compare against every token (no early exit): the time taken says nothing.
    matched = False
    for known in tokens:
        matched |= hmac.compare_digest(known.encode(), offered)
    if not matched:
        raise AuthenticationRequiredError("the bearer token is not one this server accepts")
