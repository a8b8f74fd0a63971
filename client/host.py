"""The host API behind ``create_agent(...)``: the agent and its ``workflow`` and ``sessions``
surfaces.

A host hands a firing to ``agent.workflow.send``: one call, whatever the session's state. It
starts the session's workflow when the id is new (update-with-start) or sends the update to the
one that exists, and returns the :class:`Outcome` when the turn settles. ``deliver`` resumes a
session parked by ``archmax_wait``. Refusals come back as the typed errors of
``workflows.errors``, raised before the session is touched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.activities.hook_executors import HookExecutor, check_executors
from archmax_temporal.activities.host_tools import HostTool, as_host_tools
from archmax_temporal.activities.session_store import SessionStore, write_upload
from archmax_temporal.activities.store import stored_trail
from archmax_temporal.activities.store_errors import WorkspaceError
from archmax_temporal.activities.store_identity import describe_store, session_store_ref
from archmax_temporal.activities.stored_variables import resolve_variables
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.client import visibility
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.events import (
    EventCallback,
    SessionEvent,
    session_events,
    while_watching,
)
from archmax_temporal.client.firing import fire, new_key
from archmax_temporal.client.loader import (
    LoadedWorkflow,
    load_delegates,
    load_workflow,
    turn_spec,
)
from archmax_temporal.client.repair import (
    RepairReport,
    rebuild,
    recorded_history,
    stored_result,
    write_rebuilt,
)
from archmax_temporal.client.runtime import (
    Runtime,
    WorkerMode,
    open_runtime,
    translate,
    unavailable,
    worker_polling,
)
from archmax_temporal.client.visibility import NO_WORKER as NO_WORKER  # re-exported
from archmax_temporal.client.visibility import listed_summary as listed_summary
from archmax_temporal.client.visibility import listing_query as listing_query
from archmax_temporal.workflows import projections
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.contracts import LISTED_MEMO
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.errors import (
    InvalidSessionIdError,
    PayloadTooLargeError,
    SessionNotFoundError,
    SessionNotResumableError,
    SessionUnavailableError,
    SpecNeededError,
    WorkflowDisabledError,
    error_from_type,
)
from archmax_temporal.workflows.firing import (
    Admission,
    check_decision,
    check_decision_size,
    check_delivery,
    check_delivery_size,
    check_reply,
    check_reply_size,
    check_send,
    check_send_size,
)
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.limits import INLINE_FILE_BYTES
from archmax_temporal.workflows.models import (
    Checkpoint,
    DecideInput,
    DelegateSpec,
    DeliverInput,
    FileUpload,
    Outcome,
    ReplyInput,
    SendInput,
    SessionInput,
    SessionStatus,
    SessionSummary,
    SessionView,
    ToolMock,
    ToolSchema,
    TranscriptLog,
    TurnSpec,
    Variable,
)
from archmax_temporal.workflows.paths import MISSING, InvalidPathError, parse_path, resolve_path
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.spec import MANUAL_TRIGGER
from archmax_temporal.workflows.store_binding import MISMATCH
from archmax_temporal.workflows.zones import ARTIFACTS

if TYPE_CHECKING:
    from archmax_temporal.activities.model import ModelConfig


CLOSED_RETRIES: Final = 3
"""How many times a send is sent again when the session's run closed idle under it, or the
session needed the workflow's spec (each time nothing was applied)."""


@dataclass(frozen=True)
class ResolvedSession:
    """Which session a firing belongs to, and what it would do there."""

    session_id: str
    disposition: Literal["turn", "resume", "reply"]
    minted: bool


def _encoded(content: str | bytes) -> tuple[str, Literal["utf-8", "base64"]]:
    """Text as it is, bytes base64-encoded, so they arrive exactly."""
    if isinstance(content, str):
        return content, "utf-8"
    return base64.b64encode(content).decode("ascii"), "base64"


def file_upload(name: str, content: str | bytes, store: SessionStore | None = None) -> FileUpload:
    """A file for ``send(files=...)``: inline when small, else written to ``store``'s uploads
    and carried by its digest (a large file never travels in a history)."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    if store is not None and len(data) > INLINE_FILE_BYTES:
        return FileUpload(name=name, ref=write_upload(store, data), size=len(data))
    text, encoding = _encoded(content)
    return FileUpload(name=name, content=text, encoding=encoding, size=len(data))


WAITING_ON: Final = {
    MODEL_ACTIVITY: "the model",
}
"""What a retried activity is, in a summary's ``waiting on …`` line (else its name)."""


def _store_wait(described: WorkflowExecutionDescription) -> str | None:
    """``waiting on a worker of its store: <why>`` for a session whose activity a worker of
    another store refused (``StoreMismatchError``) and that waits for its next attempt."""
    for pending in described.raw_description.pending_activities:
        failure = pending.last_failure
        if (
            failure.application_failure_info.type == MISMATCH
            and pending.state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        ):
            attempt = pending.attempt
            return f"waiting on a worker of its store: {failure.message} (attempt {attempt})"
    return None


def _retrying(described: WorkflowExecutionDescription) -> str | None:
    """``waiting on the model: <last failure>`` for a session whose activity is retrying (on
    a worker of its store first: :func:`_store_wait`)."""
    refused = _store_wait(described)
    if refused is not None:
        return refused
    for pending in described.raw_description.pending_activities:
        if pending.attempt > 1 and pending.last_failure.message:
            what = WAITING_ON.get(pending.activity_type.name, pending.activity_type.name)
            return f"waiting on {what}: {pending.last_failure.message} (attempt {pending.attempt})"
    return None


def _store_of(reopening: Checkpoint | None) -> dict[str, str | None]:
    """The store a session reopening from its checkpoint recorded when it was created (none
    recorded, an older session's: the store its checkpoint was read from, this host's)."""
    if reopening is None or not reopening.checkpoint.store_id:
        return {}
    checkpoint = reopening.checkpoint
    return {"store_id": checkpoint.store_id, "store_description": checkpoint.store_description}


def mint_session_id() -> str:
    """A fresh session id, for a firing nothing else names."""
    return f"session-{uuid.uuid4()}"


_KEYED_SESSIONS = uuid.UUID("6f1d3a0e-5b7c-4c1e-9a51-2d0c8e4b7a93")
"""The namespace of the session ids minted for an idempotency key (uuid5)."""


def minted_for_key(workflow: str, trigger: str, idempotency_key: str) -> str:
    """The session id a keyed firing that names no session mints: the same on every retry of
    that firing, so the retry reaches the session its first attempt started (and Temporal
    dedupes the update there) instead of starting another."""
    name = "\n".join((workflow, trigger, idempotency_key))
    return f"session-{uuid.uuid5(_KEYED_SESSIONS, name)}"


class WorkflowSurface:
    """Firings into sessions of one workflow: send, deliver, resolve_session."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def _session_id_for(
        self,
        trigger: str,
        variables: dict[str, Any],
        session_id: str | None,
        session_path: str | None,
    ) -> tuple[str, bool]:
        """Precedence: explicit id, per-firing path, the assembly's path, the trigger's
        ``session:`` declaration, a minted id (also when a path does not resolve). A malformed
        per-firing path is refused even beside an explicit id (an empty one included)."""
        if session_path is not None:
            try:
                parse_path(session_path)
            except InvalidPathError as exc:
                raise InvalidSessionIdError(
                    f"malformed session path {session_path!r}: {exc}"
                ) from None
        if session_id:
            return check_session_id(session_id), False
        declaration = self._agent.loaded.spec.trigger(trigger)
        for path in (
            session_path,
            self._agent.session_path,
            declaration.session if declaration else None,
        ):
            if not path:
                continue
            try:
                value = resolve_path(parse_path(path), variables)
            except InvalidPathError as exc:
                raise InvalidSessionIdError(f"malformed session path {path!r}: {exc}") from None
            if value is not MISSING and isinstance(value, str | int) and str(value):
                return check_session_id(str(value), source=f"session path {path!r}"), False
            break
        return mint_session_id(), True

    async def resolve_session(
        self,
        *,
        trigger: str = MANUAL_TRIGGER,
        variables: dict[str, Any] | None = None,
        session_id: str | None = None,
        session_path: str | None = None,
    ) -> ResolvedSession:
        """The session a firing lands on and its disposition, without invoking anything."""
        sid, minted = self._session_id_for(trigger, variables or {}, session_id, session_path)
        if minted:
            return ResolvedSession(sid, "turn", True)
        try:
            summary = await self._agent.sessions.get(sid)
        except SessionNotFoundError:
            return ResolvedSession(sid, "turn", False)
        if summary.status == "awaiting_input":
            return ResolvedSession(sid, "resume", False)
        if summary.status == "awaiting_decision":
            return ResolvedSession(sid, "reply", False)
        if summary.status == "running":
            raise SessionNotResumableError(f"session {sid!r} is mid-turn; retry after it settles")
        return ResolvedSession(sid, "turn", False)

    async def send(
        self,
        session_id: str | None,
        message: str | None,
        *,
        trigger: str = MANUAL_TRIGGER,
        variables: dict[str, Any] | None = None,
        session_path: str | None = None,
        files: Mapping[str, tuple[str, str | bytes]] | None = None,
        mocks: Sequence[ToolMock] | None = None,
        on_event: EventCallback | None = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Start or continue a session; returns the Outcome when the turn settles.

        ``idempotency_key`` (generated when not given) is the firing's Temporal update id: a
        retried call with the same key applies nothing twice and returns the first call's
        outcome (:mod:`client.firing`). A keyed firing that would mint a session mints the
        same id on every retry (:func:`minted_for_key`).

        ``mocks`` (a test case's) answer matching governed tool calls of the turns this firing
        drives (a case re-run on an existing session id brings its own); None keeps the
        session's.

        ``files`` maps a variable to ``(name, content)``: each file is placed in the session's
        ``scratchpad/attachments/`` before the turn and the variable seeded with its path.

        A new id starts the session's workflow (update-with-start); an existing finished one
        takes its next turn; one parked by ``archmax_wait`` has the firing delivered into it.

        ``on_event`` (also on ``deliver``, ``decide`` and ``reply``) is called with each of the
        turn's events as it happens (:mod:`client.events`); the call returns once the turn
        settled and its end event was delivered.
        """
        agent = self._agent
        seeds = dict(variables or {})
        sid, minted = self._session_id_for(trigger, seeds, session_id, session_path)
        if minted and idempotency_key:
            sid = minted_for_key(agent.loaded.slug, trigger, idempotency_key)
        loaded = agent.loaded
        if loaded.spec.disabled:
            await self._refuse_new_turn(sid, minted)
        current = agent.turn_spec
        # the store the session is created in: its activities run only on that store's workers
        created_in = await asyncio.to_thread(
            session_store_ref,
            agent.config.session_store(),
            describe=describe_store(agent.config.store_location),
        )
        session_input = SessionInput(
            session_id=sid,
            workflow=loaded.slug,
            spec=loaded.spec,
            spec_hash=loaded.spec_hash,
            prompt=loaded.prompt,
            search_attributes=agent.config.search_attributes,
            requests_per_run=agent.requests_per_run,
            model_calls_per_run=agent.model_calls_per_run,
            host_tools=agent.host_tools,
            mocks=list(mocks or ()),
            hook_sources=loaded.hook_sources,
            delegates=agent.delegates,
            revision=current.revision,
            idle_close_s=agent.config.idle_close.total_seconds()
            if agent.config.idle_close
            else None,
            limits=agent.config.limits,  # the session's validators hold firings to them
            store_id=created_in.id,
            store_description=created_in.description,
        )
        limits = agent.config.limits
        for var, (name, content) in (files or {}).items():
            size = len(content.encode("utf-8") if isinstance(content, str) else content)
            if size > limits.file_bytes:
                raise PayloadTooLargeError(
                    f"file {var!r} ({name}) is {size} bytes; the limit is {limits.file_bytes}"
                )
        store = agent.config.session_store() if files else None
        firing = SendInput(
            message=message,
            trigger=trigger,
            variables=seeds,
            files={
                var: file_upload(name, content, store)
                for var, (name, content) in (files or {}).items()
            },
            mocks=None if mocks is None else list(mocks),
            revision=current.revision,
        )
        check_send_size(limits, firing)
        reopening: Checkpoint | None = None
        if minted or await self._starts_afresh(sid):
            reopening = None if minted else await self._agent.sessions.closed(sid)
            self._admit_first_firing(sid, firing, reopening)
        key = idempotency_key or new_key()
        attempts = 0

        async def start() -> WorkflowUpdateHandle[Outcome]:
            nonlocal attempts, reopening
            attempts += 1
            if attempts > 1 and not minted:  # the run may have closed idle since
                reopening = await self._agent.sessions.closed(sid)
            operation = WithStartWorkflowOperation(
                ArchmaxSession.run,
                # a session whose run closed idle starts its next run from the checkpoint, in
                # the store it was created in
                session_input.model_copy(
                    update={"carried": reopening.checkpoint.carried if reopening else None}
                    | _store_of(reopening)
                ),
                id=sid,
                task_queue=agent.config.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"archmax session · {loaded.slug}",
                static_details=f"Workflow `{loaded.slug}` (spec {loaded.spec_hash}).",
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(sa.WORKFLOW, loaded.slug),
                        SearchAttributePair(sa.STATUS, "new"),
                    ]
                )
                if agent.config.search_attributes
                else None,
            )
            try:
                return await agent.client.start_update_with_start_workflow(
                    "send",
                    carrying,
                    start_workflow_operation=operation,
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                    id=key,
                    result_type=Outcome,
                )
            finally:
                _collect_start(operation)

        carrying = firing
        for _ in range(CLOSED_RETRIES):
            try:
                return await self._watched(sid, on_event, fire(agent.client, sid, key, start))
            except SpecNeededError:
                # The session holds another revision and this firing opens a turn: it runs
                # under the workflow as loaded here, so send that along (a refused update
                # wrote nothing).
                carrying = firing.model_copy(update={"spec": current})
            except (SessionNotFoundError, RPCError, WorkflowUpdateFailedError):
                # The run closed idle as the firing reached it (nothing was applied): the
                # next attempt starts a run from the checkpoint.
                if minted or await self._agent.sessions.closed(sid) is None:
                    raise
        return await self._watched(sid, on_event, fire(agent.client, sid, key, start))

    async def _starts_afresh(self, session_id: str) -> bool:
        """Whether a firing on ``session_id`` starts a new workflow run (no run, or the last
        one closed): then the host admits it itself before anything starts."""
        try:
            described = await self._agent.handle(session_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return True
            raise translate(exc, session_id=session_id) from exc
        return described.status != WorkflowExecutionStatus.RUNNING

    def _admit_first_firing(
        self, session_id: str, request: SendInput, reopening: Checkpoint | None = None
    ) -> None:
        """The checks the session's validator would make of a first firing (trigger, names,
        ``requires``, disabled), made here: a refused first firing starts no workflow, so it
        leaves no session behind. A session reopening from its checkpoint is checked as it
        stands there."""
        loaded = self._agent.loaded
        carried = reopening.checkpoint.carried if reopening else None
        view = Admission(
            session_id=session_id,
            workflow=loaded.slug,
            spec=loaded.spec,
            status=carried.status if carried else "new",
            state=carried.state if carried else None,
            variables=carried.variables if carried else {},
            pending_decision=None,
            busy=False,
            waiting=None,
            limits=self._agent.config.limits,
            revision=self._agent.turn_spec.revision,
        )
        try:
            check_send(view, request)
        except ApplicationError as refused:
            typed = error_from_type(refused.type, refused.message)
            raise (typed or refused) from None

    async def _watched(
        self, session_id: str, on_event: EventCallback | None, update: Awaitable[Outcome]
    ) -> Outcome:
        if on_event is None:
            return await self._whole(session_id, await update)
        watched = await while_watching(
            self._agent.client, session_id, on_event, update, live=self._agent.runtime.live
        )
        return await self._whole(session_id, watched)

    async def _whole(self, session_id: str, outcome: Outcome) -> Outcome:
        """``outcome`` with the session's whole variables: a session's outcome carries only
        what its firing changed (its variables never travel whole in its history), so the
        rest is read from the artifacts every settled firing writes to the store (this
        host's ``ARCHMAX_STORE``, which the workers share; no worker is asked), the values by
        reference whole; the firing's own values win. Unreadable: the outcome as it came."""
        if not outcome.variables_delta:
            return outcome
        store = self._agent.config.session_store()
        try:
            whole = await asyncio.to_thread(_stored_variables, store, session_id, outcome.variables)
        except (WorkspaceError, OSError, ValueError):
            return outcome
        return outcome.model_copy(
            update={"variables": whole, "variables_delta": False, "variable_count": len(whole)}
        )

    async def _refuse_new_turn(self, session_id: str, minted: bool) -> None:
        """A disabled workflow starts no new turn, on a new session or an existing one (whose
        own spec may predate the change); a parked session still drains."""
        if not minted:
            try:
                summary = await self._agent.sessions.get(session_id)
            except SessionNotFoundError:
                summary = None
            if summary is not None and summary.status in ("awaiting_input", "awaiting_decision"):
                return
        raise WorkflowDisabledError(
            f"Refusing to start: workflow '{self._agent.loaded.slug}' is disabled."
        )

    async def deliver(
        self,
        session_id: str,
        *,
        trigger: str | None,
        variables: dict[str, Any] | None = None,
        message: str | None = None,
        on_event: EventCallback | None = None,
        idempotency_key: str | None = None,
        mocks: Sequence[ToolMock] | None = None,
    ) -> Outcome:
        """Resume a session parked by ``archmax_wait``; returns the resumed turn's Outcome.
        ``mocks`` (a test case's) apply to the resumed turn (None keeps the session's)."""
        delivery = DeliverInput(
            trigger=trigger,
            variables=dict(variables or {}),
            message=message,
            mocks=None if mocks is None else list(mocks),
        )
        check_delivery_size(self._agent.config.limits, delivery)
        return await self._update(session_id, "deliver", delivery, on_event, idempotency_key)

    async def _update(
        self,
        session_id: str,
        update: str,
        argument: Any,
        on_event: EventCallback | None,
        idempotency_key: str | None,
    ) -> Outcome:
        """One update of a running session (by its contract name), as a
        :func:`client.firing.fire` firing."""
        handle = self._agent.handle(session_id)
        key = idempotency_key or new_key()
        closed = await self._agent.sessions.closed(session_id)
        if closed is not None:  # closed idle, so finished: refused as the open run would
            self._refuse_closed(closed, update, argument)

        def start() -> Awaitable[WorkflowUpdateHandle[Outcome]]:
            return handle.start_update(
                update,
                argument,
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                id=key,
                result_type=Outcome,
            )

        return await self._watched(
            session_id, on_event, fire(self._agent.client, session_id, key, start)
        )

    def _refuse_closed(self, closed: Checkpoint, update: str, argument: Any) -> None:
        """A deliver, decide or reply to a session whose run closed idle: it is finished, so
        the same checks as its open run's validator refuse it, with the same typed error."""
        checkpoint = closed.checkpoint
        assert checkpoint.carried is not None
        view = Admission.of(checkpoint, checkpoint.carried)
        try:
            if update == "deliver":
                check_delivery(view, argument)
            elif update == "decide":
                check_decision(view, argument)
            else:
                check_reply(view, argument.message)
        except ApplicationError as refused:
            typed = error_from_type(refused.type, refused.message)
            raise (typed or refused) from None

    async def decide(
        self,
        session_id: str,
        *,
        to: str,
        comment: str | None = None,
        on_event: EventCallback | None = None,
        idempotency_key: str | None = None,
        mocks: Sequence[ToolMock] | None = None,
        seq: int | None = None,
    ) -> Outcome:
        """Resume a session parked at a human state along the edge ``to``, as the reviewer.
        ``mocks`` (a test case's) apply to the resumed turn (None keeps the session's).
        ``seq``: the ``pending_decision.seq`` the reviewer saw; when the session has been
        decided since, :class:`SessionNotParkedError` (None: whichever park stands)."""
        decision = DecideInput(
            to=to, comment=comment, mocks=None if mocks is None else list(mocks), seq=seq
        )
        check_decision_size(self._agent.config.limits, decision)
        return await self._update(session_id, "decide", decision, on_event, idempotency_key)

    async def reply(
        self,
        session_id: str,
        message: str,
        *,
        on_event: EventCallback | None = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Send a message to a session parked at a human state; it answers and stays parked."""
        check_reply_size(self._agent.config.limits, message)
        return await self._update(
            session_id, "reply", ReplyInput(message=message), on_event, idempotency_key
        )

    async def signal_deliver(
        self,
        session_id: str,
        *,
        trigger: str,
        variables: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> None:
        """Fire-and-forget delivery (the ``deliver`` signal); an invalid one is dropped."""
        handle = self._agent.handle(session_id)
        delivery = DeliverInput(trigger=trigger, variables=dict(variables or {}), message=message)
        try:
            await handle.signal(ArchmaxSession.deliver_signal, delivery)
        except Exception as exc:
            raise translate(exc, session_id=session_id) from exc


def _collect_start(operation: WithStartWorkflowOperation[Any, Any]) -> None:
    """Collect the start half of an update-with-start. The SDK settles the operation's
    workflow-handle future with the call's error when the call fails (a server outage, say);
    unread, each failed attempt printed "Future exception was never retrieved" when
    collected. Nothing here needs the handle: the firing's outcome is the update's."""
    future = operation._workflow_handle  # the SDK's own: workflow_handle() would wait on it
    if future.done():
        if not future.cancelled():
            future.exception()
    else:  # settled later, or never: read it then
        future.add_done_callback(lambda done: done.cancelled() or done.exception())


def workspace_error(refused: ApplicationError) -> Exception:
    """The typed :class:`~archmax_temporal.activities.store_errors.WorkspaceError` (its
    ``path`` included) an activity's refusal stands for; any other error as it is."""
    from archmax_temporal.activities import store_errors

    cls = getattr(store_errors, refused.type or "", None)
    if isinstance(cls, type) and issubclass(cls, store_errors.WorkspaceError):
        path = refused.details[0] if refused.details else ""
        return cls(refused.message, str(path))
    return refused


class SessionsSurface:
    """Reading sessions: list, get, view."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    async def seed(self, session_id: str, files: Mapping[str, str | bytes]) -> list[str]:
        """Write files at chosen agent-visible paths of a session (``scratchpad/…`` or
        root-level files such as ``trigger.json``); seeds no variable. Suits fixtures.

        Writes through this host's store (``ARCHMAX_STORE``), which the embedded worker
        shares; mounts (``skills/…``) and runtime areas are refused with the typed
        ``WorkspaceError`` (``ReadOnlyPathError``, ``PathEscapeError``, …) naming the path.
        """
        from archmax_temporal.activities.workspace import WorkspaceActivities
        from archmax_temporal.workflows.workspace_tools import FileContent, SeedFilesInput

        workspace = WorkspaceActivities(self._agent.config.session_store(), self._agent.config.root)
        payload = {
            path: FileContent(content=text, encoding=encoding)
            for path, (text, encoding) in ((p, _encoded(c)) for p, c in files.items())
        }
        try:
            result = await workspace.seed_files(
                SeedFilesInput(session_id=check_session_id(session_id), files=payload)
            )
        except ApplicationError as refused:  # the typed refusal, not its wire form
            raise workspace_error(refused) from None
        return result.paths

    async def closed(self, session_id: str) -> Checkpoint | None:
        """The checkpoint of a session whose latest run closed idle (None: its run is open,
        it ended otherwise, or there is no such session)."""
        try:
            described = await self._agent.handle(session_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise translate(exc, session_id=session_id) from exc
        return await self._checkpoint_of(session_id, described.status, described.run_id)

    async def _checkpoint_of(
        self, session_id: str, status: WorkflowExecutionStatus | None, run_id: str | None
    ) -> Checkpoint | None:
        return await visibility.closed_checkpoint(self._agent.config, session_id, status, run_id)

    @staticmethod
    def _closed_summary(closed: Checkpoint) -> SessionSummary:
        return visibility.closed_summary(closed)

    async def get(self, session_id: str, *, timeout: timedelta | None = None) -> SessionSummary:
        """The session's summary (a query; for a session whose run closed idle, its
        checkpoint), or :class:`SessionNotFoundError`; with no worker to answer,
        :class:`SessionUnavailableError` at once (not after the query's timeout)."""
        try:
            described = await self._answerable(session_id)
            closed = await self._checkpoint_of(session_id, described.status, described.run_id)
            if closed is not None:
                return await self._whole_variables(session_id, self._closed_summary(closed))
            summary = await self._agent.handle(session_id).query(
                ArchmaxSession.summary, rpc_timeout=timeout
            )
        except Exception as exc:
            raise await self._typed(exc, session_id) from exc
        summary = await self._whole_variables(session_id, summary)
        # a finished session's idle checkpoint can wait on a worker of its store too
        waiting = _retrying(described) if summary.status == "running" else _store_wait(described)
        return summary.model_copy(update={"waiting_on": waiting}) if waiting else summary

    async def read(self, session_id: str) -> SessionSummary:
        """The session's summary as a reader sees it: :meth:`get` (the session's own answer)
        when a worker answers, else :meth:`describe` (what visibility knows, ``waiting_on``
        saying no worker polls). What ``archmax sessions <id>`` and ``GET
        /v1/sessions/{id}`` show: like the listing, it needs no worker."""
        try:
            return await self.get(session_id)
        except SessionUnavailableError:
            return await self.describe(session_id)

    async def _whole_variables(self, session_id: str, summary: SessionSummary) -> SessionSummary:
        """``summary`` with its values by reference read back whole from the store (this
        host's ``ARCHMAX_STORE``, which the workers share)."""
        if not any(v.ref is not None and v.value is None for v in summary.variables.values()):
            return summary
        store = self._agent.config.session_store()
        whole = await asyncio.to_thread(resolve_variables, store, session_id, summary.variables)
        return summary.model_copy(update={"variables": whole})

    async def view(self, session_id: str) -> SessionView:
        """The whole recorded session: summary, transcript and trail. The session holds only
        its newest messages; the rest is read from the store's log of the conversation (this
        host's ``ARCHMAX_STORE``, which the workers share)."""
        try:
            described = await self._answerable(session_id)
            closed = await self._checkpoint_of(session_id, described.status, described.run_id)
            view: SessionView
            carried = closed.checkpoint.carried if closed is not None else None
            if closed is not None and carried is not None:
                view = projections.view(carried, closed.checkpoint, None, busy=False)
            else:
                view = await self._agent.handle(session_id).query(ArchmaxSession.view)
        except Exception as exc:
            raise await self._typed(exc, session_id) from exc
        store = self._agent.config.session_store()
        whole = await self._whole_variables(session_id, view.summary)
        view = view.model_copy(update={"summary": whole})
        if view.logged:  # the window holds logged messages shortened: the log has them whole
            logs = TranscriptLogs(store)
            where = TranscriptLog(base=view.logged, base_hash=view.logged_hash)
            try:
                logged = await asyncio.to_thread(logs.read, session_id, where)
            except ApplicationError:  # the log lost them: the window's shortened ones stay
                logged = []
            if view.transcript_offset or len(logged) == view.logged:
                newer = view.transcript[max(view.logged - view.transcript_offset, 0) :]
                view = view.model_copy(
                    update={"transcript": [*logged, *newer], "transcript_offset": 0}
                )
        if view.trail_offset:
            held = await asyncio.to_thread(stored_trail, store, session_id, view.trail_persisted)
            newer_steps = view.trail[max(view.trail_persisted - view.trail_offset, 0) :]
            view = view.model_copy(update={"trail": [*held, *newer_steps], "trail_offset": 0})
        return view

    async def _answerable(self, session_id: str) -> WorkflowExecutionDescription:
        """Refuse a query no worker would answer: a running session whose task queue no live
        worker polls (a finished run answers from its history, and a missing one is
        :class:`SessionNotFoundError` from ``describe``). Returns the description."""
        described = await self._agent.handle(session_id).describe()
        if described.status is not None and described.status.name != "RUNNING":
            return described
        queue = described.task_queue
        try:
            polled = not queue or await worker_polling(
                self._agent.client, queue, include_commands=True
            )
        except RPCError:  # a server that cannot describe queues (the time-skipping one)
            return described
        if not polled:
            raise unavailable(session_id, queue)
        return described

    async def _typed(self, error: Exception, session_id: str) -> BaseException:
        """The typed error a failed query stands for; an unanswered one names the queue."""
        typed = translate(error, session_id=session_id)
        if not isinstance(typed, SessionUnavailableError):
            return typed
        try:
            described = await self._agent.handle(session_id).describe()
        except Exception:
            return typed
        return unavailable(session_id, described.task_queue)

    async def repair(self, session_id: str) -> RepairReport:
        """Rebuild the session's conversation log (and the prompts its model calls name) in
        this host's store from the workflow history, where every message is once
        (:mod:`client.repair`): what a ``TranscriptLogDiverged`` turn failure (a truncated,
        corrupted or deleted ``checkpoints/transcript.jsonl``) asks for. A healthy log is
        left as it is (``log="fine"``); a history that cannot vouch for the log is
        :class:`TranscriptLogUnrecoverableError` and nothing is written.

        Run it between turns: while one is in flight (a model call or any activity pending,
        or the session publishing ``running``) it is refused with
        :class:`SessionNotResumableError`, since the turn's worker writes the same log."""
        handle = self._agent.handle(session_id)
        try:
            described = await handle.describe()
        except Exception as exc:
            raise await self._typed(exc, session_id) from exc
        if described.status == WorkflowExecutionStatus.RUNNING:
            listed = await described.memo_value(
                LISTED_MEMO, None, type_hint=projections.PublishedListing
            )
            pending = described.raw_description.pending_activities
            if pending or (listed is not None and listed.status == "running"):
                raise SessionNotResumableError(
                    f"session {session_id!r} is mid-turn; repair it after the turn settles"
                )
        try:
            recorded = await recorded_history(self._agent.client, session_id)
        except RPCError as exc:
            raise translate(exc, session_id=session_id) from exc
        store = self._agent.config.session_store()

        def rebuilt_and_written() -> RepairReport:
            rebuilt = rebuild(session_id, recorded, stored_result(store, session_id))
            return write_rebuilt(store, session_id, rebuilt)

        return await asyncio.to_thread(rebuilt_and_written)

    def events(
        self, session_id: str, *, after: int = 0, follow: bool = False
    ) -> AsyncIterator[SessionEvent]:
        """The session's events in archmax's vocabulary (``tool-called``, ``hook-verdict``,
        ``parked``, …), read from its Temporal history after event ``after``; with
        ``follow``, as they happen, and the model's text as it is written
        (``agent-text-delta``; see :mod:`client.events`)."""
        return session_events(
            self._agent.client,
            session_id,
            after=after,
            follow=follow,
            live=self._agent.runtime.live,
        )

    async def _outdated(self, summaries: list[SessionSummary]) -> list[SessionSummary]:
        from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest

        client = self._agent.client
        current: dict[str, str | None] = {}
        kept: list[SessionSummary] = []
        for summary in summaries:
            try:
                described = await self._agent.handle(summary.session_id).describe()
            except RPCError:
                continue
            if described.status != WorkflowExecutionStatus.RUNNING:
                continue  # a run closed idle starts on the current build when it reopens
            info = described.raw_description.workflow_execution_info.versioning_info
            version = info.deployment_version
            if not version.deployment_name:
                continue  # not on a versioned worker
            if version.deployment_name not in current:
                try:
                    deployment = await client.workflow_service.describe_worker_deployment(
                        DescribeWorkerDeploymentRequest(
                            namespace=client.namespace, deployment_name=version.deployment_name
                        )
                    )
                    routing = deployment.worker_deployment_info.routing_config
                    current[version.deployment_name] = (
                        routing.current_deployment_version.build_id or None
                    )
                except RPCError:
                    current[version.deployment_name] = None
            target = current[version.deployment_name]
            if target is not None and version.build_id != target:
                kept.append(summary.model_copy(update={"build_id": version.build_id}))
        return kept

    async def page(
        self,
        *,
        workflow: str | None = None,
        status: SessionStatus | None = None,
        due: bool = False,
        limit: int = 100,
        token: bytes | None = None,
    ) -> tuple[list[SessionSummary], bytes | None]:
        """One page of :meth:`list` (``limit`` executions looked at) and Temporal's token for
        the next page (None: the last)."""
        return await visibility.page(
            self._agent.client,
            self._agent.config,
            workflow=workflow,
            status=status,
            due=due,
            limit=limit,
            token=token,
        )

    async def list(
        self,
        *,
        workflow: str | None = None,
        status: SessionStatus | None = None,
        due: bool = False,
        limit: int = 100,
        outdated: bool = False,
    ) -> list[SessionSummary]:
        """This deployment's sessions (its task queue), newest first, at most ``limit``, read
        from Temporal's visibility alone (search attributes and the listing each session
        publishes in its memo; a session whose run closed idle, from its checkpoint): no
        query per session, and the same answers with no worker running. ``status`` and
        ``workflow`` narrow it; ``due`` keeps sessions whose timed wake is past. :meth:`get`
        asks the session itself.

        ``outdated``: only sessions whose run is pinned to another Worker Deployment build
        than its deployment's current version (each with ``build_id`` set): the parked ones
        move to the current build when they wake."""
        if outdated:
            listed = await self.list(workflow=workflow, status=status, due=due, limit=limit)
            return await self._outdated(listed)
        return await visibility.sessions(
            self._agent.client,
            self._agent.config,
            workflow=workflow,
            status=status,
            due=due,
            limit=limit,
        )

    async def describe(self, session_id: str) -> SessionSummary:
        """The session as visibility knows it (its search attributes and the listing it
        publishes in its memo at every turn's end), with no worker to answer: what
        ``archmax sessions`` shows when none polls. :class:`SessionNotFoundError` if none."""
        try:
            described = await self._agent.handle(session_id).describe()
        except Exception as exc:
            raise await self._typed(exc, session_id) from exc
        queue = described.task_queue or self._agent.config.task_queue
        summary = await listed_summary(described, polled=await self._polled(queue))
        refused = None if summary.waiting_on else _store_wait(described)
        return summary.model_copy(update={"waiting_on": refused}) if refused else summary

    async def _polled(self, task_queue: str) -> bool:
        """Whether a worker (a command's included) polls ``task_queue``; True when the server
        cannot say (the time-skipping one)."""
        return await visibility.worker_polls(self._agent.client, task_queue)


def _stored_variables(
    store: SessionStore, session_id: str, changed: dict[str, Variable]
) -> dict[str, Variable]:
    """The session's variables as its ``artifacts/variables.json`` holds them, ``changed``
    over them, every value whole."""
    document = json.loads(store.read_text(session_id, f"{ARTIFACTS}/variables.json"))
    held = {name: Variable.model_validate(record) for name, record in document["variables"].items()}
    return resolve_variables(store, session_id, {**held, **changed})


class Agent:
    """One workflow of an authoring root, bound to a Temporal client."""

    def __init__(
        self,
        runtime: Runtime,
        loaded: LoadedWorkflow | None,
        *,
        session_path: str | None = None,
        requests_per_run: int | None = None,
        model_calls_per_run: int | None = None,
    ) -> None:
        self.requests_per_run = requests_per_run
        self.model_calls_per_run = model_calls_per_run
        self.host_tools: list[ToolSchema] = []
        self.delegates: dict[str, DelegateSpec] = (
            load_delegates(runtime.config.root, loaded) if loaded is not None else {}
        )
        """The callable workflows, pinned into every session this agent starts."""
        self._turn_spec: TurnSpec | None = None
        if session_path is not None:
            try:
                parse_path(session_path)
            except InvalidPathError as exc:
                raise InvalidSessionIdError(
                    f"malformed session path {session_path!r}: {exc}"
                ) from None
        self._runtime = runtime
        self._loaded = loaded
        self.session_path = session_path
        self.workflow = WorkflowSurface(self)
        self.sessions = SessionsSurface(self)

    @property
    def client(self) -> Client:
        """The Temporal client."""
        return self._runtime.client

    @property
    def config(self) -> RuntimeConfig:
        """Where this agent runs."""
        return self._runtime.config

    @property
    def runtime(self) -> Runtime:
        """The connection and whatever the agent started (dev server, worker)."""
        return self._runtime

    @property
    def loaded(self) -> LoadedWorkflow:
        """The workflow this agent fires into (required for send)."""
        if self._loaded is None:
            raise ValueError("this agent was created without a workflow; pass workflow=...")
        return self._loaded

    @property
    def turn_spec(self) -> TurnSpec:
        """The workflow as this agent loaded it, as a turn it opens runs under (spec, prose,
        hooks, callees, and the revision digesting them)."""
        if self._turn_spec is None:
            self._turn_spec = turn_spec(self.loaded, self.delegates)
        return self._turn_spec

    def reload(self) -> None:
        """Load the workflow again from the authoring root: the next turn this agent opens,
        on a new session or an existing one, runs under workflow.yaml as it is now. A
        parked session still resumes under the spec it parked with."""
        if self._loaded is None:
            raise ValueError("this agent was created without a workflow; pass workflow=...")
        root = self._runtime.config.root
        self._loaded = load_workflow(root, self._loaded.slug)
        self.delegates = load_delegates(root, self._loaded)
        self._turn_spec = None

    def handle(self, session_id: str) -> WorkflowHandle[Any, Any]:
        """The Temporal handle of a session (its workflow id is the session id)."""
        return self.client.get_workflow_handle(check_session_id(session_id))

    async def close(self) -> None:
        """Stop the in-process worker, if the agent runs one."""
        await self._runtime.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


async def open_agent(
    workflow: str | None = None,
    *,
    root: Path | str | None = None,
    config: RuntimeConfig | None = None,
    client: Client | None = None,
    model: ModelConfig | None = None,
    session_path: str | None = None,
    worker: WorkerMode | None = None,
    worker_cache: int = 1000,
    requests_per_run: int | None = None,
    model_calls_per_run: int | None = None,
    tools: Sequence[HostTool | Callable[[Any], Any]] = (),
    hook_executors: Mapping[str, HookExecutor] | None = None,
    sandbox_runtime: Sequence[str] | None = None,
) -> Agent:
    """Open an agent: load the workflow, connect, start what is needed (see
    :func:`archmax_temporal.client.agent.create_agent`)."""
    resolved = config or RuntimeConfig.from_env(root=root)
    loaded = load_workflow(resolved.root, workflow) if workflow else None
    registered = as_host_tools(tools)
    runtime = await open_runtime(
        resolved,
        model=model,
        worker_mode=worker,
        client=client,
        worker_cache=worker_cache,
        host_tools=registered,
        hook_executors=check_executors(hook_executors or {}),
        sandbox_runtime=sandbox_runtime,
    )
    agent = Agent(
        runtime,
        loaded,
        session_path=session_path,
        requests_per_run=requests_per_run,
        model_calls_per_run=model_calls_per_run,
    )
    agent.host_tools = [tool.schema() for tool in registered]
    return agent
