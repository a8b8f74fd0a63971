"""Per-session file storage: the ``<sessionId>/…`` folders of the session store.

One id, one folder (seed): every path here is relative to the session's own folder
(``scratchpad/notes.md``, ``trigger.json``) and never names the session id. A path that would
leave that folder (``..``, an absolute path) is refused with :class:`PathEscapeError`, and a
disk store refuses any path through a symlink (:class:`SymlinkPathError`), wherever it points.

The :class:`SessionStore` protocol is **synchronous**: activities call it, typically from a
worker thread (``asyncio.to_thread``), so a backend may block. Implementations:

- :class:`FilesystemSessionStore`: ``<root>/<sessionId>/<path>`` on disk, atomic writes.
- :class:`MemorySessionStore`: a dict, for tests.
- :class:`TextOnlyStore`: wraps another store and takes text only (``supports_bytes`` is
  false), like a backend without ``uploadFiles``: non-text content is refused, nothing written.

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

An ``OSError`` never leaves a store: :func:`os_error` translates it, at this one boundary, into
one of these in the session's own path vocabulary (its message carries neither the store's
host path nor the errno text's file name). What the runtime does not own (a host tool's
exception, a crashed process's stderr, an error no boundary expected) passes through
:func:`hide_host_paths` before it reaches a model or a history (:func:`unexpected`).
"""

from __future__ import annotations

import contextvars
import errno
import fcntl
import hashlib
import json
import os
import posixpath
import re
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final, Protocol, runtime_checkable

from temporalio.exceptions import ApplicationError

from archmax_temporal.workflows.errors import ArchmaxError
from archmax_temporal.workflows.identity import (
    SHORTENED,
    check_session_id,
    folder_name,
    legacy_folder_name,
)
from archmax_temporal.workflows.zones import ARTIFACTS, CHECKPOINTS

TEMPORARIES: Final = f"{CHECKPOINTS}/tmp"
"""Where a filesystem store writes its temporary files before renaming them into place:
inside the session folder (so the rename is atomic) and in a runtime area (so no listing, no
search and no read of the agent ever meets one)."""

# --- errors -------------------------------------------------------------------------------


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


def _shown(path: str, limit: int = 120) -> str:
    """A path for a message: long ones keep their head and tail."""
    return path if len(path) <= limit else f"{path[: limit // 2]}…{path[-limit // 2 :]}"


def os_error(exc: OSError, path: str) -> WorkspaceError:
    """``exc`` raised while working on the session-relative ``path``, as a typed error in the
    store's own vocabulary: a refusal (the path's fault) or a :class:`StoreIOError` (the
    store's). The one place an ``OSError`` is translated; the host path it carries is dropped.
    """
    if isinstance(exc, FileNotFoundError) or exc.errno == errno.ENOENT:
        return FileNotFoundInWorkspaceError(f"'{_shown(path)}' does not exist", path)
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(path.split("/"), key=lambda s: len(s.encode()), default="")
        return NameTooLongError(
            f"'{_shown(path)}': a name in this path is longer than the file system allows "
            f"('{_shown(longest, 40)}' is {len(longest.encode())} bytes; most allow 255)",
            path,
        )
    if exc.errno == errno.ELOOP:
        return SymlinkPathError(
            f"'{_shown(path)}' passes through a symlink; symlinks are not followed", path
        )
    if exc.errno in _REFUSED_ERRNOS:
        return WorkspaceError(f"'{_shown(path)}' {_REFUSED_ERRNOS[exc.errno]}", path)
    code = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    reason = exc.strerror if exc.strerror else (str(exc) if exc.filename is None else "")
    return StoreIOError(
        f"the session store failed on '{_shown(path)}' ({code}{': ' + reason if reason else ''})",
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


# --- helpers ------------------------------------------------------------------------------


def is_text(data: bytes) -> bool:
    """Whether ``data`` is text: valid UTF-8 without NUL bytes."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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


def _encode(text: str, path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(f"content for '{path}' is not valid Unicode: {exc}", path) from exc


def _decode(data: bytes, path: str) -> str:
    if not is_text(data):
        raise BinaryFileError(f"'{path}' is a binary file, not UTF-8 text", path)
    return data.decode("utf-8")


@dataclass(frozen=True)
class Entry:
    """One entry of a folder listing. ``size`` is in bytes, 0 for folders."""

    name: str
    is_dir: bool
    size: int


def read_regular(path: Path, rel: str) -> bytes:
    """The bytes of the regular file at ``path`` (see :func:`read_regular_versioned`)."""
    return read_regular_versioned(path, rel)[0]


def file_version(info: os.stat_result) -> str:
    """A file's version for conditional writes: its inode, modification time and size (an
    atomic replace always makes a new inode)."""
    return f"{info.st_ino}-{info.st_mtime_ns}-{info.st_size}"


def read_regular_versioned(path: Path, rel: str) -> tuple[bytes, str]:
    """The bytes of the regular file at ``path`` (``rel``: its name in the session's terms)
    and its :func:`file_version`.
    Anything else there, a named pipe, a device or a socket, is refused at once with
    :class:`WorkspaceError`, never opened for a read that could wait forever; a symlink is not
    followed (``ELOOP``: :class:`SymlinkPathError` through :func:`os_error`)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"'{rel}' is not a regular file; only files are read", rel)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read(), file_version(info)
    finally:
        if fd >= 0:
            os.close(fd)


class DiskCounters:
    """What this process's folder stores wrote (thread-safe): files written, the bytes in
    them, and the fsyncs asked of the disk. A benchmark reads :meth:`snapshot` before and after
    what it measures (``DISK.snapshot()``); an activity's own writes are counted apart in the
    :func:`disk_tally` it runs in (the worker's ``archmax_store_*`` metrics)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writes = 0
        self.bytes = 0
        self.fsyncs = 0

    def wrote(self, size: int, *, synced: bool) -> None:
        with self._lock:
            self.writes += 1
            self.bytes += size
            self.fsyncs += 1 if synced else 0
        tally = _TALLY.get()
        if tally is not None and tally is not self:
            tally.wrote(size, synced=synced)

    def snapshot(self) -> dict[str, int]:
        """``{"writes", "bytes", "fsyncs"}`` so far."""
        with self._lock:
            return {"writes": self.writes, "bytes": self.bytes, "fsyncs": self.fsyncs}


DISK: Final = DiskCounters()
"""The counters of every folder store in this process."""

_TALLY: contextvars.ContextVar[DiskCounters | None] = contextvars.ContextVar(
    "archmax_disk_tally", default=None
)


@contextmanager
def disk_tally() -> Iterator[DiskCounters]:
    """Counters of the folder store writes made in this context (and the threads it hands
    work to with ``asyncio.to_thread``, which copies the context) until the block ends."""
    tally = DiskCounters()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def atomic_write(
    path: Path, data: str | bytes, *, tmp_dir: Path | None = None, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The temporary file is written in ``tmp_dir`` (which must be on the same file system,
    so the rename is atomic), by default beside ``path``. A write killed before its rename
    leaves it there: a store passes a folder nobody lists and sweeps it. ``durable`` (the
    default) fsyncs the file before the rename, so the new content survives a machine crash;
    without it the replace is atomic for every reader and survives a killed process, and a
    machine crash may leave the old file or an empty one (for documents rebuilt from durable
    state at the next write).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if tmp_dir is None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    else:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir, prefix="w-", suffix=".tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        DISK.wrote(len(raw), synced=durable)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_only(
    path: Path, data: bytes, *, tmp_dir: Path | None = None, durable: bool = True
) -> bool:
    """Write ``data`` to ``path`` only if nothing is there (atomically: a hard link of a
    complete temporary file, which fails when the name exists). Whether it was written.
    ``durable``: as :func:`atomic_write`'s."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = tmp_dir or path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="c-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        DISK.wrote(len(data), synced=durable)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


# --- protocol -----------------------------------------------------------------------------


@runtime_checkable
class SessionStore(Protocol):
    """Files of sessions, addressed by ``(session_id, session-relative path)``.

    Synchronous by design: activities call it (off the event loop). Every method validates the
    session id (:func:`~workflows.identity.check_session_id`) and the path
    (:func:`normalize_path`), raising :class:`PathEscapeError` for a path leaving the session.
    """

    @property
    def supports_bytes(self) -> bool:
        """Whether the store takes raw bytes; if not, :meth:`write_bytes` takes text only."""
        ...

    def read_bytes(self, session_id: str, path: str) -> bytes:
        """The file's bytes, or :class:`FileNotFoundInWorkspaceError`."""
        ...

    def read_text(self, session_id: str, path: str) -> str:
        """The file as UTF-8 text, or :class:`BinaryFileError` for a non-text file."""
        ...

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        """Create or replace the file atomically (readers see old or new, never half);
        missing folders are created."""
        ...

    def write_text(self, session_id: str, path: str, text: str) -> None:
        """:meth:`write_bytes` of ``text`` encoded as UTF-8."""
        ...

    def exists(self, session_id: str, path: str) -> bool:
        """Whether a file or folder is at ``path`` (``False`` for a path through a symlink)."""
        ...

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        """The folder's entries sorted by name. The session folder itself (``""``) lists as
        empty before anything is written; another missing folder raises
        :class:`FileNotFoundInWorkspaceError`."""
        ...

    def walk(self, session_id: str, path: str) -> list[str]:
        """Every file below the folder ``path``, as sorted POSIX paths relative to ``path``;
        ``[]`` when ``path`` is missing or not a folder."""
        ...

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        """The file's bytes and its version (an opaque string: an ETag, a generation), for a
        later :meth:`write_if`; :class:`FileNotFoundInWorkspaceError` when missing."""
        ...

    def version_of(self, session_id: str, path: str) -> str | None:
        """The file's version (as :meth:`read_versioned` gives it) without reading it; None
        when there is no file."""
        ...

    def write_if(self, session_id: str, path: str, data: bytes, *, version: str | None) -> str:
        """Write the file only if it is still at ``version`` (``None``: only if it does not
        exist): a conditional put. The new version, or :class:`StoreConflictError` and
        nothing written. What keeps a zombie writer from overwriting a newer write."""
        ...

    def read_shared(self, key: str) -> bytes:
        """An object of the store's shared areas (outside every session: ``_specs/…``,
        ``_store.json``; see :func:`shared_key`), or :class:`FileNotFoundInWorkspaceError`."""
        ...

    def write_shared_once(self, key: str, data: bytes) -> bool:
        """Create a shared object unless it exists (put-if-absent: content-addressed objects
        are written once). Whether this call wrote it."""
        ...


def shared_key(key: str) -> str:
    """``key`` checked as the name of a shared object: a normalized relative path whose first
    segment starts with ``_`` (no session folder does), never one leaving the store."""
    rel = normalize_path(key)
    if not rel or not rel.startswith("_"):
        raise PathEscapeError(f"'{key}' is not in a shared area of the store", key)
    return rel


UPLOADS = "_uploads"
"""The store's area for files a host hands a session by reference (``<root>/_uploads/<sha>``),
content-addressed: the firing carries the digest, never the bytes."""


def write_upload(store: SessionStore, data: bytes) -> str:
    """Put ``data`` where the workers will find it; returns its SHA-256 (the reference)."""
    put = getattr(store, "write_upload", None)
    if put is None:
        raise StoreCapabilityError("this session store takes no uploads (files by reference)", "")
    digest: str = put(data)
    return digest


def read_upload(store: SessionStore, digest: str) -> bytes:
    """The bytes a host uploaded under ``digest``, checked against it."""
    get = getattr(store, "read_upload", None)
    if get is None:
        raise StoreCapabilityError("this session store takes no uploads (files by reference)", "")
    if not (len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise WorkspaceError(f"{digest[:80]!r} is no upload reference", "")
    data: bytes = get(digest)
    if hashlib.sha256(data).hexdigest() != digest:
        raise WorkspaceError(f"upload {digest[:12]}… does not match its digest", "")
    return data


def delete_file(store: SessionStore, session_id: str, path: str) -> None:
    """Remove one file through ``store``'s optional ``delete``; a store without it refuses
    with :class:`StoreCapabilityError` (deleting is not part of the minimal protocol)."""
    delete = getattr(store, "delete", None)
    if delete is None:
        rel = normalize_path(path)
        raise StoreCapabilityError(f"this session store cannot delete files ('{rel}')", rel)
    delete(session_id, path)


def check_deletable(store: SessionStore, path: str) -> None:
    """Refuse, before anything is done, a removal ``store`` cannot carry out."""
    if getattr(store, "delete", None) is None:
        rel = normalize_path(path)
        raise StoreCapabilityError(f"this session store cannot delete files ('{rel}')", rel)


def check_storable(store: SessionStore, path: str, data: bytes) -> None:
    """Refuse, before anything is written, bytes a text-only ``store`` would not take."""
    if not store.supports_bytes and not is_text(data):
        rel = normalize_path(path)
        raise StoreCapabilityError(
            f"'{rel}' is not text and this session store takes text only (no raw bytes); "
            "nothing was written",
            rel,
        )


# --- filesystem ---------------------------------------------------------------------------


def session_folder(root: Path, session_id: str) -> Path:
    """``root``'s folder of ``session_id`` (:func:`folder_name`). A long id's folder from
    before 0.2 (:func:`legacy_folder_name`) is moved to its new name on first use, once its
    ``artifacts/metadata.json`` shows it is this session's: a plain id that spells the old name
    keeps its own folder and never sees the other's."""
    name = folder_name(session_id)
    path = root / name
    legacy = legacy_folder_name(session_id) if SHORTENED in name else None
    if legacy is None or os.path.lexists(path):
        return path
    old = root / legacy
    try:
        head = json.loads((old / ARTIFACTS / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path
    if isinstance(head, dict) and head.get("sessionId") == session_id and not old.is_symlink():
        try:
            os.rename(old, path)
        except OSError as exc:  # another worker moved it first
            if exc.errno not in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY):
                raise
    return path


class FilesystemSessionStore:
    """Sessions as folders on disk: ``<root>/<sessionId>/<path>``.

    A path is walked segment by segment from the session folder and refused with
    :class:`SymlinkPathError` if any segment (the session folder itself included) is a
    symlink: nothing inside a session is ever reached through one, wherever it points.
    Listings and walks skip symlinks. Writes go through :func:`atomic_write`
    (temporary file, fsync, rename), the temporary in :data:`TEMPORARIES`. Every ``OSError``
    is translated by :func:`os_error`.
    """

    supports_bytes: bool = True

    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._resolved: Path | None = None
        """The root resolved, once it exists (every call resolved it: two per write)."""

    @property
    def root(self) -> Path:
        return self._root

    def _base(self, session_id: str) -> Path:
        root = self._resolved
        if root is None:
            root = self._root.resolve()
            if root.is_dir():
                self._resolved = root
        base = session_folder(root, session_id)
        if base.is_symlink():
            raise SymlinkPathError(
                f"the session folder of {session_id!r} is a symlink; symlinks are not followed",
                "",
            )
        return base

    def _resolve(self, session_id: str, path: str) -> tuple[Path, str]:
        rel = normalize_path(path)
        target = self._base(session_id)
        walked: list[str] = []
        for segment in rel.split("/") if rel else ():
            target = target / segment
            walked.append(segment)
            if target.is_symlink():
                where = "/".join(walked)
                what = (
                    "is a symlink"
                    if where == rel
                    else f"passes through a symlink ('{_shown(where)}')"
                )
                raise SymlinkPathError(
                    f"'{_shown(rel)}' {what}; symlinks inside the session are not followed",
                    rel,
                )
        return target, rel

    def read_bytes(self, session_id: str, path: str) -> bytes:
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if target.is_dir():
                raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
            return read_regular(target, rel)

    def read_text(self, session_id: str, path: str) -> str:
        return _decode(self.read_bytes(session_id, path), normalize_path(path))

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if not rel:
                raise WorkspaceError("cannot write the session folder itself", rel)
            if target.is_dir():
                raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
            base = self._base(session_id)
            try:
                atomic_write(target, bytes(data), tmp_dir=base / TEMPORARIES)
            except (NotADirectoryError, FileExistsError) as exc:
                raise WorkspaceError(f"cannot write '{rel}': a parent is a file", rel) from exc

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self.write_bytes(session_id, path, _encode(text, path))

    def delete(self, session_id: str, path: str) -> None:
        """Remove one file (a folder is refused), or :class:`FileNotFoundInWorkspaceError`."""
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if target.is_dir():
                raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
            target.unlink()

    def exists(self, session_id: str, path: str) -> bool:
        try:
            with os_errors(path):
                target, _ = self._resolve(session_id, path)
                return target.exists()
        except PathEscapeError:
            return False

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if not target.exists():
                if not rel:
                    return []
                raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)
            if not target.is_dir():
                raise WorkspaceError(f"'{rel}' is a file, not a folder", rel)
            entries: list[Entry] = []
            for child in target.iterdir():
                if child.is_symlink():
                    continue
                is_dir = child.is_dir()
                entries.append(Entry(child.name, is_dir, 0 if is_dir else child.stat().st_size))
            return sorted(entries, key=lambda e: e.name)

    def walk(self, session_id: str, path: str) -> list[str]:
        with os_errors(path):
            try:
                target, _ = self._resolve(session_id, path)
            except SymlinkPathError:
                return []
            if not target.is_dir():
                return []
            found: list[str] = []
            for folder, _dirs, files in os.walk(target, followlinks=False):
                for name in files:
                    full = Path(folder) / name
                    if not full.is_symlink() and full.is_file():
                        found.append(full.relative_to(target).as_posix())
            return sorted(found)

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if target.is_dir():
                raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
            return read_regular_versioned(target, rel)

    def make_folder(self, session_id: str, path: str) -> None:
        """Create the folder ``path`` (and its parents) if missing: a folder store shows an
        empty folder, where an object store implies folders by their files."""
        with os_errors(path):
            target, _ = self._resolve(session_id, path)
            target.mkdir(parents=True, exist_ok=True)

    def version_of(self, session_id: str, path: str) -> str | None:
        with os_errors(path):
            target, _ = self._resolve(session_id, path)
            try:
                info = target.stat(follow_symlinks=False)
            except FileNotFoundError:
                return None
            return file_version(info) if stat.S_ISREG(info.st_mode) else None

    @contextmanager
    def _locked(self, session_id: str) -> Iterator[Path]:
        """The session folder, locked against the conditional writes of other processes on
        this file system (an advisory lock on the folder itself)."""
        base = self._base(session_id)
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield base
        finally:
            os.close(fd)

    def write_if(
        self, session_id: str, path: str, data: bytes, *, version: str | None, durable: bool = True
    ) -> str:
        """:meth:`SessionStore.write_if`; without ``durable`` the file is not fsync'd (see
        :func:`atomic_write`)."""
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            if not rel:
                raise WorkspaceError("cannot write the session folder itself", rel)
            if target.is_dir():
                raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
            with self._locked(session_id) as base:
                if version is None:
                    if not create_only(
                        target, bytes(data), tmp_dir=base / TEMPORARIES, durable=durable
                    ):
                        raise StoreConflictError(f"'{rel}' already exists; nothing written", rel)
                else:
                    try:
                        held = file_version(target.stat(follow_symlinks=False))
                    except FileNotFoundError:
                        held = None
                    if held != version:
                        raise StoreConflictError(
                            f"'{rel}' changed since it was read (a newer write); nothing written",
                            rel,
                        )
                    atomic_write(target, bytes(data), tmp_dir=base / TEMPORARIES, durable=durable)
                return file_version(target.stat(follow_symlinks=False))

    def append_at(
        self,
        session_id: str,
        path: str,
        offset: int,
        data: bytes,
        *,
        version: str,
        durable: bool = True,
    ) -> str:
        """Replace the file's bytes from ``offset`` on with ``data``, in place, only if the
        file is still at ``version`` (else :class:`StoreConflictError`, nothing written); the
        bytes before ``offset`` are neither read nor written, so the cost is ``data``'s.
        ``durable`` fsyncs the file's data before returning. The new version.

        Not atomic for a reader: one that races the write, or a write killed half-way, may
        find the bytes before ``offset`` followed by a part of ``data``. Only for documents
        whose every reader takes a cut-short copy by the whole items it holds (the growing
        artifacts, :func:`~activities.artifact_cache.parse_items`)."""
        with os_errors(path):
            target, rel = self._resolve(session_id, path)
            with self._locked(session_id):
                fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    info = os.fstat(fd)
                    if not stat.S_ISREG(info.st_mode) or file_version(info) != version:
                        raise StoreConflictError(
                            f"'{rel}' changed since it was read (a newer write); nothing written",
                            rel,
                        )
                    if offset > info.st_size:
                        raise WorkspaceError(f"'{rel}' is shorter than the offset written at", rel)
                    written = 0
                    while written < len(data):
                        written += os.pwrite(fd, data[written:], offset + written)
                    if info.st_size > offset + len(data):
                        os.ftruncate(fd, offset + len(data))
                    if durable:
                        os.fdatasync(fd)
                    DISK.wrote(len(data), synced=durable)
                    return file_version(os.fstat(fd))
                finally:
                    os.close(fd)

    def _shared_path(self, key: str) -> tuple[Path, str]:
        rel = shared_key(key)
        target = self._root
        for segment in rel.split("/"):
            target = target / segment
            if target.is_symlink():
                raise SymlinkPathError(f"'{rel}' passes through a symlink; not followed", rel)
        return target, rel

    def read_shared(self, key: str) -> bytes:
        with os_errors(key):
            target, rel = self._shared_path(key)
            return read_regular(target, rel)

    def write_shared_once(self, key: str, data: bytes) -> bool:
        with os_errors(key):
            target, _ = self._shared_path(key)
            return create_only(target, bytes(data))

    def sweep_temporaries(self, session_id: str, before: float) -> int:
        """Remove the session's temporary files last modified before ``before`` (a Unix
        time): those of a write that was killed mid-way. The number removed."""
        folder = self._base(session_id) / TEMPORARIES
        removed = 0
        try:
            candidates = list(folder.iterdir())
        except OSError:
            return 0
        for candidate in candidates:
            try:
                if candidate.stat(follow_symlinks=False).st_mtime < before:
                    candidate.unlink()
                    removed += 1
            except OSError:
                continue
        return removed

    def write_upload(self, data: bytes) -> str:
        """Store ``data`` under ``_uploads/<sha256>`` (once); the digest is the reference."""
        digest = hashlib.sha256(data).hexdigest()
        target = self._root / UPLOADS / digest
        if not target.is_file():
            atomic_write(target, data)
        return digest

    def read_upload(self, digest: str) -> bytes:
        """The uploaded bytes, or :class:`FileNotFoundInWorkspaceError` (a host and a worker
        that do not share the store)."""
        try:
            return (self._root / UPLOADS / digest).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundInWorkspaceError(
                f"upload {digest[:12]}… is not in the session store: the host and the workers "
                "must share the store (ARCHMAX_STORE)",
                "",
            ) from None


def sweep_temporaries(store: SessionStore, session_id: str, *, before: float | None = None) -> int:
    """Remove a session's stale temporary files through ``store``'s optional
    ``sweep_temporaries`` (a store that writes none has none); ``before`` defaults to
    :data:`TEMPORARY_MAX_AGE` ago."""
    sweep = getattr(store, "sweep_temporaries", None)
    if sweep is None:
        return 0
    cutoff = time.time() - TEMPORARY_MAX_AGE if before is None else before
    return int(sweep(session_id, cutoff))


TEMPORARY_MAX_AGE: Final = 600.0
"""Seconds after which a temporary file is stale whatever happened: no write takes this long
(a workspace call's attempt is bounded at a minute, a placement's at two)."""

# --- memory -------------------------------------------------------------------------------


class MemorySessionStore:
    """Sessions in a dict (``session id → path → bytes``), for tests. Folders are implied by
    the files below them, as in an object store."""

    supports_bytes: bool = True

    def __init__(self) -> None:
        self._files: dict[str, dict[str, bytes]] = {}
        self._uploads: dict[str, bytes] = {}
        self._shared: dict[str, bytes] = {}
        self._versions: dict[tuple[str, str], str] = {}
        self._writes = 0

    def write_upload(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._uploads[digest] = bytes(data)
        return digest

    def read_upload(self, digest: str) -> bytes:
        try:
            return self._uploads[digest]
        except KeyError:
            raise FileNotFoundInWorkspaceError(f"upload {digest[:12]}… is not stored", "") from None

    def _session(self, session_id: str) -> dict[str, bytes]:
        return self._files.setdefault(check_session_id(session_id), {})

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        data = self.read_bytes(session_id, path)
        return data, self._versions[(session_id, normalize_path(path))]

    def version_of(self, session_id: str, path: str) -> str | None:
        rel = normalize_path(path)
        return self._versions.get((session_id, rel)) if rel in self._session(session_id) else None

    def write_if(self, session_id: str, path: str, data: bytes, *, version: str | None) -> str:
        rel = normalize_path(path)
        held = self._versions.get((session_id, rel)) if rel in self._session(session_id) else None
        if held != version:
            what = "already exists" if version is None else "changed since it was read"
            raise StoreConflictError(f"'{rel}' {what}; nothing written", rel)
        self.write_bytes(session_id, path, data)
        return self._versions[(session_id, rel)]

    def read_shared(self, key: str) -> bytes:
        rel = shared_key(key)
        try:
            return self._shared[rel]
        except KeyError:
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel) from None

    def write_shared_once(self, key: str, data: bytes) -> bool:
        rel = shared_key(key)
        if rel in self._shared:
            return False
        self._shared[rel] = bytes(data)
        return True

    def _is_dir(self, files: dict[str, bytes], rel: str) -> bool:
        if not rel:
            return True
        prefix = rel + "/"
        return any(p.startswith(prefix) for p in files)

    def read_bytes(self, session_id: str, path: str) -> bytes:
        rel = normalize_path(path)
        files = self._session(session_id)
        if rel in files:
            return files[rel]
        if self._is_dir(files, rel):
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)

    def read_text(self, session_id: str, path: str) -> str:
        return _decode(self.read_bytes(session_id, path), normalize_path(path))

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        rel = normalize_path(path)
        files = self._session(session_id)
        if not rel:
            raise WorkspaceError("cannot write the session folder itself", rel)
        if self._is_dir(files, rel):
            raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in files:
                raise WorkspaceError(f"cannot write '{rel}': a parent is a file", rel)
        files[rel] = bytes(data)
        self._writes += 1
        self._versions[(session_id, rel)] = str(self._writes)

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self.write_bytes(session_id, path, _encode(text, path))

    def delete(self, session_id: str, path: str) -> None:
        rel = normalize_path(path)
        files = self._session(session_id)
        if rel in files:
            del files[rel]
            return
        if self._is_dir(files, rel):
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)

    def exists(self, session_id: str, path: str) -> bool:
        try:
            rel = normalize_path(path)
        except PathEscapeError:
            return False
        files = self._session(session_id)
        return rel in files or (bool(rel) and self._is_dir(files, rel))

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        rel = normalize_path(path)
        files = self._session(session_id)
        if rel in files:
            raise WorkspaceError(f"'{rel}' is a file, not a folder", rel)
        if rel and not self._is_dir(files, rel):
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)
        prefix = rel + "/" if rel else ""
        entries: dict[str, Entry] = {}
        for p, data in files.items():
            if not p.startswith(prefix):
                continue
            head, _, rest = p[len(prefix) :].partition("/")
            entries[head] = Entry(head, True, 0) if rest else Entry(head, False, len(data))
        return [entries[name] for name in sorted(entries)]

    def walk(self, session_id: str, path: str) -> list[str]:
        rel = normalize_path(path)
        files = self._session(session_id)
        prefix = rel + "/" if rel else ""
        return sorted(p[len(prefix) :] for p in files if p.startswith(prefix))


# --- text only ----------------------------------------------------------------------------


class TextOnlyStore:
    """A store that takes text only (``supports_bytes`` is false), wrapping ``inner``.

    :meth:`write_bytes` accepts content that is UTF-8 text (:func:`is_text`) and refuses
    anything else with :class:`StoreCapabilityError` naming the path, writing nothing. Reads,
    listings and walks are the inner store's.
    """

    supports_bytes: bool = False

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner

    def write_upload(self, data: bytes) -> str:
        return write_upload(self._inner, data)

    def read_upload(self, digest: str) -> bytes:
        return read_upload(self._inner, digest)

    def read_bytes(self, session_id: str, path: str) -> bytes:
        return self._inner.read_bytes(session_id, path)

    def read_text(self, session_id: str, path: str) -> str:
        return self._inner.read_text(session_id, path)

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        if not is_text(data):
            rel = normalize_path(path)
            raise StoreCapabilityError(
                f"'{rel}' is not text and this session store takes text only "
                "(no raw bytes); nothing was written",
                rel,
            )
        self._inner.write_text(session_id, path, bytes(data).decode("utf-8"))

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self._inner.write_text(session_id, path, text)

    def delete(self, session_id: str, path: str) -> None:
        delete_file(self._inner, session_id, path)

    def sweep_temporaries(self, session_id: str, before: float) -> int:
        return sweep_temporaries(self._inner, session_id, before=before)

    def exists(self, session_id: str, path: str) -> bool:
        return self._inner.exists(session_id, path)

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        return self._inner.list_dir(session_id, path)

    def walk(self, session_id: str, path: str) -> list[str]:
        return self._inner.walk(session_id, path)

    def read_versioned(self, session_id: str, path: str) -> tuple[bytes, str]:
        return self._inner.read_versioned(session_id, path)

    def version_of(self, session_id: str, path: str) -> str | None:
        return self._inner.version_of(session_id, path)

    def write_if(self, session_id: str, path: str, data: bytes, *, version: str | None) -> str:
        return self._inner.write_if(session_id, path, data, version=version)

    def read_shared(self, key: str) -> bytes:
        return self._inner.read_shared(key)

    def write_shared_once(self, key: str, data: bytes) -> bool:
        return self._inner.write_shared_once(key, data)
