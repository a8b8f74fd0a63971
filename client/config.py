"""Where things are: the Temporal server, the task queue, the authoring root, the store.

Read once from the environment at an entry point (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``ARCHMAX_TASK_QUEUE``, ``ARCHMAX_ROOT``, ``ARCHMAX_STORE``); command-line flags override it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

from archmax_temporal.workflows.durations import InvalidUntilError, relative_duration
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.limits import Limits

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "archmax"
DEFAULT_IDLE_CLOSE = timedelta(hours=1)
"""How long a finished session waits for its next firing before its run closes."""


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


@dataclass(frozen=True)
class RuntimeConfig:
    """The runtime's coordinates, resolved."""

    root: Path
    store: Path
    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    address_configured: bool = False
    """Whether the address was given (env or flag): then a command never starts a server."""
    search_attributes: bool = True
    """Whether sessions publish the Archmax* search attributes (ARCHMAX_SEARCH_ATTRIBUTES=0
    for a namespace that has not registered them)."""
    limits: Limits = field(default_factory=Limits)
    """How big a firing may be (``ARCHMAX_MAX_*_BYTES``); new sessions start with these."""
    idle_close: timedelta | None = DEFAULT_IDLE_CLOSE
    """``ARCHMAX_IDLE_CLOSE``: how long a finished session's run stays open without a firing
    before it checkpoints to the store and closes (None: never)."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, root: Path | str | None = None
    ) -> RuntimeConfig:
        """The configuration the environment describes, with ``root`` overriding ARCHMAX_ROOT."""
        env = os.environ if env is None else env
        resolved_root = Path(root or env.get("ARCHMAX_ROOT") or Path.cwd()).resolve()
        store = env.get("ARCHMAX_STORE")
        try:
            limits = Limits.from_env(env)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        return cls(
            limits=limits,
            root=resolved_root,
            store=Path(store).resolve() if store else resolved_root / "sessions",
            address=env.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS,
            namespace=env.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE,
            task_queue=env.get("ARCHMAX_TASK_QUEUE") or DEFAULT_TASK_QUEUE,
            address_configured=bool(env.get("TEMPORAL_ADDRESS")),
            search_attributes=env.get("ARCHMAX_SEARCH_ATTRIBUTES", "1").lower()
            not in ("0", "false", "off", "no"),
            idle_close=idle_close_from(env.get("ARCHMAX_IDLE_CLOSE")),
        )

    def with_overrides(self, **changes: object) -> RuntimeConfig:
        """A copy with the given fields replaced (None values ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]
