"""Where a file handed to a session lands in ``scratchpad/attachments/`` (seed, "Files handed
to a session").

A placement keeps the file's own name unless that name is taken. Then it inserts ``-1``,
``-2``, … before the last extension, using the lowest free number::

    already there                 a new report.pdf lands at
    nothing                       report.pdf
    report.pdf                    report-1.pdf
    report.pdf, report-1.pdf      report-2.pdf

A name with no extension takes the suffix at its end (``notes-1``, ``.env-1``), and only the
last extension moves (``archive.tar-1.gz``). Pure: no I/O, so workflow code may import it.
"""

from __future__ import annotations

import re
from typing import Final

FALLBACK_NAME: Final = "file"
"""The name a file gets when nothing usable is left of the name it came with."""

MAX_NAME_BYTES: Final = 200
"""Names are cut to this many UTF-8 bytes (the extension kept) so a suffix still fits 255."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def sanitize_name(name: str) -> str:
    """``name`` as a bare file name: its last path segment, without control characters.

    Slashes and backslashes separate segments (``../../etc/passwd`` → ``passwd``,
    ``C:\\tmp\\a.txt`` → ``a.txt``); ``.``, ``..``, all-dot and empty names become
    :data:`FALLBACK_NAME`. Overlong names are cut, keeping the last extension.
    """
    cleaned = _CONTROL.sub("", str(name)).replace("\\", "/")
    segments = [s.strip() for s in cleaned.split("/")]
    segments = [s for s in segments if s]
    bare = segments[-1] if segments else ""
    if not bare or set(bare) == {"."}:
        return FALLBACK_NAME
    if len(bare.encode("utf-8")) > MAX_NAME_BYTES:
        stem, ext = split_extension(bare)
        if len(ext.encode("utf-8")) > MAX_NAME_BYTES // 2:
            stem, ext = bare, ""
        budget = MAX_NAME_BYTES - len(ext.encode("utf-8"))
        stem = stem.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
        bare = stem + ext
    return bare


def split_extension(name: str) -> tuple[str, str]:
    """``(stem, ext)`` where ``ext`` is the last extension with its dot, or ``""``.

    A leading dot starts no extension (``.env`` has none) and neither does a trailing one.
    """
    index = name.rfind(".")
    if index <= 0 or index == len(name) - 1:
        return name, ""
    return name[:index], name[index:]


def placed_name(existing: set[str], name: str) -> str:
    """The name ``name`` lands under beside ``existing``: its own (sanitised) name when free,
    else ``<stem>-<n><ext>`` with the lowest free ``n`` ≥ 1. Never a member of ``existing``.
    """
    bare = sanitize_name(name)
    if bare not in existing:
        return bare
    stem, ext = split_extension(bare)
    number = 1
    while f"{stem}-{number}{ext}" in existing:
        number += 1
    return f"{stem}-{number}{ext}"
