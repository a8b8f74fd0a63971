"""Session ids: the one id there is, chosen by the host, and also a folder name in the store."""

from __future__ import annotations

import re

from archmax_temporal.workflows.errors import InvalidSessionIdError

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:~@+=-]{0,199}$")
"""Ids that can name a workflow and a store folder: no slashes, no leading dot or underscore."""


def check_session_id(session_id: str) -> str:
    """``session_id`` unchanged, or :class:`InvalidSessionIdError` saying what is wrong."""
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id) or ".." in session_id:
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: use 1-200 characters of letters, digits and "
            "._:~@+=- starting with a letter or digit, without '..'"
        )
    return session_id
