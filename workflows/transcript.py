"""The conversation, kept so that each message enters the history once.

The whole conversation lives in the session store's log (``<session>/checkpoints/
transcript.jsonl``, one message a line, each line carrying a chained digest). The workflow
keeps only the messages the log does not hold yet and a window of the newest ones before them
(``SessionState.transcript``, starting at conversation index ``transcript_offset``); a model
call carries just what is new since the log's end (``logged``) and a reference to the rest
(``logged`` and ``logged_hash``), and the model activity appends the new messages to the log
before it reads the whole conversation back. A retry finds its messages already there (equal
lines are not written twice) and a replay never runs the activity: the history records each
message once, so a turn of K steps grows it linearly in K, and continue-as-new carries a
window, not the conversation.

Pure helpers over :class:`SessionState`; deterministic.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from archmax_temporal.workflows import patches
from archmax_temporal.workflows.hooks import MESSAGE_TEXT_LIMIT
from archmax_temporal.workflows.models import (
    PROMPTS_KEPT,
    Message,
    SessionState,
    ToolSchema,
    TrailStep,
    TranscriptLog,
)

WINDOW: Final = 60
"""How many of the newest messages the workflow keeps besides the unlogged ones: what hooks
read (their newest 50) and what finding the last reply scans."""


def total(s: SessionState) -> int:
    """How many messages the conversation has."""
    return s.transcript_offset + len(s.transcript)


def unlogged(s: SessionState) -> list[Message]:
    """The messages the store's log does not hold yet, oldest first."""
    return s.transcript[max(s.logged - s.transcript_offset, 0) :]


RESULT_MISSING: Final = "ToolResultMissing"
"""The error type of a model call naming a tool result the store does not give back (final:
the workflow sends the call again with the text)."""


def kept_prompts(s: SessionState, digests: list[str | None]) -> None:
    """Record that the store keeps the prompts named by ``digests`` (a call that named or
    carried them succeeded): later calls, and the next run's, name them."""
    kept = [d for d in s.prompts_kept if d not in digests]
    kept += [d for d in digests if d]
    s.prompts_kept = kept[-PROMPTS_KEPT:]


LOG_DIVERGED: Final = "TranscriptLogDiverged"
"""The error type of a log that does not hold what the workflow says it does (final)."""

UNHELD_LOG: Final = "log"
UNHELD_PROMPT: Final = "prompt"
"""The detail of a ``TranscriptLogDiverged`` error: the log did not hold the call's base (the
call wrote nothing), or (raised by workers of versions before ``PromptMissing``, which still
answer in a fleet that is being upgraded) a prompt it names was missing (its messages were
written first)."""

PROMPT_MISSING: Final = "PromptMissing"
"""The error type of a model call naming a system prompt or a tool schema list by a digest
the store does not give back (final: the workflow sends the call again with the texts). The
store keeps them without an fsync, as it keeps tool results: the history holds each text in
the call that carried it in full, and a machine that crashed may have lost the file or cut it
short."""


def unlogged_by_ref(s: SessionState) -> tuple[list[Message], dict[int, str]]:
    """:func:`unlogged`, with each tool result the store keeps (``result_refs``) named by
    digest instead of carried: its message without text, and its position → digest."""
    start = max(s.logged, s.transcript_offset)
    messages = unlogged(s)
    refs = {
        index - start: digest
        for index, digest in sorted(s.result_refs.items())
        if 0 <= index - start < len(messages)
    }
    if not refs:
        return messages, {}
    named = [
        message.model_copy(update={"content": None}) if position in refs else message
        for position, message in enumerate(messages)
    ]
    return named, refs


def kept(s: SessionState, message: Message) -> None:
    """Append a tool result the store keeps under its digest (its activity put it there),
    named as :func:`name_of` names texts (workflow code: the run's generation decides)."""
    append(s, message)
    if message.content:
        short = patches.generation()
        s.result_refs[total(s) - 1] = name_of(message.content, short=short)


def log_of(s: SessionState) -> TranscriptLog:
    """Where the store's log stands (what the next write extends)."""
    return TranscriptLog(base=s.logged, base_hash=s.logged_hash)


def append(s: SessionState, message: Message) -> None:
    """Add a message to the conversation (the last reply kept in step)."""
    s.transcript.append(message)
    if _is_reply(message):
        s.last_reply = message.content or ""


def logged(s: SessionState, length: int, digest: str) -> None:
    """The log now holds ``length`` messages ending in ``digest``: forget all but the window
    of what it holds (never a message it does not hold)."""
    if s.last_reply is None:
        s.last_reply = last_reply(s) or ""
    s.logged, s.logged_hash = length, digest
    if s.result_refs:  # the log holds their text now
        s.result_refs = {i: d for i, d in s.result_refs.items() if i >= length}
    held = max(length - s.transcript_offset, 0)
    drop = min(held, len(s.transcript) - WINDOW)
    if drop > 0:
        del s.transcript[:drop]
        s.transcript_offset += drop
        held -= drop
    for index in range(min(held, len(s.transcript))):
        s.transcript[index] = shortened(s.transcript[index])


HELD_TEXT_CHARS: Final = MESSAGE_TEXT_LIMIT
"""How much of a logged message's text the window keeps: what a hook is shown of a message.
The whole message stays in the store's log."""

HELD_ARGUMENTS_CHARS: Final = 16_000
"""Tool-call arguments longer than this keep their JSON shape in the window, each string in
them cut to :data:`HELD_TEXT_CHARS` (a hook still reads the same keys)."""


def shortened(message: Message) -> Message:
    """``message`` as the window holds it once the store's log has it whole: its text cut
    to what a hook is shown and very long tool-call arguments cut string by string, so the
    state continue-as-new carries stays bounded whatever the conversation held."""
    content = message.content
    long_text = content is not None and len(content) > HELD_TEXT_CHARS
    long_calls = any(len(c.arguments) > HELD_ARGUMENTS_CHARS for c in message.tool_calls)
    if not long_text and not long_calls:
        return message
    update: dict[str, object] = {}
    if long_text and content is not None:
        update["content"] = content[:HELD_TEXT_CHARS]
    if long_calls:
        update["tool_calls"] = [
            c.model_copy(update={"arguments": _shortened_arguments(c.arguments)})
            if len(c.arguments) > HELD_ARGUMENTS_CHARS
            else c
            for c in message.tool_calls
        ]
    return message.model_copy(update=update)


def _shortened_arguments(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments[:HELD_TEXT_CHARS]
    cut = json.dumps(_cut_strings(value), ensure_ascii=False)
    return cut if len(cut) <= HELD_ARGUMENTS_CHARS else arguments[:HELD_TEXT_CHARS]


def _cut_strings(value: object) -> object:
    if isinstance(value, str):
        return value[:HELD_TEXT_CHARS]
    if isinstance(value, list):
        return [_cut_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _cut_strings(v) for k, v in value.items()}
    return value


def last_reply(s: SessionState) -> str | None:
    """The agent's latest text: kept on the state, or read off the window."""
    if s.last_reply is not None:
        return s.last_reply
    for message in reversed(s.transcript):
        if _is_reply(message):
            return message.content or ""
    return None


def agent_spoke_since_opening(s: SessionState) -> bool:
    """Whether the agent wrote any text since the person's last message (or the last
    delivery or opening). Past the window's start, any text seen in it counts."""
    for message in reversed(s.transcript):
        if message.role == "user" or (
            message.role == "tool" and message.note in ("event", "opening")
        ):
            return False
        if _is_reply(message):
            return True
    return False


def _is_reply(message: Message) -> bool:
    return (
        message.role == "assistant"
        and message.note is None
        and bool((message.content or "").strip())
    )


def digest_of(text: str) -> str:
    """The SHA-256 of a prompt or a schema list, as a model call refers to it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def name_of(text: str, *, short: bool) -> str:
    """The name a model call gives a text it names rather than carries (a system prompt, a
    tool list, a tool result the store keeps): its SHA-256 (:func:`digest_of`), or the first
    128 bits of it (``short``: a run of :func:`~archmax_temporal.workflows.patches.generation`;
    32 bytes less a name in every model call's input). The model activity reads a text back
    when the name is its digest or the digest's start (:func:`names`), so either serves
    either."""
    digest = digest_of(text)
    return digest[:SHORT_NAME] if short else digest


SHORT_NAME: Final = 32
"""Hex digits of a short name: 128 bits, no collision among a session's texts to fear."""


def names(name: str, text: str) -> bool:
    """Whether ``name`` names ``text``: its SHA-256 whole, or its first
    :data:`SHORT_NAME` hex digits or more."""
    return len(name) >= SHORT_NAME and digest_of(text).startswith(name)


def schemas_text(tools: list[ToolSchema]) -> str:
    """The canonical text of a tool schema list (what its digest is taken of): each schema's
    fields as JSON, keys sorted. Built from the fields directly, not through ``model_dump``,
    which costs a few milliseconds a model call in workflow code; the text is the same
    (a tool's fields are JSON already)."""
    return json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools],
        sort_keys=True,
    )


# --- the audit trail ---------------------------------------------------------------------

TRAIL_WINDOW: Final = 100
"""How many of the newest trail steps the workflow keeps besides the unpersisted ones."""


def trail_total(s: SessionState) -> int:
    """How many steps the session's trail has."""
    return s.trail_offset + len(s.trail)


def trail_since(s: SessionState, start: int) -> list[TrailStep]:
    """The steps from trail index ``start`` on (those the window still holds)."""
    return s.trail[max(start - s.trail_offset, 0) :]


def trail_unpersisted(s: SessionState) -> list[TrailStep]:
    """The steps the store's ``trail.json`` does not hold yet."""
    return s.trail[max(s.trail_persisted - s.trail_offset, 0) :]


def trail_persisted(s: SessionState, count: int) -> None:
    """The store holds the first ``count`` steps: keep only the window of what it holds."""
    s.trail_persisted = count
    held = max(count - s.trail_offset, 0)
    drop = min(held, len(s.trail) - TRAIL_WINDOW)
    if drop > 0:
        del s.trail[:drop]
        s.trail_offset += drop
