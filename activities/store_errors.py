"""The errors of a session store operation, in the session's own path vocabulary: no
message names a host path.

Errors (all :class:`WorkspaceError`) carry the offending ``path``, always session-relative
(``scratchpad/notes.md``), never a host path; their class name is the type of the
``ApplicationError`` they travel as (:meth:`WorkspaceError.to_application_error`)::

    ArchmaxError                       (workflows/errors.py: every error a host can see)
    └── WorkspaceError                 a refused operation (the agent reads it; never retried)
        ├── PathEscapeError            ``..``, absolute, or leaving the session folder
        │   └── SymlinkPathError       the path passes through a symlink: never followed
        ├── ReadOnlyPathError          a write outside ``scratchpad/``
        ├── BinaryFileError            text asked for, bytes found
        ├── StoreCapabilityError       the store cannot (raw bytes, delete)
        ├── FileNotFoundInWorkspaceError
        ├── NameTooLongError           a name longer than the file system takes
        ├── StoreConflictError         a conditional write lost to another writer: retried
        └── StoreIOError               the store itself failed (disk full, I/O): retried

An ``OSError`` never leaves a store: :func:`os_error` translates it, at this one boundary, into one
of these in the session's own path vocabulary (its message carries neither the store's host path nor
the errno text's file name; :func:`~archmax_temporal.activities.session_paths.os_errors` around a
block). What the runtime does not own (a host tool's exception, a crashed process's stderr, an error
no boundary expected) passes through :func:`hide_host_paths` before it reaches a model or a history
(:func:`unexpected`).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar, Final

from temporalio.exceptions import ApplicationError

from archmax_temporal.workflows.errors import ArchmaxError


class WorkspaceError(ArchmaxError):
    """Base of every refusal of a workspace or session-store operation; names the path.

    An :class:`ArchmaxError` like every error a host can see: ``except ArchmaxError`` catches
    a refused ``sessions.seed`` too."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    def to_application_error(self) -> ApplicationError:
        """The error as it travels over the wire: typed with the class name, the path as its
        detail, non-retryable unless the class says a retry may succeed."""
        return ApplicationError(
            str(self), self.path, type=type(self).__name__, non_retryable=not self.retryable
        )


class PathEscapeError(WorkspaceError):
    """A path leaves the session folder or workspace: ``..``, absolute, or a symlink out."""


class ReadOnlyPathError(WorkspaceError):
    """A write to a path that is readable but not writable (everything but ``scratchpad/``)."""


class BinaryFileError(WorkspaceError):
    """Text was asked for and the file is not text (not UTF-8, or contains NUL)."""


class StoreCapabilityError(WorkspaceError):
    """The store cannot do what was asked, e.g. take raw bytes (``supports_bytes`` is false)."""


class FileNotFoundInWorkspaceError(WorkspaceError):
    """No file (or folder) at that path, or one the caller is not allowed to see."""


class SymlinkPathError(PathEscapeError):
    """The path passes through a symlink inside the session folder. Symlinks are never
    followed, wherever they point: one could reach the runtime's own ``artifacts/``."""


class NameTooLongError(WorkspaceError):
    """A name in the path is longer than the store's file system takes (255 bytes on most)."""


class StoreConflictError(WorkspaceError):
    """A conditional write lost to another writer: the object already exists (a write that
    creates only) or changed since it was read (a write that replaces only the version read).
    Nothing was written. Retryable: a retry reads the newer version first; a zombie attempt
    whose activity timed out just fails, and never overwrites the newer write."""

    retryable: ClassVar[bool] = True


class StoreIOError(WorkspaceError):
    """The store itself failed (disk full, an I/O error, a permission the operator set): an
    infrastructure fault, so the activity fails and Temporal retries it. Its message names
    the session-relative path and the error, never the host path."""

    retryable: ClassVar[bool] = True


_REFUSED_ERRNOS: Final = {
    errno.ENOENT: "does not exist",
    errno.ENOTDIR: "cannot be used: a parent folder is a file",
    errno.EEXIST: "cannot be written: a parent folder is a file",
    errno.EISDIR: "is a folder, not a file",
    errno.ENOTEMPTY: "is a folder that is not empty",
    errno.EINVAL: "is not a valid file name for this store",
    errno.EILSEQ: "is not a valid file name for this store",
}
"""Errors the caller's own path causes: the same call would fail again, so they are refusals
(tool errors), never retried."""


def shown(path: str, limit: int = 120) -> str:
    """A path for a message: long ones keep their head and tail."""
    return path if len(path) <= limit else f"{path[: limit // 2]}…{path[-limit // 2 :]}"


def os_error(exc: OSError, path: str) -> WorkspaceError:
    """``exc`` raised while working on the session-relative ``path``, as a typed error in the
    store's own vocabulary: a refusal (the path's fault) or a :class:`StoreIOError` (the
    store's). The one place an ``OSError`` is translated; the host path it carries is dropped.
    """
    if isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOENT:
        return FileNotFoundInWorkspaceError(f"'{shown(path)}' does not exist", path)
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(path.split("/"), key=lambda s: len(s.encode()), default="")
        return NameTooLongError(
            f"'{shown(path)}': a name in this path is longer than the file system allows "
            f"('{shown(longest, 40)}' is {len(longest.encode())} bytes; most allow 255)",
            path,
        )
    if exc.errno == errno.ELOOP:
        return SymlinkPathError(
            f"'{shown(path)}' passes through a symlink; symlinks are not followed", path
        )
    if exc.errno in _REFUSED_ERRNOS:
        return WorkspaceError(f"'{shown(path)}' {_REFUSED_ERRNOS[exc.errno]}", path)
    code = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    reason = exc.strerror if exc.strerror else (str(exc) if exc.filename is None else "")
    return StoreIOError(
        f"the session store failed on '{shown(path)}' ({code}{': ' + reason if reason else ''})",
        path,
    )


_ABSOLUTE: re.Pattern[str] = re.compile(
    r"""(?<![\w:/.~-])(?:[A-Za-z]:)?[/\\](?:[^\s'"`/\\:,;()<>]+[/\\])+([^\s'"`/\\:,;()<>]*)"""
)


def hide_host_paths(text: str, roots: Iterable[Path] = ()) -> str:
    """``text`` with the worker's file system paths hidden: each of ``roots`` (the store, the
    authoring root) by a label, any other absolute path by ``…/<its last name>``. For the
    messages of code the runtime does not own (a host tool, an executor, a crashed sandbox)
    before they reach the model or a history; URLs are left alone."""
    for root, label in [(Path(r), f"<{Path(r).name or 'root'}>") for r in roots]:
        for form in {str(root), str(root.resolve())}:
            if len(form) > 1:
                text = text.replace(form, label)
    return _ABSOLUTE.sub(lambda m: f"…/{m.group(1)}", text)


def unexpected(exc: Exception, roots: Iterable[Path] = ()) -> ApplicationError:
    """An exception no boundary translated (a bug, a backend's own error) as the retryable
    ``ApplicationError`` an activity raises, its message's host paths hidden."""
    message = hide_host_paths(f"{type(exc).__name__}: {exc}", roots)
    return ApplicationError(message, type=type(exc).__name__)
