"""The OpenAPI 3.1 document of the HTTP API, built from the same models the routes use.

Request bodies are the models of :mod:`.wire`; responses are the host API's own models
(``Outcome``, ``SessionSummary``, ``SessionEvent``) with their fields renamed exactly as
:func:`~.wire.to_wire` renames them; each route lists every status it can answer, each refusal a
problem document whose ``type`` is one of the error classes named in its description.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from archmax_temporal.client.events import SessionEvent
from archmax_temporal.client.http.auth import (
    ID_HEADER,
    LOGIN_COOKIE,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)
from archmax_temporal.client.http.problems import PROBLEM_JSON, STATUS, TITLES
from archmax_temporal.client.http.wire import (
    Accepted,
    ApprovalPage,
    Decision,
    Delivery,
    Health,
    Problem,
    Reply,
    SessionMessage,
    SessionPage,
    TriggerFiring,
    wire_schema,
)
from archmax_temporal.workflows.identity import MAX_SESSION_ID_CHARS
from archmax_temporal.workflows.models import Outcome, SessionSummary
from archmax_temporal.workflows.spec import SLUG

API_VERSION = "1"
_REF = "#/components/schemas/{model}"
_STATUSES = ["running", "awaiting_input", "awaiting_decision", "completed", "failed", "rejected"]
_READ: list[dict[str, list[str]]] = [{"bearer": []}, {"login": []}]
"""A read takes the bearer token or the inbox's login cookie."""
_SLUG_QUERY = {
    "name": "workflow",
    "in": "query",
    "schema": {"type": "string", "pattern": SLUG.pattern.replace(r"\Z", "$")},
}
_LIMIT = {
    "name": "limit",
    "in": "query",
    "schema": {"type": "integer", "minimum": 1, "maximum": 200},
}
_CURSOR = {"name": "cursor", "in": "query", "schema": {"type": "string"}}


def _schemas() -> dict[str, Any]:
    requests: list[type[BaseModel]] = [TriggerFiring, Delivery, Decision, Reply, SessionMessage]
    responses: list[type[BaseModel]] = [
        Outcome,
        SessionSummary,
        SessionPage,
        ApprovalPage,
        SessionEvent,
        Accepted,
        Health,
        Problem,
    ]
    _, asked = models_json_schema(
        [(model, "validation") for model in requests], ref_template=_REF, by_alias=True
    )
    _, answered = models_json_schema(
        [(model, "serialization") for model in responses], ref_template=_REF
    )
    return {**asked.get("$defs", {}), **wire_schema(answered.get("$defs", {}))}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _errors_by_status() -> dict[int, list[str]]:
    by_status: dict[int, list[str]] = {}
    for cls, status in STATUS.items():
        by_status.setdefault(status, []).append(cls.__name__)
    return by_status


def _problems(*statuses: int) -> dict[str, Any]:
    names = _errors_by_status()
    answers: dict[str, Any] = {}
    for status in statuses:
        kinds = ", ".join(sorted(names.get(status, [])))
        answer: dict[str, Any] = {
            "description": f"{TITLES[status]}; `type` is one of: {kinds}",
            "content": {PROBLEM_JSON: {"schema": _ref(Problem)}},
        }
        if status in (409, 503):
            answer["headers"] = {
                "Retry-After": {
                    "description": "seconds to wait (503, and SessionBusyError)",
                    "schema": {"type": "integer"},
                }
            }
        if status == 401:
            answer["headers"] = {
                "WWW-Authenticate": {"schema": {"type": "string"}, "description": "Bearer"}
            }
        answers[str(status)] = answer
    answers["default"] = {
        "description": "an unexpected failure (500), a model endpoint's refusal (502)",
        "content": {PROBLEM_JSON: {"schema": _ref(Problem)}},
    }
    return answers


_SESSION_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "description": f"the session id: 1-{MAX_SESSION_ID_CHARS} printable characters, "
    "percent-encoded in the path ('/' as %2F)",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_SESSION_ID_CHARS,
        "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]+$",
    },
}
_IDEMPOTENCY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "names this firing: a retry of the same request with the same key applies "
    "nothing twice and gets the first Outcome back (also when retries race); the key is bound "
    "to the request and scoped to the route and the caller, and the same key with another "
    "request is 422 IdempotencyKeyReusedError",
    "schema": {"type": "string", "pattern": r"^[\x21-\x7e]{1,200}$"},
}
_PREFER = {
    "name": "Prefer",
    "in": "header",
    "required": False,
    "description": "`respond-async`: answer 202 once the session accepted the firing",
    "schema": {"type": "string", "enum": ["respond-async"]},
}


def _outcome_answers() -> dict[str, Any]:
    return {
        "200": {
            "description": "the turn settled: its Outcome",
            "content": {"application/json": {"schema": _ref(Outcome)}},
        },
        "202": {
            "description": "accepted (Prefer: respond-async); Location names the session",
            "headers": {
                "Location": {"schema": {"type": "string"}},
                "Preference-Applied": {"schema": {"type": "string"}},
            },
            "content": {"application/json": {"schema": _ref(Accepted)}},
        },
    }


def _session_post(
    summary: str, description: str, body: type[BaseModel], errors: tuple[int, ...]
) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "description": description,
            "security": [{"bearer": []}],
            "parameters": [_SESSION_ID, _IDEMPOTENCY, _PREFER],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(body)}},
            },
            "responses": {**_outcome_answers(), **_problems(*errors)},
        }
    }


def openapi_document() -> dict[str, Any]:
    """The whole document, as ``GET /openapi.json`` serves it."""
    posted = (400, 401, 404, 409, 413, 415, 422, 503)
    multipart = {
        "type": "object",
        "description": "each file part's field name is the variable it seeds",
        "properties": {
            "message": {"type": "string"},
            "variables": {"type": "string", "description": "a JSON object"},
            "session": {"type": "string"},
            "sessionPath": {"type": "string"},
        },
        "additionalProperties": {"type": "string", "format": "binary"},
    }
    paths: dict[str, Any] = {
        "/v1/workflows/{slug}/triggers/{trigger}": {
            "post": {
                "summary": "Fire a trigger",
                "description": "The session is resolved by the seed's precedence (session, "
                "sessionPath, the server's path, the trigger's session: declaration, a minted "
                "id) and the send rule applies: a new turn, a delivery into a session parked "
                "for input, a reply to one parked at a human state. A trigger with a "
                "configured secret takes requests signed as Standard Webhooks asks: "
                f"{ID_HEADER}, {TIMESTAMP_HEADER} (within 5 minutes) and {SIGNATURE_HEADER} "
                "('v1,' and the base64 HMAC-SHA256 of '<id>.<timestamp>.<body>'); the "
                f"{ID_HEADER} is the firing's idempotency key, and a signature received "
                "before is refused.",
                "security": [{"bearer": []}, {"signature": []}],
                "parameters": [
                    {
                        "name": "slug",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": SLUG.pattern.replace(r"\Z", "$")},
                        "example": "support-inbox",
                    },
                    {
                        "name": "trigger",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "minLength": 1},
                        "example": "email_received",
                    },
                    _IDEMPOTENCY,
                    _PREFER,
                    {
                        "name": ID_HEADER,
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "pattern": r"^[\x21-\x7e]{1,200}$"},
                    },
                    {
                        "name": TIMESTAMP_HEADER,
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
                    },
                    {
                        "name": SIGNATURE_HEADER,
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {"schema": _ref(TriggerFiring)},
                        "multipart/form-data": {"schema": multipart},
                    },
                },
                "responses": {**_outcome_answers(), **_problems(403, *posted)},
            }
        },
        "/v1/sessions": {
            "get": {
                "summary": "List sessions",
                "description": "This deployment's open sessions (running workflows of its task "
                "queue), newest first, each with its summary; a session that cannot answer in "
                "time is left out.",
                "security": _READ,
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"enum": _STATUSES}},
                    _SLUG_QUERY,
                    {
                        "name": "due",
                        "in": "query",
                        "description": "only sessions parked for input whose resumeAt has passed",
                        "schema": {"type": "boolean"},
                    },
                    _LIMIT,
                    _CURSOR,
                ],
                "responses": {
                    "200": {
                        "description": "a page of summaries",
                        "content": {"application/json": {"schema": _ref(SessionPage)}},
                    },
                    **_problems(400, 401, 503),
                },
            }
        },
        "/v1/approvals": {
            "get": {
                "summary": "List sessions awaiting a decision",
                "description": "The inbox of the people who decide: every session of this "
                "deployment parked at a human state, across workflows, with its handoff, the "
                "edges a person may take, since when it waits and when a deadline decides it. "
                "Paged like the session list (the same cursor rules) and read from visibility "
                "alone, so it answers with no worker running; each page lists the soonest due "
                "first, then the longest waiting. Decide with POST /v1/sessions/{id}/decide "
                "(pass seq to refuse a decision taken since), or reply.",
                "security": _READ,
                "parameters": [_SLUG_QUERY, _LIMIT, _CURSOR],
                "responses": {
                    "200": {
                        "description": "a page of approvals",
                        "content": {"application/json": {"schema": _ref(ApprovalPage)}},
                    },
                    **_problems(400, 401, 503),
                },
            }
        },
        "/v1/sessions/{id}": {
            "get": {
                "summary": "A session's summary",
                "security": _READ,
                "parameters": [_SESSION_ID],
                "responses": {
                    "200": {
                        "description": "the summary",
                        "content": {"application/json": {"schema": _ref(SessionSummary)}},
                    },
                    **_problems(400, 401, 404, 503),
                },
            }
        },
        "/v1/sessions/{id}/events": {
            "get": {
                "summary": "A session's events (Server-Sent Events)",
                "description": "One archmax event per message, named with its type in `event:`, "
                "its data a SessionEvent as JSON. "
                "`id:` is the event's seq, `seq.k` for the k-th further event read off the same "
                "history event; reconnect with Last-Event-ID to resume with nothing lost or "
                "repeated. With follow (the default) the stream stays open for new events, and "
                "carries the model's text as it is written: `agent-text-delta` "
                "(`messageId`, `text`, `offset`, `attempt`) and `agent-text-reset` (`messageId`: "
                "the text so far is void), advisory and without an `id:`, followed by the "
                "durable `agent-text` with the same `messageId`.",
                "security": _READ,
                "parameters": [
                    _SESSION_ID,
                    {
                        "name": "after",
                        "in": "query",
                        "description": "only events after this seq",
                        "schema": {"type": "integer", "minimum": 0},
                    },
                    {"name": "follow", "in": "query", "schema": {"type": "boolean"}},
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "schema": {"type": "string", "pattern": r"^[0-9]{1,15}(\.[0-9]{1,6})?$"},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the event stream",
                        "content": {
                            "text/event-stream": {
                                "schema": {"type": "string"},
                                "x-event-data": _ref(SessionEvent),
                            }
                        },
                    },
                    **_problems(400, 401, 404, 503),
                },
            }
        },
        "/v1/sessions/{id}/deliver": _session_post(
            "Deliver an event",
            "Resume a session parked for input (archmax_wait) with the event that arrived.",
            Delivery,
            posted,
        ),
        "/v1/sessions/{id}/decide": _session_post(
            "Decide",
            "Route a session parked at a human state along one of its edges.",
            Decision,
            posted,
        ),
        "/v1/sessions/{id}/reply": _session_post(
            "Reply",
            "A person's message to a session parked at a human state; it answers and stays.",
            Reply,
            posted,
        ),
        "/v1/sessions/{id}/messages": _session_post(
            "Send a message",
            "Send to an existing session by the send rule: a new turn, a delivery into an "
            "input park, a reply at a human state.",
            SessionMessage,
            posted,
        ),
        "/healthz": {
            "get": {
                "summary": "Health",
                "security": [],
                "responses": {
                    "200": {
                        "description": "Temporal answers",
                        "content": {"application/json": {"schema": _ref(Health)}},
                    },
                    **_problems(503),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": {
                        "description": "the OpenAPI document",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "archmax serve",
            "version": API_VERSION,
            "description": "archmax sessions over HTTP: triggers in, decisions and replies, "
            "summaries, and the live event stream out. Errors are application/problem+json "
            "with `type` the archmax error class.",
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "signature": {"type": "apiKey", "in": "header", "name": SIGNATURE_HEADER},
                "login": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": LOGIN_COOKIE,
                    "description": "the inbox's login (POST /inbox/login): reads only",
                },
            },
        },
    }
