"""The effect journal: every side effect of an activity at most once in effect.

Temporal retries an activity whose worker died, and a worker can die after the activity
changed a file but before Temporal heard it complete. Run again from scratch, ``edit_file``
would edit the edited text (``START X X END``), ``move_file`` would find no source, a
placement would pick the next free name. So every side-effecting activity is keyed by an
**idempotency key**, stable across the retries of one scheduled call and different for every
other call (:func:`idempotency_key`: the workflow run id and the activity id), and records
its change **before** applying it, in its session's journal::

    <session folder>/checkpoints/effects/<run id>.<activity id>[.<n>].json

An entry holds the change's full, absolute outcome: the final bytes of every file it writes
(with their SHA-256), the paths it removes, and the answer the tool gives. Applying an entry
is idempotent (write the same bytes again; remove what is still there), so a retry that finds
its entry applies it again and answers exactly what the first attempt would have; it never
computes a new change over already-changed files. A call that is refused records nothing.
``.<n>`` keys the n-th ``tools.*`` call of a sandbox run. ``checkpoints/`` is runtime-internal:
the agent never sees the journal.

Host tools and hook executors change things the runtime cannot see: they are told the key
(``ToolContext``) to make their own effects idempotent, and their answer is recorded once it
is known, so a retry after they returned answers from the journal without calling them again.

**Pruning** happens at the end of every turn (``archmax.store.persist_turn``): the entries of
the turn's own workflow run go (every activity before it has completed, so none of them can
be retried), and so does any entry older than :data:`EFFECT_MAX_AGE` (a run that continued as
new, a caller's placement into a sub-workflow's folder, a session terminated mid-call).

**Watching** (for ``archmax test``'s ``crash`` step): an :class:`EffectWatch` set for the
current activity (:func:`watch_effects`, a context variable, so threads the activity starts
see it) hears every effect as it is applied (:class:`EffectEvent`: computed afresh, or
replayed from the journal) and every host tool's or hook executor's return, before its answer
is recorded; a test harness counts them to prove that nothing was applied twice, and may hold
a killed worker there. Unset (production), nothing is called.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hashlib
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError
from temporalio import activity

from archmax_temporal.activities.session_store import SessionStore, delete_file, is_text
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    StoreConflictError,
    StoreIOError,
    WorkspaceError,
)
from archmax_temporal.workflows.zones import CHECKPOINTS

EFFECTS: Final = f"{CHECKPOINTS}/effects"
"""Where a session's journal lives (runtime-internal: never listed, read or written by tools)."""

REMEMBERED_ENTRIES: Final = 10_000
"""How many entries' recording times a process keeps (for pruning without reading again)."""

EFFECT_MAX_AGE: Final = 24 * 3600.0
"""Seconds after which any entry is pruned: no call is retried for this long (the longest
retry policy gives up within an hour)."""

PAUSE_AFTER_EFFECT_ENV: Final = "ARCHMAX_TEST_PAUSE_AFTER_EFFECT"
"""A test hook, never set in production: ``<tool>[,<tool>...]=<marker file>``. An activity
of one of those tools (or ``persist_turn``), once its effect is applied and before it
completes, appends ``<tool> <key>`` to the marker file and sleeps, so a fault test can
SIGKILL the worker at exactly that boundary (tests/test_effect_crash.py). Read when an
effect is applied, never at import."""

_PLAIN_KEY: Final = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


def idempotency_key() -> str | None:
    """The current activity's key, ``<workflow run id>.<activity id>``: the same on every
    attempt of one scheduled call, different for every other call (a standalone activity:
    its activity run id). None outside an activity (a host's own call, a unit test): there
    is no retry to guard against."""
    if not activity.in_activity():
        return None
    info = activity.info()
    if info.workflow_run_id:
        return f"{info.workflow_run_id}.{info.activity_id}"
    return info.activity_run_id


def digest(value: Any) -> str:
    """The SHA-256 of ``value`` as canonical JSON: what a call asked, so a key reused for a
    different call (a sandbox script that changed course) is not answered from the journal."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Change:
    """A change set: the final bytes of each file written, then the paths removed, in order
    (a move writes before it removes). Paths are session-relative."""

    writes: tuple[tuple[str, bytes], ...] = ()
    removes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Effect:
    """What a side-effecting call will do and answer, computed before anything is applied."""

    answer: str
    change: Change = Change()


class _Write(BaseModel):
    model_config = ConfigDict(extra="ignore")

    path: str
    sha256: str
    content: str
    encoding: str = "utf-8"
    """``utf-8`` for text, ``base64`` for any other bytes."""

    def data(self) -> bytes:
        raw = (
            base64.b64decode(self.content)
            if self.encoding == "base64"
            else self.content.encode("utf-8")
        )
        if hashlib.sha256(raw).hexdigest() != self.sha256:
            raise WorkspaceError(f"the journal's bytes for '{self.path}' do not match", self.path)
        return raw


class JournalEntry(BaseModel):
    """One recorded call: its key, what it was asked, its answer and its change."""

    model_config = ConfigDict(extra="ignore")

    key: str
    tool: str
    request: str
    """:func:`digest` of the call's input."""
    recorded_at: float
    answer: str
    writes: list[_Write] = []
    removes: list[str] = []

    def change(self) -> Change:
        return Change(tuple((w.path, w.data()) for w in self.writes), tuple(self.removes))


def entry_name(key: str) -> str:
    """The entry's file name: the key itself when it is plain and short (a run id and an
    activity id are), else a digest of it."""
    if len(key) <= 200 and _PLAIN_KEY.fullmatch(key):
        return f"{key}.json"
    return f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def write_file(store: SessionStore, session_id: str, path: str, data: bytes) -> None:
    """Write ``data`` through ``store``: as bytes, or as text to a text-only store."""
    if store.supports_bytes:
        store.write_bytes(session_id, path, data)
    else:
        store.write_text(session_id, path, data.decode("utf-8"))


class EffectJournal:
    """The journal of the sessions in one store."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._recorded: OrderedDict[tuple[str, str], float] = OrderedDict()
        """When each entry this process read while pruning was recorded (entries are written
        once): a turn's prune reads only the entries it has not seen, not every old one."""

    def load(self, session_id: str, key: str, request: str) -> JournalEntry | None:
        """The entry of ``key`` if it records this very request, else None."""
        try:
            text = self._store.read_text(session_id, f"{EFFECTS}/{entry_name(key)}")
        except FileNotFoundInWorkspaceError:
            return None
        try:
            entry = JournalEntry.model_validate_json(text)
        except ValidationError:
            return None  # entries are written atomically: this is no entry of ours
        return entry if entry.key == key and entry.request == request else None

    def record(
        self, session_id: str, key: str, tool: str, request: str, effect: Effect
    ) -> JournalEntry:
        """Write the entry of ``key`` (before its change is applied), unless another attempt
        of the same call recorded first: then that entry, which the caller applies."""
        return self._record(session_id, key, tool, request, effect)[0]

    def _record(
        self, session_id: str, key: str, tool: str, request: str, effect: Effect
    ) -> tuple[JournalEntry, bool]:
        writes = []
        for path, data in effect.change.writes:
            text = is_text(data)
            writes.append(
                _Write(
                    path=path,
                    sha256=hashlib.sha256(data).hexdigest(),
                    content=data.decode("utf-8") if text else base64.b64encode(data).decode(),
                    encoding="utf-8" if text else "base64",
                )
            )
        entry = JournalEntry(
            key=key,
            tool=tool,
            request=request,
            recorded_at=time.time(),
            answer=effect.answer,
            writes=writes,
            removes=list(effect.change.removes),
        )
        path = f"{EFFECTS}/{entry_name(key)}"
        document = entry.model_dump_json(indent=1)
        try:  # put-if-absent: two attempts of one call (a zombie's) agree on one change
            self._store.write_if(session_id, path, document.encode("utf-8"), version=None)
        except StoreConflictError:
            held = self.load(session_id, key, request)
            if held is not None:
                return held, False
            self._store.write_text(session_id, path, document)  # no entry of this call
        return entry, True

    def apply(self, session_id: str, change: Change) -> None:
        """Bring the files to the change's outcome: idempotent, so applying twice is once."""
        for path, data in change.writes:
            write_file(self._store, session_id, path, data)
        for path in change.removes:
            if self._store.exists(session_id, path):
                with contextlib.suppress(FileNotFoundInWorkspaceError):  # gone in between
                    delete_file(self._store, session_id, path)

    def once(
        self,
        session_id: str,
        key: str | None,
        tool: str,
        request: str,
        plan: Callable[[], Effect],
    ) -> str:
        """Run a side-effecting call at most once in effect and return its answer.

        With an entry for ``key`` and this request, its change is applied again and its
        answer returned: ``plan`` is not called. Otherwise ``plan`` computes the effect (a
        refusal raises and records nothing), the entry is written, then the change applied.
        Without a key (no activity, so no retry) the effect is simply applied.
        """
        if key is None:
            effect = plan()
            self.apply(session_id, effect.change)
            return effect.answer
        entry = self.load(session_id, key, request)
        if entry is not None:
            self.apply(session_id, entry.change())
            effect_applied(EffectEvent(session_id, key, tool, "journal", replayed=True))
            return entry.answer
        effect = plan()
        recorded, mine = self._record(session_id, key, tool, request, effect)
        if not mine:  # another attempt of this call recorded its change first: that one
            self.apply(session_id, recorded.change())
            effect_applied(EffectEvent(session_id, key, tool, "journal", replayed=True))
            return recorded.answer
        try:
            self.apply(session_id, effect.change)
        except StoreIOError:
            raise  # the store failed: the retry applies the recorded change
        except WorkspaceError:
            self.forget(session_id, key)  # refused by the store: nothing to apply again
            raise
        effect_applied(EffectEvent(session_id, key, tool, "journal", replayed=False))
        pause_after_effect(tool, key)
        return effect.answer

    def forget(self, session_id: str, key: str) -> None:
        """Drop the entry of ``key`` (its change was refused), if the store can delete."""
        with contextlib.suppress(WorkspaceError):
            delete_file(self._store, session_id, f"{EFFECTS}/{entry_name(key)}")

    def answer_of(self, session_id: str, key: str | None, request: str) -> str | None:
        """The recorded answer of a call whose effect the runtime cannot see (a host tool,
        a hook executor), or None."""
        if key is None:
            return None
        entry = self.load(session_id, key, request)
        return None if entry is None else entry.answer

    def record_answer(
        self, session_id: str, key: str | None, tool: str, request: str, answer: str
    ) -> None:
        """Record such a call's answer once it is known (no change: its effect is its own)."""
        if key is not None:
            self.record(session_id, key, tool, request, Effect(answer))

    def prune(self, session_id: str, run_id: str | None, *, now: float | None = None) -> int:
        """Remove the entries of the workflow run ``run_id`` and any older than
        :data:`EFFECT_MAX_AGE`; the number removed. A store that cannot delete keeps them."""
        if getattr(self._store, "delete", None) is None:
            return 0
        cutoff = (time.time() if now is None else now) - EFFECT_MAX_AGE
        try:
            names = [e.name for e in self._store.list_dir(session_id, EFFECTS) if not e.is_dir]
        except FileNotFoundInWorkspaceError:
            return 0
        removed = 0
        for name in names:
            path = f"{EFFECTS}/{name}"
            if not (run_id and name.startswith(f"{run_id}.")):
                recorded = self._recorded_at(session_id, name)
                if recorded is None or recorded >= cutoff:
                    continue
            self._recorded.pop((session_id, name), None)
            try:
                delete_file(self._store, session_id, path)
            except FileNotFoundInWorkspaceError:
                continue
            removed += 1
        return removed

    def _recorded_at(self, session_id: str, name: str) -> float | None:
        """When the entry ``name`` was recorded (read once per process), or None when it is
        no readable entry."""
        known = self._recorded.get((session_id, name))
        if known is not None:
            self._recorded.move_to_end((session_id, name))
            return known
        try:
            text = self._store.read_text(session_id, f"{EFFECTS}/{name}")
            recorded = JournalEntry.model_validate_json(text).recorded_at
        except (WorkspaceError, ValidationError):
            return None
        self._recorded[(session_id, name)] = recorded
        while len(self._recorded) > REMEMBERED_ENTRIES:
            self._recorded.popitem(last=False)
        return recorded


@dataclass(frozen=True)
class EffectEvent:
    """One side effect of a call, as it was applied.

    ``source`` is ``journal`` for a change the journal recorded before applying it (the
    workspace tools, placements, a script's ``tools.*`` writes), ``callable`` for a host tool
    or a hook executor (its effect is its own: the runtime sees only that it ran, or was
    answered from the journal). ``replayed``: applied again from the journal's entry (or
    answered from it) rather than computed, or run, afresh. ``takes_key``: a callable that
    takes a ``ToolContext``, so it was told the call's idempotency key."""

    session_id: str
    key: str
    tool: str
    source: Literal["journal", "callable"]
    replayed: bool
    takes_key: bool = True


class EffectWatch(Protocol):
    """What hears a watched activity's effects (``archmax test``'s crash harness)."""

    def applied(self, event: EffectEvent) -> None:
        """``event`` happened; called on the thread that applied it, and may block there (a
        harness holds a killed worker's activity at this point)."""
        ...


_WATCH: Final[contextvars.ContextVar[EffectWatch | None]] = contextvars.ContextVar(
    "archmax_effect_watch", default=None
)


def watch_effects(watch: EffectWatch | None) -> contextvars.Token[EffectWatch | None]:
    """Let ``watch`` hear the effects of what runs in this context from here on (the
    activity's, and the threads it starts); the token resets it."""
    return _WATCH.set(watch)


def unwatch_effects(token: contextvars.Token[EffectWatch | None]) -> None:
    """Undo :func:`watch_effects`."""
    _WATCH.reset(token)


def watched() -> bool:
    """Whether a watch hears this context's effects."""
    return _WATCH.get() is not None


def effect_applied(event: EffectEvent) -> None:
    """Tell the watch, if one is set, that ``event`` happened (may block: see
    :meth:`EffectWatch.applied`)."""
    watch = _WATCH.get()
    if watch is not None:
        watch.applied(event)


async def callable_ran(
    session_id: str, key: str, tool: str, *, replayed: bool, takes_key: bool
) -> None:
    """A host tool or hook executor ran (``replayed``: was answered from the journal), for
    the watch, if one is set: on a thread, since the watch may block."""
    if watched():
        event = EffectEvent(session_id, key, tool, "callable", replayed, takes_key)
        await asyncio.to_thread(effect_applied, event)


def pause_after_effect(tool: str, key: str) -> None:
    """The fault tests' hook (:data:`PAUSE_AFTER_EFFECT_ENV`): a no-op unless it names
    ``tool``; then mark the boundary and wait there to be killed."""
    setting = os.environ.get(PAUSE_AFTER_EFFECT_ENV)
    if not setting or "=" not in setting:
        return
    tools, _, marker = setting.partition("=")
    if tool not in tools.split(","):
        return
    with Path(marker).open("a", encoding="utf-8") as handle:
        handle.write(f"{tool} {key}\n")
    time.sleep(3600)


__all__ = [
    "EFFECTS",
    "EFFECT_MAX_AGE",
    "Change",
    "Effect",
    "EffectEvent",
    "EffectJournal",
    "EffectWatch",
    "JournalEntry",
    "callable_ran",
    "digest",
    "effect_applied",
    "idempotency_key",
    "unwatch_effects",
    "watch_effects",
    "watched",
]
