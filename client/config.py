"""Where things are: the Temporal server, the task queue, the authoring root, the store.

Read once from the environment at an entry point; command-line flags override it. Temporal's
coordinates and credentials come from Temporal's own environment configuration
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``,
``temporal.toml`` profiles and ``TEMPORAL_PROFILE``: see
:class:`archmax_temporal.connection.TemporalConnection`); archmax's own from ``ARCHMAX_TASK_QUEUE``,
``ARCHMAX_ROOT`` and ``ARCHMAX_STORE``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.service import TLSConfig

from archmax_temporal.client.devserver import is_local_address
from archmax_temporal.connection import DEFAULT_ADDRESS, DEFAULT_NAMESPACE, TemporalConnection
from archmax_temporal.workflows.durations import InvalidUntilError, relative_duration
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.limits import Limits

if TYPE_CHECKING:
    from archmax_temporal.activities.session_store import SessionStore

DEFAULT_TASK_QUEUE = "archmax"
"""The task queue when one is configured nowhere and Temporal's address is (a deployment's
hosts and workers agree on it without sharing a folder)."""


def root_task_queue(root: Path) -> str:
    """The embedded default's task queue of an authoring root: ``archmax-<folder>-<digest>``.

    Why: with nothing configured every root on a machine shares the one local dev server; on
    one queue, the background worker of the first root would serve another root's sessions
    with its own model configuration and store. Each root gets its own queue instead, stable
    for the root's path, readable in the Temporal UI."""
    resolved = str(Path(root).resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(resolved).name).strip("-.")[:40]
    return f"archmax-{name}-{digest}" if name else f"archmax-{digest}"


def default_task_queue(root: Path, connection: TemporalConnection) -> str:
    """:func:`root_task_queue` for the embedded default (no address configured, a local one,
    plain), else :data:`DEFAULT_TASK_QUEUE`."""
    local = not connection.address_configured and is_local_address(connection.address)
    return root_task_queue(root) if local and connection.plain else DEFAULT_TASK_QUEUE


DEFAULT_IDLE_CLOSE = timedelta(hours=1)
"""How long a finished session waits for its next firing before its run closes."""


STORE_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "memory")
"""The URL schemes ``ARCHMAX_STORE`` takes for an object store (a path or ``file://`` is a
folder)."""


def is_store_url(location: str) -> bool:
    """Whether ``ARCHMAX_STORE`` names an object store (``scheme://…``) rather than a folder."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() != "file"


@lru_cache(maxsize=8)
def _open_store(location: str) -> SessionStore:
    """The store at ``location`` (a folder, ``file://``, or an object store's URL: see
    :func:`~archmax_temporal.activities.object_store.open_store`); one per location and process."""
    from archmax_temporal.activities.object_store import open_store

    try:
        return open_store(location)
    except ConfigurationError as exc:
        raise ConfigurationError(f"ARCHMAX_STORE: {exc}") from None


def idle_close_from(text: str | None) -> timedelta | None:
    """``ARCHMAX_IDLE_CLOSE``: a relative duration (``90s``, ``30m``, ``1h``, ``1d``); unset is
    :data:`DEFAULT_IDLE_CLOSE`, ``0`` is never (the run stays open)."""
    if text is None or not text.strip():
        return DEFAULT_IDLE_CLOSE
    try:
        duration = relative_duration(text)
    except InvalidUntilError as exc:
        raise ConfigurationError(f"ARCHMAX_IDLE_CLOSE: {exc}") from None
    return duration or None


__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TASK_QUEUE",
    "RuntimeConfig",
    "default_task_queue",
    "root_task_queue",
]


@dataclass(frozen=True)
class RuntimeConfig:
    """The runtime's coordinates, resolved."""

    root: Path
    store: Path
    """The session store's folder (``ARCHMAX_STORE`` when it is a path; else unused)."""
    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = ""
    """The task queue; empty (not given) means the default for the address
    (:func:`default_task_queue`), filled in at construction."""
    task_queue_configured: bool = field(init=False, default=False)
    """Whether the queue was given (``ARCHMAX_TASK_QUEUE``, a flag, an argument)."""
    address_configured: bool = False
    """Whether the address was given (env or flag): then a command never starts a server."""
    search_attributes: bool = True
    """Whether sessions publish the Archmax* search attributes (ARCHMAX_SEARCH_ATTRIBUTES=0
    for a namespace that has not registered them)."""
    limits: Limits = field(default_factory=Limits)
    """How big a firing may be (``ARCHMAX_MAX_*_BYTES``); new sessions start with these."""
    api_key: str | None = field(default=None, repr=False)
    """Temporal API key (``TEMPORAL_API_KEY`` or the profile's); never printed."""
    tls: bool | TLSConfig | None = field(default=None, repr=False)
    """Temporal TLS (``TEMPORAL_TLS*`` or the profile's); ``None``: on exactly with a key."""
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    """gRPC metadata sent with every call (``TEMPORAL_GRPC_META_*``)."""
    profile: str | None = None
    """The ``temporal.toml`` profile read (``TEMPORAL_PROFILE`` or ``--profile``)."""
    store_url: str | None = None
    """``ARCHMAX_STORE`` when it is an object store's URL (``s3://bucket/prefix``, ``gs://``,
    ``az://``); None: the folder :attr:`store`."""

    @property
    def store_location(self) -> str:
        """Where the session store is, as ``ARCHMAX_STORE`` names it (a URL or a folder)."""
        return self.store_url or str(self.store)

    def session_store(self) -> SessionStore:
        """The session store this configuration names (one per location and process)."""
        return _open_store(self.store_location)

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_queue_configured", bool(self.task_queue))
        if not self.task_queue:
            object.__setattr__(self, "task_queue", default_task_queue(self.root, self.connection))

    @property
    def connection(self) -> TemporalConnection:
        """How to reach Temporal, for :func:`archmax_temporal.connection.connect`."""
        return TemporalConnection(
            address=self.address,
            namespace=self.namespace,
            api_key=self.api_key,
            tls=self.tls,
            rpc_metadata=self.rpc_metadata,
            address_configured=self.address_configured,
        )

    idle_close: timedelta | None = DEFAULT_IDLE_CLOSE
    """``ARCHMAX_IDLE_CLOSE``: how long a finished session's run stays open without a firing
    before it checkpoints to the store and closes (None: never)."""

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        root: Path | str | None = None,
        profile: str | None = None,
    ) -> RuntimeConfig:
        """The configuration the environment describes, with ``root`` overriding ARCHMAX_ROOT
        and ``profile`` overriding TEMPORAL_PROFILE."""
        env = os.environ if env is None else env
        temporal = TemporalConnection.from_env(env, profile=profile)
        resolved_root = Path(root or env.get("ARCHMAX_ROOT") or Path.cwd()).resolve()
        store = env.get("ARCHMAX_STORE") or None
        store_url = store if store is not None and is_store_url(store) else None
        if store_url is not None:
            store = None
        elif store is not None and store.startswith("file://"):
            store = store[len("file://") :]
        try:
            limits = Limits.from_env(env)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        return cls(
            limits=limits,
            root=resolved_root,
            store=Path(store).resolve() if store else resolved_root / "sessions",
            address=temporal.address,
            namespace=temporal.namespace,
            api_key=temporal.api_key,
            tls=temporal.tls,
            rpc_metadata=temporal.rpc_metadata,
            profile=profile or env.get("TEMPORAL_PROFILE") or None,
            task_queue=env.get("ARCHMAX_TASK_QUEUE") or "",
            address_configured=temporal.address_configured,
            search_attributes=env.get("ARCHMAX_SEARCH_ATTRIBUTES", "1").lower()
            not in ("0", "false", "off", "no"),
            idle_close=idle_close_from(env.get("ARCHMAX_IDLE_CLOSE")),
            store_url=store_url,
        )

    def with_overrides(self, **changes: object) -> RuntimeConfig:
        """A copy with the given fields replaced (None values ignored); a new ``address``
        counts as configured (nothing starts a server for it)."""
        changed = {k: v for k, v in changes.items() if v is not None}
        if "address" in changed:
            changed.setdefault("address_configured", True)
        if not self.task_queue_configured:
            changed.setdefault("task_queue", "")  # derived again for the new address
        return replace(self, **changed)  # type: ignore[arg-type]
