"""``GET /v1/sessions``: a page of this deployment's open sessions, and the cursor to the next.

The page is ``sessions.page``: visibility alone (search attributes and the listing each
session publishes in its memo), so no query per session and no worker needed. The cursor is
Temporal's page token, prefixed with a digest of the filters it was given out for: a cursor
replayed with other filters, or one made up, is refused (400) before Temporal sees it where
possible, and Temporal's own refusal of a forged token is a 400 too, never a retry loop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import cast

from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.host import Agent
from archmax_temporal.client.http.problems import MalformedRequestError
from archmax_temporal.workflows.models import SessionStatus, SessionSummary

_DIGEST = 8


def _digest(task_queue: str, status: str | None, workflow: str | None, due: bool) -> bytes:
    key = f"{task_queue}\n{status or ''}\n{workflow or ''}\n{int(due)}"
    return hashlib.sha256(key.encode()).digest()[:_DIGEST]


async def list_page(
    agent: Agent,
    *,
    status: str | None,
    workflow: str | None,
    due: bool,
    limit: int,
    cursor: str | None,
) -> tuple[list[SessionSummary], str | None]:
    """One page of summaries (newest first) and the cursor of the next page, if any."""
    digest = _digest(agent.config.task_queue, status, workflow, due)
    token = _token(cursor, digest) if cursor else None
    try:
        sessions, following = await agent.sessions.page(
            workflow=workflow,
            status=cast("SessionStatus | None", status),
            due=due,
            limit=limit,
            token=token,
        )
    except RPCError as exc:
        if token and exc.status in (RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.UNKNOWN):
            raise MalformedRequestError("cursor is not one this server gave out") from None
        raise
    next_cursor = base64.urlsafe_b64encode(digest + following).decode() if following else None
    return sessions, next_cursor


def _token(cursor: str, digest: bytes) -> bytes:
    try:
        raw = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raw = b""
    if len(raw) <= _DIGEST or raw[:_DIGEST] != digest:
        raise MalformedRequestError("cursor is not one this server gave out for these filters")
    return raw[_DIGEST:]
