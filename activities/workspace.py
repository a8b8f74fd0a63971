"""The workspace activities: every workspace tool, file placement and seeding, each an
activity over one session store and authoring root.

The tools are ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``,
``copy_file``, ``move_file`` and ``remove_file`` (``archmax.workspace.<tool>``).

What a call sees is :mod:`archmax_temporal.activities.workspace_view`; the tools are in
:mod:`archmax_temporal.activities.workspace_reads` and
:mod:`archmax_temporal.activities.workspace_writes`, placement and seeding in
:mod:`archmax_temporal.activities.file_placement`.

A refused call (a bad path, a write outside ``scratchpad/``, a binary read, a missing file, a
symlink, a name too long for the disk) is answered as a ``status="error"`` result the model
reads, in its own path vocabulary (``scratchpad/…``, never a host path); it never fails the
activity. Only infrastructure errors (:class:`StoreIOError`: the disk, the store backend) raise,
and Temporal retries them.

Every call that changes files (``write_file``, ``edit_file``, ``copy_file``, ``move_file``,
``remove_file``, placements) goes through the effect journal
(:mod:`archmax_temporal.activities.effects`): its outcome is recorded before it is applied, so a
retry after a crash applies the same change and gives the same answer. Calls heartbeat while they
run (:mod:`archmax_temporal.activities.heartbeat`).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import ValidationError
from temporalio import activity

from archmax_temporal.activities import workspace_reads, workspace_writes
from archmax_temporal.activities.effects import Effect, EffectJournal, digest, idempotency_key
from archmax_temporal.activities.file_placement import checked_session, plan_placement, seed_files
from archmax_temporal.activities.heartbeat import heartbeating
from archmax_temporal.activities.session_paths import os_errors
from archmax_temporal.activities.session_store import SessionStore, sweep_temporaries
from archmax_temporal.activities.store_errors import StoreIOError, WorkspaceError, unexpected
from archmax_temporal.activities.tool_text import truncate
from archmax_temporal.activities.transcript_log import TranscriptLogs
from archmax_temporal.activities.workspace_view import WorkspaceView
from archmax_temporal.workflows.contracts.workspace import (
    COPY_FILE_ACTIVITY,
    EDIT_FILE_ACTIVITY,
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    LS_ACTIVITY,
    MOVE_FILE_ACTIVITY,
    PLACE_FILES_ACTIVITY,
    READ_FILE_ACTIVITY,
    REMOVE_FILE_ACTIVITY,
    SEED_FILES_ACTIVITY,
    WRITE_FILE_ACTIVITY,
    FilePlacementInput,
    FilePlacementResult,
    SeedFilesInput,
    SeedFilesResult,
    WorkspaceToolInput,
    WorkspaceToolResult,
)
from archmax_temporal.workflows.tools import (
    COPY_FILE,
    EDIT_FILE,
    GLOB,
    GREP,
    LS,
    MOVE_FILE,
    READ_FILE,
    REMOVE_FILE,
    WRITE_FILE,
)
from archmax_temporal.workflows.workspace_tools import TOOL_ARGUMENTS

_READERS: Final[dict[str, Callable[[WorkspaceView, Any], str]]] = {
    LS: workspace_reads.ls,
    READ_FILE: workspace_reads.read_file,
    GLOB: workspace_reads.glob,
    GREP: workspace_reads.grep,
}
"""The tools that only read."""

_WRITERS: Final[dict[str, Callable[[WorkspaceView, Any], Effect]]] = {
    WRITE_FILE: workspace_writes.write_file,
    EDIT_FILE: workspace_writes.edit_file,
    COPY_FILE: workspace_writes.copy_file,
    MOVE_FILE: workspace_writes.move_file,
    REMOVE_FILE: workspace_writes.remove_file,
}
"""The tools that change files: each plans an :class:`Effect`, applied through the journal."""

_TOOLS: Final = frozenset(_READERS) | frozenset(_WRITERS)


def _primary_path(arguments: dict[str, Any]) -> str:
    """The path a call is about, for an error raised outside any one path's handling."""
    for name in ("file_path", "path", "source"):
        value = arguments.get(name)
        if isinstance(value, str):
            return value
    return ""


# --- activities ---------------------------------------------------------------------------


class WorkspaceActivities:
    """The workspace tools and file placement over one session store and authoring root.

    Placements into one session run one at a time (a per-session lock held by this instance),
    so concurrent placements of the same name each take their own name.
    """

    def __init__(
        self, store: SessionStore, authoring_root: Path, logs: TranscriptLogs | None = None
    ) -> None:
        self._store = store
        self._authoring = Path(authoring_root)
        self._journal = EffectJournal(store)
        self._logs = logs
        """Where a tool activity keeps a long result by digest (the next model call names it
        instead of carrying it); None: results are never kept."""
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def store(self) -> SessionStore:
        """The session store, for the runtime's own files (the sandbox's journals)."""
        return self._store

    @property
    def journal(self) -> EffectJournal:
        """The effect journal over this store (the sandbox's ``tools.*`` calls use it too)."""
        return self._journal

    def activities(self) -> list[Callable[..., Any]]:
        """Every activity of this instance, for ``Worker(activities=...)``."""
        return [
            self.ls,
            self.read_file,
            self.write_file,
            self.edit_file,
            self.glob,
            self.grep,
            self.copy_file,
            self.move_file,
            self.remove_file,
            self.place_files,
            self.seed_files,
        ]

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[session_id] = lock
        return lock

    async def _run(self, tool: str, call: WorkspaceToolInput) -> WorkspaceToolResult:
        checked_session(call.session_id)
        if call.tool != tool:
            return WorkspaceToolResult(
                content=f"Error: call for '{call.tool}' was sent to the '{tool}' activity",
                status="error",
            )
        key = idempotency_key()
        try:
            if tool in _WRITERS:
                await asyncio.to_thread(self.sweep_after_crash, call.session_id)
            return await heartbeating(asyncio.to_thread(self._run_kept, tool, call, key))
        except WorkspaceError as exc:  # only StoreIOError gets here: retried
            raise exc.to_application_error() from None
        except Exception as exc:
            raise unexpected(exc, self._hidden) from None

    @property
    def _hidden(self) -> list[Path]:
        """The host folders an unexpected error's message must not name."""
        root = getattr(self._store, "root", None)
        return [self._authoring, *([Path(root)] if root is not None else [])]

    def sweep_after_crash(self, session_id: str) -> None:
        """Remove the session's stale temporary files before a call writes: on a retry, every
        one older than this attempt (the crashed attempt's); otherwise those past
        ``TEMPORARY_MAX_AGE``."""
        before: float | None = None
        if activity.in_activity() and activity.info().attempt > 1:
            before = activity.info().current_attempt_scheduled_time.timestamp()
        with contextlib.suppress(WorkspaceError):  # a sweep never fails a call
            sweep_temporaries(self._store, session_id, before=before)

    def run_tool(self, call: WorkspaceToolInput, *, key: str | None = None) -> WorkspaceToolResult:
        """Run one workspace tool call synchronously (the sandbox's ``tools.*`` bridge calls
        it from its own thread): the very code path of the tool activities. ``key`` is the
        call's idempotency key (the sandbox run's, with the call's position). A
        :class:`StoreIOError` raises; every other refusal is an error result."""
        if call.tool not in _TOOLS:
            return WorkspaceToolResult(content=f"Error: unknown tool '{call.tool}'", status="error")
        return self._run_sync(call.tool, call, key)

    def read_text(self, session_id: str, path: str, visible_skills: Sequence[str]) -> str:
        """A text file's content at an agent-visible path, or a :class:`WorkspaceError`."""
        ws = WorkspaceView(self._store, self._authoring, session_id, visible_skills)
        with os_errors(path):
            return ws.read_text(ws.locate(path))

    def _run_kept(
        self, tool: str, call: WorkspaceToolInput, key: str | None
    ) -> WorkspaceToolResult:
        """The tool activity's work: the call, then its result kept in the store by digest
        when it is long (``kept``: the next model call names it, so the history holds the
        result once). The sandbox's ``tools.*`` bridge keeps nothing (no model reads it)."""
        result = self._run_sync(tool, call, key)
        if self._logs is not None and self._logs.keep_result(call.session_id, result.content):
            return result.model_copy(update={"kept": True})
        return result

    def _run_sync(
        self, tool: str, call: WorkspaceToolInput, key: str | None
    ) -> WorkspaceToolResult:
        status: Literal["ok", "error"] = "ok"
        try:
            with os_errors(_primary_path(call.arguments)):
                args = TOOL_ARGUMENTS[tool].model_validate(call.arguments)
                ws = WorkspaceView(
                    self._store, self._authoring, call.session_id, call.visible_skills
                )
                if tool in _WRITERS:
                    plan = _WRITERS[tool]
                    content = self._journal.once(
                        call.session_id,
                        key,
                        tool,
                        digest(call.model_dump(mode="json")),
                        lambda: plan(ws, args),
                    )
                else:
                    content = _READERS[tool](ws, args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            content, status = f"Error: invalid arguments for {tool}: {problems}", "error"
        except StoreIOError:
            raise
        except WorkspaceError as exc:
            message = str(exc)
            content = message if message.startswith("Error:") else f"Error: {message}"
            status = "error"
        content, cut = truncate(content, call.max_result_chars)
        return WorkspaceToolResult(content=content, status=status, truncated=cut)

    @activity.defn(name=LS_ACTIVITY)
    async def ls(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``ls {path?}``: a folder's entries, folders ending in ``/``."""
        return await self._run(LS, call)

    @activity.defn(name=READ_FILE_ACTIVITY)
    async def read_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``read_file {file_path, offset?, limit?}``: text with ``cat -n`` line numbers."""
        return await self._run(READ_FILE, call)

    @activity.defn(name=WRITE_FILE_ACTIVITY)
    async def write_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``write_file {file_path, content}``: create or replace a file under scratchpad/."""
        return await self._run(WRITE_FILE, call)

    @activity.defn(name=EDIT_FILE_ACTIVITY)
    async def edit_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``edit_file {file_path, old_string, new_string, replace_all?}``."""
        return await self._run(EDIT_FILE, call)

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``glob {pattern, path?}``: matching files, dot files included."""
        return await self._run(GLOB, call)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``grep {pattern, path?, glob?, max_count?}``: ``path:line:text`` per match."""
        return await self._run(GREP, call)

    @activity.defn(name=COPY_FILE_ACTIVITY)
    async def copy_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``copy_file {source, destination, overwrite?}``: a byte-exact copy."""
        return await self._run(COPY_FILE, call)

    @activity.defn(name=MOVE_FILE_ACTIVITY)
    async def move_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``move_file {source, destination, overwrite?}``: written there, removed here."""
        return await self._run(MOVE_FILE, call)

    @activity.defn(name=REMOVE_FILE_ACTIVITY)
    async def remove_file(self, call: WorkspaceToolInput) -> WorkspaceToolResult:
        """``remove_file {file_path}``: delete one file under scratchpad/."""
        return await self._run(REMOVE_FILE, call)

    @activity.defn(name=PLACE_FILES_ACTIVITY)
    async def place_files(self, placement: FilePlacementInput) -> FilePlacementResult:
        """Place each file into ``scratchpad/attachments/`` under :func:`placed_name`.

        One placement per session at a time; never overwrites. Through a store without
        bytes, a non-text file is refused (a typed, non-retryable error naming it) and
        nothing at all is written. The names chosen are journaled before anything is
        written, so a retry places the same files under the same names.
        """
        session_id = checked_session(placement.session_id)
        key = idempotency_key()
        async with self._lock(session_id):
            try:
                await asyncio.to_thread(self.sweep_after_crash, session_id)
                return await heartbeating(
                    asyncio.to_thread(self._place_sync, session_id, placement, key)
                )
            except WorkspaceError as exc:
                raise exc.to_application_error() from None
            except Exception as exc:
                raise unexpected(exc, self._hidden) from None

    def _place_sync(
        self, session_id: str, placement: FilePlacementInput, key: str | None
    ) -> FilePlacementResult:
        answer = self._journal.once(
            session_id,
            key,
            "place_files",
            digest(placement.model_dump(mode="json")),
            lambda: plan_placement(self._store, session_id, placement),
        )
        return FilePlacementResult.model_validate_json(answer)

    @activity.defn(name=SEED_FILES_ACTIVITY)
    async def seed_files(self, seed: SeedFilesInput) -> SeedFilesResult:
        """Write fixture files at the workspace paths given (``scratchpad/…`` or session
        files such as ``trigger.json``), replacing what is there.

        Mounts (``skills/…``, ``AGENTS.md``) and runtime areas (``artifacts/``,
        ``checkpoints/``, archmax's offload areas ...) are refused; every file is checked
        before anything is written.
        """
        session_id = checked_session(seed.session_id)
        async with self._lock(session_id):
            try:
                return await heartbeating(
                    asyncio.to_thread(seed_files, self._store, session_id, seed)
                )
            except WorkspaceError as exc:
                raise exc.to_application_error() from None
            except Exception as exc:
                raise unexpected(exc, self._hidden) from None
