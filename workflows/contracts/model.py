"""``archmax.model.complete``: one Chat Completions call (the agent's, a handoff or a rubric)."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy

from archmax_temporal.workflows.contracts.base import ActivityContract
from archmax_temporal.workflows.models import ModelCallInput as ModelCallInput
from archmax_temporal.workflows.models import ModelCallResult as ModelCallResult

MODEL_ACTIVITY: Final = "archmax.model.complete"
"""One Chat Completions call."""

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

CONTRACT: Final = ActivityContract(
    MODEL_ACTIVITY, ModelCallInput, ModelCallResult, "one Chat Completions call"
)


async def complete(
    call: ModelCallInput,
    *,
    summary: str,
    attempt_timeout: timedelta = DEFAULT_MODEL_CALL_TIMEOUT,
    deadline: timedelta = DEFAULT_MODEL_CALL_DEADLINE,
) -> ModelCallResult:
    """Schedule one model call and wait for its answer (an ``ActivityError`` when it failed
    for good)."""
    result: ModelCallResult = await workflow.execute_activity(
        MODEL_ACTIVITY,
        call,
        result_type=ModelCallResult,
        start_to_close_timeout=attempt_timeout,
        schedule_to_close_timeout=deadline,
        retry_policy=MODEL_RETRY,
        summary=summary,
    )
    return result
