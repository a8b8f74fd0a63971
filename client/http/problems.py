"""Errors over HTTP: every archmax error class has one status, and every refusal is an
``application/problem+json`` document (RFC 9457) whose ``type`` is the error's class name.

:data:`STATUS` is the one table: each class of :mod:`archmax_temporal.workflows.errors` and
each of the HTTP layer's own classes below, mapped to the status it answers with. A test
walks both modules and fails when a class is missing from it.

The HTTP layer adds a few classes of its own, for what only a request can get wrong::

    HttpError(ArchmaxError)
    ├── MalformedRequestError      400: a body that does not parse, a malformed path or header
    ├── AuthenticationRequiredError 401: no bearer token, or one that is not configured
    ├── SignatureRejectedError     403: a webhook signature missing, stale, wrong or replayed
    ├── CsrfRejectedError          403: an inbox form without its login's CSRF token
    ├── RouteNotFoundError         404: no route at that path
    ├── MethodNotAllowedError      405: the route takes other methods
    ├── UnsupportedMediaTypeError  415: a body that is neither JSON nor multipart
    └── RequestValidationError     422: a body of the wrong shape (unknown or mistyped fields)
"""

from __future__ import annotations

from typing import Any

from archmax_temporal.workflows import errors as e

PROBLEM_JSON = "application/problem+json"

RETRY_AFTER_SECONDS = 1
"""The ``Retry-After`` a retryable refusal (busy session, Temporal unavailable) suggests."""


class HttpError(e.ArchmaxError):
    """A request the HTTP layer refuses on its own, before the host API sees it."""


class MalformedRequestError(HttpError):
    """The body is not valid JSON (or multipart), or a path segment, a header or a query
    parameter cannot be read (a malformed workflow slug, ``Last-Event-ID`` or cursor)."""


class AuthenticationRequiredError(HttpError):
    """The route needs a bearer token and the request has none, or one not configured."""


class SignatureRejectedError(HttpError):
    """A signed trigger request whose signature does not verify, whose timestamp is outside
    the tolerance window, that lacks one of the three headers, that was received before (a
    replay), or whose ``Idempotency-Key`` is not its signed ``webhook-id``."""


class CsrfRejectedError(HttpError):
    """An inbox form that changes state without the CSRF token of the login it was shown to,
    or sent from another origin."""


class RouteNotFoundError(HttpError):
    """No route answers at the requested path."""


class MethodNotAllowedError(HttpError):
    """The route exists but does not take the request's method."""


class UnsupportedMediaTypeError(HttpError):
    """A body that is neither ``application/json`` nor ``multipart/form-data``."""


class RequestValidationError(HttpError):
    """The body parsed but has the wrong shape: an unknown field, a field of the wrong type,
    a required field missing."""


STATUS: dict[type[e.ArchmaxError], int] = {
    e.ArchmaxError: 500,
    e.SpecValidationError: 500,  # the server's own workflow.yaml does not load
    e.UnknownWorkflowError: 404,
    e.UnknownTriggerError: 404,
    e.TriggerInputError: 422,
    e.WorkflowDisabledError: 409,
    e.ReservedToolNameError: 500,
    e.InvalidVariableNameError: 422,
    e.InvalidSessionIdError: 400,
    e.PayloadTooLargeError: 413,
    e.IdempotencyKeyReusedError: 422,
    e.SessionError: 409,
    e.SessionNotFoundError: 404,
    e.SessionNotAwaitingInputError: 409,
    e.MissingDeliveryTriggerError: 422,
    e.SessionNotResumableError: 409,
    e.SessionNotParkedError: 409,
    e.InvalidDecisionTargetError: 422,
    e.EmptyMessageError: 422,
    e.SessionAwaitingSubWorkflowError: 409,
    e.SessionUnavailableError: 503,
    e.SessionBusyError: 409,
    e.SpecNeededError: 409,
    e.SessionTerminatedError: 409,
    e.TranscriptLogUnrecoverableError: 409,
    e.ConfigurationError: 500,
    e.TemporalUnavailableError: 503,
    e.StoreMismatchError: 503,  # no worker of the session's store: it waits for one
    e.StoreIdentityError: 500,  # the store's _store.json is unreadable: the operator's
    e.ModelCallError: 502,
    e.SandboxError: 500,
    e.ForbiddenSandboxImportError: 500,
    e.SandboxScriptError: 500,
    e.SandboxTimeoutError: 500,
    e.SandboxMemoryError: 500,
    e.SandboxResultTooLargeError: 500,
    e.SandboxCrashError: 500,
    e.SuiteError: 500,
    e.UnsupportedConcurrencyError: 500,
    e.InvalidTargetError: 500,
    HttpError: 400,
    MalformedRequestError: 400,
    AuthenticationRequiredError: 401,
    SignatureRejectedError: 403,
    CsrfRejectedError: 403,
    RouteNotFoundError: 404,
    MethodNotAllowedError: 405,
    UnsupportedMediaTypeError: 415,
    RequestValidationError: 422,
}
"""Every error class and the HTTP status it answers with (the drift test keeps it whole)."""

TITLES: dict[int, str] = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def status_of(error: e.ArchmaxError) -> int:
    """The status of ``error``'s class (its nearest mapped ancestor, for a subclass a host
    defined)."""
    for cls in type(error).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def problem(error: e.ArchmaxError, *, instance: str | None = None) -> tuple[int, dict[str, Any]]:
    """The status and problem document of ``error``."""
    status = status_of(error)
    body: dict[str, Any] = {
        "type": type(error).__name__,
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": str(error),
    }
    if instance is not None:
        body["instance"] = instance
    return status, body


__all__ = [
    "PROBLEM_JSON",
    "RETRY_AFTER_SECONDS",
    "STATUS",
    "AuthenticationRequiredError",
    "CsrfRejectedError",
    "HttpError",
    "MalformedRequestError",
    "MethodNotAllowedError",
    "RequestValidationError",
    "RouteNotFoundError",
    "SignatureRejectedError",
    "UnsupportedMediaTypeError",
    "problem",
    "status_of",
]
