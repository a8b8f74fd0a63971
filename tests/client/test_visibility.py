"""``archmax sessions`` costs a connection and a page: its import path loads neither the host
nor the worker (nor the model client, the HTTP server, the object store), and a page is
decoded from the raw visibility rows to exactly what the client's own decoding gives."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import Payload, SearchAttributes
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.converter import DataConverter, PayloadCodec, decode_typed_search_attributes
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client import visibility
from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.workflows import search_attributes as sa
from archmax_temporal.workflows.contracts import LISTED_MEMO, WORKFLOW_NAME
from archmax_temporal.workflows.errors import ConfigurationError
from archmax_temporal.workflows.models import (
    DecisionEdge,
    PendingDecision,
    PendingInput,
    SessionSummary,
    Usage,
)
from archmax_temporal.workflows.projections import PublishedListing
from tests.support.agents import Scripted, running_agent, write_workflow

DESK = """
title: Desk
states:
  intake:
    triggers: { manual: {} }
    instructions: Say noted.
"""

NOT_LOADED = (
    "archmax_temporal.client.host",
    "archmax_temporal.client.events",
    "archmax_temporal.client.loader",
    "archmax_temporal.activities.store",
    "archmax_temporal.live",
    "archmax_temporal.worker",
    "archmax_temporal.workflows.session",
    "temporalio.worker",
    "openai",
    "starlette",
    "obstore",
    "yaml",
    "opentelemetry",  # no OTLP endpoint configured: nothing to trace
)
"""What ``archmax sessions`` has no use for."""

_LOADED = """
import json, os, sys
from archmax_temporal.client.cli.app import run_cli
code = run_cli(sys.argv[1:])
with open(os.environ["LOADED_FILE"], "w") as out:
    json.dump(sorted(sys.modules), out)
os._exit(code)
"""


def test_archmax_sessions_loads_neither_the_host_nor_the_worker(
    client: Client, tmp_path: Path
) -> None:
    loaded_file = tmp_path / "loaded.json"
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("OTEL_")},
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "ARCHMAX_TASK_QUEUE": f"imports-{uuid.uuid4().hex[:8]}",
        "ARCHMAX_ROOT": str(tmp_path),
        "LOADED_FILE": str(loaded_file),
    }
    for argv in (["sessions"], ["sessions", "--json", "--status", "awaiting_input"]):
        done = subprocess.run(
            [sys.executable, "-c", _LOADED, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        if "--json" in argv:
            assert json.loads(done.stdout) == []
        else:
            assert "No durable sessions found." in done.stderr
        loaded = set(json.loads(loaded_file.read_text()))
        assert "archmax_temporal.client.visibility" in loaded  # the listing did run
        assert sorted(m for m in NOT_LOADED if m in loaded) == []


class _Passing(PayloadCodec):
    """A codec that changes nothing: the listing must still go through it."""

    def __init__(self) -> None:
        self.decoded = 0

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.decoded += len(payloads)
        return list(payloads)


async def test_a_page_decodes_the_raw_rows_as_the_client_does(
    client: Client, tmp_path: Path
) -> None:
    """Runs no worker ever takes (their memo and search attributes set at start, as a
    session's settled turn leaves them): a parked one, one awaiting a decision whose
    deadline passed, a finished one, one with no memo yet (its status from the search
    attributes) and one never admitted (``new``: no session). The page read from the raw
    rows equals the summaries the client's own decoding gives, with and without a codec."""
    queue = f"fast-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC).replace(microsecond=0)
    parked = PendingInput(
        state="clarify", reason="the order id", parked_at=now, resume_at=now - timedelta(days=2)
    )
    decision = PendingDecision(
        state="approve",
        title="Refund?",
        seq=3,
        transitions=[DecisionEdge(to="refund", description="pay it back")],
        created_at=now - timedelta(days=3),
        due_at=now - timedelta(days=2),
    )
    runs: dict[str, tuple[PublishedListing | None, str]] = {
        "parked": (
            PublishedListing(
                status="awaiting_input",
                state="clarify",
                spec_hash="h1",
                trigger="email_received",
                turns=2,
                pending_input=parked,
                variable_names=["conversation_id", "customer"],
                locked_names=["customer"],
                usage=Usage(requests=3, input_tokens=120, output_tokens=40),
            ),
            "awaiting_input",
        ),
        "deciding": (
            PublishedListing(
                status="awaiting_decision",
                state="approve",
                spec_hash="h2",
                pending_decision=decision,
                handoff="Please approve the refund",
            ),
            "awaiting_decision",
        ),
        "failed": (PublishedListing(status="failed", state="draft", rejected=None), "failed"),
        "unpublished": (None, "running"),
        "waking": (None, "awaiting_input"),  # no memo: its state and wake from the attributes
        "new": (None, "new"),
    }
    run = uuid.uuid4().hex[:8]
    for name, (listing, status) in runs.items():
        pairs: list[SearchAttributePair[Any]] = [
            SearchAttributePair(sa.WORKFLOW, "desk"),
            SearchAttributePair(sa.STATUS, status),
        ]
        if name in ("parked", "waking"):
            pairs += [
                SearchAttributePair(sa.STATE, "clarify"),
                SearchAttributePair(sa.RESUME_AT, now - timedelta(days=2)),
            ]
        await client.start_workflow(
            WORKFLOW_NAME,
            id=f"fast-{name}-{run}",
            task_queue=queue,
            memo={LISTED_MEMO: listing.model_dump(mode="json")} if listing else None,
            search_attributes=TypedSearchAttributes(pairs),
        )
    config = RuntimeConfig.from_env(root=tmp_path).with_overrides(task_queue=queue)
    codec = _Passing()
    coded = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=DataConverter(
            payload_converter_class=client.data_converter.payload_converter_class,
            payload_codec=codec,
        ),
    )
    expected_ids = {f"fast-{name}-{run}" for name in runs if name != "new"}
    deadline = asyncio.get_running_loop().time() + 60
    while True:  # visibility lags behind the starts
        fast, _ = await visibility.page(client, config, limit=100)
        if {s.session_id for s in fast} == expected_ids:
            break
        assert asyncio.get_running_loop().time() < deadline, [s.session_id for s in fast]
        await asyncio.sleep(0.2)
    through_codec, _ = await visibility.page(coded, config, limit=100)
    slow: list[SessionSummary] = []
    async for execution in client.list_workflows(visibility.listing_query(queue)):
        summary = await visibility.listed_summary(execution, polled=False)
        if summary.status != "new":
            slow.append(summary)

    def dumped(summaries: list[SessionSummary]) -> list[dict[str, object]]:
        return sorted((s.model_dump(mode="json") for s in summaries), key=str)

    assert dumped(fast) == dumped(slow) == dumped(through_codec)
    assert codec.decoded == 3  # the three memos went through the codec
    by_id = {s.session_id.split("-")[1]: s for s in fast}
    assert by_id["parked"].waiting_on == f"due 2 d ago — {visibility.NO_WORKER}"
    assert by_id["parked"].variables["customer"].locked
    assert not by_id["parked"].variables["conversation_id"].locked
    assert by_id["deciding"].waiting_on == f"deadline passed 2 d ago — {visibility.NO_WORKER}"
    assert by_id["failed"].waiting_on is None
    assert (by_id["unpublished"].status, by_id["unpublished"].state) == ("running", None)
    waking = by_id["waking"]
    assert (waking.status, waking.state) == ("awaiting_input", "clarify")
    assert waking.resume_at == now - timedelta(days=2)
    assert waking.waiting_on == f"due 2 d ago — {visibility.NO_WORKER}"
    narrowed, _ = await visibility.page(client, config, status="awaiting_input", limit=100)
    assert sorted(s.session_id for s in narrowed) == [f"fast-parked-{run}", f"fast-waking-{run}"]


def _payload(data: bytes, kind: str, encoding: bytes = b"json/plain") -> Payload:
    return Payload(metadata={"encoding": encoding, "type": kind.encode()}, data=data)


def test_listed_attributes_read_as_the_client_decodes_them() -> None:
    """A row's four listed attributes read directly (plain JSON of their registered type)
    or, for any other shape, through the client's decoding: the same values either way."""
    resume = b'"2026-12-20T10:00:00.5+01:00"'
    rows: list[dict[str, Payload]] = [
        {  # as a session upserts them, with attributes a summary never reads
            sa.WORKFLOW.name: _payload(b'"desk"', "Keyword"),
            sa.STATUS.name: _payload(b'"awaiting_input"', "Keyword"),
            sa.STATE.name: _payload(b'"clarify"', "Keyword"),
            sa.RESUME_AT.name: _payload(resume, "Datetime"),
            "BuildIds": _payload(b'["unversioned"]', "KeywordList"),
        },
        {sa.STATUS.name: _payload(b'"running"', "Keyword")},  # the rest unset
        {  # a one-item list, which the client reads as its item
            sa.WORKFLOW.name: _payload(b'["desk"]', "Keyword"),
            sa.STATUS.name: _payload(b'"running"', "Keyword"),
        },
        {sa.STATE.name: _payload(b'"clarify"', "Text")},  # registered as another type
        {sa.STATE.name: _payload(b'"clarify"', "Keyword")},
        {sa.STATE.name: _payload(b"", "")},  # no type: the client ignores it
    ]
    for fields in rows:
        attributes = SearchAttributes(indexed_fields=fields)
        expected = visibility.ListedAttributes.of(decode_typed_search_attributes(attributes))
        assert visibility.listed_attributes(attributes) == expected, fields
    first = visibility.listed_attributes(SearchAttributes(indexed_fields=rows[0]))
    assert first.resume_at == datetime(2026, 12, 20, 9, 0, 0, 500000, tzinfo=UTC)
    assert visibility.listed_attributes(SearchAttributes(indexed_fields=rows[2])).workflow == "desk"


def test_a_refusal_naming_another_attribute_or_of_another_kind_is_left_alone() -> None:
    """Only the server's refusal of one of archmax's own attributes is translated."""
    ours = RPCError(
        "invalid query: invalid search attribute: ArchmaxStatus",
        RPCStatusCode.INVALID_ARGUMENT,
        b"",
    )
    assert visibility.unregistered_search_attributes(ours, "prod") is not None
    for message, status in [
        ("invalid query: invalid search attribute: CustomerId", RPCStatusCode.INVALID_ARGUMENT),
        ("invalid search attribute: ArchmaxStatus", RPCStatusCode.UNAVAILABLE),
        ("malformed query", RPCStatusCode.INVALID_ARGUMENT),
    ]:
        error = RPCError(message, status, b"")
        assert visibility.unregistered_search_attributes(error, "prod") is None, message
    assert visibility.unregistered_search_attributes(ValueError("ArchmaxStatus")) is None


async def test_a_namespace_without_archmax_s_search_attributes_is_a_typed_error(
    client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
) -> None:
    """On a namespace that never registered archmax's search attributes, listing and a first
    firing are each a ``ConfigurationError`` that names the namespace, the attribute, the
    commands that register them and ``ARCHMAX_SEARCH_ATTRIBUTES=0``, and nothing starts
    (they were an ``RPCError`` shown as an unexpected error)."""
    namespace = f"bare-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86_400)
        )
    )
    bare = await Client.connect(
        client.service_client.config.target_host,
        namespace=namespace,
        data_converter=client.data_converter,
    )
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # the server's namespace cache takes a moment to know it
        try:
            await bare.count_workflows()
            break
        except RPCError:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.2)
    write_workflow(tmp_path, "desk", DESK)
    server = scripted('{"rules": [], "default": {"content": "Noted."}}')
    async with running_agent(bare, task_queue, tmp_path, "desk", server) as agent:
        with pytest.raises(ConfigurationError) as listed:
            await agent.sessions.list()
        with pytest.raises(ConfigurationError) as fired:
            await agent.workflow.send("never-started", "hello")
    for refused in (listed.value, fired.value):
        text = str(refused)
        assert f"namespace {namespace!r} has not registered" in text
        assert (
            f"temporal operator search-attribute create --namespace {namespace} "
            "--name ArchmaxWorkflow --name ArchmaxStatus --name ArchmaxState "
            "--name ArchmaxParkedChannel --type Keyword"
        ) in text
        assert "--name ArchmaxResumeAt --type Datetime" in text
        assert "ARCHMAX_SEARCH_ATTRIBUTES=0" in text
    assert "ArchmaxStatus" in str(listed.value)
    with pytest.raises(RPCError) as missing:
        await bare.get_workflow_handle("never-started").describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


class _Service:
    """A workflow service whose listing fails at once and whose task-queue description
    never answers."""

    def __init__(self) -> None:
        self.described = asyncio.Event()

    async def list_workflow_executions(self, *_: object, **__: object) -> object:
        await self.described.wait()  # the poll question is out before the page fails
        raise RPCError("visibility is down", RPCStatusCode.UNAVAILABLE, b"")

    async def describe_task_queue(self, *_: object, **__: object) -> object:
        self.described.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class _FailingClient:
    namespace = "default"

    def __init__(self) -> None:
        self.workflow_service = _Service()


async def test_a_page_that_fails_leaves_no_task_behind(tmp_path: Path) -> None:
    """Whether a worker polls is asked beside the page; when the page fails, that question
    is cancelled and awaited before the error is raised: no task is left pending (a pending
    one is later destroyed with a warning) and none holds an error nobody reads."""
    config = RuntimeConfig.from_env(root=tmp_path).with_overrides(task_queue="q")
    client: Any = _FailingClient()
    with pytest.raises(RPCError, match="visibility is down"):
        await visibility.page(client, config, limit=10)
    left = [task for task in asyncio.all_tasks() if "worker_polls" in repr(task)]
    assert left == []
