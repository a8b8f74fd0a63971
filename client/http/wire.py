"""The HTTP wire: request bodies, and the host API's models as archmax spells them in JSON.

The Python models use snake_case fields (``session_id``, ``resume_at``); on the wire they are
camelCase (``sessionId``, ``resumeAt``), as archmax's own hosts read them. :func:`to_wire`
renames model fields only: the keys of a mapping (variable names, a variable's value) are data
and travel as they are. :func:`wire_schema` applies the same renaming to a model's JSON Schema,
so the OpenAPI document describes exactly what :func:`to_wire` produces.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic_core import to_jsonable_python

from archmax_temporal.workflows.models import DecisionEdge, SessionSummary, Variable


def to_wire(value: Any) -> Any:
    """``value`` as JSON-ready data with every model field name camelCased."""
    if isinstance(value, Variable):  # a variable is the seeds' {value, locked} record
        return to_jsonable_python(value)
    if isinstance(value, BaseModel):
        return {to_camel(name): to_wire(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, dict):
        return {key: to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    return to_jsonable_python(value)


def wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON Schema with its models' property names camelCased (``$defs`` too);
    ``additionalProperties`` (a mapping's keys are data) is left alone."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, item in node.items():
            if key == "properties" and isinstance(item, dict):
                out[key] = {to_camel(name): walk(sub) for name, sub in item.items()}
            elif key == "required" and isinstance(item, list):
                out[key] = [to_camel(name) for name in item]
            else:
                out[key] = walk(item)
        return out

    return walk(schema)  # type: ignore[no-any-return]


class _Body(BaseModel):
    """A request body: camelCase names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=False, strict=True
    )


class FilePart(_Body):
    """A file handed to the session in a JSON body (multipart sends the file itself)."""

    name: str = Field(min_length=1, description="the file's name, kept when it is placed")
    content: str = Field(description="the content: text, or base64 when encoding is base64")
    encoding: Literal["utf-8", "base64"] = "utf-8"


class TriggerFiring(_Body):
    """``POST /v1/workflows/{slug}/triggers/{trigger}``: a firing of a declared trigger."""

    message: str | None = Field(default=None, description="the message, if the event has one")
    variables: dict[str, Any] = Field(
        default_factory=dict, description="what the event brought, seeded as locked variables"
    )
    session: str | None = Field(
        default=None, description="an explicit session id (wins over every session path)"
    )
    session_path: str | None = Field(
        default=None, description="a dotted path over the variables to the session id"
    )
    files: dict[str, FilePart] = Field(
        default_factory=dict,
        description="variable → file: placed in scratchpad/attachments/, the variable seeded",
    )


class Delivery(_Body):
    """``POST /v1/sessions/{id}/deliver``: the event a session parked for input waits for."""

    trigger: str = Field(description="the trigger id, recorded as the session's trigger")
    variables: dict[str, Any] = Field(default_factory=dict)
    message: str | None = None


class Decision(_Body):
    """``POST /v1/sessions/{id}/decide``: a reviewer's pick of the human state's edge."""

    to: str = Field(description="the transition's target state")
    comment: str | None = None
    seq: int | None = Field(
        default=None,
        description="the pendingDecision.seq this decision answers: refused (409 "
        "SessionNotParkedError) when the session was decided since; omit to decide whichever "
        "park stands",
    )


class Reply(_Body):
    """``POST /v1/sessions/{id}/reply``: a person's message to a session at a human state."""

    message: str


class SessionMessage(_Body):
    """``POST /v1/sessions/{id}/messages``: a message to an existing session, by the send
    rule (a turn, a delivery into an input park, a reply at a human state)."""

    message: str
    trigger: str = "manual"
    variables: dict[str, Any] = Field(default_factory=dict)


class Problem(BaseModel):
    """An ``application/problem+json`` document (RFC 9457)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="the archmax error class, e.g. SessionNotAwaitingInputError")
    title: str
    status: int
    detail: str
    instance: str | None = None


class Accepted(BaseModel):
    """The ``202`` answer to ``Prefer: respond-async``: the firing was accepted."""

    session_id: str
    update_id: str = Field(
        description="the Temporal update id (the Idempotency-Key when one was sent); POST "
        "again with it as Idempotency-Key to wait for the Outcome"
    )
    status: Literal["accepted"] = "accepted"


class SessionPage(BaseModel):
    """``GET /v1/sessions``: one page of summaries, newest first."""

    sessions: list[SessionSummary]
    next_cursor: str | None = Field(
        default=None, description="pass as ?cursor= for the next page; null on the last"
    )


class Approval(BaseModel):
    """A session awaiting a person's decision, as ``GET /v1/approvals`` lists it."""

    session_id: str
    workflow: str
    state: str = Field(description="the human state the session is parked at")
    title: str | None = Field(default=None, description="the human state's title")
    handoff: str | None = Field(
        default=None, description="the first line of the agent's handoff to the person"
    )
    transitions: list[DecisionEdge] = Field(description="the edges a person may decide")
    seq: int = Field(description="the park's number: pass it as seq to decide")
    created_at: datetime = Field(description="since when the session waits for a decision")
    due_at: datetime | None = Field(
        default=None, description="when a deadline decides it (null: no deadline)"
    )
    waiting_on: str | None = Field(
        default=None, description="set when no worker serves the session (decisions wait)"
    )


class ApprovalPage(BaseModel):
    """``GET /v1/approvals``: one page of sessions awaiting a decision."""

    approvals: list[Approval] = Field(
        description="the page's sessions, the soonest due first, then the longest waiting"
    )
    next_cursor: str | None = Field(
        default=None, description="pass as ?cursor= for the next page; null on the last"
    )


class Health(BaseModel):
    """``GET /healthz``."""

    status: Literal["ok"]
    temporal: Literal["ok"]


__all__ = [
    "Accepted",
    "Approval",
    "ApprovalPage",
    "Decision",
    "Delivery",
    "FilePart",
    "Health",
    "Problem",
    "Reply",
    "SessionMessage",
    "SessionPage",
    "TriggerFiring",
    "to_wire",
    "wire_schema",
]
