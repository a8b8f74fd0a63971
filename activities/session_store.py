"""What a session store is: the :class:`SessionStore` protocol, and what every store answers
alike (text, uploads, deletes, temporaries).

The :class:`SessionStore` protocol is **synchronous**: activities call it, typically from a
worker thread (``asyncio.to_thread``), so a backend may block. Implementations:

- :class:`~archmax_temporal.activities.folder_store.FilesystemSessionStore`:
  ``<root>/<sessionId>/<path>`` on disk, atomic writes.
- :class:`~archmax_temporal.activities.object_store.ObjectSessionStore`: S3, GCS, Azure Blob, or in
  memory.
- :class:`~archmax_temporal.activities.memory_store.MemorySessionStore`: a dict, for tests.
- :class:`~archmax_temporal.activities.text_only_store.TextOnlyStore`: wraps another store and takes
  text only (``supports_bytes`` is false), like a backend without ``uploadFiles``: non-text content
  is refused, nothing written.

Paths are session-relative (:mod:`archmax_temporal.activities.session_paths`); what a refused or
failed operation raises is in :mod:`archmax_temporal.activities.store_errors`, whose classes this
module also names for the hosts that import them from here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import time
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from archmax_temporal.activities.session_paths import normalize_path
from archmax_temporal.activities.store_errors import BinaryFileError as BinaryFileError
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError as FileNotFoundInWorkspaceError,
)
from archmax_temporal.activities.store_errors import NameTooLongError as NameTooLongError
from archmax_temporal.activities.store_errors import PathEscapeError as PathEscapeError
from archmax_temporal.activities.store_errors import ReadOnlyPathError as ReadOnlyPathError
from archmax_temporal.activities.store_errors import StoreCapabilityError as StoreCapabilityError
from archmax_temporal.activities.store_errors import StoreConflictError as StoreConflictError
from archmax_temporal.activities.store_errors import StoreIOError as StoreIOError
from archmax_temporal.activities.store_errors import SymlinkPathError as SymlinkPathError
from archmax_temporal.activities.store_errors import WorkspaceError as WorkspaceError


def is_text(data: bytes) -> bool:
    """Whether ``data`` is text: valid UTF-8 without NUL bytes."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def encode_text(text: str, path: str) -> bytes:
    """``text`` as the UTF-8 bytes a store writes at the session-relative ``path``; text that
    cannot be encoded (a lone surrogate) is refused with :class:`WorkspaceError` naming the
    path and the offending character."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(f"content for '{path}' is not valid Unicode: {exc}", path) from exc


def decode_text(data: bytes, path: str) -> str:
    """The bytes read at ``path`` as text, or :class:`BinaryFileError` when they are not."""
    if not is_text(data):
        raise BinaryFileError(f"'{path}' is a binary file, not UTF-8 text", path)
    return data.decode("utf-8")


@dataclass(frozen=True)
class Entry:
    """One entry of a folder listing. ``size`` is in bytes, 0 for folders."""

    name: str
    is_dir: bool
    size: int


@runtime_checkable
class SessionStore(Protocol):
    """Files of sessions, addressed by ``(session_id, session-relative path)``.

    Synchronous by design: activities call it (off the event loop). Every method validates the
    session id (:func:`~archmax_temporal.workflows.identity.check_session_id`) and the path
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


def write_if_unsynced(
    store: SessionStore, session_id: str, path: str, data: bytes, *, version: str | None
) -> str:
    """:meth:`SessionStore.write_if` without the fsync where the store can skip it (a folder
    store's ``durable=False``; an object put is durable as it is). Only for what is rebuilt
    from durable state, or whose loss is noticed and survived: after a crash of the machine
    (not of the worker: a killed process loses nothing from the page cache) it may be gone
    or hold fewer bytes."""
    if not _skips_fsync(type(store)):
        return store.write_if(session_id, path, data, version=version)
    written: str = store.write_if(  # type: ignore[call-arg]
        session_id, path, data, version=version, durable=False
    )
    return written


@functools.cache
def _skips_fsync(kind: type[SessionStore]) -> bool:
    """Whether a store class's conditional writes take ``durable``."""
    return "durable" in inspect.signature(kind.write_if).parameters


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
