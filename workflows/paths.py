"""Dotted paths over variables: one parser for ``session:`` declarations, guards and the CLI.

``conversation_id`` reads a variable, ``mail.thread.id`` a nested field, and
``triggers.-1.conversationId`` the ``conversationId`` of the last entry of the ``triggers``
array. A malformed path is rejected wherever it is written, by the same :func:`parse_path`,
so a path means one thing everywhere. Pure: workflow code imports it.
"""

from __future__ import annotations

import re
from typing import Any, Final

# ``\Z``, not ``$``: a trailing newline is no part of a name; ``[0-9]``: ASCII digits only.
_SEGMENT = re.compile(r"^(?:-?[0-9]+|[A-Za-z_][A-Za-z0-9_-]*)\Z")
_INDEX = re.compile(r"^-?[0-9]+\Z")
_NEVER_RESOLVED: Final = frozenset({"length", "constructor", "__proto__"})

Segment = str | int


class InvalidPathError(ValueError):
    """A dotted path is malformed: empty, an empty segment, or a segment that is no name."""


class _Missing:
    """Sentinel for a path that does not resolve (distinct from a resolved ``None``)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def parse_path(path: str) -> list[Segment]:
    """Split ``path`` into names and integer indices, or raise :class:`InvalidPathError`."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidPathError("a path must be a non-empty string")
    if "${{" in path or "}}" in path:
        raise InvalidPathError(f"path {path!r} must be bare, without ${{{{ }}}}")
    segments: list[Segment] = []
    for raw in path.split("."):
        if not raw:
            raise InvalidPathError(f"path {path!r} has an empty segment")
        if not _SEGMENT.match(raw):
            raise InvalidPathError(f"path {path!r}: segment {raw!r} is neither a name nor an index")
        segments.append(int(raw) if _INDEX.match(raw) else raw)
    if isinstance(segments[0], int):
        raise InvalidPathError(f"path {path!r} must start with a variable name")
    return segments


def resolve_path(path: str | list[Segment], root: dict[str, Any]) -> Any:
    """The value at ``path`` inside ``root``, or :data:`MISSING` when any step is absent."""
    segments = parse_path(path) if isinstance(path, str) else path
    current: Any = root
    for segment in segments:
        if isinstance(current, dict):
            if isinstance(segment, int) or segment in _NEVER_RESOLVED or segment not in current:
                return MISSING
            current = current[segment]
        elif isinstance(current, list):
            if not isinstance(segment, int):
                return MISSING
            index = segment if segment >= 0 else len(current) + segment
            if not 0 <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current
