"""Session ids: the one id there is, chosen by the host, opaque to the runtime.

An id names the conversation: a mail Message-ID (``<CAF…@mail.gmail.com>``), a chat id, a
case number (``CASE #12``). Any printable text of 1-255 characters is one (Temporal allows
1,000 bytes of workflow id); control characters and invalid Unicode are refused.

The session store keeps each session in a folder named by :func:`folder_name`, a stable,
reversible encoding: an id of letters, digits and ``._:~@+=-`` that starts with a letter or
digit is its own folder name (every id this project ever accepted keeps its folder); any
other byte is written ``%XX`` (``%`` itself is ``%25``), and a name that would exceed
:data:`MAX_FOLDER_BYTES` keeps a readable prefix and ends with :data:`SHORTENED` and a digest
of the id. :func:`session_id_of` reads an encoded name back.

The map is injective: a plain name holds no ``%``; in an encoded one every ``%`` starts a
``%XX`` escape; a shortened one holds ``%~``, which neither can, and two shortened names differ
by their 128-bit digests. (Before 0.2 a shortened name ended in ``~`` and 16 hex digits, which
a plain id could spell: :func:`legacy_folder_name` gives that name, so the store can move such
a folder to its new name.)
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

from archmax_temporal.workflows.errors import InvalidSessionIdError

MAX_SESSION_ID_CHARS: Final = 255
"""The longest id, in characters."""

MAX_SESSION_ID_BYTES: Final = 1000
"""Temporal's limit on a workflow id, in UTF-8 bytes."""

MAX_FOLDER_BYTES: Final = 200
"""The longest folder name the store writes (file systems allow 255 bytes)."""

SHORTENED: Final = "%~"
"""What a digest-shortened folder name holds before its digest, and no other name can."""

_DIGEST_HEX: Final = 32
"""Hex digits of the id's SHA-256 that end a shortened name (128 bits)."""

_PLAIN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:~@+=-]*$")
_FIRST: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_KEEP: Final = _FIRST | frozenset(b"._:~@+=-")


def session_id_problem(session_id: object) -> str | None:
    """Why ``session_id`` cannot name a session, or None."""
    if not isinstance(session_id, str):
        return f"a session id is a string, not {type(session_id).__name__}"
    if not session_id:
        return "a session id is 1-255 characters, not empty"
    if len(session_id) > MAX_SESSION_ID_CHARS:
        return f"a session id is at most {MAX_SESSION_ID_CHARS} characters, not {len(session_id)}"
    for char in session_id:
        if unicodedata.category(char) in ("Cc", "Cs"):
            return f"a session id holds no control characters or invalid Unicode ({char!r})"
    if len(session_id.encode("utf-8")) > MAX_SESSION_ID_BYTES:
        return f"a session id is at most {MAX_SESSION_ID_BYTES} UTF-8 bytes"
    return None


def check_session_id(session_id: str, *, source: str | None = None) -> str:
    """``session_id`` unchanged, or :class:`InvalidSessionIdError` saying what is wrong (and,
    for an id read from a payload, the path it came from)."""
    problem = session_id_problem(session_id)
    if problem is not None:
        where = f" (from {source})" if source else ""
        raise InvalidSessionIdError(f"invalid session id {session_id!r}{where}: {problem}")
    return session_id


def folder_name(session_id: str) -> str:
    """The store folder of ``session_id``: itself when plain, else ``%XX``-encoded, shortened
    with a digest when too long (see the module docstring); never ``.``, ``..``, hidden, or a
    runtime area (``_specs``), and never another id's folder."""
    name = _encoded(session_id)
    if len(name.encode()) <= MAX_FOLDER_BYTES:
        return name
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:_DIGEST_HEX]
    keep = MAX_FOLDER_BYTES - len(SHORTENED) - _DIGEST_HEX
    return f"{_cut(name, keep)}{SHORTENED}{digest}"


def legacy_folder_name(session_id: str) -> str | None:
    """The folder a shortened id had before 0.2 (``<prefix>~<16 hex>``), or None for an id
    whose name is not shortened (its folder never moved)."""
    name = _encoded(session_id)
    if len(name.encode()) <= MAX_FOLDER_BYTES:
        return None
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]
    return f"{name[: MAX_FOLDER_BYTES - 18].rstrip('%')}~{digest}"


def _encoded(session_id: str) -> str:
    check_session_id(session_id)
    if _PLAIN.match(session_id) and ".." not in session_id:
        return session_id
    raw = session_id.encode("utf-8")
    return "".join(
        chr(byte) if byte in (_KEEP if index else _FIRST) else f"%{byte:02X}"
        for index, byte in enumerate(raw)
    ).replace("..", "%2E.")


def _cut(name: str, limit: int) -> str:
    """``name``'s first ``limit`` characters (all ASCII), never ending inside a ``%XX``."""
    cut = name[:limit]
    tail = cut.rfind("%", len(cut) - 2)
    return cut[:tail] if tail >= 0 else cut


def session_id_of(folder: str) -> str | None:
    """The id an encoded folder name stands for; None for a digest-shortened name (its id is
    in the folder's ``artifacts/metadata.json``)."""
    if SHORTENED in folder:
        return None
    out = bytearray()
    index = 0
    while index < len(folder):
        if folder[index] == "%" and re.fullmatch(r"[0-9A-F]{2}", folder[index + 1 : index + 3]):
            out.append(int(folder[index + 1 : index + 3], 16))
            index += 3
        else:
            out.extend(folder[index].encode("utf-8"))
            index += 1
    return out.decode("utf-8", "replace")
