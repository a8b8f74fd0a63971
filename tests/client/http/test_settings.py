"""The HTTP server's settings from the environment (tokens, secrets, files):
:mod:`archmax_temporal.client.http.settings`."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from archmax_temporal.client.http import ServeSettings
from archmax_temporal.workflows.errors import ConfigurationError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The Standard Webhooks reference libraries' test secret (24 bytes)."""

PADDED = "whsec_" + base64.b64encode(b"y" * 32).decode()
"""A secret whose base64 ends in ``=`` (a secrets line may use ``=`` as its separator too)."""


class TestSettings:
    def test_tokens_and_secrets_come_from_the_environment_and_files(self, tmp_path: Path) -> None:
        tokens = tmp_path / "tokens"
        tokens.write_text("# ops\nfile-token\n\n", encoding="utf-8")
        secrets = tmp_path / "secrets"
        secrets.write_text(f"support-inbox/email_received {SECRET}\nbilling/paid={PADDED}\n")
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
        assert settings.secrets == {"support-inbox/email_received": SECRET, "billing/paid": PADDED}
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

    @pytest.mark.parametrize("bad", ["no-slash {secret}", "ok/two s3cret"])
    def test_a_malformed_secrets_line_names_its_number(self, tmp_path: Path, bad: str) -> None:
        """A line that is not ``<slug>/<trigger> <secret>``, or whose secret is not a
        Standard Webhooks one: the error names the line, never the secret."""
        secrets = tmp_path / "secrets"
        secrets.write_text(f"ok/one {SECRET}\n{bad.format(secret=SECRET)}\n")
        with pytest.raises(ConfigurationError, match="line 2") as refused:
            ServeSettings.from_env({"ARCHMAX_SERVE_SECRETS_FILE": str(secrets)})
        assert "s3cret" not in str(refused.value)

    def test_a_notify_secret_must_be_a_webhook_secret(self) -> None:
        with pytest.raises(ConfigurationError, match="ARCHMAX_NOTIFY_SECRET"):
            ServeSettings.from_env(
                {"ARCHMAX_NOTIFY_URL": "http://x/", "ARCHMAX_NOTIFY_SECRET": "s"}
            )

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
