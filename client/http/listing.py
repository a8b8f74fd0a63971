"""``GET /v1/sessions``: a page of this deployment's open sessions, and the cursor to the next.

Visibility finds the running session workflows of the task queue (narrowed by the ``Archmax*``
search attributes when the deployment publishes them); each one's summary query describes it,
and the filters are applied to the summaries too, since visibility lags a little behind. The
cursor is Temporal's page token, prefixed with a digest of the filters it was given out for:
a cursor replayed with other filters, or one made up, is refused (400) before Temporal sees it
where possible, and Temporal's own refusal of a forged token is a 400 too, never a retry loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.host import Agent
from archmax_temporal.client.http.problems import MalformedRequestError
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.contracts import WORKFLOW_NAME
from archmax_temporal.workflows.models import SessionSummary

LIST_CONCURRENCY = 8
"""How many summary queries one page runs at once."""

SUMMARY_TIMEOUT = timedelta(seconds=5)
"""How long a listed session's summary query may take before the session is left out."""

LIST_TIMEOUT = timedelta(seconds=10)
"""How long the visibility query of one page may take."""

_DIGEST = 8


def _digest(task_queue: str, status: str | None, workflow: str | None, due: bool) -> bytes:
    key = f"{task_queue}\n{status or ''}\n{workflow or ''}\n{int(due)}"
    return hashlib.sha256(key.encode()).digest()[:_DIGEST]


def _query(agent: Agent, status: str | None, workflow: str | None, due: bool, now: datetime) -> str:
    query = (
        f"WorkflowType = '{WORKFLOW_NAME}' AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{agent.config.task_queue}'"
    )
    if not agent.config.search_attributes:
        return query
    if workflow:  # a checked slug: nothing to escape
        query += f" AND {sa.WORKFLOW.name} = '{workflow}'"
    if status:  # one of the statuses
        query += f" AND {sa.STATUS.name} = '{status}'"
    if due:
        instant = now.isoformat().replace("+00:00", "Z")
        query += f" AND {sa.STATUS.name} = 'awaiting_input' AND {sa.RESUME_AT.name} <= '{instant}'"
    return query


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
    token = _token(cursor, digest) if cursor else b""
    now = datetime.now(UTC)
    client = agent.client
    try:
        response = await client.workflow_service.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace=client.namespace,
                page_size=limit,
                next_page_token=token,
                query=_query(agent, status, workflow, due, now),
            ),
            retry=False,
            timeout=LIST_TIMEOUT,
        )
    except RPCError as exc:
        if token and exc.status in (RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.UNKNOWN):
            raise MalformedRequestError("cursor is not one this server gave out") from None
        raise
    summaries = await _summaries(agent, [e.execution.workflow_id for e in response.executions])
    sessions = [
        s
        for s in summaries
        if s is not None
        and (status is None or s.status == status)
        and (workflow is None or s.workflow == workflow)
        and (not due or (s.status == "awaiting_input" and s.resume_at and s.resume_at <= now))
    ]
    following = response.next_page_token
    next_cursor = base64.urlsafe_b64encode(digest + following).decode() if following else None
    return sessions, next_cursor


async def _summaries(agent: Agent, ids: Sequence[str]) -> list[SessionSummary | None]:
    gate = asyncio.Semaphore(LIST_CONCURRENCY)

    async def summary(session_id: str) -> SessionSummary | None:
        async with gate:
            try:
                return await agent.sessions.get(session_id, timeout=SUMMARY_TIMEOUT)
            except Exception:  # a session that cannot answer right now is left out
                return None

    return list(await asyncio.gather(*(summary(i) for i in ids)))


def _token(cursor: str, digest: bytes) -> bytes:
    try:
        raw = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raw = b""
    if len(raw) <= _DIGEST or raw[:_DIGEST] != digest:
        raise MalformedRequestError("cursor is not one this server gave out for these filters")
    return raw[_DIGEST:]
