"""The worker's own metrics from activity code: each model call attempt, its outcome and
latency, and what each activity wrote to a folder store (files, bytes, fsyncs: a turn's save
writes what is new and fsyncs once), through ``activity.metric_meter()`` (the worker's
Temporal runtime exports them with Temporal's SDK metrics; without a metrics endpoint they
cost next to nothing).

The names are defined with the workflow's in :mod:`archmax_temporal.workflows.telemetry`.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from archmax_temporal.activities.disk_files import DiskCounters, disk_tally
from archmax_temporal.activities.tracing import model_call_span, record_model_result
from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
from archmax_temporal.workflows.telemetry import (
    MODEL_CALLS,
    MODEL_LATENCY,
    STORE_BYTES,
    STORE_FSYNCS,
    STORE_WRITES,
)


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return "ok"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    if isinstance(error, ApplicationError) and error.type:
        return error.type
    return type(error).__name__


def _count_store_writes(tally: DiskCounters) -> None:
    """What the activity wrote to a folder store, as the worker's metrics (nothing when it
    wrote nothing)."""
    if not tally.writes:
        return
    meter = activity.metric_meter()
    attributes = {"activity": activity.info().activity_type}
    for metric, value in (
        (STORE_WRITES, tally.writes),
        (STORE_BYTES, tally.bytes),
        (STORE_FSYNCS, tally.fsyncs),
    ):
        if value:
            counter = meter.create_counter(metric.name, metric.description, metric.unit)
            counter.add(value, attributes)


class _ModelCallMetrics(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        with disk_tally() as tally:
            try:
                return await self._execute(input)
            finally:
                _count_store_writes(tally)

    async def _execute(self, input: ExecuteActivityInput) -> Any:
        if activity.info().activity_type != MODEL_ACTIVITY:
            return await super().execute_activity(input)
        argument = input.args[0] if input.args else None
        requested = getattr(argument, "model", None)
        started = time.monotonic()
        error: BaseException | None = None
        result: Any = None
        try:
            with model_call_span(requested) as span:
                result = await super().execute_activity(input)
                record_model_result(span, result, request_model=requested)
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            model = getattr(result, "model", None) or getattr(argument, "model", None)
            attributes = {"model": str(model or "default")}
            meter = activity.metric_meter()
            meter.create_counter(MODEL_CALLS.name, MODEL_CALLS.description).add(
                1, {**attributes, "outcome": _outcome(error)}
            )
            meter.create_histogram_timedelta(
                MODEL_LATENCY.name, MODEL_LATENCY.description, MODEL_LATENCY.unit
            ).record(timedelta(seconds=time.monotonic() - started), attributes)


class ModelCallMetricsInterceptor(Interceptor):
    """Counts model call attempts by model and outcome and records their latency; counts
    what every activity wrote to a folder store (files, bytes, fsyncs) by activity type."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ModelCallMetrics(next)
