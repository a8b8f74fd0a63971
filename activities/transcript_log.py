"""The store's log of each conversation, and the prompts model calls refer to by digest.

Each message has a chained digest: ``sha256(digest of the message before + its JSON)`` (``""``
before the first), so the digest at ``n`` names the whole conversation up to ``n``. A model
call names where the log stood (``TranscriptLog(base, base_hash)``) and carries the messages
after it. The log is a set of **segments**, objects under ``checkpoints/transcript/`` that any
worker writes and none ever changes: one per call that brought new messages, named by where
it ends and where it starts (:func:`segment_name`: the end's index and digest, the start's
index and the digest before it) and holding its messages as lines
``{"n": index, "h": chained digest, "m": message}`` after a header ``{"first", "prev"}``.

- A segment is written put-if-absent: a retry of the call names the same segment (same
  messages, same digests) and writes nothing twice.
- A reset that rewound the session writes a segment from an earlier point: both branches
  stay, and each call reads only the chain that ends at its own ``base_hash``, walking back
  segment by segment (:meth:`TranscriptLogs.chain`). Nothing is ever cut or rewritten, so a
  worker that fails over reads exactly what the session recorded: no local state, no log
  that diverges because another worker appended.
- A chain that cannot be walked (a segment lost or corrupted: its lines do not chain to the
  digests its name promises) is a store that lost what it held: a non-retryable error naming
  the session and how to repair it (``archmax repair``, which rebuilds the log from the
  workflow history), never a silent rewrite.
- A folder store written before segments holds the log as one file,
  ``checkpoints/transcript.jsonl`` (:data:`LEGACY_LOG_FILE`); a chain the segments do not
  reach is read from it, and written as one segment so the file is read once.

A worker new to a session walks its chain back once (then keeps it). The walk is bounded:
after every :data:`COMPACT_EVERY`-th segment of a chain the writer adds one that spans the
16 before it, after every 256th one that spans 256 (and so on), and a walk takes the widest
segment that ends where it stands, so it reads at most about 15 segments a level.

Prompts and tool schemas are kept once per digest under ``checkpoints/prompts/``: a call
sends the text when it changed since the run's last call and its digest otherwise. They are
written without an fsync, like tool results: one that is not in the store, or whose bytes do
not hash to its name (a machine crash cut it short), is the final ``PromptMissing``, and the
workflow sends the call again with the texts.

Tool results are kept the same way, under ``checkpoints/results/<name>``
(:data:`RESULTS_DIR`, the name the first 128 bits of the result's SHA-256; before 0.2.0's
generation all 256, and a call naming a result by its whole digest finds it under either):
the activity that ran a workspace or host tool puts a result of at
least :data:`KEEP_RESULT_BYTES` there (put-if-absent, before it completes; not fsync'd,
since the history holds the result and a lost one is only sent again) and says so
(``kept``); the workflow then hands the next model call the result's digest instead of its
text (``ModelCallInput.refs``), and the model activity reads it back (:meth:`TranscriptLogs.
resolve`) before it appends the messages to the log, so the log holds exactly what it held
when calls carried the text, and the history holds each result once: as the tool's result.
A result that is not in the store, or whose bytes do not hash to its name, is the final
``ToolResultMissing``: the workflow sends the call again with the text.

Everything here is synchronous store I/O
(:class:`~archmax_temporal.activities.session_store.SessionStore`): callers run it in a thread. A
per-process cache keeps the last chain of each hot conversation, so a model call on the worker that
made the last one reads nothing and writes one segment.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.session_store import SessionStore, write_if_unsynced
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    StoreConflictError,
    WorkspaceError,
)
from archmax_temporal.workflows.known_texts import KNOWN_TEXTS, Kept
from archmax_temporal.workflows.models import Message, ToolSchema, TranscriptLog
from archmax_temporal.workflows.transcript import (
    LOG_DIVERGED,
    PROMPT_MISSING,
    RESULT_MISSING,
    SHORT_NAME,
    UNHELD_LOG,
    digest_of,
    names,
    schemas_text,
)

SEGMENTS_DIR: Final = "checkpoints/transcript"
"""Where a session's log segments live, relative to its folder."""

LEGACY_LOG_FILE: Final = "checkpoints/transcript.jsonl"
"""Where a folder store kept a session's log before segments (read, never written)."""

COMPACT_EVERY: Final = 16
"""Every 16th segment of a chain is followed by one spanning the 16 before it (and every
256th by one spanning 256, …): a walk back from any point reads at most about 15 segments
per level, however long the session."""

CACHED_PROMPTS: Final = 256
"""Prompts and tool lists a worker process keeps in memory (by session and digest)."""

PROMPTS_DIR: Final = "checkpoints/prompts"
"""Where prompts and tool schemas are kept by digest, relative to a session's folder."""

RESULTS_DIR: Final = "checkpoints/results"
"""Where tool results a model call names by digest are kept (``<name>``: the first 128 bits of
the SHA-256, or all of it before 0.2.0's generation), relative to a session's folder."""


def result_paths(name: str) -> list[str]:
    """Where a tool result a call names ``name`` may be kept, in the order to look: under the
    name, and, for a whole digest (a run begun before the generation, whose result a worker
    of this version kept), under its first 128 bits."""
    paths = [f"{RESULTS_DIR}/{name}"]
    if len(name) > SHORT_NAME:
        paths.append(f"{RESULTS_DIR}/{name[:SHORT_NAME]}")
    return paths


KEEP_RESULT_BYTES: Final = 512
"""A tool result at least this long (UTF-8) is kept in the store by its activity and named
by digest in the next model call; a shorter one travels in the call (the digest and the
store write would cost about as much as the text)."""

CACHED_RESULTS: Final = 256
"""Tool results a worker process keeps in memory (by session and digest): a model call on
the worker that ran the tool reads nothing."""

CACHED_RESULT_CHARS: Final = 100_000
"""A result longer than this is not kept in memory (it is read back from the store)."""

CACHED_SESSIONS: Final = 64
"""How many conversations a worker process keeps in memory (the hot ones)."""


NOT_IN_STORE: Final = "is not in the store: the workers must share the store (ARCHMAX_STORE)"
"""Why a text a call names by digest is missing, when the session's store should hold it."""

NOT_KNOWN: Final = (
    "is neither known to this worker nor kept in the session's store yet (the first call "
    "naming it on a worker that has not seen it)"
)
"""Why a tool list a call names by digest is missing: a worker new to the list, or a store the
workers do not share."""


REPAIR_HINT: Final = (
    "run `archmax repair {session_id}` (or agent.sessions.repair) to rebuild it from the "
    "workflow history"
)
"""What a damaged log's error says to do (the session id filled in)."""


def chain(previous: str, message: Message) -> str:
    """The digest of a log line: the previous line's digest and this message's JSON."""
    return hashlib.sha256((previous + message.model_dump_json()).encode("utf-8")).hexdigest()


def holds(messages: list[Message], digests: list[str], log: TranscriptLog) -> bool:
    """Whether a log of ``messages`` (with ``digests``) holds what ``log`` names: at least
    ``log.base`` messages, the digest at ``base`` being ``base_hash``."""
    return len(messages) >= log.base and (not log.base or digests[log.base - 1] == log.base_hash)


def advance(
    messages: list[Message], digests: list[str], log: TranscriptLog, new: list[Message]
) -> tuple[bool, list[tuple[Message, str]]]:
    """Apply one call to a log that :func:`holds` its base, in place: the lines past ``base``
    that equal ``new`` kept (a retry's), the rest past them cut off (a reset rewound the
    session), the remaining ``new`` appended. Whether lines were cut, and the appended lines
    with their digests. (The model activity and ``archmax repair`` apply calls alike.)"""
    already = 0  # how many of ``new`` the log holds after base (a retry's)
    for held, message in zip(messages[log.base :], new, strict=False):
        if held.model_dump_json() != message.model_dump_json():
            break
        already += 1
    cut = len(messages) > log.base + already  # lines a reset rewound past
    previous = digests[log.base + already - 1] if log.base + already else ""
    appended: list[tuple[Message, str]] = []
    for message in new[already:]:
        previous = chain(previous, message)
        appended.append((message, previous))
    del messages[log.base + already :]
    del digests[log.base + already :]
    messages.extend(m for m, _ in appended)
    digests.extend(h for _, h in appended)
    return cut, appended


def log_lines(first: int, lines: list[tuple[Message, str]]) -> str:
    """Log lines (``n`` counting from ``first``) as the file holds them."""
    return "".join(
        json.dumps({"n": first + k, "h": h, "m": m.model_dump(mode="json")}, ensure_ascii=False)
        + "\n"
        for k, (m, h) in enumerate(lines)
    )


def log_bytes(messages: list[Message], digests: list[str]) -> bytes:
    """The whole log file of ``messages`` and their digests."""
    return log_lines(0, list(zip(messages, digests, strict=True))).encode("utf-8")


def diverged(session_id: str, base: int, held: int) -> ApplicationError:
    """The final error of a log that does not hold the ``base`` messages a call names."""
    return ApplicationError(
        f"the store's conversation log of session {session_id!r} does not hold the "
        f"{base} messages the session recorded (it holds {held}): the store lost data, was "
        "damaged or belongs to another deployment; " + REPAIR_HINT.format(session_id=session_id),
        UNHELD_LOG,
        type=LOG_DIVERGED,
        non_retryable=True,
    )


_NAME_DIGEST: Final = 32
"""Hex digits of a digest in a segment's name (the header and lines hold them whole)."""

_SEGMENT: Final = re.compile(r"^(\d{10})\.([0-9a-f]{32})\.(\d{10})\.([0-9a-f]{32}|start)\.jsonl$")


def segment_name(first: int, prev: str, end: int, digest: str) -> str:
    """The segment holding messages ``first`` to ``end - 1``: after the chain ending in
    ``prev`` (``""`` at the start), up to the one ending in ``digest``. Its session-relative
    path."""
    tail = prev[:_NAME_DIGEST] if prev else "start"
    return f"{SEGMENTS_DIR}/{end:010d}.{digest[:_NAME_DIGEST]}.{first:010d}.{tail}.jsonl"


def segment_bytes(first: int, prev: str, lines: list[tuple[Message, str]]) -> bytes:
    """A segment's content: the header, then one line per message."""
    header = json.dumps({"first": first, "prev": prev}) + "\n"
    return (header + log_lines(first, lines)).encode("utf-8")


@dataclass(frozen=True)
class _Named:
    """What a segment's name promises."""

    name: str
    end: int
    digest: str
    first: int
    prev: str


def _named(name: str) -> _Named | None:
    found = _SEGMENT.match(name)
    if found is None:
        return None
    end, digest, first, prev = found.groups()
    return _Named(name, int(end), digest, int(first), "" if prev == "start" else prev)


def _parse_segment(data: bytes, named: _Named) -> tuple[str, list[Message], list[str]] | None:
    """A segment's full ``prev`` digest, messages and digests, if its lines chain from its
    header and end where its name says; else None (a damaged segment)."""
    try:
        header, *rows = data.decode("utf-8").splitlines()
        head = json.loads(header)
        previous = str(head["prev"])
        if int(head["first"]) != named.first or previous[:_NAME_DIGEST] != named.prev:
            return None
        messages: list[Message] = []
        digests: list[str] = []
        for k, row in enumerate(rows):
            entry = json.loads(row)
            message = Message.model_validate(entry["m"])
            digest = str(entry["h"])
            if entry["n"] != named.first + k or digest != chain(
                previous if not k else digests[-1], message
            ):
                return None
            messages.append(message)
            digests.append(digest)
    except (ValueError, KeyError, TypeError):
        return None
    if named.first + len(messages) != named.end or not digests:
        return None
    if digests[-1][:_NAME_DIGEST] != named.digest:
        return None
    return previous, messages, digests


def _parse_legacy(data: bytes) -> tuple[list[Message], list[str]]:
    """The chain a pre-segment log file holds: its lines up to the first torn, unparsable or
    unchained one."""
    messages: list[Message] = []
    digests: list[str] = []
    for raw in data.split(b"\n")[:-1]:  # the part after the last newline is torn
        try:
            entry = json.loads(raw.decode("utf-8", errors="replace"))
            message = Message.model_validate(entry["m"])
            digest = str(entry["h"])
        except (ValueError, KeyError, TypeError):
            break
        if digest != chain(digests[-1] if digests else "", message):
            break
        messages.append(message)
        digests.append(digest)
    return messages, digests


class TranscriptLogs:
    """The conversations of the sessions in one store."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[list[Message], list[str]]] = OrderedDict()
        """Per session: the last chain read or written (any branch of the log)."""
        self.reads = 0
        """Segments (and legacy files) this process read: what a cache miss cost."""
        self._prompts: Kept[tuple[str, str], str] = Kept(CACHED_PROMPTS)
        """Prompts this process wrote or read, by session and digest, so a call that names
        one reads nothing."""
        self._bounds: dict[str, list[int]] = {}
        """Per cached session: where the segments of its cached chain end (for compaction)."""
        self._results: Kept[tuple[str, str], str] = Kept(CACHED_RESULTS)
        """Tool results this process kept or read, by session and digest."""
        self._schemas: Kept[str, tuple[ToolSchema, ...]] = Kept(CACHED_PROMPTS)
        """Tool schema lists parsed, by digest (alike in every session), so a call that
        names one parses nothing."""

    # --- reading ----------------------------------------------------------------------

    def _cached(
        self, session_id: str, end: int, digest: str
    ) -> tuple[list[Message], list[str]] | None:
        """The cached chain's first ``end`` messages when they end in ``digest``."""
        cached = self._cache.get(session_id)
        if cached is None:
            return None
        messages, digests = cached
        if end == 0:
            return [], []
        if len(digests) >= end and digests[end - 1][: len(digest)] == digest:
            return messages[:end], digests[:end]
        return None

    def _held(self, names: list[_Named], legacy: int) -> int:
        return max([legacy, *(n.end for n in names)])

    def _legacy(self, session_id: str) -> tuple[list[Message], list[str]]:
        try:
            data = self._store.read_bytes(session_id, LEGACY_LOG_FILE)
        except FileNotFoundInWorkspaceError:
            return [], []
        self.reads += 1
        return _parse_legacy(data)

    def _walk(self, session_id: str, base: int, base_hash: str) -> tuple[list[Message], list[str]]:
        """The chain ending at ``base`` in ``base_hash``, read back segment by segment (from
        the cache as far as it holds it), or :func:`diverged`."""
        names = [n for n in map(_named, self._store.walk(session_id, SEGMENTS_DIR)) if n]
        ending: dict[tuple[int, str], list[_Named]] = {}
        for named in names:
            ending.setdefault((named.end, named.digest), []).append(named)
        pieces: list[tuple[list[Message], list[str]]] = []
        ends: list[int] = []
        end, digest, full = base, base_hash[:_NAME_DIGEST], base_hash
        prefix: tuple[list[Message], list[str]] | None = None
        legacy: tuple[list[Message], list[str]] | None = None
        bounds: list[int] = []
        while prefix is None:
            prefix = self._cached(session_id, end, full)
            if prefix is not None:
                bounds = self._bounds_to(session_id, end)
                break
            candidates = sorted(ending.get((end, digest), []), key=lambda n: n.first)
            for named in candidates:  # the widest first
                try:
                    data = self._store.read_bytes(session_id, f"{SEGMENTS_DIR}/{named.name}")
                except FileNotFoundInWorkspaceError:
                    continue
                self.reads += 1
                parsed = _parse_segment(data, named)
                if parsed is not None and parsed[2][-1] == full:
                    previous, messages, digests = parsed
                    pieces.append((messages, digests))
                    ends.append(named.end)
                    end, digest, full = named.first, previous[:_NAME_DIGEST], previous
                    if end == 0:
                        prefix = ([], [])
                    break
            else:
                if legacy is None:
                    legacy = self._legacy(session_id)
                held_messages, held_digests = legacy
                if len(held_digests) >= end and (not end or held_digests[end - 1] == full):
                    prefix = held_messages[:end], held_digests[:end]
                    if end:
                        self._write_segment(session_id, 0, "", list(zip(*prefix, strict=True)))
                        bounds = [end]
                    break
                raise diverged(session_id, base, self._held(names, len(held_digests)))
        messages, digests = list(prefix[0]), list(prefix[1])
        for piece_messages, piece_digests in reversed(pieces):
            messages.extend(piece_messages)
            digests.extend(piece_digests)
        self._bounds[session_id] = [*bounds, *reversed(ends)]
        return messages, digests

    def _bounds_to(self, session_id: str, end: int) -> list[int]:
        """Where the cached chain's segments end, up to ``end`` (itself one: a call's base
        is where an earlier call ended)."""
        kept = [b for b in self._bounds.get(session_id, []) if b <= end]
        return kept if not end or (kept and kept[-1] == end) else [*kept, end]

    def _chain(self, session_id: str, base: int, base_hash: str) -> tuple[list[Message], list[str]]:
        cached = self._cached(session_id, base, base_hash) if base_hash or not base else None
        if cached is None:
            cached = self._walk(session_id, base, base_hash)
            self._remember(session_id, *cached)
        else:
            self._bounds[session_id] = self._bounds_to(session_id, base)
            self._cache.move_to_end(session_id)
        return cached

    def _remember(self, session_id: str, messages: list[Message], digests: list[str]) -> None:
        self._cache[session_id] = (messages, digests)
        self._cache.move_to_end(session_id)
        while len(self._cache) > CACHED_SESSIONS:
            dropped, _ = self._cache.popitem(last=False)
            self._bounds.pop(dropped, None)

    def forget(self, session_id: str) -> None:
        """Drop the session's cached chain (after a repair rewrote its log)."""
        with self._lock:
            self._cache.pop(session_id, None)

    # --- writing ----------------------------------------------------------------------

    def _write_segment(
        self, session_id: str, first: int, prev: str, lines: list[tuple[Message, str]]
    ) -> None:
        """Put one segment unless it is there (a retry's, another worker's: the same)."""
        name = segment_name(first, prev, first + len(lines), lines[-1][1])
        with contextlib.suppress(StoreConflictError):
            self._store.write_if(session_id, name, segment_bytes(first, prev, lines), version=None)

    def _compact(self, session_id: str, messages: list[Message], digests: list[str]) -> None:
        """Record the segment just written; after every :data:`COMPACT_EVERY`-th (and every
        ``COMPACT_EVERY**2``-th, …) write one more spanning that many before it."""
        bounds = self._bounds.setdefault(session_id, [])
        bounds.append(len(messages))
        count, span = len(bounds), COMPACT_EVERY
        while count % span == 0:
            first = bounds[count - span - 1] if count > span else 0
            prev = digests[first - 1] if first else ""
            lines = list(zip(messages[first:], digests[first:], strict=True))
            self._write_segment(session_id, first, prev, lines)
            span *= COMPACT_EVERY

    def extend(
        self, session_id: str, log: TranscriptLog, new: list[Message]
    ) -> tuple[list[Message], str]:
        """The whole conversation once ``new`` follows the log's first ``log.base`` messages
        (written unless a retry already did), and the digest at its end."""
        with self._lock:
            messages, digests = self._chain(session_id, log.base, log.base_hash)
            previous = log.base_hash if log.base else ""
            lines: list[tuple[Message, str]] = []
            for message in new:
                previous = chain(previous, message)
                lines.append((message, previous))
            messages = [*messages, *(m for m, _ in lines)]
            digests = [*digests, *(h for _, h in lines)]
            if lines:
                self._write_segment(session_id, log.base, log.base_hash if log.base else "", lines)
                self._compact(session_id, messages, digests)
            self._remember(session_id, messages, digests)
            return list(messages), digests[-1] if digests else ""

    def chain(self, session_id: str, log: TranscriptLog) -> tuple[list[Message], list[str]]:
        """The conversation up to where ``log`` stands and its digests, or :func:`diverged`."""
        with self._lock:
            messages, digests = self._chain(session_id, log.base, log.base_hash)
            return list(messages), list(digests)

    def read(self, session_id: str, log: TranscriptLog) -> list[Message]:
        """The conversation's messages up to where ``log`` stands."""
        return self.chain(session_id, log)[0]

    def prompt(
        self, session_id: str, digest: str, text: str | None, *, shared: bool = False
    ) -> str:
        """The prompt (or schema text) with ``digest``: ``text`` is kept when given, else
        read from where an earlier call kept it. A ``shared`` text (a tool list: alike in
        every session) the process knows (:data:`KNOWN_TEXTS`) is kept in the session's store
        as if the call carried it, and every shared text read or carried joins them."""
        path = f"{PROMPTS_DIR}/{digest}"
        known = self._prompts.get((session_id, digest))
        if known is not None:
            return known
        if text is None and shared:
            text = KNOWN_TEXTS.get(digest)
        if text is not None:
            # no fsync: a prompt the store lost is a PromptMissing, and the call is sent
            # again with the text (which the workflow renders again)
            with contextlib.suppress(StoreConflictError):
                write_if_unsynced(self._store, session_id, path, text.encode("utf-8"), version=None)
        else:
            what, not_found = ("tool list", NOT_KNOWN) if shared else ("prompt", NOT_IN_STORE)
            text = self._read_named(session_id, [path], digest, what, PROMPT_MISSING, not_found)
        self._keep_prompt(session_id, digest, text)
        if shared:
            KNOWN_TEXTS.put(digest, text)
        return text

    def _keep_prompt(self, session_id: str, digest: str, text: str) -> None:
        if not digest:
            return
        self._prompts.put((session_id, digest), text)

    def tools(
        self, session_id: str, digest: str | None, tools: list[ToolSchema]
    ) -> list[ToolSchema]:
        """The tool schemas a call offers: sent, or kept under their digest."""
        if digest is None:
            return tools
        text = self.prompt(session_id, digest, schemas_text(tools) if tools else None, shared=True)
        parsed = self._schemas.get(digest)
        if parsed is None:
            loaded: list[Any] = json.loads(text)
            parsed = tuple(ToolSchema.model_validate(t) for t in loaded)
            self._schemas.put(digest, parsed)
        return list(parsed)

    # --- tool results -------------------------------------------------------------------

    def keep_result(self, session_id: str, text: str) -> bool:
        """Keep a tool result under its digest (put-if-absent: a retry's, or the same result
        read twice, writes nothing new) when it is long enough to be named by digest
        (:data:`KEEP_RESULT_BYTES`). Whether it is kept: only then may a model call name it
        (a store that cannot take it now: not kept, and the call carries the text)."""
        if len(text.encode("utf-8")) < KEEP_RESULT_BYTES:
            return False
        name = digest_of(text)[:SHORT_NAME]
        if self._results.get((session_id, name)) is not None:
            return True
        try:  # no fsync: a result the store lost is a ToolResultMissing, sent again whole
            write_if_unsynced(
                self._store,
                session_id,
                f"{RESULTS_DIR}/{name}",
                text.encode("utf-8"),
                version=None,
            )
        except StoreConflictError:
            pass  # there already: the same bytes
        except WorkspaceError:
            return False  # the store cannot take it now: the call carries the text
        self._keep_result(session_id, name, text)
        return True

    def result(self, session_id: str, digest: str) -> str:
        """The tool result kept under ``digest``: from memory, or read from the store and
        checked against its digest; the final ``ToolResultMissing`` when it is not there or
        does not hash to its name."""
        known = self._results.get((session_id, digest[:SHORT_NAME]))
        if known is not None:  # kept by the first 128 bits of a text checked against them
            return known
        paths = result_paths(digest)
        text = self._read_named(session_id, paths, digest, "tool result", RESULT_MISSING)
        self._keep_result(session_id, digest[:SHORT_NAME], text)
        return text

    def _read_named(
        self,
        session_id: str,
        paths: list[str],
        digest: str,
        what: str,
        missing: str,
        not_found: str = NOT_IN_STORE,
    ) -> str:
        """The text the first of ``paths`` the store has holds (files named by ``digest``); the
        final ``missing`` error (the workflow then sends the call again with the text) when none
        is there (saying ``not_found``) or its bytes' SHA-256 is not ``digest`` (whole, or its
        first 128 bits: :func:`~archmax_temporal.workflows.transcript.names`), as after a crash
        cut an unsynced write short."""
        for path in paths:  # the first that is there
            try:
                data = self._store.read_bytes(session_id, path)
                break
            except FileNotFoundInWorkspaceError:
                continue
            except WorkspaceError as exc:
                raise exc.to_application_error() from None
        else:
            raise named_missing(what, missing, session_id, digest, not_found)
        text = data.decode("utf-8", errors="replace")
        if not names(digest, text):
            raise named_missing(what, missing, session_id, digest, "does not match its digest")
        return text

    def resolve(
        self, session_id: str, messages: list[Message], refs: dict[int, str]
    ) -> list[Message]:
        """``messages`` with the text of each tool result ``refs`` names (position in
        ``messages`` → digest) filled in: what the call would have carried without refs."""
        if not refs:
            return messages
        resolved = list(messages)
        for index, digest in sorted(refs.items()):
            if not 0 <= index < len(resolved) or resolved[index].content is not None:
                raise ApplicationError(
                    f"a model call names a tool result at message {index} that carries text "
                    "or does not exist",
                    type="ModelCallError",
                    non_retryable=True,
                )
            text = self.result(session_id, digest)
            resolved[index] = resolved[index].model_copy(update={"content": text})
        return resolved

    def _keep_result(self, session_id: str, digest: str, text: str) -> None:
        if len(text) > CACHED_RESULT_CHARS:
            return
        self._results.put((session_id, digest), text)


def named_missing(
    what: str, error_type: str, session_id: str, digest: str, why: str
) -> ApplicationError:
    """The final error of a text a call names by digest (a tool result: ``ToolResultMissing``;
    a system prompt or tool list: ``PromptMissing``) that the store cannot give: the workflow
    sends the call again with the text."""
    return ApplicationError(
        f"{what} {digest[:12]}… of session {session_id!r} {why}; the call is sent again with "
        "the text",
        type=error_type,
        non_retryable=True,
    )
