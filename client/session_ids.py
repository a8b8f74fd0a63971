"""Which session a firing belongs to: an explicit id, a session path over its variables, or a
minted id.

A host names a session with an id, or with a dotted path (``session_path``, per firing or per
agent, or the trigger's ``session:`` declaration) read from the firing's variables; a firing
nothing names mints a fresh id, the same one on every retry of a keyed firing. Pure: no
Temporal, no store.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from archmax_temporal.workflows.errors import InvalidSessionIdError
from archmax_temporal.workflows.identity import check_session_id
from archmax_temporal.workflows.paths import (
    MISSING,
    InvalidPathError,
    Segment,
    parse_path,
    resolve_path,
)


@dataclass(frozen=True)
class ResolvedSession:
    """Which session a firing belongs to, and what it would do there."""

    session_id: str
    disposition: Literal["turn", "resume", "reply"]
    minted: bool


def mint_session_id() -> str:
    """A fresh session id, for a firing nothing else names."""
    return f"session-{uuid.uuid4()}"


_KEYED_SESSIONS = uuid.UUID("6f1d3a0e-5b7c-4c1e-9a51-2d0c8e4b7a93")
"""The namespace of the session ids minted for an idempotency key (uuid5)."""


def minted_for_key(workflow: str, trigger: str, idempotency_key: str) -> str:
    """The session id a keyed firing that names no session mints: the same on every retry of
    that firing, so the retry reaches the session its first attempt started (and Temporal
    dedupes the update there) instead of starting another."""
    name = "\n".join((workflow, trigger, idempotency_key))
    return f"session-{uuid.uuid5(_KEYED_SESSIONS, name)}"


def parsed_session_path(path: str) -> list[Segment]:
    """``path`` parsed, or :class:`InvalidSessionIdError` naming it and what is wrong with it
    (a session path is checked where it is given: per agent, per firing, declared)."""
    try:
        return parse_path(path)
    except InvalidPathError as exc:
        raise InvalidSessionIdError(f"malformed session path {path!r}: {exc}") from None


def session_id_for(
    variables: dict[str, Any],
    *,
    session_id: str | None,
    session_path: str | None,
    agent_path: str | None,
    declared_path: str | None,
) -> tuple[str, bool]:
    """The session a firing belongs to, and whether its id was minted. Precedence: the explicit
    ``session_id``, the per-firing ``session_path``, the agent's ``agent_path``, the trigger's
    ``session:`` declaration (``declared_path``), a minted id (also when the first path given
    does not resolve to a string or a number). A malformed per-firing path is refused even
    beside an explicit id (an empty one included)."""
    if session_path is not None:
        parsed_session_path(session_path)
    if session_id:
        return check_session_id(session_id), False
    for path in (session_path, agent_path, declared_path):
        if not path:
            continue
        value = resolve_path(parsed_session_path(path), variables)
        if value is not MISSING and isinstance(value, str | int) and str(value):
            return check_session_id(str(value), source=f"session path {path!r}"), False
        break
    return mint_session_id(), True
