"""How a workspace tool's answer reads: cut to its budget, sizes for people, and the files
``read_file`` refuses named by type.

:func:`truncate` marks what it cut (``…[truncated: N more chars]``); :func:`human_size` and
:func:`binary_mime` say what a refused binary file is."""

from __future__ import annotations

import mimetypes
from typing import Final

from archmax_temporal.activities.session_store import is_text

_BINARY_MIME: Final = frozenset(
    {
        "application/pdf",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    }
)


def truncate(content: str, max_chars: int) -> tuple[str, bool]:
    """``content`` cut to ``max_chars`` with a visible ``…[truncated: N more chars]`` marker."""
    if len(content) <= max_chars:
        return content, False
    return f"{content[:max_chars]}…[truncated: {len(content) - max_chars} more chars]", True


def human_size(size: int) -> str:
    """``512 bytes``, ``1.5 KB``, ``3.2 MB``."""
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def binary_mime(path: str, data: bytes) -> str | None:
    """The file's MIME type when ``read_file`` must refuse it (media, PDF, PPT, non-text
    content), else ``None``."""
    mime, _ = mimetypes.guess_type(path, strict=False)
    media = mime is not None and mime.split("/")[0] in ("image", "audio", "video")
    if mime is not None and mime != "image/svg+xml" and (media or mime in _BINARY_MIME):
        return mime
    if not is_text(data):
        return mime or "application/octet-stream"
    return None
