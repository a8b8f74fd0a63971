"""The read side of the host API, ``agent.sessions``: a session's summary, its whole record,
its events and the listing of sessions, with or without a worker to answer.

A summary comes from the session itself (a query) when a worker answers, else from what Temporal's
visibility holds (:mod:`archmax_temporal.client.visibility`); a session whose run closed idle, from
its checkpoint. Values, messages and trail steps kept in the store by reference are read back whole
from this host's store, which the workers share.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.activities.store import stored_trail
from archmax_temporal.activities.stored_variables import resolve_variables
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.client import visibility
from archmax_temporal.client.events import SessionEvent, session_events
from archmax_temporal.client.files import encoded
from archmax_temporal.client.repair import (
    RepairReport,
    rebuild,
    recorded_history,
    stored_result,
    write_rebuilt,
)
from archmax_temporal.client.runtime import translate, unavailable, worker_polling
from archmax_temporal.workflows import projections
from archmax_temporal.workflows.contracts import LISTED_MEMO
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.errors import SessionNotResumableError, SessionUnavailableError
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.models import (
    Checkpoint,
    SessionStatus,
    SessionSummary,
    SessionView,
    TranscriptLog,
)
from archmax_temporal.workflows.session import ArchmaxSession
from archmax_temporal.workflows.store_binding import MISMATCH

if TYPE_CHECKING:
    from archmax_temporal.client.host import Agent

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
            for path, (text, encoding) in ((p, encoded(c)) for p, c in files.items())
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
        """Rebuild the session's conversation log (and the prompts its model calls name) in this
        host's store from the workflow history, where every message is once
        (:mod:`archmax_temporal.client.repair`): what a ``TranscriptLogDiverged`` turn failure (a
        truncated, corrupted or deleted ``checkpoints/transcript.jsonl``) asks for. A healthy log is
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
        (``agent-text-delta``; see :mod:`archmax_temporal.client.events`)."""
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
        summary = await visibility.listed_summary(described, polled=await self._polled(queue))
        refused = None if summary.waiting_on else _store_wait(described)
        return summary.model_copy(update={"waiting_on": refused}) if refused else summary

    async def _polled(self, task_queue: str) -> bool:
        """Whether a worker (a command's included) polls ``task_queue``; True when the server
        cannot say (the time-skipping one)."""
        return await visibility.worker_polls(self._agent.client, task_queue)
