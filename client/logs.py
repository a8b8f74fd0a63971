"""Logging set-up, done once at each entry point (never at import).

structlog writes to stderr, so stdout stays data only; ``--verbose`` (or ARCHMAX_LOG_LEVEL)
shows per-call lines such as each model call's state, attempt and tokens.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now, so a configuration made once never holds on
    to a stream that was later replaced (and closed)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(verbose: bool = False) -> None:
    """Send structlog and the standard library's logging to stderr at the chosen level."""
    name = os.environ.get("ARCHMAX_LOG_LEVEL") or ("info" if verbose else "warning")
    level = logging.getLevelNamesMapping().get(name.upper(), logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    for chatty in ("httpx", "httpx2", "httpcore", "openai"):
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))
    logging.basicConfig(
        level=level,
        stream=_CurrentStderr(),
        format="%(levelname)s %(name)s: %(message)s",
    )
