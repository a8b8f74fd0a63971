"""Per-session file storage: the ``<sessionId>/…`` folders of the session store.

One id, one folder (seed): every path here is relative to the session's own folder
(``scratchpad/notes.md``, ``trigger.json``) and never names the session id. A path that would
leave that folder (``..``, an absolute path, or a symlink pointing out) is refused with
:class:`PathEscapeError`.

The :class:`SessionStore` protocol is **synchronous**: activities call it, typically from a
worker thread (``asyncio.to_thread``), so a backend may block. Implementations:

- :class:`FilesystemSessionStore`: ``<root>/<sessionId>/<path>`` on disk, atomic writes.
- :class:`MemorySessionStore`: a dict, for tests.
- :class:`TextOnlyStore`: wraps another store and takes text only (``supports_bytes`` is
  false), like a backend without ``uploadFiles``: non-text content is refused, nothing written.

Errors (all :class:`WorkspaceError`) carry the offending ``path``; their class name is the type
of the ``ApplicationError`` they travel as (:meth:`WorkspaceError.to_application_error`).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from temporalio.exceptions import ApplicationError

from archmax_temporal.activities.store import atomic_write
from archmax_temporal.workflows.identity import check_session_id, folder_name

# --- errors -------------------------------------------------------------------------------


class WorkspaceError(Exception):
    """Base of every refusal of a workspace or session-store operation; names the path."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path

    def to_application_error(self) -> ApplicationError:
        """The error as it travels over the wire: non-retryable, typed with the class name."""
        return ApplicationError(str(self), self.path, type=type(self).__name__, non_retryable=True)


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
        """Whether a file or folder is at ``path`` (``False`` for an escaping symlink)."""
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


# --- filesystem ---------------------------------------------------------------------------


class FilesystemSessionStore:
    """Sessions as folders on disk: ``<root>/<sessionId>/<path>``.

    Every path is resolved (symlinks followed) and must stay inside ``<root>/<sessionId>/``;
    listings and walks skip symlinks that point out. Writes go through
    :func:`activities.store.atomic_write` (temporary file, fsync, rename).
    """

    supports_bytes: bool = True

    def __init__(self, root: Path) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        return self._root

    def _base(self, session_id: str) -> Path:
        root = self._root.resolve()
        base = (root / folder_name(session_id)).resolve()
        if base.parent != root:
            raise PathEscapeError(f"session folder of {session_id!r} leaves the store", "")
        return base

    def _resolve(self, session_id: str, path: str) -> tuple[Path, str]:
        rel = normalize_path(path)
        base = self._base(session_id)
        target = (base / rel).resolve() if rel else base
        if not target.is_relative_to(base):
            raise PathEscapeError(f"'{path}' resolves outside the session folder", path)
        return target, rel

    def _inside(self, base: Path, candidate: Path) -> bool:
        try:
            return candidate.resolve().is_relative_to(base)
        except OSError:
            return False

    def read_bytes(self, session_id: str, path: str) -> bytes:
        target, rel = self._resolve(session_id, path)
        if target.is_dir():
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        try:
            return target.read_bytes()
        except FileNotFoundError as exc:
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel) from exc

    def read_text(self, session_id: str, path: str) -> str:
        return _decode(self.read_bytes(session_id, path), normalize_path(path))

    def write_bytes(self, session_id: str, path: str, data: bytes) -> None:
        target, rel = self._resolve(session_id, path)
        if not rel:
            raise WorkspaceError("cannot write the session folder itself", rel)
        if target.is_dir():
            raise WorkspaceError(f"'{rel}' is a folder, not a file", rel)
        try:
            atomic_write(target, bytes(data))
        except (NotADirectoryError, FileExistsError) as exc:
            raise WorkspaceError(f"cannot write '{rel}': a parent is a file", rel) from exc

    def write_text(self, session_id: str, path: str, text: str) -> None:
        self.write_bytes(session_id, path, _encode(text, path))

    def delete(self, session_id: str, path: str) -> None:
        """Remove one file (a folder is refused), or :class:`FileNotFoundInWorkspaceError`."""
        target, rel = self._resolve(session_id, path)
        if target.is_dir():
            raise WorkspaceError(f"'{rel or '.'}' is a folder, not a file", rel)
        try:
            target.unlink()
        except FileNotFoundError as exc:
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel) from exc

    def exists(self, session_id: str, path: str) -> bool:
        try:
            target, _ = self._resolve(session_id, path)
        except PathEscapeError:
            return False
        return target.exists()

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        target, rel = self._resolve(session_id, path)
        base = self._base(session_id)
        if not target.exists():
            if not rel:
                return []
            raise FileNotFoundInWorkspaceError(f"'{rel}' does not exist", rel)
        if not target.is_dir():
            raise WorkspaceError(f"'{rel}' is a file, not a folder", rel)
        entries: list[Entry] = []
        for child in target.iterdir():
            if not self._inside(base, child):
                continue
            is_dir = child.is_dir()
            entries.append(Entry(child.name, is_dir, 0 if is_dir else child.stat().st_size))
        return sorted(entries, key=lambda e: e.name)

    def walk(self, session_id: str, path: str) -> list[str]:
        target, _ = self._resolve(session_id, path)
        base = self._base(session_id)
        if not target.is_dir():
            return []
        found: list[str] = []
        for folder, _dirs, files in os.walk(target, followlinks=False):
            for name in files:
                full = Path(folder) / name
                if self._inside(base, full) and full.is_file():
                    found.append(full.relative_to(target).as_posix())
        return sorted(found)

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


# --- memory -------------------------------------------------------------------------------


class MemorySessionStore:
    """Sessions in a dict (``session id → path → bytes``), for tests. Folders are implied by
    the files below them, as in an object store."""

    supports_bytes: bool = True

    def __init__(self) -> None:
        self._files: dict[str, dict[str, bytes]] = {}
        self._uploads: dict[str, bytes] = {}

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

    def exists(self, session_id: str, path: str) -> bool:
        return self._inner.exists(session_id, path)

    def list_dir(self, session_id: str, path: str) -> list[Entry]:
        return self._inner.list_dir(session_id, path)

    def walk(self, session_id: str, path: str) -> list[str]:
        return self._inner.walk(session_id, path)
