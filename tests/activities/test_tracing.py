"""Traces: with a tracer provider set, a session's turns, model calls (GenAI attributes), tool
calls, hooks, wakes and deliveries are spans of one trace, read from an in-memory exporter;
a replaying worker adds none twice."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.activities.tracing import tracing_active, tracing_interceptors
from archmax_temporal.worker import TemporalConnection, connect
from tests.support.agents import Scripted, copy_example, running_agent
from tests.support.agents import tool_call as call
from tests.support.scenarios import (
    ORDERS,
    SUPPORT_INBOX_PLAYBOOK,
    deliver_reply,
    park_in_clarify,
    write_gated,
)

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider, exporting to memory; unset again afterwards so the
    rest of the suite runs untraced."""
    memory = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    yield memory
    provider.shutdown()
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
async def traced(env: WorkflowEnvironment, exporter: InMemorySpanExporter) -> Client:
    exporter.clear()
    target = env.client.service_client.config.target_host
    return await connect(TemporalConnection(address=target))


@dataclass(frozen=True)
class Span:
    """A finished span, as the assertions read it."""

    name: str
    attributes: dict[str, Any]
    span_id: int
    parent_id: int | None
    trace_id: int
    kind: Any
    start: int


def finished(exporter: InMemorySpanExporter) -> list[Span]:
    spans = []
    for span in exporter.get_finished_spans():
        assert span.context is not None
        spans.append(
            Span(
                name=span.name,
                attributes=dict(span.attributes or {}),
                span_id=span.context.span_id,
                parent_id=span.parent.span_id if span.parent else None,
                trace_id=span.context.trace_id,
                kind=span.kind,
                start=span.start_time or 0,
            )
        )
    return spans


def tree(spans: Sequence[Span]) -> str:
    """The span tree, indented by parent, in start order (for reading a trace)."""
    ids = {span.span_id for span in spans}
    children: dict[int | None, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start):
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            keys = sorted(k for k in span.attributes if not k.startswith("temporal"))
            shown = ", ".join(f"{k}={span.attributes[k]}" for k in keys)
            lines.append(f"{'  ' * depth}{span.name}" + (f"  [{shown}]" if shown else ""))
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


async def test_a_session_is_one_trace_with_turn_model_and_delivery_spans(
    traced: Client,
    exporter: InMemorySpanExporter,
    task_queue: str,
    tmp_path: Path,
    scripted: Scripted,
) -> None:
    """Park and deliver on a cache-less worker: one trace per firing from the client's call
    down to each model call's GenAI span; each turn and the wake once."""
    assert tracing_active() and tracing_interceptors()
    root = copy_example("support-inbox", tmp_path)
    server = scripted(SUPPORT_INBOX_PLAYBOOK)
    session = f"traced-{task_queue}"
    async with running_agent(traced, task_queue, root, "support-inbox", server) as agent:
        await park_in_clarify(agent, session)
        await deliver_reply(agent, session)
    spans = finished(exporter)
    (tmp_path / "trace.txt").write_text(tree(spans))
    names = [span.name for span in spans]
    turns = [s for s in spans if s.name == "archmax.turn"]
    assert [s.attributes["archmax.outcome"] for s in turns] == ["awaiting_input", "completed"]
    assert {s.attributes["archmax.disposition"] for s in turns} == {"turn", "deliver"}
    assert all(s.attributes["temporalWorkflowID"] == session for s in turns)
    assert [s.attributes["archmax.channel"] for s in spans if s.name == "archmax.wake"] == ["input"]
    assert "HandleUpdate:deliver" in names and any(
        n.startswith("StartWorkflowUpdate") for n in names
    )
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) >= 2
    by_id = {s.span_id: s for s in spans}
    for chat in chats:
        attributes = chat.attributes
        assert chat.name == "chat scripted" and chat.kind == trace.SpanKind.CLIENT
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "scripted"
        assert attributes["gen_ai.response.model"] == "scripted"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.parent_id is not None
        parent = by_id[chat.parent_id]
        assert parent.name == "RunActivity:archmax.model.complete"
    # The session's run is one trace: its start, the deliver update, both turns, every
    # model call.
    traces = {s.trace_id for s in turns}
    assert len(traces) == 1
    members = {s.name for s in spans if s.trace_id in traces}
    assert {"HandleUpdate:deliver", "RunActivity:archmax.model.complete", "chat scripted"} <= (
        members
    )
    print(tree([s for s in spans if s.trace_id in traces]))


async def test_hooks_and_tool_calls_are_spans(
    traced: Client,
    exporter: InMemorySpanExporter,
    task_queue: str,
    tmp_path: Path,
    scripted: Scripted,
) -> None:
    """A before hook's veto and ok, and a blocked read, each a span with its outcome."""
    write_gated(tmp_path)
    advance = {"tool_calls": [call("archmax_advance", to="review", reason="ready")]}
    approve = {"tool_calls": [call("archmax_set_variables", variables={"approved": True})]}
    rules = [
        {"when": {"state": "intake", "last_tool_result": "/no approval yet/"}, "reply": approve},
        {"when": {"state": "intake", "last_tool": "read_file"}, "reply": advance},
        {"when": {"state": "intake", "last_tool": "archmax_set_variables"}, "reply": advance},
        {
            "when": {"state": "intake"},
            "reply": {"tool_calls": [call("read_file", file_path=ORDERS)]},
        },
        {"when": {"state": "review"}, "reply": {"content": "Reviewed."}},
    ]
    server = scripted(json.dumps({"rules": rules}))
    async with running_agent(traced, task_queue, tmp_path, "gated", server) as agent:
        outcome = await agent.workflow.send(f"traced-gated-{task_queue}", "Please review.")
    assert outcome.status == "completed"
    spans = finished(exporter)
    hooks = [s.attributes for s in spans if s.name == "archmax.hook"]
    assert [(h["archmax.phase"], h["archmax.verdict"]) for h in hooks] == [
        ("before", "veto"),
        ("before", "ok"),
    ]
    tools = [s.attributes for s in spans if s.name == "archmax.tool"]
    blocked = [t for t in tools if t["archmax.tool.status"] == "blocked"]
    assert [t["gen_ai.tool.name"] for t in blocked] == ["read_file"] and blocked[0][
        "archmax.tool.rule"
    ]
    assert {"archmax_advance", "archmax_set_variables"} <= {t["gen_ai.tool.name"] for t in tools}
    assert "RunActivity:archmax.sandbox.run" in {s.name for s in spans} or any(
        s.name.startswith("RunActivity:") and "sandbox" in s.name for s in spans
    )
