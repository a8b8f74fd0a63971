"""The session store on disk: spec snapshots and per-session artifacts.

Layout (the seed's, under ``ARCHMAX_STORE``, default ``<root>/sessions``)::

    _specs/<specHash>.json          the spec a session runs under (content-addressed)
    <sessionId>/artifacts/          trail.json, variables.json, metadata.json, graph.json
    <sessionId>/scratchpad/         the session's working area
    <sessionId>/checkpoints/session.json   an idle finished session's state, its run closed
    <sessionId>/checkpoints/variables/<sha256>.json   a large variable's value (by reference)

Checkpoints are Temporal's history; the store holds files, through the
:class:`~activities.session_store.SessionStore` protocol (a folder or an object store). Every
write is atomic (a folder store writes a temporary file and renames it; an object put is
whole), so a killed worker never leaves a half-written artifact. A document that changes is
replaced only if it is still the version this attempt found (a conditional put), after the
attempt claimed the session's ``checkpoints/persisted.json`` for its place in the session's
order: a zombie attempt whose activity timed out finds a newer claim or a newer version and
writes nothing (:class:`Superseded`). The end of a turn is also when the session's runtime records
are tidied: the effect journal's entries of the turn's run (:mod:`activities.effects`) and
temporary files older than ``TEMPORARY_MAX_AGE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from temporalio import activity

from archmax_temporal.activities.artifact_cache import ArtifactCache, Texts, item_text, render
from archmax_temporal.activities.effects import EffectJournal, pause_after_effect
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.session_store import (
    FileNotFoundInWorkspaceError,
    SessionStore,
    StoreConflictError,
    StoreIOError,
    WorkspaceError,
    os_error,
    sweep_temporaries,
)
from archmax_temporal.activities.stored_variables import (
    read_stored_text,
    resolve_variables,
    write_stored_texts,
)
from archmax_temporal.workflows.contracts.store import (
    CHECKPOINT_ACTIVITY,
    LOAD_VARIABLES_ACTIVITY,
    PERSIST_ACTIVITY,
    PUT_VARIABLES_ACTIVITY,
)
from archmax_temporal.workflows.models import (
    Checkpoint,
    CheckpointInput,
    LoadVariablesInput,
    LoadVariablesResult,
    Message,
    PersistTurnInput,
    StoreVariablesInput,
    TrailStep,
    TranscriptLog,
)
from archmax_temporal.workflows.spec import WorkflowSpec
from archmax_temporal.workflows.variables import STORED_VARIABLES
from archmax_temporal.workflows.zones import ARTIFACTS, SCRATCHPAD, SPECS

if TYPE_CHECKING:
    from archmax_temporal.activities.transcript_log import TranscriptLogs


def _package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("archmax-temporal")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "0+unknown"


PACKAGE_VERSION = _package_version()
"""The runtime's version, from the installed distribution (written into metadata.json)."""


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"


def _message_text(message: Message) -> str:
    """One trajectory message as ``trajectory.json`` lists it."""
    return item_text(message.model_dump(mode="json", exclude_none=True, exclude_defaults=True))


def spec_snapshot(spec: WorkflowSpec) -> dict[str, Any]:
    """The governing spec as JSON (``metadata`` excluded, as from the hash)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"metadata"})


def graph(spec: WorkflowSpec) -> dict[str, Any]:
    """The machine topology: states, edges, ``on_error`` routes and one start edge per trigger."""
    return {
        "states": [
            {
                "id": slug,
                "type": state.type,
                "title": state.title,
                "terminal": state.is_terminal,
            }
            for slug, state in spec.states.items()
        ],
        "edges": [
            {"from": slug, "to": t.to, "kind": "transition", "type": t.type}
            for slug, state in spec.states.items()
            for t in state.transitions
        ]
        + [
            {"from": slug, "to": state.on_error, "kind": "on_error"}
            for slug, state in spec.states.items()
            if state.on_error
        ],
        "starts": [
            {"trigger": trigger_id, "to": slug}
            for slug, state in spec.states.items()
            for trigger_id in state.triggers
        ],
    }


def stored_trail(store: SessionStore, session_id: str, count: int) -> list[TrailStep]:
    """The first ``count`` steps of a session's audit trail, from its ``trail.json`` (the
    session keeps only the newest; :class:`StoreIOError` when the file is missing or
    holds fewer: a host that does not share the workers' store)."""
    try:
        steps = json.loads(store.read_text(session_id, TRAIL))["steps"]
    except (WorkspaceError, ValueError, KeyError, TypeError):
        steps = None
    if not isinstance(steps, list) or len(steps) < count:
        raise StoreIOError(
            f"the session's trail.json does not hold its first {count} steps: the host and "
            "the workers must share the store (ARCHMAX_STORE)",
            ARTIFACTS,
        )
    return [TrailStep.model_validate(step) for step in steps[:count]]


CHECKPOINT_FILE: Final = "checkpoints/session.json"
"""Where an idle finished session's state is kept once its run closed (under its folder)."""

CLAIM_FILE: Final = "checkpoints/persisted.json"
"""The newest persist attempt's place in the session's order (see :class:`Superseded`)."""

TRAIL: Final = f"{ARTIFACTS}/trail.json"


def read_checkpoint(store: SessionStore, session_id: str) -> Checkpoint | None:
    """The session's checkpoint, or None when it has none (it never closed idle)."""
    try:
        text = store.read_text(session_id, CHECKPOINT_FILE)
    except FileNotFoundInWorkspaceError:
        return None
    return Checkpoint.model_validate_json(text)


class Superseded(Exception):
    """This attempt is older than a write already in the store (a zombie whose activity timed
    out and was retried, or a turn already followed by the next): it writes nothing more."""


def _order(scheduled_at: datetime | None = None) -> tuple[float, int]:
    """This activity attempt's place in its session's order: when it was scheduled (workflow
    time only grows, across runs too) and its attempt. A local activity's schedule time is
    its worker's clock, so a local save is placed by the workflow's time it carries
    (``scheduled_at``): never before a save the server scheduled earlier."""
    if not activity.in_activity():
        return (time.time(), 1)
    info = activity.info()
    if info.is_local and scheduled_at is not None:
        return (scheduled_at.timestamp(), info.attempt)
    return (info.current_attempt_scheduled_time.timestamp(), info.attempt)


@contextlib.contextmanager
def _failing_as(zone: str, doing: str) -> Iterator[None]:
    """A store activity's failure, typed: an ``OSError`` in the block travels as
    :class:`StoreIOError` saying what could not be done, in the session's terms (the host
    path stays out of the history); a :class:`WorkspaceError` as itself."""
    try:
        yield
    except OSError as exc:
        error = os_error(exc, zone)
        raise StoreIOError(f"could not {doing}: {error}", zone).to_application_error() from None
    except WorkspaceError as exc:
        raise exc.to_application_error() from None


class StoreActivities:
    """Activities that write the session store of this worker."""

    def __init__(self, store: SessionStore, logs: TranscriptLogs | None = None) -> None:
        from archmax_temporal.activities.transcript_log import TranscriptLogs

        self._store = store
        self._logs = logs or TranscriptLogs(store)
        self._specs: dict[str, WorkflowSpec] = {}
        self._journal = EffectJournal(self._store)
        self._texts = ArtifactCache()
        self._versions: dict[tuple[str, str], str] = {}
        """The version of each document this worker last wrote: a replace that finds it still
        there needs no read first."""

    def _spec(self, turn: PersistTurnInput) -> WorkflowSpec:
        """The turn's spec: sent (once a run; its snapshot ``_specs/<hash>.json`` written once
        per worker process, put-if-absent), or read back from the snapshot."""
        key = f"{SPECS}/{turn.spec_hash}.json"
        if turn.spec is not None:
            if turn.spec_hash not in self._specs:
                data = _json(spec_snapshot(turn.spec)).encode("utf-8")
                self._store.write_shared_once(key, data)
            self._specs[turn.spec_hash] = turn.spec
            return turn.spec
        known = self._specs.get(turn.spec_hash)
        if known is None:
            known = WorkflowSpec.model_validate(json.loads(self._store.read_shared(key)))
            self._specs[turn.spec_hash] = known
        return known

    def _trail_texts(self, turn: PersistTurnInput) -> Texts:
        """The trail's step texts: those ``trail.json`` holds (``turn.trail_base`` of them,
        from this worker's cache when the document is still the version it last wrote) and
        the new ones."""
        held: list[str] = []
        if turn.trail_base:
            sid = turn.session_id
            cached = self._texts.get(sid, "trail")
            mine = self._versions.get((sid, TRAIL))
            if (
                cached is not None
                and mine is not None
                and cached.stamp == mine
                and len(cached.items) >= turn.trail_base
                and self._store.version_of(sid, TRAIL) == mine
            ):
                held = cached.items[: turn.trail_base]
            else:
                steps = json.loads(self._store.read_text(sid, TRAIL))["steps"]
                held = [item_text(step) for step in steps[: turn.trail_base]]
        return Texts(items=[*held, *(item_text(s.model_dump(mode="json")) for s in turn.trail)])

    def _trajectory_texts(self, turn: PersistTurnInput) -> list[str]:
        """The conversation's message texts: the store log's first ``turn.log.base`` (from
        this worker's cache as far as the log's digests vouch for it), then the unlogged."""
        if turn.log is None:
            return [_message_text(m) for m in turn.transcript]
        sid, base = turn.session_id, turn.log.base
        cached = self._texts.get(sid, "trajectory") or Texts()
        all_messages, all_digests = self._logs.chain(sid, TranscriptLog.model_validate(turn.log))
        keep = min(len(cached.items), base)
        if keep and all_digests[keep - 1] != cached.tags[keep - 1]:
            keep = 0  # another branch of the log (a reset, another worker): read it all
        messages, digests = all_messages[keep:base], all_digests[keep:base]
        logged = Texts(
            items=[*cached.items[:keep], *(_message_text(m) for m in messages)],
            tags=[*cached.tags[:keep], *digests],
        )
        self._texts.put(sid, "trajectory", logged)
        return [*logged.items, *(_message_text(m) for m in turn.transcript)]

    @activity.defn(name=PERSIST_ACTIVITY)
    async def persist_turn(self, turn: PersistTurnInput) -> None:
        """Rewrite the session's artifacts (and its spec snapshot once) at the end of a turn,
        then prune the effect journal of the turn's workflow run and sweep stale temporaries."""
        run_id = activity.info().workflow_run_id if activity.in_activity() else None
        with _failing_as(ARTIFACTS, "write the session's artifacts"):
            await heartbeating(asyncio.to_thread(self._persist_sync, turn, run_id))

    @activity.defn(name=CHECKPOINT_ACTIVITY)
    async def checkpoint(self, request: CheckpointInput) -> None:
        """Write an idle finished session's state (``checkpoints/session.json``, atomically)
        before its run ends; the next firing's run starts from it."""
        info = activity.info() if activity.in_activity() else None
        document = Checkpoint(
            run_id=info.workflow_run_id if info else None,
            written_at=info.started_time if info else None,
            checkpoint=request.checkpoint,
        )
        sid = request.session_id
        data = document.model_dump_json().encode("utf-8")

        def write() -> None:
            order = _order()
            version = self._store.version_of(sid, CHECKPOINT_FILE)  # before the claim check
            try:
                self._claim(sid, order)
                self._replace(sid, CHECKPOINT_FILE, data, version, order)
            except Superseded:
                return  # a newer attempt of the session wrote after this one was scheduled

        with _failing_as("checkpoints", "write the session's checkpoint"):
            await asyncio.to_thread(write)

    @activity.defn(name=PUT_VARIABLES_ACTIVITY)
    async def put_variables(self, request: StoreVariablesInput) -> None:
        """Write values by reference to ``<id>/checkpoints/variables/`` (atomically, once)."""
        with _failing_as(STORED_VARIABLES, "store the session's variables"):
            await asyncio.to_thread(
                write_stored_texts, self._store, request.session_id, request.texts
            )

    @activity.defn(name=LOAD_VARIABLES_ACTIVITY)
    async def load_variables(self, request: LoadVariablesInput) -> LoadVariablesResult:
        """Read values by reference back (each checked against its digest)."""

        def read() -> dict[str, str]:
            sid = request.session_id
            return {ref: read_stored_text(self._store, sid, ref) for ref in request.refs}

        try:
            return LoadVariablesResult(texts=await asyncio.to_thread(read))
        except StoreIOError as exc:
            raise exc.to_application_error() from None

    def _claim(self, session_id: str, order: tuple[float, int]) -> None:
        """Claim the session's persist order for this attempt (``checkpoints/persisted.json``,
        replaced only as the version read); :class:`Superseded` when a newer attempt holds it."""
        while True:
            try:
                data, version = self._store.read_versioned(session_id, CLAIM_FILE)
                held = json.loads(data)["order"]
                held_order = (float(held[0]), int(held[1]))
            except FileNotFoundInWorkspaceError:
                version, held_order = None, None
            except (ValueError, KeyError, TypeError, IndexError):
                held_order = None  # unreadable: this attempt's claim replaces it
            if held_order is not None and held_order > order:
                raise Superseded
            if held_order == order:
                return
            claim = json.dumps({"order": list(order)}).encode("utf-8")
            try:
                self._store.write_if(session_id, CLAIM_FILE, claim, version=version)
                return
            except StoreConflictError:
                continue  # another attempt claimed in between: read it again

    def _replace(
        self, session_id: str, path: str, data: bytes, version: str | None, order: tuple[float, int]
    ) -> str:
        """Write one document if it is still at ``version`` (read before this attempt's claim
        was checked); on a conflict, the claim again (:class:`Superseded` when a newer attempt
        holds it), the version read again, the claim checked again, and another try. Its new
        version."""
        for _ in range(3):
            try:
                written = self._store.write_if(session_id, path, data, version=version)
            except StoreConflictError:
                self._claim(session_id, order)
                version = self._store.version_of(session_id, path)
                self._claim(session_id, order)  # a newer write seen above has a newer claim
                continue
            self._versions[(session_id, path)] = written
            return written
        raise StoreConflictError(f"'{path}' kept changing under this write; retried", path)

    def _persist_sync(self, turn: PersistTurnInput, run_id: str | None) -> None:
        spec = self._spec(turn)
        sid = turn.session_id
        make_folder = getattr(self._store, "make_folder", None)
        if make_folder is not None:  # a folder store shows the empty scratchpad
            make_folder(sid, SCRATCHPAD)
        head = {"sessionId": sid, "workflow": turn.workflow}
        steps = self._trail_texts(turn)
        documents: dict[str, str] = {
            "trail.json": render(head, "steps", steps.items),
            "variables.json": _json(
                {
                    **head,
                    "variables": {
                        name: {"value": v.value, "locked": v.locked}
                        for name, v in resolve_variables(self._store, sid, turn.variables).items()
                    },
                }
            ),
            "metadata.json": _json(
                {
                    **head,
                    "runtimeContract": f"{spec.runtime.engine}@{spec.runtime.version}",
                    "packageVersion": PACKAGE_VERSION,
                    "specHash": turn.spec_hash,
                    "status": turn.status,
                    "state": turn.state,
                    "usage": turn.usage.model_dump(),
                }
            ),
            "graph.json": _json(graph(spec)),
            "trajectory.json": render(head, "messages", self._trajectory_texts(turn)),
        }
        order = _order(turn.scheduled_at)
        paths = {name: f"{ARTIFACTS}/{name}" for name in documents}
        versions = {
            name: self._versions.get((sid, path)) or self._store.version_of(sid, path)
            for name, path in paths.items()
        }  # read before the claim is checked: a newer write seen here has a newer claim
        try:
            self._claim(sid, order)
            for name, text in documents.items():
                data = text.encode("utf-8")
                written = self._replace(sid, paths[name], data, versions[name], order)
                if name == "trail.json":
                    steps.stamp = written
        except Superseded:
            activity.logger.info("persist_turn superseded by a newer write; nothing more written")
            return
        self._texts.put(sid, "trail", steps)
        if run_id is not None:  # the fault tests' boundary: artifacts written, not reported
            pause_after_effect("persist_turn", f"{run_id}.{activity.info().activity_id}")
        with contextlib.suppress(WorkspaceError):  # tidying never fails a turn
            self._journal.prune(turn.session_id, run_id, now=time.time())
            sweep_temporaries(self._store, turn.session_id)
