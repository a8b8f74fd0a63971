"""The HTTP layer's pure parts: settings from the environment, signatures, the wire format."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from archmax_temporal.client.http import ServeSettings, signature, signed_headers
from archmax_temporal.client.http.auth import check_bearer, verify_signature
from archmax_temporal.client.http.openapi import openapi_document
from archmax_temporal.client.http.problems import (
    AuthenticationRequiredError,
    SignatureRejectedError,
)
from archmax_temporal.client.http.wire import to_wire
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import Outcome, PendingInput, Variable


class TestSettings:
    def test_tokens_and_secrets_come_from_the_environment_and_files(self, tmp_path: Path) -> None:
        tokens = tmp_path / "tokens"
        tokens.write_text("# ops\nfile-token\n\n", encoding="utf-8")
        secrets = tmp_path / "secrets"
        secrets.write_text("support-inbox/email_received s3cret\nbilling/paid=x=y\n")
        settings = ServeSettings.from_env(
            {
                "ARCHMAX_SERVE_TOKENS": "a, b,,",
                "ARCHMAX_SERVE_TOKENS_FILE": str(tokens),
                "ARCHMAX_SERVE_SECRETS_FILE": str(secrets),
                "ARCHMAX_SERVE_MAX_BODY": "2048",
            },
            host="0.0.0.0",
            port=9000,
        )
        assert settings.tokens == {"a", "b", "file-token"}
        assert settings.secrets == {"support-inbox/email_received": "s3cret", "billing/paid": "x=y"}
        assert (settings.host, settings.port, settings.max_body) == ("0.0.0.0", 9000, 2048)
        settings.check_exposure()

    @pytest.mark.parametrize(
        "env",
        [
            {"ARCHMAX_SERVE_MAX_BODY": "lots"},
            {"ARCHMAX_SERVE_TOKENS_FILE": "/nonexistent/tokens"},
        ],
    )
    def test_unusable_values_name_their_variable(self, env: dict[str, str]) -> None:
        with pytest.raises(ConfigurationError, match=next(iter(env))):
            ServeSettings.from_env(env)

    def test_a_malformed_secrets_line_names_its_number(self, tmp_path: Path) -> None:
        secrets = tmp_path / "secrets"
        secrets.write_text("ok/one s\nno-slash secret\n")
        with pytest.raises(ConfigurationError, match="line 2"):
            ServeSettings.from_env({"ARCHMAX_SERVE_SECRETS_FILE": str(secrets)})

    @pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
    def test_loopback_needs_no_token(self, host: str) -> None:
        ServeSettings(host=host).check_exposure()

    @pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.internal"])
    def test_anything_else_needs_tokens(self, host: str) -> None:
        with pytest.raises(ConfigurationError, match="without bearer tokens"):
            ServeSettings(host=host).check_exposure()

    def test_notifications_are_always_signed(self) -> None:
        with pytest.raises(ConfigurationError, match="ARCHMAX_NOTIFY_SECRET"):
            ServeSettings(notify_url="http://127.0.0.1:9/hook").check_exposure()


class TestSignatures:
    def test_a_signature_covers_the_timestamp_and_the_body(self) -> None:
        body = b'{"a":1}'
        headers = {k.lower(): v for k, v in signed_headers("s", body).items()}
        verify_signature("s", headers, body, window=300)
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature("s", headers, body + b" ", window=300)
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature("other", headers, body, window=300)
        moved = {**headers, "x-archmax-timestamp": str(int(headers["x-archmax-timestamp"]) + 1)}
        with pytest.raises(SignatureRejectedError, match="does not match"):
            verify_signature("s", moved, body, window=300)

    def test_the_replay_window_is_five_minutes_either_way(self) -> None:
        body = b"{}"
        now = time.time()
        for skew, ok in ((-299, True), (299, True), (-301, False), (301, False)):
            headers = {k.lower(): v for k, v in signed_headers("s", body, now=now + skew).items()}
            if ok:
                verify_signature("s", headers, body, window=300, now=now)
            else:
                with pytest.raises(SignatureRejectedError, match="replay window"):
                    verify_signature("s", headers, body, window=300, now=now)

    def test_missing_or_malformed_headers(self) -> None:
        with pytest.raises(SignatureRejectedError, match="needs both"):
            verify_signature("s", {"x-archmax-signature": signature("s", 1, b"")}, b"", window=300)
        with pytest.raises(SignatureRejectedError, match="unix seconds"):
            verify_signature(
                "s", {"x-archmax-timestamp": "soon", "x-archmax-signature": "x"}, b"", window=300
            )

    def test_bearer_tokens(self) -> None:
        check_bearer({"a", "b"}, "Bearer b")
        check_bearer({"a"}, "bearer a")
        for header in (None, "", "Bearer", "Basic a", "Bearer c"):
            with pytest.raises(AuthenticationRequiredError):
                check_bearer({"a"}, header)


class TestWire:
    def test_field_names_are_camel_cased_and_data_keys_are_not(self) -> None:
        outcome = Outcome(
            session_id="s-1",
            kind="parked",
            disposition="turn",
            status="awaiting_input",
            parked_channel="input",
            pending=PendingInput(
                state="clarify",
                reason="waiting",
                parked_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            ),
            variables={"conversation_id": Variable(value={"nested_key": 1}, locked=True)},
        )
        wire = to_wire(outcome)
        assert wire["sessionId"] == "s-1" and wire["parkedChannel"] == "input"
        assert wire["pending"]["parkedAt"] == "2026-01-02T03:04:05Z"
        assert wire["variables"] == {
            "conversation_id": {"value": {"nested_key": 1}, "locked": True}
        }

    def test_the_document_describes_exactly_what_to_wire_writes(self) -> None:
        schemas = openapi_document()["components"]["schemas"]
        outcome = Outcome(session_id="s", kind="completed", disposition="turn", status="completed")
        assert set(to_wire(outcome)) == set(schemas["Outcome"]["properties"])
        pending = schemas["PendingInput"]["properties"]
        assert {"parkedAt", "resumeAt"} <= set(pending)
