"""Who may call: bearer tokens on the API routes, Standard Webhooks signatures on trigger routes,
and the inbox's login cookie (a bearer token exchanged for it at ``/inbox/login``).

The login cookie never holds the token: it is ``v1.<issued>.<HMAC-SHA256(token, issued)>``,
verified against every configured token and valid for :data:`LOGIN_MAX_AGE`; removing a
token from the configuration ends its cookies too. A form that changes state carries a CSRF
token derived from the cookie (:func:`csrf_token`), which a page of another site cannot read.

A signed request follows Standard Webhooks (https://www.standardwebhooks.com), verified with
its reference library (``standardwebhooks``)::

    webhook-id: evt_2KWPBgLlAfxdpx2AI54pPJ85f4W     # the event's id, the same on every retry
    webhook-timestamp: 1767225600                    # unix seconds of this attempt
    webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>

The secret is ``whsec_<base64 of 24-64 random bytes>`` (the key is the decoded bytes). The id,
the timestamp and the body are all signed, and the id is the firing's idempotency key, so
neither a new timestamp nor a new key can be put on a captured request. The timestamp must be
within :data:`SIGNATURE_TOLERANCE` of the server's clock, and a signature that was already
received is refused for as long as it could verify (:class:`ReplayGuard`). Notifications the
server sends are signed the same way with ``ARCHMAX_NOTIFY_SECRET``, so a receiver verifies
them with any Standard Webhooks library.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import re
import secrets
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from standardwebhooks import Webhook, WebhookVerificationError

from archmax_temporal.activities.webhooks import ID_HEADER as ID_HEADER
from archmax_temporal.activities.webhooks import SECRET_BYTES as SECRET_BYTES
from archmax_temporal.activities.webhooks import SECRET_PREFIX as SECRET_PREFIX
from archmax_temporal.activities.webhooks import SIGNATURE_HEADER as SIGNATURE_HEADER
from archmax_temporal.activities.webhooks import TIMESTAMP_HEADER as TIMESTAMP_HEADER
from archmax_temporal.activities.webhooks import check_secret as check_secret
from archmax_temporal.activities.webhooks import signed_headers as signed_headers
from archmax_temporal.client.http.problems import (
    AuthenticationRequiredError,
    CsrfRejectedError,
    SignatureRejectedError,
)

SIGNED_HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)

SIGNATURE_TOLERANCE = 300
"""How far a signed request's timestamp may be from the server's clock, either way (seconds;
the standard's five minutes, which the reference library also enforces)."""

MESSAGE_ID = re.compile(r"^[\x21-\x7e]{1,200}$")
"""A ``webhook-id`` the server takes: 1-200 visible ASCII characters (it is the firing's
idempotency key, hence part of a Temporal update id)."""

_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")


def new_secret() -> str:
    """A fresh Standard Webhooks secret (32 random bytes)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class Signed:
    """A verified signature: the message id (the firing's idempotency key) and its
    timestamp."""

    message_id: str
    timestamp: int


def verify_signature(secret: str, headers: Mapping[str, str], body: bytes) -> Signed:
    """The verified message of ``body`` signed with ``secret``, timestamped within
    :data:`SIGNATURE_TOLERANCE`; otherwise :class:`SignatureRejectedError` (the reason names
    no secret material)."""
    given = {name: headers.get(name) for name in SIGNED_HEADERS}
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise SignatureRejectedError(
            f"a signed request needs {', '.join(SIGNED_HEADERS)} (missing: {', '.join(missing)})"
        )
    message_id = given[ID_HEADER] or ""
    raw_timestamp = given[TIMESTAMP_HEADER] or ""
    if not MESSAGE_ID.match(message_id):
        raise SignatureRejectedError(f"{ID_HEADER} must be 1-200 visible ASCII characters")
    if not _TIMESTAMP.match(raw_timestamp):
        raise SignatureRejectedError(f"{TIMESTAMP_HEADER} must be integer unix seconds")
    timestamp = int(raw_timestamp)
    if abs(time.time() - timestamp) > SIGNATURE_TOLERANCE:
        raise SignatureRejectedError(
            f"{TIMESTAMP_HEADER} is more than {SIGNATURE_TOLERANCE // 60} minutes from the "
            "server's clock (a replay, or a clock to fix)"
        )
    try:
        Webhook(secret).verify(body, {k: v or "" for k, v in given.items()}, json_parse=False)
    except WebhookVerificationError as exc:
        reason = str(exc)
        if "signature" in reason.lower():
            reason = "the signature does not match the id, timestamp and body"
        raise SignatureRejectedError(reason) from None
    return Signed(message_id, timestamp)


class ReplayGuard:
    """The signatures this process has received, each remembered until its timestamp leaves
    the tolerance window (after which it no longer verifies anyway): a captured request sent
    again is refused instead of being taken twice.

    It is this process's memory: a replay sent to another ``archmax serve`` process gets past
    it, and is then the same firing (its ``webhook-id`` is the idempotency key), which the
    session applies once."""

    def __init__(self, tolerance: int = SIGNATURE_TOLERANCE) -> None:
        self._tolerance = tolerance
        self._seen: set[tuple[str, str, int]] = set()
        self._expiry: list[tuple[float, tuple[str, str, int]]] = []

    def admit(self, scope: str, signed: Signed, *, now: float | None = None) -> None:
        """Remember ``signed`` (received for ``scope``, the trigger); refuse it when it was
        received before."""
        current = time.time() if now is None else now
        while self._expiry and self._expiry[0][0] < current:
            self._seen.discard(heapq.heappop(self._expiry)[1])
        entry = (scope, signed.message_id, signed.timestamp)
        if entry in self._seen:
            raise SignatureRejectedError(
                f"this signed request ({ID_HEADER} {signed.message_id!r}, {TIMESTAMP_HEADER} "
                f"{signed.timestamp}) was already received: a sender retries with a new "
                f"{TIMESTAMP_HEADER} and signature"
            )
        self._seen.add(entry)
        heapq.heappush(self._expiry, (signed.timestamp + self._tolerance + 1, entry))

    def __len__(self) -> int:
        return len(self._seen)


def check_bearer(tokens: Collection[str], authorization: str | None) -> str:
    """The token of ``authorization`` (``Bearer <token>``) when it is a configured one."""
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
    return offered.decode()


def caller_of_token(token: str) -> str:
    """A caller's identity from its bearer token: a digest, never the token itself."""
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]


LOGIN_COOKIE = "archmax_inbox"
LOGIN_MAX_AGE = 12 * 3600
"""How long a login lasts (seconds): then the inbox asks for the token again."""

_LOGIN = re.compile(r"^v1\.([0-9]{1,12})\.([A-Za-z0-9_-]{43})$")


def _mac(token: str, message: str) -> str:
    digest = hmac.new(token.encode(), message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def login_cookie(token: str, *, now: float | None = None) -> str:
    """The login cookie's value for ``token``, issued now: opaque, never the token."""
    issued = int(time.time() if now is None else now)
    return f"v1.{issued}.{_mac(token, f'login.{issued}')}"


def check_login_cookie(
    tokens: Collection[str],
    value: str | None,
    *,
    now: float | None = None,
    max_age: int = LOGIN_MAX_AGE,
) -> str:
    """The configured token whose login cookie ``value`` is, issued within ``max_age``;
    otherwise :class:`AuthenticationRequiredError`."""
    found = _LOGIN.match(value or "")
    if found is None:
        raise AuthenticationRequiredError("no login: sign in at /inbox/login")
    issued = int(found.group(1))
    age = (time.time() if now is None else now) - issued
    if not -60 <= age <= max_age:
        raise AuthenticationRequiredError("the login has expired: sign in again")
    offered = found.group(2).encode()
    matched: str | None = None
    for known in tokens:  # every token compared, no early exit
        if hmac.compare_digest(_mac(known, f"login.{issued}").encode(), offered):
            matched = known
    if matched is None:
        raise AuthenticationRequiredError("the login is not one this server accepts")
    return matched


def csrf_token(token: str, cookie: str) -> str:
    """The CSRF token of the forms a login (``cookie``, issued for ``token``) is shown."""
    return _mac(token, f"csrf.{cookie}")


def check_csrf(token: str, cookie: str, offered: str | None) -> None:
    """Refuse a form whose CSRF token is not its login's (:class:`CsrfRejectedError`)."""
    if not offered or not hmac.compare_digest(csrf_token(token, cookie).encode(), offered.encode()):
        raise CsrfRejectedError("the form is not one this login was shown: reload the page")
