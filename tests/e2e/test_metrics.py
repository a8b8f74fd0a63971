"""Metrics: the worker's Prometheus endpoint, scraped after real turns, holds Temporal's SDK
metrics and archmax's own, each counted once however often the workflow replays."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from archmax_temporal.worker import TemporalConnection, connect, metrics_runtime
from archmax_temporal.workflows import telemetry
from archmax_temporal.workflows.errors import SessionNotAwaitingInputError
from archmax_temporal.workflows.models import DeliverInput
from tests.support.agents import Scripted, copy_example, running_agent
from tests.support.agents import tool_call as call
from tests.support.scenarios import (
    ORDERS,
    SUPPORT_INBOX_PLAYBOOK,
    deliver_reply,
    park_in_clarify,
    write_gated,
)

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Scrape:
    """One scrape of ``/metrics``, parsed: samples by name, with their labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[tuple[str, dict[str, str], float]] = []
        for line in text.splitlines():
            match = _LINE.match(line)
            if match is None or line.startswith("#"):
                continue
            labels = dict(_LABEL.findall(match["labels"] or ""))
            self.samples.append((match["name"], labels, float(match["value"])))

    def value(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels``."""
        return sum(
            value
            for sample, have, value in self.samples
            if sample == name and all(have.get(k) == v for k, v in labels.items())
        )

    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}


@pytest.fixture(scope="module")
async def metered(env: WorkflowEnvironment) -> AsyncIterator[tuple[Client, str]]:
    """A client on a Temporal runtime exporting Prometheus metrics, and the endpoint."""
    address = f"127.0.0.1:{_free_port()}"
    runtime = metrics_runtime(address)
    target = env.client.service_client.config.target_host
    yield await connect(TemporalConnection(address=target), runtime=runtime), address


async def _scrape(address: str) -> Scrape:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://{address}/metrics", timeout=10)
    assert response.status_code == 200
    return Scrape(response.text)


async def test_a_park_deliver_and_refusal_are_counted_once_each(
    metered: tuple[Client, str], task_queue: str, tmp_path: Path, scripted: Scripted
) -> None:
    """After a parking turn, its delivery and a refused second delivery on a cache-less
    worker (every task replays), the endpoint counts each exactly once: turns by outcome,
    the park and the wake by channel, deliveries, the refusal by error type, model calls,
    their latency and tokens by workflow and model; Temporal's own metrics are beside them."""
    client, address = metered
    root = copy_example("support-inbox", tmp_path)
    server = scripted(SUPPORT_INBOX_PLAYBOOK)
    session = f"metrics-{task_queue}"
    async with running_agent(client, task_queue, root, "support-inbox", server) as agent:
        await park_in_clarify(agent, session)
        await deliver_reply(agent, session)
        with pytest.raises(SessionNotAwaitingInputError):
            await agent.workflow.deliver(
                session, trigger="email_reply", variables={"reply_body": "Again."}
            )
        # A signal cannot be refused to its sender: the session drops it and counts it.
        await client.get_workflow_handle(session).signal(
            "deliver", DeliverInput(trigger="email_reply", variables={"reply_body": "Late."})
        )
        scrape = await _scrape(address)
        for _ in range(100):
            if scrape.value(
                "archmax_refusals_total", update="deliver_signal", task_queue=task_queue
            ):
                break
            await asyncio.sleep(0.1)
            scrape = await _scrape(address)
    ours = {"task_queue": task_queue, "workflow": "support-inbox"}
    assert scrape.value("archmax_turns_total", **ours) == 2
    assert scrape.value("archmax_turns_total", outcome="awaiting_input", disposition="turn", **ours)
    assert scrape.value("archmax_turns_total", outcome="completed", disposition="deliver", **ours)
    assert scrape.value("archmax_parks_total", channel="input", **ours) == 1
    assert scrape.value("archmax_wakes_total", channel="input", **ours) == 1
    assert scrape.value("archmax_deliveries_total", update="send", **ours) == 1
    assert scrape.value("archmax_deliveries_total", update="deliver", **ours) == 1
    refused = {"update": "deliver", "error": "SessionNotAwaitingInputError"}
    assert scrape.value("archmax_refusals_total", **refused, **ours) == 1
    signal = {"update": "deliver_signal", "error": "SessionNotAwaitingInputError"}
    assert scrape.value("archmax_refusals_total", **signal, **ours) == 1
    assert scrape.value("archmax_deliveries_total", update="deliver_signal", **ours) == 0
    calls = scrape.value("archmax_model_calls_total", task_queue=task_queue, model="scripted")
    assert calls >= 2
    assert scrape.value("archmax_model_calls_total", task_queue=task_queue, outcome="ok") == calls
    latency = {"task_queue": task_queue, "model": "scripted"}
    assert scrape.value("archmax_model_call_latency_count", **latency) == calls
    # what each turn's save wrote to the folder store: one fsync a turn (the trail's), and
    # the spec's snapshot once a worker
    persist = {"task_queue": task_queue, "activity": "archmax.store.persist_turn"}
    assert scrape.value("archmax_store_fsyncs_total", **persist) in (2, 3)
    assert scrape.value("archmax_store_writes_total", **persist) >= 2
    assert scrape.value("archmax_store_written_bytes_total", **persist) > 0
    assert scrape.value("archmax_model_call_latency_sum", **latency) > 0
    assert scrape.value("archmax_model_tokens_total", model="scripted", kind="input", **ours) > 0
    assert scrape.value("archmax_model_tokens_total", model="scripted", kind="output", **ours) > 0
    assert {"temporal_request_total", "temporal_workflow_task_execution_latency_count"} <= (
        scrape.names()
    )


async def test_hook_verdicts_and_blocked_tool_calls_are_counted(
    metered: tuple[Client, str], task_queue: str, tmp_path: Path, scripted: Scripted
) -> None:
    """A read the state does not allow is counted blocked with its rule; a before hook's
    veto and its later ok are counted by verdict."""
    client, address = metered
    write_gated(tmp_path, [{"id": "ORD-1001"}])
    advance = {"tool_calls": [call("archmax_advance", to="review", reason="ready")]}
    server = scripted(
        json.dumps(
            {
                "rules": [
                    {
                        "when": {"state": "intake", "last_tool_result": "/no approval yet/"},
                        "reply": {
                            "tool_calls": [
                                call("archmax_set_variables", variables={"approved": True})
                            ]
                        },
                    },
                    {"when": {"state": "intake", "last_tool": "read_file"}, "reply": advance},
                    {
                        "when": {"state": "intake", "last_tool": "archmax_set_variables"},
                        "reply": advance,
                    },
                    {
                        "when": {"state": "intake"},
                        "reply": {"tool_calls": [call("read_file", file_path=ORDERS)]},
                    },
                    {"when": {"state": "review"}, "reply": {"content": "Reviewed."}},
                ]
            }
        )
    )
    async with running_agent(client, task_queue, tmp_path, "gated", server) as agent:
        outcome = await agent.workflow.send(f"gated-{task_queue}", "Please review.")
    assert outcome.status == "completed"
    scrape = await _scrape(address)
    ours = {"task_queue": task_queue, "workflow": "gated"}
    hook = {"phase": "before", "kind": "script"}
    assert scrape.value("archmax_hook_verdicts_total", verdict="veto", **hook, **ours) == 1
    assert scrape.value("archmax_hook_verdicts_total", verdict="ok", **hook, **ours) == 1
    blocked = scrape.value("archmax_tool_calls_blocked_total", tool="read_file", **ours)
    assert blocked == 1
    rules = {labels.get("rule") for name, labels, _ in scrape.samples if "blocked" in name}
    assert rules and None not in rules and "refused" not in rules


def test_every_metric_is_defined_once_with_a_description() -> None:
    """The registry names each metric once, each with a description."""
    names = [metric.name for metric in telemetry.METRICS]
    assert len(names) == len(set(names))
    assert all(m.name.startswith("archmax_") and m.description for m in telemetry.METRICS)
