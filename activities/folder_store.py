"""The session store in a folder: :class:`FilesystemSessionStore`, ``<root>/<sessionId>/<path>``
on disk, written atomically and never reached through a symlink.

A disk store refuses any path through a symlink (:class:`SymlinkPathError`), wherever it points; its
writes go through :func:`~archmax_temporal.activities.disk_files.atomic_write`, their temporaries in
:data:`TEMPORARIES`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from archmax_temporal.activities.disk_files import (
    DISK,
    atomic_write,
    create_only,
    file_version,
    read_regular,
    read_regular_versioned,
)
from archmax_temporal.activities.session_paths import normalize_path, os_errors, shared_key
from archmax_temporal.activities.session_store import UPLOADS, Entry, decode_text, encode_text
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    StoreConflictError,
    SymlinkPathError,
    WorkspaceError,
    shown,
)
from archmax_temporal.workflows.identity import SHORTENED, folder_name, legacy_folder_name
from archmax_temporal.workflows.zones import ARTIFACTS, CHECKPOINTS

TEMPORARIES: Final = f"{CHECKPOINTS}/tmp"
"""Where a filesystem store writes its temporary files before renaming them into place:
inside the session folder (so the rename is atomic) and in a runtime area (so no listing, no
search and no read of the agent ever meets one)."""


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
                    else f"passes through a symlink ('{shown(where)}')"
                )
                raise SymlinkPathError(
                    f"'{shown(rel)}' {what}; symlinks inside the session are not followed",
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
        return decode_text(self.read_bytes(session_id, path), normalize_path(path))

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
        self.write_bytes(session_id, path, encode_text(text, path))

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
        artifacts, :func:`~archmax_temporal.activities.artifact_cache.parse_items`)."""
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
