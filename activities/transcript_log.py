"""The store's log of each conversation, and the prompts model calls refer to by digest.

``<store>/<session folder>/checkpoints/transcript.jsonl`` holds one message a line as
``{"n": index, "h": chained digest, "m": message}``; the digest of line ``n`` is
``sha256(digest of line n-1 + the message's JSON)``. A model call names where the log stood
(``TranscriptLog(base, base_hash)``) and carries the messages after it:

- lines past ``base`` that equal the call's messages are a retry's (or an earlier failed
  attempt's): kept, not written again;
- lines past ``base`` that differ (a workflow reset rewound the session) are cut off first;
- a log shorter than ``base``, or whose digest at ``base`` is not ``base_hash``, is a store
  that lost what it held: a non-retryable error naming the session and how to repair it
  (``archmax repair``, which rebuilds the log from the workflow history), never a silent
  rewrite. A line whose digest does not follow from the line before and its message (a
  corrupted line) ends the log where it stands, as a torn last line does.

Prompts and tool schemas are kept once per digest under ``checkpoints/prompts/``: a call
sends the text when it changed since the run's last call and its digest otherwise.

Everything here is synchronous file I/O: callers run it in a thread. A per-process cache
keeps the last read conversations, so a model call reads only the lines it appends.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Final

from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.session_store import atomic_write, session_folder
from archmax_temporal.workflows.models import Message, ToolSchema, TranscriptLog
from archmax_temporal.workflows.transcript import schemas_text

LOG_FILE: Final = "checkpoints/transcript.jsonl"
"""Where a session's conversation lives, relative to its folder."""

PROMPTS_DIR: Final = "checkpoints/prompts"
"""Where prompts and tool schemas are kept by digest, relative to a session's folder."""

CACHED_SESSIONS: Final = 64
"""How many conversations a worker process keeps in memory (the hot ones)."""

LOG_DIVERGED: Final = "TranscriptLogDiverged"
"""The error type of a log that does not hold what the workflow says it does (final)."""


REPAIR_HINT: Final = (
    "run `archmax repair {session_id}` (or agent.sessions.repair) to rebuild it from the "
    "workflow history"
)
"""What a damaged log's error says to do (the session id filled in)."""

UNHELD_LOG: Final = "log"
UNHELD_PROMPT: Final = "prompt"
"""The detail of a ``TranscriptLogDiverged`` error: the log did not hold the call's base (the
call wrote nothing), or a prompt it names was missing (its messages were written first)."""


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


def _stamp(path: Path) -> tuple[int, int]:
    """The log file's (inode, size): what the cache read is still the file while they hold
    (a missing file: ``(0, 0)``)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (0, 0)
    return (stat.st_ino, stat.st_size)


class TranscriptLogs:
    """The conversations of the sessions under one store root."""

    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[list[Message], list[str], tuple[int, int]]] = (
            OrderedDict()
        )
        """Per session: the parsed log and the (inode, size) of the file it was read from."""

    def _folder(self, session_id: str) -> Path:
        return session_folder(self._root, session_id)

    def _load(self, session_id: str) -> tuple[list[Message], list[str]]:
        """The session's log, from the cache as far as the file still is what it cached:
        the same file grown by appends (another worker's turn) is read from where the cache
        ends; a replaced file (a rewrite after a reset) is read whole."""
        path = self._folder(session_id) / LOG_FILE
        stamp = _stamp(path)
        cached = self._cache.get(session_id)
        if cached is not None:
            self._cache.move_to_end(session_id)
            messages, digests, seen = cached
            if seen == stamp:
                return messages, digests
            if seen[0] == stamp[0] and stamp[1] > seen[1]:
                return self._read(session_id, path, messages, digests, seen[1])
        return self._read(session_id, path, [], [], 0)

    def _read(
        self,
        session_id: str,
        path: Path,
        messages: list[Message],
        digests: list[str],
        offset: int,
    ) -> tuple[list[Message], list[str]]:
        """Parse the log's lines from byte ``offset`` onto ``messages`` and cache the result."""
        torn = False
        if path.exists():
            with path.open("rb") as log:
                log.seek(offset)
                for raw in log:
                    try:
                        entry = json.loads(raw.decode("utf-8", errors="replace"))
                        message = Message.model_validate(entry["m"])
                        digest = str(entry["h"])
                    except (ValueError, KeyError, TypeError):
                        torn = True  # a write cut short by a crash: the log ends before it
                        break
                    if not raw.endswith(b"\n"):
                        torn = True  # a line still being written (or cut): not yet the log's
                        break
                    if digest != chain(digests[-1] if digests else "", message):
                        torn = True  # a corrupted line: the log ends before it
                        break
                    messages.append(message)
                    digests.append(digest)
        if torn:
            self._rewrite(session_id, messages, digests)
        self._remember(session_id, path, messages, digests)
        return messages, digests

    def _remember(
        self, session_id: str, path: Path, messages: list[Message], digests: list[str]
    ) -> None:
        self._cache[session_id] = (messages, digests, _stamp(path))
        self._cache.move_to_end(session_id)
        while len(self._cache) > CACHED_SESSIONS:
            self._cache.popitem(last=False)

    def _rewrite(self, session_id: str, messages: list[Message], digests: list[str]) -> None:
        atomic_write(self._folder(session_id) / LOG_FILE, log_bytes(messages, digests))

    def _append(self, session_id: str, first: int, lines: list[tuple[Message, str]]) -> None:
        path = self._folder(session_id) / LOG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        text = log_lines(first, lines)
        with path.open("a", encoding="utf-8") as log:
            log.write(text)
            log.flush()
            os.fsync(log.fileno())

    def extend(
        self, session_id: str, log: TranscriptLog, new: list[Message]
    ) -> tuple[list[Message], str]:
        """The whole conversation once ``new`` follows the log's first ``log.base`` messages
        (written unless a retry already did), and the digest at its end."""
        with self._lock:
            messages, digests = self._load(session_id)
            if not holds(messages, digests, log):
                self._cache.pop(session_id, None)
                raise diverged(session_id, log.base, len(messages))
            cut, appended = advance(messages, digests, log, new)
            if cut:
                self._rewrite(session_id, messages, digests)
            elif appended:
                self._append(session_id, len(messages) - len(appended), appended)
            self._remember(session_id, self._folder(session_id) / LOG_FILE, messages, digests)
            end = digests[-1] if digests else ""
            return list(messages), end

    def read(self, session_id: str, count: int) -> list[Message]:
        """The conversation's first ``count`` messages (fewer if the log is shorter)."""
        with self._lock:
            messages, _ = self._load(session_id)
            return list(messages[:count])

    def slice(self, session_id: str, start: int, stop: int) -> tuple[list[Message], list[str]]:
        """Messages ``start`` to ``stop`` of the conversation and their digests (fewer when
        the log is shorter)."""
        with self._lock:
            messages, digests = self._load(session_id)
            return messages[start:stop], digests[start:stop]

    def digest_at(self, session_id: str, count: int) -> str | None:
        """The digest of the log's first ``count`` messages (None when it holds fewer)."""
        with self._lock:
            _, digests = self._load(session_id)
            if count > len(digests):
                return None
            return digests[count - 1] if count else ""

    def prompt(self, session_id: str, digest: str, text: str | None) -> str:
        """The prompt (or schema text) with ``digest``: ``text`` is kept when given, else
        read from where an earlier call kept it."""
        path = self._folder(session_id) / PROMPTS_DIR / digest
        if text is not None:
            if not path.exists():
                atomic_write(path, text.encode("utf-8"))
            return text
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ApplicationError(
                f"prompt {digest[:12]}… of session {session_id!r} is not in the store: "
                "the workers must share the store (ARCHMAX_STORE); if it was lost, "
                + REPAIR_HINT.format(session_id=session_id),
                UNHELD_PROMPT,
                type=LOG_DIVERGED,
                non_retryable=True,
            ) from None

    def tools(
        self, session_id: str, digest: str | None, tools: list[ToolSchema]
    ) -> list[ToolSchema]:
        """The tool schemas a call offers: sent, or kept under their digest."""
        if digest is None:
            return tools
        text = self.prompt(session_id, digest, schemas_text(tools) if tools else None)
        loaded: list[Any] = json.loads(text)
        return [ToolSchema.model_validate(t) for t in loaded]
