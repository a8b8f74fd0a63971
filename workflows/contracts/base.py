"""What one activity contract is: its name, its wire types and what it does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from pydantic import BaseModel

HEARTBEAT_EVERY: Final = timedelta(seconds=2)
"""How often a long activity heartbeats while it works (activities.heartbeat). Temporal
forwards at most one heartbeat per 80% of the timeout, so this only needs to be well under
:data:`HEARTBEAT_TIMEOUT`."""

HEARTBEAT_TIMEOUT: Final = timedelta(seconds=10)
"""How long an attempt may go without a heartbeat before Temporal deems its worker dead and
retries it: a worker SIGKILLed mid-call is noticed, and the call running again on another
worker, within about this (plus the retry's first backoff), not at the end of its
start-to-close budget. Five heartbeats fit in it, so a busy worker is never mistaken for a
dead one."""


@dataclass(frozen=True)
class ActivityContract:
    """One activity as every history records it.

    ``name`` is a contract: renaming it breaks every session in flight. ``input`` and
    ``result`` are the wire types both sides import (``result`` None: the activity answers
    nothing).
    """

    name: str
    input: type[BaseModel]
    result: type[BaseModel] | None
    does: str
    """One line for the reader: what the activity does."""
