"""The session store in memory: :class:`MemorySessionStore`, sessions in a dict, for tests."""

from __future__ import annotations

import hashlib

from archmax_temporal.activities.session_paths import normalize_path, shared_key
from archmax_temporal.activities.session_store import Entry, decode_text, encode_text
from archmax_temporal.activities.store_errors import (
    FileNotFoundInWorkspaceError,
    PathEscapeError,
    StoreConflictError,
    WorkspaceError,
)
from archmax_temporal.workflows.identity import check_session_id


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
        return decode_text(self.read_bytes(session_id, path), normalize_path(path))

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
        self.write_bytes(session_id, path, encode_text(text, path))

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
