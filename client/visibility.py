"""Sessions as Temporal's visibility lists them: a page of this deployment's sessions read
off the search attributes and the listing each session publishes in its memo, with no query
per session and no worker needed. What ``agent.sessions.list`` / ``sessions.page``,
``GET /v1/sessions`` and ``archmax sessions`` show.

This module imports the Temporal client and the wire models only (never the host's store,
loader or workflow code, nor the worker), so ``archmax sessions`` costs a connection and a
page, not the runtime (``tests/test_listing_fast.py`` holds it to that). A page is read as
Temporal returns it and each run decoded once, only what a summary shows: the memo's JSON
straight into :class:`PublishedListing` (the typed boundary) and the four ``Archmax*``
search attributes it reads (the client's own decoding of a listed run costs more than all of
that: every attribute, twice, and every timestamp).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, NamedTuple, get_args

from temporalio.api.common.v1 import Memo, SearchAttributes
from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.common import TypedSearchAttributes
from temporalio.converter import WorkflowSerializationContext, decode_typed_search_attributes
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.times import span
from archmax_temporal.workflows import projections
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.contracts import LISTED_MEMO, WORKFLOW_NAME
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import (
    SessionStatus,
    SessionSummary,
    Variable,
    is_finished,
)

if TYPE_CHECKING:
    from archmax_temporal.client.config import RuntimeConfig
    from archmax_temporal.workflows.models import Checkpoint

LIST_TIMEOUT = timedelta(seconds=10)
"""How long the visibility query of one page of a listing may take."""

NO_WORKER = "no worker is polling; start one with archmax worker"
"""What a listed session no worker serves says (its timers and deliveries wait for one)."""

_STATUSES: Final = frozenset(get_args(SessionStatus))
_JSON_PLAIN: Final = b"json/plain"

ClosedSummary = Callable[
    [str, "WorkflowExecutionStatus | None", str], Awaitable["SessionSummary | None"]
]
"""The summary of a listed run that is not running, given its session id, status and run id
(None: it is no session to list)."""

LISTED_ATTRIBUTES: Final = (sa.WORKFLOW.name, sa.STATUS.name, sa.STATE.name, sa.RESUME_AT.name)
"""The search attributes a listed summary reads: the only ones a page decodes."""

_UNKNOWN_ATTRIBUTE: Final = re.compile(
    r"(?:invalid search attribute:?|no mapping defined for search attribute|"
    r"search attribute)\s+([A-Za-z][A-Za-z0-9_]*)"
)
"""How the server names a search attribute a namespace has not registered, in a query
(``invalid search attribute: ArchmaxStatus``) and in a start
(``… has no mapping defined for search attribute ArchmaxWorkflow``)."""


def unregistered_search_attributes(
    error: BaseException, namespace: str | None = None
) -> ConfigurationError | None:
    """The typed error of a call the server refused because the namespace has not registered
    one of archmax's search attributes (None for any other error), saying how to register
    them or run without them."""
    if not isinstance(error, RPCError) or error.status != RPCStatusCode.INVALID_ARGUMENT:
        return None
    found = _UNKNOWN_ATTRIBUTE.search(error.message)
    if found is None or found.group(1) not in {key.name for key in sa.ALL}:
        return None
    where = namespace or "<namespace>"
    by_type: dict[str, list[str]] = {}
    for key in sa.ALL:
        kind = key.indexed_value_type.name.title().replace("_", "")  # KEYWORD: Keyword
        by_type.setdefault(kind, []).append(key.name)
    commands = [
        f"temporal operator search-attribute create --namespace {where} "
        + " ".join(f"--name {name}" for name in names)
        + f" --type {kind}"
        for kind, names in by_type.items()
    ]
    return ConfigurationError(
        f"namespace {where!r} has not registered archmax's search attributes (it does not "
        f"know {found.group(1)}); nothing was applied. Register them once: "
        + "; ".join(commands)
        + " (or, on Temporal Cloud, tcld namespace search-attributes add; see "
        "docs/production/deployment.md). Or set ARCHMAX_SEARCH_ATTRIBUTES=0 to run without "
        "them."
    )


def listing_query(
    task_queue: str,
    *,
    workflow: str | None = None,
    status: str | None = None,
    due_before: datetime | None = None,
    search_attributes: bool = True,
) -> str:
    """The visibility query of a listing: the sessions of ``task_queue`` (running, or closed
    idle: completed), narrowed
    by the ``Archmax*`` search attributes where the deployment publishes them (``workflow``
    is a checked slug and ``status`` one of the statuses: nothing to escape)."""
    query = (
        f"WorkflowType = '{WORKFLOW_NAME}' "
        "AND (ExecutionStatus = 'Running' OR ExecutionStatus = 'Completed') "
        f"AND TaskQueue = '{task_queue}'"
    )
    if not search_attributes:
        return query
    query += f" AND {sa.STATUS.name} != 'new'"
    if workflow:
        query += f" AND {sa.WORKFLOW.name} = '{workflow}'"
    if status:
        query += f" AND {sa.STATUS.name} = '{status}'"
    if due_before is not None:
        instant = due_before.isoformat().replace("+00:00", "Z")
        query += f" AND {sa.STATUS.name} = 'awaiting_input' AND {sa.RESUME_AT.name} <= '{instant}'"
    return query


def is_due(summary: SessionSummary, now: datetime) -> bool:
    """Whether a parked session's timed wake is past."""
    return (
        summary.status == "awaiting_input"
        and summary.resume_at is not None
        and summary.resume_at <= now
    )


def newer(run: WorkflowExecutionInfo, than: WorkflowExecutionInfo) -> bool:
    """Whether ``run`` is a later run of the same session than ``than``."""
    if run.status == _RUNNING:
        return True
    if than.status == _RUNNING:
        return False
    started, held = run.start_time, than.start_time
    return (started.seconds, started.nanos) > (held.seconds, held.nanos)


_RUNNING: Final = WorkflowExecutionStatus.RUNNING.value


class ListedAttributes(NamedTuple):
    """The four ``Archmax*`` search attributes a listed summary reads (None: not set)."""

    workflow: str | None = None
    status: str | None = None
    state: str | None = None
    resume_at: datetime | None = None

    @classmethod
    def of(cls, attributes: TypedSearchAttributes) -> ListedAttributes:
        """Those of a run the client decoded (a described one)."""
        return cls(
            attributes.get(sa.WORKFLOW),
            attributes.get(sa.STATUS),
            attributes.get(sa.STATE),
            attributes.get(sa.RESUME_AT),
        )


_KEYWORD: Final = b"Keyword"
_DATETIME: Final = b"Datetime"
_LISTED_TYPES: Final = tuple(
    zip(LISTED_ATTRIBUTES, (_KEYWORD, _KEYWORD, _KEYWORD, _DATETIME), strict=True)
)
"""Each of :data:`LISTED_ATTRIBUTES` and the ``type`` its payload carries."""


def listed_attributes(attributes: SearchAttributes) -> ListedAttributes:
    """The :data:`LISTED_ATTRIBUTES` of a raw row, read as the client decodes them: a
    plain-JSON keyword or timestamp of its registered type is read directly (most of a
    page's client-side time otherwise), anything else (another encoding, a list, another
    type) through the client's own decoding of those four alone."""
    held = attributes.indexed_fields
    values: list[object] = []
    for name, kind in _LISTED_TYPES:
        payload = held.get(name)
        if payload is None:
            values.append(None)
            continue
        metadata = payload.metadata
        if metadata.get("type") != kind or metadata.get("encoding") != _JSON_PLAIN:
            return _decoded(attributes)
        try:
            value = json.loads(payload.data)
            if not isinstance(value, str):
                return _decoded(attributes)
            values.append(datetime.fromisoformat(value) if kind == _DATETIME else value)
        except ValueError:  # not JSON, not a timestamp: the client's decoding says what
            return _decoded(attributes)
    workflow, status, state, resume_at = values
    assert resume_at is None or isinstance(resume_at, datetime)
    return ListedAttributes(
        workflow if isinstance(workflow, str) else None,
        status if isinstance(status, str) else None,
        state if isinstance(state, str) else None,
        resume_at,
    )


def _decoded(attributes: SearchAttributes) -> ListedAttributes:
    """:func:`listed_attributes` through the client's decoding (the others, which a summary
    never shows, left encoded)."""
    wanted = SearchAttributes()
    held = attributes.indexed_fields
    for name in LISTED_ATTRIBUTES:
        if name in held:
            wanted.indexed_fields[name].CopyFrom(held[name])
    return ListedAttributes.of(decode_typed_search_attributes(wanted))


def published_listing(memo: Memo, *, plain: bool) -> projections.PublishedListing | None:
    """The listing a run published in its memo (None: none yet), decoded in one pass: the
    payload's JSON validated straight into the model. ``plain``: whether the client's data
    converter has no payload codec. A memo behind a codec, or of another encoding, is the
    data converter's to read (:class:`_NeedsConverter`)."""
    field = memo.fields.get(LISTED_MEMO)
    if field is None:
        return None
    if not plain or field.metadata.get("encoding") != _JSON_PLAIN:
        raise _NeedsConverter
    return projections.PublishedListing.model_validate_json(field.data)


class _NeedsConverter(Exception):
    """The memo is not plain JSON this module can read without the data converter."""


async def listed_summary(execution: WorkflowExecution, *, polled: bool) -> SessionSummary:
    """A session's summary from visibility alone: the listing the session publishes in its
    memo at every settled turn, and its ``Archmax*`` search attributes (``source=
    "visibility"``; each variable by name and lock, with no value). With no worker polling,
    an open session's ``waiting_on`` says so, and how overdue a timed wake is: ``due 12 min
    ago — no worker is polling; …`` (a decision's passed deadline: ``deadline passed 12 min
    ago — …``); a finished one (completed, failed, rejected) waits on
    nothing. The memo is read through the execution's data converter; a page of a listing
    reads it in one pass (:func:`published_listing`)."""
    published = await execution.memo_value(
        LISTED_MEMO, None, type_hint=projections.PublishedListing
    )
    attributes = ListedAttributes.of(execution.typed_search_attributes)
    return summary_of(execution.id, attributes, published, polled=polled)


def summary_of(
    session_id: str,
    attributes: ListedAttributes,
    published: projections.PublishedListing | None,
    *,
    polled: bool,
) -> SessionSummary:
    """:func:`listed_summary` of a run, from its search attributes and its decoded memo
    (``published``)."""
    listed = published or projections.PublishedListing()
    status: str = listed.status if published else attributes.status or "running"
    if status not in _STATUSES:
        status = "running"
    pending = listed.pending_input
    resume_at = pending.resume_at if pending else attributes.resume_at
    waiting_on: str | None = None
    if not polled and not is_finished(status):  # a finished session waits on nothing
        waiting_on = NO_WORKER
        if resume_at is not None and status == "awaiting_input":
            late = datetime.now(UTC) - resume_at
            waiting_on = (
                f"due {span(late.total_seconds())} ago — {NO_WORKER}"
                if late.total_seconds() >= 0
                else f"wakes in {span(-late.total_seconds())}; {NO_WORKER}"
            )
        decision = listed.pending_decision
        due_at = decision.due_at if decision is not None else None
        if due_at is not None and status == "awaiting_decision":
            late = datetime.now(UTC) - due_at
            if late.total_seconds() >= 0:  # its deadline is taken when a worker runs it
                waiting_on = f"deadline passed {span(late.total_seconds())} ago — {NO_WORKER}"
    delegation = listed.delegation
    return SessionSummary(
        session_id=session_id,
        workflow=attributes.workflow or "",
        status=status,
        classification=projections.classification(status),
        state=listed.state if published else attributes.state or None,
        spec_hash=listed.spec_hash,
        pending_input=pending,
        pending_decision=listed.pending_decision,
        wait_reason=projections.wait_reason(pending, delegation),
        resume_at=resume_at,
        exit=listed.exit,
        rejected=listed.rejected,
        trigger=listed.trigger,
        # names and locks; values never (a value of None here means "not read")
        variables={
            name: Variable(value=None, locked=name in listed.locked_names)
            for name in listed.variable_names
        },
        usage=listed.usage,
        turns=listed.turns,
        delegation=delegation,
        parent_session_id=listed.parent_session_id,
        waiting_on=waiting_on,
        handoff=listed.handoff,
        source="visibility",
    )


async def worker_polls(client: Client, task_queue: str) -> bool:
    """Whether a worker (a command's included) polls ``task_queue``; True when the server
    cannot say (the time-skipping one)."""
    from archmax_temporal.client.runtime import worker_polling

    try:
        return await worker_polling(client, task_queue, include_commands=True)
    except RPCError:
        return True


async def closed_checkpoint(
    config: RuntimeConfig,
    session_id: str,
    status: WorkflowExecutionStatus | None,
    run_id: str | None,
) -> Checkpoint | None:
    """The checkpoint of a session whose run ``run_id`` closed idle, read from ``config``'s
    store (None: the run is open, or it ended some other way)."""
    if status != WorkflowExecutionStatus.COMPLETED:
        return None

    from archmax_temporal.activities.store import read_checkpoint

    found = await asyncio.to_thread(read_checkpoint, config.session_store(), session_id)
    if found is None or found.run_id != run_id or found.checkpoint.carried is None:
        return None  # the run ended some other way (a child's, a never-admitted run)
    return found


def closed_summary(closed: Checkpoint) -> SessionSummary:
    """The summary of a session whose run closed idle, from its checkpoint."""
    checkpoint = closed.checkpoint
    assert checkpoint.carried is not None
    return projections.summary(checkpoint.carried, checkpoint, None, busy=False)


def closed_from_store(config: RuntimeConfig) -> ClosedSummary:
    """:data:`ClosedSummary` reading each run that closed idle from ``config``'s store."""

    async def summary(
        session_id: str, status: WorkflowExecutionStatus | None, run_id: str
    ) -> SessionSummary | None:
        found = await closed_checkpoint(config, session_id, status, run_id)
        return closed_summary(found) if found is not None else None

    return summary


async def page(
    client: Client,
    config: RuntimeConfig,
    *,
    workflow: str | None = None,
    status: SessionStatus | None = None,
    due: bool = False,
    limit: int = 100,
    token: bytes | None = None,
    closed: ClosedSummary | None = None,
) -> tuple[list[SessionSummary], bytes | None]:
    """One page of :func:`sessions` (``limit`` executions looked at) and Temporal's token
    for the next page (None: the last). ``closed`` reads a run that closed idle (default:
    from ``config``'s store). Whether a worker polls is asked beside the page, not after
    it: one round trip to the server, not two."""
    now = datetime.now(UTC)
    polling = asyncio.ensure_future(worker_polls(client, config.task_queue))
    listing = client.workflow_service.list_workflow_executions(
        ListWorkflowExecutionsRequest(
            namespace=client.namespace,
            page_size=limit,
            next_page_token=token or b"",
            query=listing_query(
                config.task_queue,
                workflow=workflow,
                status=status,
                due_before=now if due else None,
                search_attributes=config.search_attributes,
            ),
        ),
        retry=True,
        timeout=LIST_TIMEOUT,
    )
    try:
        response = await listing
    except BaseException as exc:
        polling.cancel()  # and awaited: no task is left pending, nor its error unread
        with contextlib.suppress(BaseException):
            await polling
        missing = unregistered_search_attributes(exc, client.namespace)
        if missing is not None:
            raise missing from None
        raise
    polled = await polling
    # Visibility lists runs: a session that closed idle and reopened has several. Its
    # open run describes it; a closed one only when it is its latest and closed idle.
    latest: dict[str, WorkflowExecutionInfo] = {}
    for run in response.executions:
        held = latest.get(run.execution.workflow_id)
        if held is None or newer(run, held):
            latest[run.execution.workflow_id] = run
    read_closed = closed or closed_from_store(config)
    plain = client.data_converter.payload_codec is None
    kept: list[SessionSummary] = []
    for session_id, run in latest.items():
        summary: SessionSummary | None
        if run.status == _RUNNING:
            try:
                published = published_listing(run.memo, plain=plain)
            except _NeedsConverter:
                published = await _converted_listing(client, session_id, run.memo)
            attributes = listed_attributes(run.search_attributes)
            summary = summary_of(session_id, attributes, published, polled=polled)
        else:  # None: it ended otherwise (a finished child, say)
            state = WorkflowExecutionStatus(run.status) if run.status else None
            summary = await read_closed(session_id, state, run.execution.run_id)
        if (
            summary is not None
            and summary.status != "new"  # a run that never admitted a firing is no session
            and (status is None or summary.status == status)  # visibility lags a little
            and (workflow is None or summary.workflow == workflow)
            and (not due or is_due(summary, now))
        ):
            kept.append(summary)
    return kept, response.next_page_token or None


async def _converted_listing(
    client: Client, session_id: str, memo: Memo
) -> projections.PublishedListing | None:
    """The listing memo through the client's data converter (its codec, its encodings), as
    ``WorkflowExecution.memo_value`` reads it."""
    converter = client.data_converter.with_context(
        WorkflowSerializationContext(namespace=client.namespace, workflow_id=session_id)
    )
    (listing,) = await converter.decode([memo.fields[LISTED_MEMO]], [projections.PublishedListing])
    return listing if isinstance(listing, projections.PublishedListing) else None


async def sessions(
    client: Client,
    config: RuntimeConfig,
    *,
    workflow: str | None = None,
    status: SessionStatus | None = None,
    due: bool = False,
    limit: int = 100,
    closed: ClosedSummary | None = None,
) -> list[SessionSummary]:
    """This deployment's sessions (``config``'s task queue), newest first, at most
    ``limit``, read from visibility alone, page after page (see ``sessions.list``)."""
    found: list[SessionSummary] = []
    token: bytes | None = None
    while len(found) < limit:
        got, token = await page(
            client,
            config,
            workflow=workflow,
            status=status,
            due=due,
            limit=limit - len(found),
            token=token,
            closed=closed,
        )
        found += got
        if not token:
            break
    return found[:limit]
