"""What workflow code tells an operator: metrics and log lines, both replay-safe.

Metrics go through ``workflow.metric_meter()`` and log lines through ``workflow.logger``;
Temporal records neither while a workflow replays, so a worker that replays a history (a
cache miss, a restarted worker) counts and logs nothing twice. Nothing here adds a command to
the history: recording is invisible to determinism.

Every metric's name is defined once here (:data:`METRICS`); the worker's Prometheus endpoint
exports them beside Temporal's own SDK metrics (see docs/production/observability.md). Each
carries Temporal's ``namespace``, ``task_queue`` and ``workflow_type`` attributes and
archmax's ``workflow`` (the slug), plus its own:

- :data:`TURNS` ``{workflow, outcome, disposition}``: each firing that settled, by the status
  it settled in (``completed``, ``failed``, ``rejected``, ``awaiting_input``,
  ``awaiting_decision``) and what it was (``turn``, ``deliver``, ``decide``, ``reply``);
- :data:`PARKS` ``{workflow, channel}`` and :data:`WAKES` ``{workflow, channel}``: a firing
  settling parked (``input``, ``decision``) and a parked session woken (``input``,
  ``decision``, ``timer``, ``sub_workflow``);
- :data:`DELIVERIES` ``{workflow, update}`` and :data:`REFUSALS` ``{workflow, update, error}``:
  updates (``send``, ``deliver``, ``decide``, ``reply``) and ``deliver`` signals
  (``deliver_signal``) accepted, and refused by archmax error type;
- :data:`HOOK_VERDICTS` ``{workflow, phase, kind, verdict}`` and :data:`TOOLS_BLOCKED`
  ``{workflow, tool, rule}``;
- :data:`MODEL_TOKENS` ``{workflow, model, kind}``: tokens the model calls reported
  (``input``, ``output``, ``cache_read``, ``cache_write``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ExecuteWorkflowInput,
    HandleUpdateInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

with workflow.unsafe.imports_passed_through():
    from archmax_temporal.workflows.contracts.model import MODEL_ACTIVITY
    from archmax_temporal.workflows.models import ModelCallResult, Usage

if TYPE_CHECKING:
    from archmax_temporal.workflows.context import SessionContext


@dataclass(frozen=True)
class Metric:
    """One metric archmax emits: its name, kind and meaning."""

    name: str
    kind: str
    description: str
    unit: str | None = None


TURNS: Final = Metric("archmax_turns", "counter", "Firings settled, by outcome and disposition")
PARKS: Final = Metric("archmax_parks", "counter", "Firings that settled parked, by channel")
WAKES: Final = Metric("archmax_wakes", "counter", "Parked sessions woken, by channel")
DELIVERIES: Final = Metric("archmax_deliveries", "counter", "Updates and signals accepted")
REFUSALS: Final = Metric("archmax_refusals", "counter", "Updates and signals refused, by error")
HOOK_VERDICTS: Final = Metric("archmax_hook_verdicts", "counter", "Hook verdicts, by verdict")
TOOLS_BLOCKED: Final = Metric("archmax_tool_calls_blocked", "counter", "Tool calls refused")
MODEL_TOKENS: Final = Metric("archmax_model_tokens", "counter", "Tokens model calls reported")
MODEL_CALLS: Final = Metric("archmax_model_calls", "counter", "Model call attempts, by outcome")
MODEL_LATENCY: Final = Metric(
    "archmax_model_call_latency", "histogram", "Model call attempt latency", "duration"
)
STORE_WRITES: Final = Metric(
    "archmax_store_writes", "counter", "Files a folder store wrote, by activity"
)
STORE_BYTES: Final = Metric(
    "archmax_store_written_bytes", "counter", "Bytes a folder store wrote, by activity"
)
STORE_FSYNCS: Final = Metric(
    "archmax_store_fsyncs", "counter", "Fsyncs a folder store asked of the disk, by activity"
)

METRICS: Final = (
    TURNS,
    PARKS,
    WAKES,
    DELIVERIES,
    REFUSALS,
    HOOK_VERDICTS,
    TOOLS_BLOCKED,
    MODEL_TOKENS,
    MODEL_CALLS,
    MODEL_LATENCY,
    STORE_WRITES,
    STORE_BYTES,
    STORE_FSYNCS,
)
"""Every archmax metric: the workflow's recorded here, the activities' (model calls and their
latency, what each activity wrote to a folder store) by
:mod:`archmax_temporal.activities.telemetry`."""

DELIVERY_HANDLERS: Final = frozenset({"send", "deliver", "decide", "reply"})
"""The updates counted as deliveries and refusals (the ``deliver`` signal is counted by the
session itself, as ``deliver_signal``: a signal is refused inside its handler)."""

_PARKED: Final = {"awaiting_input": "input", "awaiting_decision": "decision"}


@functools.cache
def _tracing_module() -> Any:
    """Temporal's OpenTelemetry integration, or ``None`` without OpenTelemetry (asked once
    per process: a failed import is not retried on every span)."""
    try:
        with workflow.unsafe.imports_passed_through():
            import temporalio.contrib.opentelemetry.workflow as traced
    except ImportError:
        return None
    return traced


def _span(name: str, attributes: Mapping[str, str | int | bool]) -> None:
    """A completed span under the workflow's current one, when the worker traces (Temporal's
    ``TracingInterceptor``); never while replaying, and nothing without OpenTelemetry."""
    if not workflow.in_workflow():
        return
    traced = _tracing_module()
    if traced is None or traced.TracingWorkflowInboundInterceptor._from_context() is None:
        return
    traced.completed_span(name, attributes=dict(attributes))


def _count(metric: Metric, value: int, attributes: Mapping[str, str]) -> None:
    if value <= 0 or not workflow.in_workflow():  # a unit test drives the seams bare
        return
    counter = workflow.metric_meter().create_counter(metric.name, metric.description, metric.unit)
    counter.add(value, dict(attributes))


def log_extra(ctx: SessionContext) -> dict[str, Any]:
    """The ``extra`` of a ``workflow.logger`` line: the slug, state and status (Temporal adds
    the workflow and run ids)."""
    s = ctx.session
    return {"archmax": {"workflow": ctx.input.workflow, "state": s.state, "status": s.status}}


_KINDS: Final = {
    "SendFiring": "send",
    "DeliverFiring": "deliver",
    "DecideFiring": "decide",
    "ReplyFiring": "reply",
    "ChildSettled": "child",
    "ResumeTurn": "resume",
}


def firing_started(ctx: SessionContext, firing: object) -> None:
    """A firing is about to be served: a parked session woken is counted by channel (a
    reply leaves it parked; a turn resumed after continue-as-new woke before)."""
    channel = _PARKED.get(ctx.session.status)
    kind = _KINDS.get(type(firing).__name__)
    if channel is None or kind in (None, "reply", "resume"):
        return
    if kind == "send" and channel == "decision":
        return  # a send at a human state is a reply: the session stays parked
    if kind == "child":
        channel = "sub_workflow"
    elif getattr(getattr(firing, "delivery", None), "trigger", None) == "timer":
        channel = "timer"
    _count(WAKES, 1, {"workflow": ctx.input.workflow, "channel": channel})
    workflow.logger.info("session woken by %s", channel, extra=log_extra(ctx))
    _span("archmax.wake", {"archmax.workflow": ctx.input.workflow, "archmax.channel": channel})


def settled(ctx: SessionContext, disposition: str) -> None:
    """A firing settled: counted by outcome, and as a park when it parked."""
    s = ctx.session
    slug = ctx.input.workflow
    _count(TURNS, 1, {"workflow": slug, "outcome": s.status, "disposition": disposition})
    channel = _PARKED.get(s.status)
    if channel is not None:
        _count(PARKS, 1, {"workflow": slug, "channel": channel})
    workflow.logger.info("firing settled (%s): %s", disposition, s.status, extra=log_extra(ctx))
    _span(
        "archmax.turn",
        {
            "archmax.workflow": slug,
            "archmax.state": s.state or "",
            "archmax.outcome": s.status,
            "archmax.disposition": disposition,
            "archmax.session.input_tokens": s.usage.prompt_tokens,
            "archmax.session.output_tokens": s.usage.completion_tokens,
        },
    )


def hook_verdict(ctx: SessionContext, phase: str, kind: str, verdict: str, error: bool) -> None:
    """One hook ran: its verdict (``error`` when it failed, which fails closed)."""
    attributes = {
        "workflow": ctx.input.workflow,
        "phase": phase,
        "kind": kind,
        "verdict": "error" if error else verdict,
    }
    _count(HOOK_VERDICTS, 1, attributes)
    _span("archmax.hook", {f"archmax.{k}": v for k, v in attributes.items()})


def tool_answered(ctx: SessionContext, tool: str, status: str, rule: str | None) -> None:
    """A tool call was answered (``ok``, ``error`` or ``blocked`` by governance)."""
    _span(
        "archmax.tool",
        {
            "archmax.workflow": ctx.input.workflow,
            "archmax.state": ctx.session.state or "",
            "gen_ai.tool.name": tool,
            "archmax.tool.status": status,
            "archmax.tool.rule": rule or "",
        },
    )
    if status == "blocked":
        _tool_blocked(ctx, tool, rule)


def _tool_blocked(ctx: SessionContext, tool: str, rule: str | None) -> None:
    if not workflow.in_workflow():  # a unit test drives the seams bare
        return
    attributes = {"workflow": ctx.input.workflow, "tool": tool, "rule": rule or "refused"}
    _count(TOOLS_BLOCKED, 1, attributes)
    workflow.logger.info(
        "tool call blocked: %s (%s)", tool, rule or "refused", extra=log_extra(ctx)
    )


def signal_delivered(ctx: SessionContext) -> None:
    """A ``deliver`` signal was admitted."""
    _count(DELIVERIES, 1, {"workflow": ctx.input.workflow, "update": "deliver_signal"})


def signal_refused(ctx: SessionContext, error: str) -> None:
    """A ``deliver`` signal was dropped (a signal cannot be refused to its sender)."""
    attributes = {"workflow": ctx.input.workflow, "update": "deliver_signal", "error": error}
    _count(REFUSALS, 1, attributes)


def _model_tokens(slug: str, model: str, usage: Usage) -> None:
    for kind, value in (
        ("input", usage.prompt_tokens),
        ("output", usage.completion_tokens),
        ("cache_read", usage.cache_read_tokens),
        ("cache_write", usage.cache_write_tokens),
    ):
        _count(MODEL_TOKENS, value, {"workflow": slug, "model": model, "kind": kind})


# --- the interceptor: what no workflow module has to call -----------------------------------


class _Labels:
    """The run's workflow slug, read from its input when the run starts."""

    slug: str = "unknown"


class _Inbound(WorkflowInboundInterceptor):
    def __init__(self, next: WorkflowInboundInterceptor) -> None:
        super().__init__(next)
        self._labels = _Labels()

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound, self._labels))

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        slug = getattr(input.args[0], "workflow", None) if input.args else None
        if isinstance(slug, str) and slug:
            self._labels.slug = slug
        return await super().execute_workflow(input)

    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        try:
            super().handle_update_validator(input)
        except Exception as refusal:
            self._refused(input.update, refusal)
            raise

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        try:
            result = await super().handle_update_handler(input)
        except Exception as refusal:
            self._refused(input.update, refusal)
            raise
        if input.update in DELIVERY_HANDLERS:
            _count(DELIVERIES, 1, {"workflow": self._labels.slug, "update": input.update})
        return result

    def _refused(self, update: str, refusal: Exception) -> None:
        if update not in DELIVERY_HANDLERS:
            return
        error = refusal.type if isinstance(refusal, ApplicationError) else None
        attributes = {
            "workflow": self._labels.slug,
            "update": update,
            "error": error or type(refusal).__name__,
        }
        _count(REFUSALS, 1, attributes)


class _Outbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, labels: _Labels) -> None:
        super().__init__(next)
        self._labels = labels

    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        handle = super().start_activity(input)
        if input.activity == MODEL_ACTIVITY:
            slug = self._labels.slug

            def record(done: workflow.ActivityHandle[Any]) -> None:
                if done.cancelled() or done.exception() is not None:
                    return
                result = done.result()
                if isinstance(result, ModelCallResult):
                    _model_tokens(slug, result.model, result.usage)

            handle.add_done_callback(record)
        return handle


class WorkflowTelemetryInterceptor(Interceptor):
    """Counts deliveries, refusals and model tokens for every ``ArchmaxSession`` run."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound
