"""Bearer tokens and webhook signatures (Standard Webhooks), replays refused:
:mod:`archmax_temporal.client.http.auth`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest

from archmax_temporal.client.http import new_secret, signed_headers
from archmax_temporal.client.http.auth import (
    ReplayGuard,
    Signed,
    check_bearer,
    check_secret,
    verify_signature,
)
from archmax_temporal.client.http.problems import (
    AuthenticationRequiredError,
    SignatureRejectedError,
)
from archmax_temporal.workflows.errors import ConfigurationError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The Standard Webhooks reference libraries' test secret (24 bytes)."""

PADDED = "whsec_" + base64.b64encode(b"y" * 32).decode()
"""A secret whose base64 ends in ``=`` (a secrets line may use ``=`` as its separator too)."""


def _signed(body: bytes, message_id: str = "msg_1", now: float | None = None) -> dict[str, str]:
    return signed_headers(SECRET, body, message_id=message_id, now=now)


class TestSignatures:
    def test_the_published_test_vector(self) -> None:
        """The Standard Webhooks libraries' own vector: this id, timestamp, body and secret
        sign to exactly this ``v1`` signature."""
        headers = signed_headers(
            SECRET,
            b'{"test": 2432232314}',
            message_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
            now=1614265330,
        )
        assert headers == {
            "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "webhook-timestamp": "1614265330",
            "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        }

    def test_the_scheme_is_hmac_sha256_of_id_timestamp_and_body(self) -> None:
        """Computed by hand from the spec: base64(HMAC-SHA256(key, "id.timestamp.body"))."""
        body = b'{"a":1}'
        headers = _signed(body, "evt-7")
        key = base64.b64decode(SECRET.removeprefix("whsec_"))
        signed = f"evt-7.{headers['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        assert headers["webhook-signature"] == f"v1,{expected}"
        assert verify_signature(SECRET, headers, body) == Signed(
            "evt-7", int(headers["webhook-timestamp"])
        )

    def test_the_id_the_timestamp_and_the_body_are_all_covered(self) -> None:
        body = b'{"a":1}'
        headers = _signed(body, "evt-1")
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature(SECRET, headers, body + b" ")
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature(SECRET, {**headers, "webhook-id": "evt-2"}, body)
        moved = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) + 1)}
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature(SECRET, moved, body)
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature(new_secret(), headers, body)

    def test_the_tolerance_is_five_minutes_either_way(self) -> None:
        body = b"{}"
        now = time.time()
        for skew, ok in ((-290, True), (290, True), (-310, False), (310, False)):
            headers = _signed(body, now=now + skew)
            if ok:
                verify_signature(SECRET, headers, body)
            else:
                with pytest.raises(SignatureRejectedError, match="5 minutes"):
                    verify_signature(SECRET, headers, body)

    def test_a_rotated_secret_signs_beside_the_old_one(self) -> None:
        """``webhook-signature`` may list several signatures (secret rotation): one that
        verifies is enough."""
        body = b"{}"
        old = _signed(body)
        other = signed_headers(new_secret(), body, message_id="msg_1")["webhook-signature"]
        both = {**old, "webhook-signature": f"{other} {old['webhook-signature']}"}
        verify_signature(SECRET, both, body)

    def test_missing_or_malformed_headers(self) -> None:
        headers = _signed(b"")
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
            partial = {k: v for k, v in headers.items() if k != name}
            with pytest.raises(SignatureRejectedError, match=f"missing: {name}"):
                verify_signature(SECRET, partial, b"")
        for timestamp in ("soon", "1.7e9", "-5"):
            with pytest.raises(SignatureRejectedError, match="integer unix seconds"):
                verify_signature(SECRET, {**headers, "webhook-timestamp": timestamp}, b"")
        with pytest.raises(SignatureRejectedError, match="visible ASCII"):
            verify_signature(SECRET, {**headers, "webhook-id": "has space"}, b"")

    @pytest.mark.parametrize(
        "secret",
        [
            "s3cret",  # no prefix
            "whsec_not base64!",
            "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short
            "whsec_" + base64.b64encode(b"x" * 65).decode(),  # too long
        ],
    )
    def test_a_secret_is_whsec_and_24_to_64_bytes(self, secret: str) -> None:
        with pytest.raises(ConfigurationError, match="whsec_") as refused:
            check_secret(secret, "ARCHMAX_NOTIFY_SECRET")
        assert secret not in str(refused.value)
        assert check_secret(new_secret(), "x").startswith("whsec_")
        assert check_secret(PADDED.rstrip("="), "x")  # unpadded base64 is taken

    def test_a_signature_is_taken_once_within_its_window(self) -> None:
        """The guard refuses a signature it has seen (same trigger, id and timestamp) until
        the timestamp leaves the window; a re-signed retry of the same id is another
        signature, and another trigger's is its own."""
        guard = ReplayGuard(tolerance=300)
        now = 1_800_000_000.0
        first = Signed("evt-1", int(now))
        guard.admit("inbox/mail", first, now=now)
        with pytest.raises(SignatureRejectedError, match="already received"):
            guard.admit("inbox/mail", first, now=now + 299)
        guard.admit("inbox/mail", Signed("evt-1", int(now) + 5), now=now + 5)  # re-signed
        guard.admit("billing/paid", first, now=now + 10)
        guard.admit("inbox/mail", Signed("evt-2", int(now) + 400), now=now + 400)
        assert len(guard) == 1  # the others expired with their window
        guard.admit("inbox/mail", first, now=now + 400)  # stale by now: verify refuses it

    def test_bearer_tokens(self) -> None:
        check_bearer({"a", "b"}, "Bearer b")
        check_bearer({"a"}, "bearer a")
        for header in (None, "", "Bearer", "Basic a", "Bearer c"):
            with pytest.raises(AuthenticationRequiredError):
                check_bearer({"a"}, header)
