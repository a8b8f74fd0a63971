"""Session-relative paths: made canonical, refused when they leave the session folder, and
the ``OSError`` raised on one named in the session's own terms.

One id, one folder (seed): every path a store takes is relative to the session's own folder
(``scratchpad/notes.md``, ``trigger.json``) and never names the session id. A path that would
leave that folder (``..``, an absolute path) is refused with :class:`PathEscapeError`. The
store's shared areas (``_specs/…``, ``_store.json``) are named by :func:`shared_key`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from contextlib import contextmanager

from archmax_temporal.activities.store_errors import PathEscapeError, WorkspaceError, os_error


def normalize_path(path: str) -> str:
    """``path`` as a canonical session-relative POSIX path (``""`` is the session folder).

    ``.`` segments and repeated slashes drop; ``..`` is applied. An absolute path, or one whose
    ``..`` climbs above the session folder, raises :class:`PathEscapeError`.
    """
    if not isinstance(path, str):
        raise WorkspaceError(f"path must be a string, not {type(path).__name__}", str(path))
    if "\x00" in path:
        raise WorkspaceError(f"path {path!r} contains a NUL character", path)
    if path.startswith("/"):
        raise PathEscapeError(f"'{path}' is absolute; paths are relative to the session", path)
    normal = posixpath.normpath(path) if path else "."
    if normal == ".":
        return ""
    if normal == ".." or normal.startswith("../"):
        raise PathEscapeError(f"'{path}' escapes the session folder", path)
    return normal


def shared_key(key: str) -> str:
    """``key`` checked as the name of a shared object: a normalized relative path whose first
    segment starts with ``_`` (no session folder does), never one leaving the store."""
    rel = normalize_path(key)
    if not rel or not rel.startswith("_"):
        raise PathEscapeError(f"'{key}' is not in a shared area of the store", key)
    return rel


def _relative_or_raw(path: str) -> str:
    try:
        return normalize_path(path)
    except WorkspaceError:
        return str(path)


@contextmanager
def os_errors(path: str) -> Iterator[None]:
    """Translate an ``OSError`` raised inside the block (see :func:`os_error`)."""
    try:
        yield
    except OSError as exc:
        raise os_error(exc, _relative_or_raw(path)) from None
