"""A session store's identity, and the worker's check that it serves only its own store's
sessions.

A store is identified by ``_store.json`` at its top (a shared object, outside every session
folder)::

    {"id": "<uuid4 hex>", "created": "<ISO time>", "description": "<where, no credentials>"}

written once, by whichever host or worker first uses the store (put-if-absent: of two
processes that race to create it, both end with the one that won), and never rewritten:
copying a whole store keeps its identity; pointing at another folder or bucket is another
store. :func:`store_identity` reads it (creating it when absent) and caches it per process.

A host records the identity in every session it creates (:attr:`SessionInput.store_id
<archmax_temporal.workflows.models.SessionInput.store_id>`); the session's activities carry it
(:mod:`archmax_temporal.workflows.store_binding`), and a worker runs none whose store is not its own
(:mod:`archmax_temporal.activities.store_check`): it fails the attempt with a retryable
``StoreMismatchError`` naming both stores, and the session waits for a worker of its store, losing
nothing.
"""

from __future__ import annotations

import os
import threading
import uuid
from datetime import UTC, datetime
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from archmax_temporal.activities.session_store import SessionStore
from archmax_temporal.activities.store_errors import FileNotFoundInWorkspaceError
from archmax_temporal.workflows.errors import StoreIdentityError
from archmax_temporal.workflows.store_binding import StoreRef

STORE_IDENTITY_KEY: Final = "_store.json"
"""Where a store keeps its identity (a shared key: outside every session folder)."""

DESCRIPTION_CHARS: Final = 200
"""The longest description kept (a long path keeps its head and tail)."""


class StoreIdentity(BaseModel):
    """``_store.json``: the store's id, when it was created and where it was then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    """A random UUID's 32 hex digits, fixed when the store was first used."""
    created: datetime
    """When the identity was written."""
    description: str
    """Where the store was when its identity was written (:func:`describe_store`)."""

    @property
    def short(self) -> str:
        """The id's first eight digits, for messages."""
        return self.id[:8]


def describe_store(location: str | os.PathLike[str]) -> str:
    """A store's location as messages may show it: a folder as an absolute path; a URL
    (``s3://bucket/prefix``) without its user, password, query or fragment (where
    credentials hide). At most :data:`DESCRIPTION_CHARS` characters."""
    from archmax_temporal.activities.object_store import describe_store as described

    text = os.fspath(location)
    text = described(text) if "://" in text else os.path.abspath(os.path.expanduser(text))
    if len(text) > DESCRIPTION_CHARS:
        half = DESCRIPTION_CHARS // 2 - 1
        text = f"{text[:half]}…{text[-half:]}"
    return text


def read_store_identity(store: SessionStore) -> StoreIdentity | None:
    """The store's identity, or None when it has none yet; :class:`StoreIdentityError` when
    ``_store.json`` is not one (the store's own failures, ``StoreIOError``, pass through)."""
    try:
        data = store.read_shared(STORE_IDENTITY_KEY)
    except FileNotFoundInWorkspaceError:
        return None
    try:
        return StoreIdentity.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in exc.errors()
        )
        raise StoreIdentityError(
            f"the session store's {STORE_IDENTITY_KEY} is not a store identity ({problems}); "
            "it is never rewritten: restore it from a copy of the store, or remove it only if "
            "no session was ever created in this store"
        ) from None


def establish_store_identity(store: SessionStore, *, describe: str) -> StoreIdentity:
    """The store's identity, created (once) when it has none: of two processes that race to
    create it, the one whose write lost reads the winner's. Uncached: see
    :func:`store_identity`."""
    found = read_store_identity(store)
    if found is not None:
        return found
    created = StoreIdentity(id=uuid.uuid4().hex, created=datetime.now(UTC), description=describe)
    if store.write_shared_once(STORE_IDENTITY_KEY, created.model_dump_json(indent=2).encode()):
        return created
    won = read_store_identity(store)  # another process created it first
    if won is None:
        raise StoreIdentityError(
            f"the session store's {STORE_IDENTITY_KEY} existed when this process tried to "
            "create it, and is gone now: something removes it"
        )
    return won


class _Identities:
    """The identities this process has read, by store description: a store's identity never
    changes once written, so each is read once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[int, tuple[SessionStore, StoreIdentity]] = {}
        """By the store object (held, so its id is never reused): two stores that describe
        themselves alike (two wrappers, two prefixes of one label) are never taken for one."""

    def get(self, store: SessionStore, describe: str) -> StoreIdentity:
        with self._lock:
            known = self._known.get(id(store))
        if known is not None:
            return known[1]
        identity = establish_store_identity(store, describe=describe)
        with self._lock:
            if len(self._known) >= KNOWN_STORES:
                self._known.clear()  # a process that opens store after store: read again
            return self._known.setdefault(id(store), (store, identity))[1]


KNOWN_STORES: Final = 256
"""Store objects whose identity a process keeps (a host or worker opens one or two)."""

_PROCESS: Final = _Identities()


def store_identity(store: SessionStore, *, describe: str) -> StoreIdentity:
    """The identity of ``store`` (found at ``describe``: :func:`describe_store`), created when
    it has none, read once per process."""
    return _PROCESS.get(store, describe)


def session_store_ref(store: SessionStore, *, describe: str) -> StoreRef:
    """What a session created in ``store`` records of it (``SessionInput.store_id`` and
    ``store_description``): its id, and where this process finds it."""
    return StoreRef(id=store_identity(store, describe=describe).id, description=describe)
