"""``GET /v1/sessions``: a page of this deployment's open sessions, and the cursor to the next;
``GET /v1/approvals``: the same machinery, narrowed to the sessions awaiting a decision.

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
from datetime import datetime
from typing import cast

from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.host import Agent
from archmax_temporal.client.http.problems import MalformedRequestError
from archmax_temporal.client.http.wire import Approval
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


async def approvals_page(
    agent: Agent, *, workflow: str | None, limit: int, cursor: str | None
) -> tuple[list[Approval], str | None]:
    """One page of the sessions awaiting a decision (a page of ``awaiting_decision``
    sessions, read from visibility like the session list, so no worker is needed), the soonest
    due first, then the longest waiting; and the cursor of the next page. A caller whose park
    mirrors its sub-workflow's is left out: the child is listed, and decided, itself."""
    sessions, next_cursor = await list_page(
        agent,
        status="awaiting_decision",
        workflow=workflow,
        due=False,
        limit=limit,
        cursor=cursor,
    )
    approvals = [approval for approval in map(approval_of, sessions) if approval is not None]
    approvals.sort(key=_urgency)
    return approvals, next_cursor


def approval_of(summary: SessionSummary) -> Approval | None:
    """The approval a summary stands for (None: it awaits no decision of its own)."""
    pending = summary.pending_decision
    if summary.status != "awaiting_decision" or pending is None or summary.delegation:
        return None
    return Approval(
        session_id=summary.session_id,
        workflow=summary.workflow,
        state=pending.state,
        title=pending.title,
        handoff=summary.handoff,
        transitions=pending.transitions,
        seq=pending.seq,
        created_at=pending.created_at,
        due_at=pending.due_at,
        waiting_on=summary.waiting_on,
    )


def _urgency(approval: Approval) -> tuple[bool, datetime, datetime]:
    due = approval.due_at or approval.created_at
    return (approval.due_at is None, due, approval.created_at)
