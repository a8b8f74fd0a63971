"""The store activities: what a turn's save, a checkpoint and values by reference write to the
session store (its artifacts, the spec snapshots).

Layout (the seed's, under ``ARCHMAX_STORE``, default ``<root>/sessions``)::

    _specs/<specHash>.json          the spec a session runs under (content-addressed)
    <sessionId>/artifacts/          trail.json, trajectory.json, variables.json,
                                    metadata.json, graph.json
    <sessionId>/scratchpad/         the session's working area
    <sessionId>/checkpoints/session.json   an idle finished session's state, its run closed
    <sessionId>/checkpoints/variables/<sha256>.json   a large variable's value (by reference)

Checkpoints are Temporal's history; the store holds files, through the
:class:`~archmax_temporal.activities.session_store.SessionStore` protocol (a folder or an object
store). Every write is atomic (a folder store writes a temporary file and renames it; an object put
is whole), so a killed worker never leaves a half-written artifact, except the two artifacts that
grow with the session on a store that writes in place (a folder store): a turn appends what is new
to ``trail.json`` and ``trajectory.json`` over the document's old end, so what it writes does not
grow with the session, and a reader that meets one cut short (it raced the append, or the append was
killed) reads the whole items before the cut
(:func:`~archmax_temporal.activities.artifact_cache.parse_items`); the next turn makes it whole
again. On a folder store a turn fsyncs once: ``trail.json``, whose older steps live nowhere else.
What is rebuilt from durable state at the next turn (the trajectory: the conversation log and the
workflow; the small artifacts; the persist claim) is replaced atomically without an fsync, and a
small artifact this worker wrote with the same content is not written again.

A document that changes is replaced (or appended to) only if it is still the version this attempt
found (a conditional write), after the attempt claimed the session's ``checkpoints/persisted.json``
for its place in the session's order: a zombie attempt whose activity timed out finds a newer claim
or a newer version and writes nothing (:class:`Superseded`). The end of a turn is also when the
session's runtime records are tidied: the effect journal's entries of the turn's run
(:mod:`archmax_temporal.activities.effects`) and temporary files older than ``TEMPORARY_MAX_AGE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from temporalio import activity

from archmax_temporal.activities.artifact_cache import (
    SEPARATOR,
    TAIL,
    ArtifactCache,
    Texts,
    appended,
    held_prefix,
    item_text,
    opening,
    parse_items,
    render,
)
from archmax_temporal.activities.effects import EffectJournal, pause_after_effect
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.session_store import (
    SessionStore,
    sweep_temporaries,
    write_if_unsynced,
)
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    StoreConflictError,
    StoreIOError,
    WorkspaceError,
    os_error,
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
        steps: list[Any] | None = parse_items(store.read_text(session_id, TRAIL), "steps")
    except WorkspaceError:
        steps = None
    if steps is None or len(steps) < count:
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

TRAJECTORY: Final = f"{ARTIFACTS}/trajectory.json"


@dataclass
class _Found:
    """A growing artifact (``trail.json``, ``trajectory.json``) as an attempt found it before
    its claim: its version, and what it holds (this worker's record of it, or the file)."""

    path: str
    key: str
    version: str | None
    """None: no file."""
    mine: Texts | None = None
    """What this worker last wrote there, when the file is still that version."""
    data: bytes | None = None
    """The file as read, when this worker's record did not vouch for it."""

    def items(self) -> list[str]:
        """The item texts the document holds (all of a whole one, the whole items before
        the cut of one cut short)."""
        if self.mine is not None:
            return self.mine.items
        if self.data is None:
            return []
        text = self.data.decode("utf-8", errors="replace")
        return [item_text(item) for item in parse_items(text, self.key)]


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


def _common(held: list[str], items: list[str]) -> int:
    """How many items the two lists begin with alike."""
    n = min(len(held), len(items))
    if held[:n] == items[:n]:  # the usual case, at C speed (the same strings, mostly)
        return n
    count = 0
    while count < n and held[count] == items[count]:
        count += 1
    return count


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
        self._digests: dict[tuple[str, str], str] = {}
        """The content digest of each small artifact this worker last wrote: one unchanged
        and still that version is not written again."""

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

    def _found(self, session_id: str, path: str, key: str) -> _Found:
        """A growing artifact as it is now: this worker's record of it when the file is still
        the version it wrote, else the file read (if there is one)."""
        version = self._store.version_of(session_id, path)
        if version is None:
            return _Found(path, key, None)
        mine = self._texts.get(session_id, path)
        if mine is not None and mine.stamp == version:
            return _Found(path, key, version, mine=mine)
        try:
            data, version = self._store.read_versioned(session_id, path)
        except FileNotFoundInWorkspaceError:
            return _Found(path, key, None)
        return _Found(path, key, version, data=data)

    def _trail_texts(self, turn: PersistTurnInput, found: _Found) -> list[str]:
        """The trail's step texts: the first ``turn.trail_base`` that ``trail.json`` holds,
        then the new ones."""
        held = found.items()[: turn.trail_base] if turn.trail_base else []
        return [*held, *(item_text(s.model_dump(mode="json")) for s in turn.trail)]

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
            try:  # atomic, not fsync'd: it orders live attempts, which a machine crash ends
                self._write_if(session_id, CLAIM_FILE, claim, version, durable=False)
                return
            except StoreConflictError:
                continue  # another attempt claimed in between: read it again

    def _write_if(
        self, session_id: str, path: str, data: bytes, version: str | None, *, durable: bool
    ) -> str:
        """The store's conditional write; not fsync'd when ``durable`` is false and the store
        can skip it (an object put is durable as it is)."""
        if durable:
            return self._store.write_if(session_id, path, data, version=version)
        return write_if_unsynced(self._store, session_id, path, data, version=version)

    def _replace(
        self,
        session_id: str,
        path: str,
        data: bytes,
        version: str | None,
        order: tuple[float, int],
        *,
        durable: bool = True,
    ) -> str:
        """Write one document if it is still at ``version`` (read before this attempt's claim
        was checked); on a conflict, the claim again (:class:`Superseded` when a newer attempt
        holds it), the version read again, the claim checked again, and another try. Its new
        version."""
        for _ in range(3):
            try:
                written = self._write_if(session_id, path, data, version, durable=durable)
            except StoreConflictError:
                self._claim(session_id, order)
                version = self._store.version_of(session_id, path)
                self._claim(session_id, order)  # a newer write seen above has a newer claim
                continue
            self._versions[(session_id, path)] = written
            return written
        raise StoreConflictError(f"'{path}' kept changing under this write; retried", path)

    def _grow(
        self,
        session_id: str,
        found: _Found,
        head: dict[str, Any],
        items: list[str],
        order: tuple[float, int],
        *,
        durable: bool,
    ) -> None:
        """Bring a growing artifact to ``items``: on a store that writes in place, the items
        past those it already holds and the document's end, written over its old end (nothing
        when it holds them all); otherwise, or when it holds none of them, the whole document,
        replaced. Conditional on the version found before the claim, as :meth:`_replace`."""
        start = opening(head, found.key)
        tail = len(TAIL.encode("utf-8"))
        append = getattr(self._store, "append_at", None)
        version = found.version
        for _ in range(3):
            kept, end, size = 0, -1, -1  # items held alike, where the last ends, the size
            if append is not None and version is not None:
                if found.mine is not None and found.mine.start == start:
                    held = found.mine.items
                    kept, size = _common(held, items), found.mine.size
                    cut = sum(len(t.encode("utf-8")) + len(SEPARATOR) for t in held[kept:])
                    end = size - tail - cut if kept else -1
                elif found.data is not None:  # whole or cut short: what it holds
                    kept, end = held_prefix(found.data, start, items)
                    whole = found.data.startswith(TAIL.encode("utf-8"), end)
                    size = len(found.data) if whole else -1
            written: str | None = None
            total = size
            if kept and kept == len(items) and end + tail == size:
                written = version  # it holds them all and ends there: nothing to write
            elif kept and append is not None and version is not None:
                chunk = appended(items[kept:])
                try:
                    written = append(
                        session_id, found.path, end, chunk, version=version, durable=durable
                    )
                except StoreConflictError:  # another writer: the claim decides, then again
                    self._claim(session_id, order)
                    found = self._found(session_id, found.path, found.key)
                    self._claim(session_id, order)
                    version = found.version
                    continue
                total = end + len(chunk)
            if written is None:
                data = render(head, found.key, items).encode("utf-8")
                written = self._replace(
                    session_id, found.path, data, version, order, durable=durable
                )
                total = len(data)
            self._texts.put(
                session_id,
                found.path,
                Texts(items=list(items), stamp=written, start=start, size=total),
            )
            return
        raise StoreConflictError(f"'{found.path}' kept changing under this write; retried", "")

    def _persist_sync(self, turn: PersistTurnInput, run_id: str | None) -> None:
        spec = self._spec(turn)
        sid = turn.session_id
        make_folder = getattr(self._store, "make_folder", None)
        if make_folder is not None:  # a folder store shows the empty scratchpad
            make_folder(sid, SCRATCHPAD)
        head = {"sessionId": sid, "workflow": turn.workflow}
        # read before the claim is checked: a newer write seen here has a newer claim
        trail = self._found(sid, TRAIL, "steps")
        # only a store that appends needs what the trajectory holds (it is built from the log)
        trajectory = (
            self._found(sid, TRAJECTORY, "messages")
            if hasattr(self._store, "append_at")
            else _Found(
                TRAJECTORY,
                "messages",
                self._versions.get((sid, TRAJECTORY)) or self._store.version_of(sid, TRAJECTORY),
            )
        )
        documents: dict[str, str] = {
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
        }
        steps = self._trail_texts(turn, trail)
        messages = self._trajectory_texts(turn)
        order = _order(turn.scheduled_at)
        paths = {name: f"{ARTIFACTS}/{name}" for name in documents}
        encoded = {name: text.encode("utf-8") for name, text in documents.items()}
        digests = {name: hashlib.sha256(data).hexdigest() for name, data in encoded.items()}
        versions: dict[str, str | None] = {}
        for name, path in paths.items():
            mine = self._versions.get((sid, path))
            if mine is not None and self._digests.get((sid, path)) == digests[name]:
                versions[name] = self._store.version_of(sid, path)  # unchanged if still mine
            else:
                versions[name] = mine or self._store.version_of(sid, path)
        try:
            self._claim(sid, order)
            for name, data in encoded.items():
                path = paths[name]
                if (
                    self._digests.get((sid, path)) == digests[name]
                    and versions[name] is not None
                    and versions[name] == self._versions.get((sid, path))
                ):
                    continue  # as this worker wrote it, and nobody wrote it since
                self._replace(sid, path, data, versions[name], order, durable=False)
                self._digests[(sid, path)] = digests[name]
            # the trail's older steps live only here: durable; the trajectory is the log's
            self._grow(sid, trail, head, steps, order, durable=True)
            self._grow(sid, trajectory, head, messages, order, durable=False)
        except Superseded:
            activity.logger.info("persist_turn superseded by a newer write; nothing more written")
            return
        if run_id is not None:  # the fault tests' boundary: artifacts written, not reported
            pause_after_effect("persist_turn", f"{run_id}.{activity.info().activity_id}")
        with contextlib.suppress(WorkspaceError):  # tidying never fails a turn
            self._journal.prune(turn.session_id, run_id, now=time.time())
            sweep_temporaries(self._store, turn.session_id)
