"""Large variable values in the session store (``<id>/checkpoints/variables/<sha256>.json``):
written by the workflow's ``archmax.store.put_variables``, read back by the activities that
need them whole (hooks, scripts, the artifacts) and by hosts (``sessions.get``,
``sessions.view``, outcomes). Each is checked against its digest when read.
"""

from __future__ import annotations

import json
from typing import Any

from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import StoreIOError, WorkspaceError
from archmax_temporal.workflows.models import Variable
from archmax_temporal.workflows.variables import STORED_VARIABLES, reference_of


def _stored_path(ref: str) -> str:
    """A value by reference's session-relative path (``ref`` is a SHA-256 digest)."""
    if len(ref) != 64 or any(c not in "0123456789abcdef" for c in ref):
        raise StoreIOError(f"not a variable reference: {ref[:80]!r}", STORED_VARIABLES)
    return f"{STORED_VARIABLES}/{ref}.json"


def read_stored_text(store: SessionStore, session_id: str, ref: str) -> str:
    """The JSON of a value by reference, checked against its digest (:class:`StoreIOError`
    when it is missing or altered: the host and the workers must share the store)."""
    try:
        text: str | None = store.read_text(session_id, _stored_path(ref))
    except (WorkspaceError, OSError, ValueError):
        text = None
    if text is None or not text.isascii() or reference_of(text) != ref:
        raise StoreIOError(
            f"the session's stored variable {ref[:12]}… is missing or altered: the host and "
            "the workers must share the store (ARCHMAX_STORE)",
            STORED_VARIABLES,
        )
    return text


def resolve_variables(
    store: SessionStore, session_id: str, variables: dict[str, Variable]
) -> dict[str, Variable]:
    """``variables`` with every value by reference read back whole from the store, as plain
    ``{value, locked}`` variables (what a reader outside the workflow sees, and what travels
    on from it whole: a value by reference would travel as its reference alone)."""
    return {
        name: Variable(
            value=json.loads(read_stored_text(store, session_id, v.ref))
            if v.value is None
            else v.value,
            locked=v.locked,
        )
        if v.ref is not None
        else v
        for name, v in variables.items()
    }


def fill_stored(
    store: SessionStore, session_id: str, args: dict[str, Any], variables: dict[str, Variable]
) -> dict[str, Any]:
    """A hook's or script's ``args`` with the values by reference of ``variables`` filled
    into ``args["variables"]`` (the workflow sends them as None)."""
    plain = args.get("variables")
    stored = {n: v for n, v in variables.items() if v.ref is not None and v.value is None}
    if not isinstance(plain, dict) or not stored:
        return args
    whole = resolve_variables(store, session_id, stored)
    return {**args, "variables": {**plain, **{n: v.value for n, v in whole.items()}}}


def write_stored_texts(store: SessionStore, session_id: str, texts: dict[str, str]) -> None:
    """Write values by reference (content-named: an existing one is left as it is)."""
    for ref, text in texts.items():
        if not text.isascii() or reference_of(text) != ref:
            raise StoreIOError(f"variable {ref[:12]}… does not match its digest", STORED_VARIABLES)
        path = _stored_path(ref)
        if not store.exists(session_id, path):
            store.write_text(session_id, path, text)
