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
"""Per-attempt bound on a model call when the state sets no ``budget.timeoutMs`` (a hung
endpoint costs at most this, then the attempt is retried)."""

DEFAULT_MODEL_CALL_DEADLINE: Final = None
"""No bound across retries: the activity itself gives transient failures up after a few
attempts, and waits out the deployment's errors (a missing key, an unreachable endpoint)
for as long as they last, visibly, so a fixed worker picks the turn up by itself."""

MODEL_HEARTBEAT_TIMEOUT: Final = timedelta(seconds=20)
"""A model call heartbeats every 5 s while it waits: a worker that died mid-call is noticed,
and the call retried on another worker, within this."""

BUDGET_MARGIN: Final = timedelta(seconds=30)
"""Beyond ``budget.timeoutMs``, what an attempt's start-to-close allows the activity to say
the budget ran out (the activity races the call against the budget itself)."""

BUDGET_EXHAUSTED: Final = "ModelBudgetExhausted"
"""The error type of a call that outran its state's ``budget.timeoutMs``: final."""

MODEL_RETRY: Final = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=0,
)
"""Retries without a count: the activity decides what is final (``ModelCallError`` for the
call's own faults and for transient failures after their attempts; ``ModelBudgetExhausted``)
and what is the deployment's to fix (``ModelConfigurationError``, retried at a capped
interval); a ``Retry-After`` travels as the error's next retry delay.

The final errors are raised non-retryable by the activity itself, so the policy lists no
types: each model call's scheduled event is 38 bytes shorter than when it listed those two
(a retry policy is no command a replay compares)."""

CONTRACT: Final = ActivityContract(
    MODEL_ACTIVITY, ModelCallInput, ModelCallResult, "one Chat Completions call"
)


async def complete(call: ModelCallInput, *, summary: str) -> ModelCallResult:
    """Schedule one model call and wait for its answer (an ``ActivityError`` when it failed
    for good). A call with a budget (``call.budget_ms``) is raced against it inside the
    activity: the budget bounds the work of each attempt, never the retries after a crash."""
    attempt = (
        timedelta(milliseconds=call.budget_ms) + BUDGET_MARGIN
        if call.budget_ms
        else DEFAULT_MODEL_CALL_TIMEOUT
    )
    result: ModelCallResult = await workflow.execute_activity(
        MODEL_ACTIVITY,
        call,
        result_type=ModelCallResult,
        start_to_close_timeout=attempt,
        heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
        retry_policy=MODEL_RETRY,
        summary=summary,
    )
    return result
