"""Names, timeouts and retry policies of everything the session workflow schedules.

Activity names are a contract: renaming one breaks every session in flight, so they live
here, namespaced and stable, and both the workflow and the worker read them from this module.
Timeouts and retries are named constants rather than literals at call sites.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio.common import RetryPolicy

WORKFLOW_NAME: Final = "ArchmaxSession"
"""The Temporal workflow type of a session."""

MODEL_ACTIVITY: Final = "archmax.model.complete"
"""One Chat Completions call."""

PERSIST_ACTIVITY: Final = "archmax.store.persist_turn"
"""Rewrites the session's artifacts and spec snapshot at the end of every turn."""

DEFAULT_MODEL_CALL_TIMEOUT: Final = timedelta(minutes=3)
"""Per-attempt bound on a model call when the state sets no ``budget.timeoutMs``."""

DEFAULT_MODEL_CALL_DEADLINE: Final = timedelta(minutes=15)
"""Bound on a model call across all its retries when the state sets no budget."""

MODEL_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["ModelCallError"],
)
"""Rate limits, 5xx, timeouts and connection errors retry with backoff (a ``Retry-After``
travels as the error's next retry delay); 4xx answers are raised as the non-retryable
``ModelCallError``."""

PERSIST_TIMEOUT: Final = timedelta(seconds=30)
"""Writing a handful of small JSON files."""

PERSIST_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=10,
)
"""Store writes are idempotent (write, then rename), so they retry freely."""

DEFAULT_MAX_MODEL_CALLS_PER_VISIT: Final = 50
"""``budget.maxTurns`` when a state declares none: archmax's recursion limit."""

MAX_ERROR_ROUTES_PER_TURN: Final = 10
"""Backstop against ``on_error`` cycles: after this many routes in one turn it is rejected."""

DEFAULT_REQUESTS_PER_RUN: Final = 200
"""Turns and deliveries one run handles before it continues as new (Temporal may suggest it
earlier)."""
