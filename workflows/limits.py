"""How big a firing may be, checked before it is accepted.

Everything a firing carries ends up in the workflow's history (the update's payload, then the
transcript and the activity inputs that carry it), and Temporal refuses any payload over 2 MB,
failing every workflow task that would write one. So a firing is bounded *before* its update is
accepted: over a limit, the validator refuses it with
:class:`~archmax_temporal.workflows.errors.PayloadTooLargeError` naming the field, its size and the
limit, and nothing is written. Files are different: they travel by reference through the session
store (the host writes the bytes, the firing carries their digest), so only their own limit applies.

The defaults, and why:

- a message: 128 KiB (a long email thread in plain text);
- one variable: 64 KiB of JSON (an identifier, a payload excerpt; bulk data belongs in a file);
- a whole firing (message and variables, and any inline file content): 256 KiB, Temporal's
  own warning threshold, leaving the rest of its 2 MB for the session's records;
- one file: 64 MiB, by reference.

What a session *accumulates* is bounded as well, since its variables travel with it (the
continue-as-new input, the checkpoint, every turn's save step, the hooks' input):

- distinct variables: 1,000 (``ARCHMAX_MAX_VARIABLES``);
- all its variables together, as the session carries them: 512 KiB
  (``ARCHMAX_MAX_SESSION_VARIABLE_BYTES``, at most 640 KiB).

A firing (or an agent's ``archmax_set_variables``) that would take a session past either is refused
whole, with :class:`~archmax_temporal.workflows.errors.PayloadTooLargeError` naming the limit and
its environment variable; the session is untouched and takes the next firing that fits.

Hosts set them with ``ARCHMAX_MAX_MESSAGE_BYTES``, ``ARCHMAX_MAX_VARIABLE_BYTES``,
``ARCHMAX_MAX_FIRING_BYTES``, ``ARCHMAX_MAX_FILE_BYTES``, ``ARCHMAX_MAX_VARIABLES`` and
``ARCHMAX_MAX_SESSION_VARIABLE_BYTES``; a session keeps the limits it was started with (they
travel in its input), so its validators never change under it. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from archmax_temporal.workflows.errors import PayloadTooLargeError

KIB: Final = 1024
MIB: Final = 1024 * KIB

HARD_CEILING: Final = 1536 * KIB
"""No configured firing limit may exceed this: Temporal's payload limit is 2 MB."""

INLINE_FILE_BYTES: Final = 32 * KIB
"""A file up to this size may travel inline in its firing; a larger one goes by reference."""

SESSION_VARIABLES_CEILING: Final = 640 * KIB
"""No session's variables may carry more than this: the largest payload that carries them,
a hook's or script's input, holds them twice (its ``args.variables`` and the session's
variables its governance reads) beside the spec and the transcript, under Temporal's 2 MB."""

VARIABLES_CEILING: Final = 1_000_000
"""The most distinct variables ``ARCHMAX_MAX_VARIABLES`` may allow (the byte bound binds
long before)."""

INLINE_VARIABLE_BYTES: Final = 1 * KIB
"""A variable whose value's JSON is over this lives in the session store by reference (the
session carries its digest and a preview, never the value)."""

PREVIEW_CHARS: Final = 200
"""How much of a stored value's JSON its preview keeps (what the system prompt shows)."""

MAX_VARIABLE_NAME_CHARS: Final = 64
"""A variable name's length (the same bound the spec puts on the names it declares)."""


class Limits(BaseModel):
    """The bounds a session's firings are held to (carried in its input)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    message_bytes: int = Field(default=128 * KIB, gt=0)
    variable_bytes: int = Field(default=64 * KIB, gt=0)
    firing_bytes: int = Field(default=256 * KIB, gt=0)
    file_bytes: int = Field(default=64 * MIB, gt=0)
    variables: int = Field(default=1000, gt=0)
    """Distinct variables a session may hold (``trigger`` included)."""
    session_variable_bytes: int = Field(default=512 * KIB, gt=0)
    """What a session's variables may carry together (:func:`carried_size`)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        """The limits the environment sets; an unusable value raises ``ValueError`` naming
        the variable (the firing ones are capped below Temporal's 2 MB)."""
        values: dict[str, int] = {}
        for field, name in ENV_NAMES.items():
            raw = env.get(name)
            if not raw:
                continue
            try:
                number = int(raw)
            except ValueError:
                raise ValueError(f"{name} must be a whole number, not {raw!r}") from None
            if number <= 0:
                raise ValueError(f"{name} must be positive, not {number}")
            ceiling = _CEILINGS.get(field, HARD_CEILING)
            if ceiling is not None and number > ceiling:
                raise ValueError(
                    f"{name} must be at most {ceiling} (Temporal's payload limit is 2 MB)"
                )
            values[field] = number
        return cls(**values)


ENV_NAMES: Final = {
    "message_bytes": "ARCHMAX_MAX_MESSAGE_BYTES",
    "variable_bytes": "ARCHMAX_MAX_VARIABLE_BYTES",
    "firing_bytes": "ARCHMAX_MAX_FIRING_BYTES",
    "file_bytes": "ARCHMAX_MAX_FILE_BYTES",
    "variables": "ARCHMAX_MAX_VARIABLES",
    "session_variable_bytes": "ARCHMAX_MAX_SESSION_VARIABLE_BYTES",
}
"""Each limit's environment variable."""

_CEILINGS: Final[dict[str, int | None]] = {
    "file_bytes": None,
    "variables": VARIABLES_CEILING,
    "session_variable_bytes": SESSION_VARIABLES_CEILING,
}
"""Each limit's ceiling other than :data:`HARD_CEILING` (None: no ceiling)."""


def size_of(value: Any) -> int:
    """The UTF-8 size of ``value``'s JSON (a string's own bytes)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))


def _refuse(field: str, size: int, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"{field} is {_human(size)} ({size} bytes); the limit is {_human(limit)} ({limit} bytes)"
    )


def _human(size: int) -> str:
    if size >= MIB:
        return f"{size / MIB:.1f} MiB"
    if size >= KIB:
        return f"{size / KIB:.1f} KiB"
    return f"{size} B"


def check(
    limits: Limits,
    *,
    message: str | None = None,
    variables: Mapping[str, Any] | None = None,
    files: Mapping[str, tuple[int, int]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Raise :class:`PayloadTooLargeError` for the first part of a firing over its limit.

    ``files`` maps a variable to (its size, the bytes it puts inline in the firing);
    ``extra`` holds other fields that count toward the firing (a decision's comment).
    """
    total = 0
    if message is not None:
        size = size_of(message)
        if size > limits.message_bytes:
            raise _refuse("the message", size, limits.message_bytes)
        total += size
    for name, value in (variables or {}).items():
        size = size_of(value)
        if size > limits.variable_bytes:
            raise _refuse(f"variable {name!r}", size, limits.variable_bytes)
        total += size + len(name)
    for name, (size, inline) in (files or {}).items():
        if size > limits.file_bytes:
            raise _refuse(f"file {name!r}", size, limits.file_bytes)
        total += inline
    for name, value in (extra or {}).items():
        size = size_of(value)
        if size > limits.message_bytes:
            raise _refuse(name, size, limits.message_bytes)
        total += size
    if total > limits.firing_bytes:
        raise _refuse("the firing", total, limits.firing_bytes)


_LOCKED_RECORD: Final = len('"":{"value":,"locked":true},')
_UNLOCKED_RECORD: Final = len('"":{"value":,"locked":false},')
_REFERENCE: Final = len('null,"ref":"","size":1048576,"preview":""') + 64 + 16
"""What a reference adds beside its preview (the digest; escapes in the preview allowed)."""


def preview_of(text: str) -> str:
    """A value's JSON as a prompt shows it: whole, or its first :data:`PREVIEW_CHARS`
    characters and how many more there are."""
    if len(text) <= PREVIEW_CHARS:
        return text
    return f"{text[:PREVIEW_CHARS]}…(+{len(text) - PREVIEW_CHARS} chars)"


def stored_entry_size(name: str, preview: str | None, locked: bool) -> int:
    """What a variable by reference adds to the session's carried variables."""
    record = _LOCKED_RECORD if locked else _UNLOCKED_RECORD
    return len(name) + record + _REFERENCE + len((preview or "").encode("utf-8", "surrogatepass"))


def check_growth(limits: Limits, *, count: int, new: int, carried: int) -> None:
    """Raise :class:`PayloadTooLargeError` when a firing that brings ``new`` variables would
    leave a session holding ``count`` variables past ``ARCHMAX_MAX_VARIABLES``, or carrying
    ``carried`` bytes of them past ``ARCHMAX_MAX_SESSION_VARIABLE_BYTES``: the session is
    bounded before it grows."""
    if new and count > limits.variables:
        raise PayloadTooLargeError(
            f"the session would hold {count} variables ({new} new); the limit is "
            f"{limits.variables} ({ENV_NAMES['variables']})"
        )
    if carried > limits.session_variable_bytes:
        raise PayloadTooLargeError(
            f"the session's variables would carry {_human(carried)} ({carried} bytes); the "
            f"limit is {_human(limits.session_variable_bytes)} "
            f"({limits.session_variable_bytes} bytes, {ENV_NAMES['session_variable_bytes']})"
        )
