"""The write side of the host API, ``agent.workflow``: firings into sessions of one workflow
(send, deliver, decide, reply), each ending in the turn's :class:`Outcome` or a typed error.

A host hands a firing to ``agent.workflow.send``: one call, whatever the session's state. It
starts the session's workflow when the id is new (update-with-start) or sends the update to the
one that exists, and returns the :class:`Outcome` when the turn settles. ``deliver`` resumes a
session parked by ``archmax_wait``. Refusals come back as the typed errors of
``archmax_temporal.workflows.errors``, raised before the session is touched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import WorkspaceError
from archmax_temporal.activities.store_identity import describe_store, session_store_ref
from archmax_temporal.activities.stored_variables import resolve_variables
from archmax_temporal.client.events import EventCallback, while_watching
from archmax_temporal.client.files import file_upload
from archmax_temporal.client.firing import fire, new_key
from archmax_temporal.client.runtime import translate
from archmax_temporal.client.session_ids import ResolvedSession, minted_for_key, session_id_for
from archmax_temporal.client.visibility import closed_checkpoint
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.errors import (
    ArchmaxError,
    PayloadTooLargeError,
    SessionNotFoundError,
    SessionNotResumableError,
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
from archmax_temporal.workflows.models import (
    Checkpoint,
    DecideInput,
    DeliverInput,
    Outcome,
    ReplyInput,
    SendInput,
    SessionInput,
    ToolMock,
    Variable,
)
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.spec import MANUAL_TRIGGER
from archmax_temporal.workflows.zones import ARTIFACTS

if TYPE_CHECKING:
    from archmax_temporal.client.host import Agent

CLOSED_RETRIES: Final = 3
"""How many times a send is sent again when the session's run closed idle under it, or the
session needed the workflow's spec (each time nothing was applied)."""


def _store_of(reopening: Checkpoint | None) -> dict[str, str | None]:
    """The store a session reopening from its checkpoint recorded when it was created (none
    recorded, an older session's: the store its checkpoint was read from, this host's)."""
    if reopening is None or not reopening.checkpoint.store_id:
        return {}
    checkpoint = reopening.checkpoint
    return {"store_id": checkpoint.store_id, "store_description": checkpoint.store_description}


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
        """The session a firing on ``trigger`` belongs to (:func:`session_id_for`)."""
        declaration = self._agent.loaded.spec.trigger(trigger) if not session_id else None
        return session_id_for(
            variables,
            session_id=session_id,
            session_path=session_path,
            agent_path=self._agent.session_path,
            declared_path=declaration.session if declaration else None,
        )

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

        ``idempotency_key`` (generated when not given) is the firing's Temporal update id: a retried
        call with the same key applies nothing twice and returns the first call's outcome
        (:mod:`archmax_temporal.client.firing`). A keyed firing that would mint a session mints the
        same id on every retry (:func:`minted_for_key`).

        ``mocks`` (a test case's) answer matching governed tool calls of the turns this firing
        drives (a case re-run on an existing session id brings its own); None keeps the
        session's.

        ``files`` maps a variable to ``(name, content)``: each file is placed in the session's
        ``scratchpad/attachments/`` before the turn and the variable seeded with its path.

        A new id starts the session's workflow (update-with-start); an existing finished one
        takes its next turn; one parked by ``archmax_wait`` has the firing delivered into it.

        ``on_event`` (also on ``deliver``, ``decide`` and ``reply``) is called with each of the
        turn's events as it happens (:mod:`archmax_temporal.client.events`); the call returns once
        the turn settled and its end event was delivered.
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
        # Whether the start may only make the session's first run. A firing that passes a
        # first firing's checks is sent without asking Temporal about the session first: a
        # new session starts with it, a running one takes it (its validator has the last
        # word), and a closed run under the id refuses the start, which then reopens the
        # session from its checkpoint below. One fewer round trip per firing.
        first_run_only = not minted and self._admits_as_first(sid, firing)
        if minted:
            self._admit_first_firing(sid, firing)
        elif not first_run_only:
            reopening = await self._reopening(sid, firing)
        key = idempotency_key or new_key()
        attempts = 0

        async def start() -> WorkflowUpdateHandle[Outcome]:
            nonlocal attempts, reopening
            attempts += 1
            if attempts > 1 and not minted and not first_run_only:  # it may have closed since
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
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE
                if first_run_only
                else WorkflowIDReusePolicy.ALLOW_DUPLICATE,
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
            except (
                WorkflowAlreadyStartedError,
                SessionNotFoundError,
                RPCError,
                WorkflowUpdateFailedError,
            ) as failed:
                if first_run_only and _start_refused(failed):
                    # A run that closed holds the id (nothing was applied): reopen the
                    # session from its checkpoint, as a firing that asked first does.
                    first_run_only = False
                    reopening = await self._reopening(sid, firing)
                    attempts = 0
                    continue
                # The run closed idle as the firing reached it (nothing was applied): the
                # next attempt starts a run from the checkpoint.
                if (
                    isinstance(failed, WorkflowAlreadyStartedError)
                    or minted
                    or await self._agent.sessions.closed(sid) is None
                ):
                    raise
        return await self._watched(sid, on_event, fire(agent.client, sid, key, start))

    def _admits_as_first(self, session_id: str, request: SendInput) -> bool:
        """Whether ``request`` passes the checks of a new session's first firing."""
        try:
            self._admit_first_firing(session_id, request)
        except (ArchmaxError, ApplicationError):
            return False
        return True

    async def _reopening(self, session_id: str, request: SendInput) -> Checkpoint | None:
        """For a firing on ``session_id`` that starts a new workflow run (no run, or the
        last one closed): the checkpoint the run reopens from (None: a new session), once the
        host admitted the firing itself, before anything starts. For a running session:
        None, and its validator decides."""
        try:
            described = await self._agent.handle(session_id).describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise translate(exc, session_id=session_id) from exc
            self._admit_first_firing(session_id, request)
            return None
        if described.status == WorkflowExecutionStatus.RUNNING:
            return None
        reopening = await closed_checkpoint(
            self._agent.config, session_id, described.status, described.run_id
        )
        self._admit_first_firing(session_id, request, reopening)
        return reopening

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
        :func:`archmax_temporal.client.firing.fire` firing."""
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


def _start_refused(failed: BaseException) -> bool:
    """Whether an update-with-start failed because a run under the id exists and the start
    may not reuse it (``REJECT_DUPLICATE``): nothing was started, nothing applied. The dev
    server says so as ``WorkflowAlreadyStartedError``, the time-skipping test server as a
    bare ``ALREADY_EXISTS``."""
    if isinstance(failed, WorkflowAlreadyStartedError):
        return True
    return isinstance(failed, RPCError) and failed.status == RPCStatusCode.ALREADY_EXISTS


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


def _stored_variables(
    store: SessionStore, session_id: str, changed: dict[str, Variable]
) -> dict[str, Variable]:
    """The session's variables as its ``artifacts/variables.json`` holds them, ``changed``
    over them, every value whole."""
    document = json.loads(store.read_text(session_id, f"{ARTIFACTS}/variables.json"))
    held = {name: Variable.model_validate(record) for name, record in document["variables"].items()}
    return resolve_variables(store, session_id, {**held, **changed})
