"""OpenTelemetry traces, optional (``pip install 'archmax-temporal[otel]'``).

Tracing is on when OpenTelemetry is installed and a tracer provider is set: by the host
(any SDK set-up of its own), or by :func:`configure_tracing` at an ``archmax`` entry point
when OTLP is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SERVICE_NAME``, default ``archmax``). Then
:func:`archmax_temporal.worker.connect` adds Temporal's ``TracingInterceptor`` to the client
(and so to every worker built on it): spans for starting and updating sessions, each
workflow run, each update and signal handled, each activity; archmax adds the GenAI span of
each model call (:func:`model_call_span`) and, from workflow code, spans for each turn,
tool call, hook and wake (:mod:`archmax_temporal.workflows.telemetry`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final

from temporalio.client import Interceptor

SERVICE_NAME: Final = "archmax"

GEN_AI_SYSTEM: Final = "openai"
"""``gen_ai.system`` / ``gen_ai.provider.name``: the wire protocol (any OpenAI-compatible
endpoint speaks it)."""


def _otel_installed() -> bool:
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


def tracing_active() -> bool:
    """Whether spans are recorded: OpenTelemetry installed and a real provider set. A process
    that has not imported OpenTelemetry has set no provider (nor can one be set lazily, short
    of ``OTEL_PYTHON_TRACER_PROVIDER``), so it is not imported to find that out: a command
    that traces nothing does not pay for the import."""
    if "opentelemetry.trace" not in sys.modules and not os.environ.get(
        "OTEL_PYTHON_TRACER_PROVIDER"
    ):
        return False
    if not _otel_installed():
        return False
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def configure_tracing(env: Mapping[str, str] | None = None) -> bool:
    """Export spans over OTLP (HTTP) when the environment names an endpoint and no provider
    is set yet; ``True`` when tracing is active afterwards."""
    env = os.environ if env is None else env
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if not endpoint or not _otel_installed() or tracing_active():
        return tracing_active()
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True


def flush_tracing(timeout_ms: int = 5000) -> None:
    """Export the spans still buffered (before a process leaves through ``os._exit``)."""
    if not tracing_active():
        return
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if callable(flush):
        flush(timeout_ms)


def tracing_interceptors() -> list[Interceptor]:
    """Temporal's ``TracingInterceptor`` when tracing is active, else nothing."""
    if not tracing_active():
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


@contextlib.contextmanager
def model_call_span(request_model: str | None) -> Iterator[Any]:
    """The GenAI client span of one model call attempt (``chat <model>``), a child of the
    activity's span; yields the span (or ``None`` when this worker does not trace: no
    provider, or no recording span around the activity)."""
    if not tracing_active():
        yield None
        return
    from opentelemetry import trace

    if not trace.get_current_span().is_recording():
        yield None
        return

    tracer = trace.get_tracer("archmax_temporal")
    name = f"chat {request_model}" if request_model else "chat"
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": GEN_AI_SYSTEM,
        "gen_ai.provider.name": GEN_AI_SYSTEM,
    }
    if request_model:
        attributes["gen_ai.request.model"] = request_model
    kind = trace.SpanKind.CLIENT
    with tracer.start_as_current_span(name, kind=kind, attributes=attributes) as span:
        yield span


def record_model_result(span: Any, result: Any, *, request_model: str | None) -> None:
    """The response's model, finish reason and token usage on the model call's span (with
    no model in the request, the worker's default answered: its name is the response's)."""
    if span is None or result is None:
        return
    model = getattr(result, "model", None)
    if model:
        span.set_attribute("gen_ai.response.model", str(model))
        if request_model is None:
            span.update_name(f"chat {model}")
            span.set_attribute("gen_ai.request.model", str(model))
    finish = getattr(result, "finish_reason", None)
    if finish:
        span.set_attribute("gen_ai.response.finish_reasons", [str(finish)])
    usage = getattr(result, "usage", None)
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.prompt_tokens))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.completion_tokens))
    calls = getattr(result, "tool_calls", None)
    if calls is not None:
        span.set_attribute("archmax.tool_calls", len(calls))
