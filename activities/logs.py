"""Structured log lines from library code, silent until an entry point configures logging.

The library never writes to stdout and never configures logging: its structlog loggers
(:func:`get_logger`) end in the standard library's ``logging`` (the event as the message, the
fields as the record's extras), so a host that set nothing up sees at most warnings on stderr
(``logging``'s last resort), and a host with its own logging gets ordinary records.
``archmax`` entry points render them, as key-value or JSON lines, with
:func:`archmax_temporal.client.logs.configure_logging`.

Activity code gets the session bound on every line by :class:`LogContextInterceptor`: the
session id (the workflow id), the run id, the activity type and attempt, and the state and
workflow slug when the activity's input names them. Workflow code logs through
``workflow.logger`` (quiet while replaying); its lines carry the same fields (see
:mod:`archmax_temporal.workflows.telemetry`).
"""

from __future__ import annotations

import logging
from typing import Any

import structlog
from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

LOGGER_PREFIX = "archmax"
"""Every library logger's name starts with it (``archmax.model``, ``archmax.http``)."""


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """A structlog logger writing to the standard library's ``logging.getLogger(name)``."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.render_to_log_kwargs,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
    )
    return logger


def activity_fields(info: activity.Info, argument: object | None) -> dict[str, Any]:
    """What every line of one activity attempt carries."""
    fields: dict[str, Any] = {
        "session_id": info.workflow_id,
        "run_id": info.workflow_run_id,
        "activity": info.activity_type,
        "attempt": info.attempt,
    }
    for name, key in (("workflow", "workflow"), ("state", "state")):
        value = getattr(argument, name, None)
        if isinstance(value, str) and value:
            fields[key] = value
    return fields


class _ActivityLogContext(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        argument = input.args[0] if input.args else None
        fields = activity_fields(activity.info(), argument)
        with structlog.contextvars.bound_contextvars(**fields):
            return await super().execute_activity(input)


class LogContextInterceptor(Interceptor):
    """Binds the session's fields to every structlog line an activity writes."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityLogContext(next)
