"""Files a host hands to a session, as they travel: text as it is, bytes base64-encoded, and a
large file by the digest of its upload to the store instead of inline."""

from __future__ import annotations

import base64
from typing import Literal

from archmax_temporal.activities.session_store import SessionStore, write_upload
from archmax_temporal.workflows.limits import INLINE_FILE_BYTES
from archmax_temporal.workflows.models import FileUpload


def encoded(content: str | bytes) -> tuple[str, Literal["utf-8", "base64"]]:
    """Text as it is, bytes base64-encoded, so they arrive exactly."""
    if isinstance(content, str):
        return content, "utf-8"
    return base64.b64encode(content).decode("ascii"), "base64"


def file_upload(name: str, content: str | bytes, store: SessionStore | None = None) -> FileUpload:
    """A file for ``send(files=...)``: inline when small, else written to ``store``'s uploads
    and carried by its digest (a large file never travels in a history)."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    if store is not None and len(data) > INLINE_FILE_BYTES:
        return FileUpload(name=name, ref=write_upload(store, data), size=len(data))
    text, encoding = encoded(content)
    return FileUpload(name=name, content=text, encoding=encoding, size=len(data))
