"""A session store that takes text only: :class:`TextOnlyStore`, another store behind it,
like a backend without ``uploadFiles``."""

from __future__ import annotations

from archmax_temporal.activities.session_paths import normalize_path
from archmax_temporal.activities.session_store import (
    Entry,
    SessionStore,
    delete_file,
    is_text,
    read_upload,
    sweep_temporaries,
    write_upload,
)
from archmax_temporal.activities.store_errors import StoreCapabilityError


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
