"""Logging set-up, done once at each entry point (never at import, never by the library).

Every line goes to stderr, so stdout stays data only. ``ARCHMAX_LOG_FORMAT=json`` writes one
JSON object per line (for a log pipeline); otherwise lines are readable key-value, coloured
on a terminal. ``--verbose`` (or ``ARCHMAX_LOG_LEVEL``) shows per-call lines such as each
model call's state, attempt and tokens.

Lines from structlog loggers and from the standard library's ``logging`` (Temporal's
``workflow.logger`` and ``activity.logger`` included) go through one chain: the session's
fields are lifted out of Temporal's extras (``session_id`` = the workflow id, ``run_id``,
``workflow``, ``state``), and every value that holds a secret known to this process (a
model or Temporal API key, a password or token from the environment) is masked.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["console", "json"]

FORMAT_ENV: Final = "ARCHMAX_LOG_FORMAT"
LEVEL_ENV: Final = "ARCHMAX_LOG_LEVEL"

SECRET_ENV_SUFFIXES: Final = (
    "_API_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_ACCESS_KEY",  # AWS_SECRET_ACCESS_KEY
    "_ACCOUNT_KEY",  # AZURE_STORAGE_ACCOUNT_KEY, GOOGLE_SERVICE_ACCOUNT_KEY
)
"""Environment variables whose values are secrets: never written to a log line."""

SECRET_FIELDS: Final = frozenset(
    {"api_key", "apikey", "authorization", "password", "secret", "token", "access_token"}
)
"""Field names whose values are masked whatever they hold."""

MASK: Final = "[redacted]"

_MIN_SECRET_LENGTH = 6
"""Shorter values are not masked inside other text (``on``, ``1`` would mangle lines)."""


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now, so a configuration made once never holds on
    to a stream that was later replaced (and closed)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def secrets_from_env(env: Mapping[str, str]) -> list[str]:
    """The secret values of ``env`` (``*_API_KEY``, ``*_TOKEN``, ...), longest first."""
    found = {
        value
        for name, value in env.items()
        if name.upper().endswith(SECRET_ENV_SUFFIXES) and len(value) >= _MIN_SECRET_LENGTH
    }
    return sorted(found, key=len, reverse=True)


class RedactSecrets:
    """A processor masking known secret values anywhere in a line, and secret-named fields."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = [s for s in secrets if len(s) >= _MIN_SECRET_LENGTH]

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self._secrets:
                if secret in value:
                    value = value.replace(secret, MASK)
            return value
        if isinstance(value, dict):
            return {k: MASK if _secret_field(k) else self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._clean(v) for v in value)
        if isinstance(value, BaseException | bytes):
            return self._clean(str(value))
        return value

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        for key in list(event):
            event[key] = MASK if _secret_field(key) else self._clean(event[key])
        return event


def _secret_field(name: object) -> bool:
    return isinstance(name, str) and name.lower().replace("-", "_") in SECRET_FIELDS


_TEMPORAL_WORKFLOW_FIELDS: Final = (("workflow_id", "session_id"), ("run_id", "run_id"))
_TEMPORAL_ACTIVITY_FIELDS: Final = (
    ("workflow_id", "session_id"),
    ("workflow_run_id", "run_id"),
    ("activity_type", "activity"),
    ("attempt", "attempt"),
)


def lift_temporal_context(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """Temporal's ``temporal_workflow`` / ``temporal_activity`` extras and archmax's
    ``archmax`` extra, as flat fields (``session_id``, ``run_id``, ``workflow``, ``state``)."""
    for extra, fields in (
        ("temporal_workflow", _TEMPORAL_WORKFLOW_FIELDS),
        ("temporal_activity", _TEMPORAL_ACTIVITY_FIELDS),
    ):
        info = event.pop(extra, None)
        if isinstance(info, Mapping):
            for source, target in fields:
                if source in info and target not in event:
                    event[target] = info[source]
    archmax = event.pop("archmax", None)
    if isinstance(archmax, Mapping):
        for key, value in archmax.items():
            event.setdefault(str(key), value)
    return event


def _drop_noise(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    for key in ("_record", "_from_structlog", "color_message", "temporal_log"):
        event.pop(key, None)
    return event


def log_format(env: Mapping[str, str] | None = None) -> LogFormat:
    """``json`` when ``ARCHMAX_LOG_FORMAT=json``, else ``console``."""
    env = os.environ if env is None else env
    return "json" if env.get(FORMAT_ENV, "").strip().lower() == "json" else "console"


_HANDLER_NAME: Final = "archmax"


class _DeferredFormatter(logging.Formatter):
    """Builds the real formatter on the first record it formats, so a command that logs
    nothing (``archmax sessions``) never imports structlog and what it pulls in."""

    def __init__(self, build: Callable[[], logging.Formatter]) -> None:
        super().__init__()
        self._build: Callable[[], logging.Formatter] | None = build
        self._built: logging.Formatter | None = None

    def format(self, record: logging.LogRecord) -> str:
        if self._built is None:
            assert self._build is not None
            self._built, self._build = self._build(), None
        return self._built.format(record)


def _structlog_formatter(
    chosen: LogFormat, colors: bool, secrets: list[str]
) -> Callable[[], logging.Formatter]:
    """What sets structlog up and renders a record: structlog's own loggers go through the
    standard library's, and every line, theirs or a plain ``logging`` one, gets the same
    processors (fields lifted, time stamped, secrets masked) and renderer."""

    def build() -> logging.Formatter:
        import structlog

        shared: list[Processor] = [
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(),
            lift_temporal_context,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # a traceback becomes text before the masking, so a secret in it is masked too
            structlog.processors.format_exc_info,
            RedactSecrets(secrets),
        ]
        renderer: Processor
        if chosen == "json":
            renderer = structlog.processors.JSONRenderer(default=str)
        else:
            renderer = structlog.dev.ConsoleRenderer(colors=colors)
        structlog.configure(
            processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            logger_factory=structlog.stdlib.LoggerFactory(),
            wrapper_class=structlog.stdlib.BoundLogger,
            cache_logger_on_first_use=False,
        )
        return structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _drop_noise,
                renderer,
            ],
        )

    return build


def configure_logging(
    verbose: bool = False,
    *,
    format: LogFormat | None = None,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Send structlog and the standard library's logging to stderr (or ``stream``), at the
    chosen level, in the chosen format. Calling it again replaces the earlier set-up.

    structlog is set up now if something loaded it already, else on the first line logged
    (the library's own loggers end in ``logging`` either way:
    :mod:`archmax_temporal.activities.logs`)."""
    env = os.environ if env is None else env
    name = env.get(LEVEL_ENV) or ("info" if verbose else "warning")
    level = logging.getLevelNamesMapping().get(name.upper(), logging.WARNING)
    chosen = format or log_format(env)
    output: Any = stream if stream is not None else _CurrentStderr()
    colors = stream is None and sys.stderr.isatty()
    build = _structlog_formatter(chosen, colors, secrets_from_env(env))
    handler = logging.StreamHandler(output)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(build() if "structlog" in sys.modules else _DeferredFormatter(build))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Temporal's adapters append the workflow's or activity's info to the message text; the
    # chain above lifts it into fields instead.
    from temporalio import activity, workflow

    workflow.logger.workflow_info_on_message = False
    activity.logger.activity_info_on_message = False
    for chatty in ("httpx", "httpx2", "httpcore", "openai"):
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))
