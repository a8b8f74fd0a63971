"""What ``archmax serve`` is configured with: where it listens, who may call it, where it
reports. Read once from the environment at the entry point, never from ``workflow.yaml``:
tokens and secrets are the deployment's, not the authored workflow's.

============================  ==================================================================
``ARCHMAX_SERVE_TOKENS``      bearer tokens the API routes accept, comma-separated
``ARCHMAX_SERVE_TOKENS_FILE`` a file of tokens, one a line (``#`` comments); added to the above
``ARCHMAX_SERVE_SECRETS_FILE`` webhook secrets: ``<slug>/<trigger> whsec_...`` a line (or ``=``);
                              a trigger with a secret also takes requests signed with it
                              (Standard Webhooks, :mod:`.auth`), no token needed
``ARCHMAX_SERVE_MAX_BODY``    request body limit in bytes (default 1 MiB); over it: 413
``ARCHMAX_SERVE_SESSION_PATH`` the server's session path (step 3 of the seed's precedence)
``ARCHMAX_NOTIFY_URL``        receives a signed POST when a turn the server ran settles
``ARCHMAX_NOTIFY_SECRET``     signs those POSTs (a ``whsec_`` secret, Standard Webhooks)
============================  ==================================================================
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from archmax_temporal.client.http.auth import check_secret
from archmax_temporal.workflows.errors import ConfigurationError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_BODY = 1024 * 1024
"""1 MiB: well under Temporal's 2 MB payload limit, even base64-encoded files included."""


@dataclass(frozen=True)
class ServeSettings:
    """The HTTP server's configuration, resolved."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    tokens: frozenset[str] = frozenset()
    secrets: Mapping[str, str] = field(default_factory=dict)
    """``"<slug>/<trigger>"`` → the webhook secret that trigger's signed requests use."""
    max_body: int = DEFAULT_MAX_BODY
    session_path: str | None = None
    notify_url: str | None = None
    notify_secret: str | None = None

    def __post_init__(self) -> None:
        for key, secret in self.secrets.items():
            check_secret(secret, f"the webhook secret of {key}")
        if self.notify_secret:
            check_secret(self.notify_secret, "ARCHMAX_NOTIFY_SECRET")

    @property
    def auth_enabled(self) -> bool:
        """Whether the API routes require a bearer token (whenever tokens are configured)."""
        return bool(self.tokens)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
    ) -> ServeSettings:
        """The settings the environment describes; ``host``/``port`` from the command line."""
        env = os.environ if env is None else env
        tokens = {t.strip() for t in (env.get("ARCHMAX_SERVE_TOKENS") or "").split(",")}
        tokens_file = env.get("ARCHMAX_SERVE_TOKENS_FILE")
        if tokens_file:
            tokens |= set(_lines(tokens_file, "ARCHMAX_SERVE_TOKENS_FILE"))
        secrets_file = env.get("ARCHMAX_SERVE_SECRETS_FILE")
        secrets = _secrets(secrets_file) if secrets_file else {}
        return cls(
            host=host or DEFAULT_HOST,
            port=DEFAULT_PORT if port is None else port,
            tokens=frozenset(t for t in tokens if t),
            secrets=secrets,
            max_body=_positive(env, "ARCHMAX_SERVE_MAX_BODY", DEFAULT_MAX_BODY),
            session_path=env.get("ARCHMAX_SERVE_SESSION_PATH") or None,
            notify_url=env.get("ARCHMAX_NOTIFY_URL") or None,
            notify_secret=env.get("ARCHMAX_NOTIFY_SECRET") or None,
        )

    def check_exposure(self) -> None:
        """Refuse to listen beyond loopback without tokens: auth is off by default only there.
        The message is the one line ``archmax serve`` prints."""
        if not self.tokens and not is_loopback(self.host):
            raise ConfigurationError(
                f"refusing to serve on {self.host} without bearer tokens: set "
                "ARCHMAX_SERVE_TOKENS (or ARCHMAX_SERVE_TOKENS_FILE), or bind to 127.0.0.1"
            )
        if self.notify_url and not self.notify_secret:
            raise ConfigurationError(
                "ARCHMAX_NOTIFY_URL is set without ARCHMAX_NOTIFY_SECRET: notifications are "
                "always signed"
            )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _lines(path: str, variable: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{variable}: cannot read {path!r} ({exc.strerror})") from None
    stripped = (line.strip() for line in text.splitlines())
    return [line for line in stripped if line and not line.startswith("#")]


_SECRET_LINE = re.compile(r"^([^\s=]+)(?:\s*=\s*|\s+)(\S+)$")


def _secrets(path: str) -> dict[str, str]:
    """``<slug>/<trigger> <secret>`` (or ``<slug>/<trigger>=<secret>``) a line; the secret's
    own base64 may end in ``=``."""
    secrets: dict[str, str] = {}
    for number, line in enumerate(_lines(path, "ARCHMAX_SERVE_SECRETS_FILE"), 1):
        found = _SECRET_LINE.match(line)
        key, secret = found.groups() if found else ("", "")
        slug, slash, trigger = key.partition("/")
        if not (slug and slash and trigger and secret.strip()):
            raise ConfigurationError(
                f"ARCHMAX_SERVE_SECRETS_FILE line {number}: expected '<slug>/<trigger> <secret>'"
            )
        secrets[key] = check_secret(secret.strip(), f"ARCHMAX_SERVE_SECRETS_FILE line {number}")
    return secrets


def _positive(env: Mapping[str, str], variable: str, default: int) -> int:
    raw = env.get(variable)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigurationError(f"{variable} must be a positive number of bytes, not {raw!r}")
    return value
