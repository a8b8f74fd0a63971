"""Rolling upgrades: a payload from a newer client or worker (a field this version does not
know) decodes on today's wire models, while what a user authors stays strictly parsed."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from archmax_temporal.client.loader import load_workflow, spec_hash
from archmax_temporal.client.testing import case_model, steps
from archmax_temporal.connection import DATA_CONVERTER
from archmax_temporal.workflows import models, spec
from archmax_temporal.workflows.contracts import host_tools, sandbox, workspace
from archmax_temporal.workflows.models import (
    DeliverInput,
    Message,
    Outcome,
    PendingInput,
    SendInput,
    SessionInput,
    SessionState,
    SessionSummary,
    SessionView,
    SubWorkflowReport,
    ToolCall,
    TrailStep,
    Variable,
)
from tests.support.paths import EXAMPLES

CONVERTER = pydantic_data_converter.payload_converter
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
WIRE_MODULES: tuple[ModuleType, ...] = (models, workspace, sandbox, host_tools)


def _models(module: ModuleType) -> list[type[BaseModel]]:
    """The pydantic models ``module`` itself defines."""
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseModel)
        and value.__module__ == module.__name__
    ]


def _newer(payload: Payload, edit: Any) -> Payload:
    """``payload`` as a newer version would send it: ``edit`` adds fields to its JSON."""
    data = json.loads(payload.data)
    edit(data)
    return Payload(metadata=payload.metadata, data=json.dumps(data).encode())


def _outcome() -> Outcome:
    return Outcome(
        session_id="wire-1",
        kind="parked",
        disposition="turn",
        status="awaiting_input",
        state="ask",
        parked_channel="input",
        pending=PendingInput(state="ask", reason="the order number", parked_at=NOW),
        reply="Which order?",
        variables={"title": Variable(value="Order", locked=True)},
        trail=[TrailStep(to="ask", kind="trigger", reason="email", ts=NOW)],
    )


def _summary() -> SessionSummary:
    return SessionSummary(
        session_id="wire-1",
        workflow="support",
        status="awaiting_input",
        classification="open",
        spec_hash="abc",
        trigger="email",
    )


def _state() -> SessionState:
    return SessionState(
        status="running",
        state="ask",
        transcript=[
            Message(role="user", content="hi", state="ask"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="ls")], state="ask"),
        ],
        trail=[TrailStep(to="ask", kind="trigger", ts=NOW)],
    )


class TestNewerPayloadsDecode:
    """A field added by a newer version is ignored, at the top and deep inside."""

    @pytest.mark.parametrize(
        "value",
        [
            _outcome(),
            _summary(),
            _state(),
            SessionView(summary=_summary(), transcript=_state().transcript, trail=[]),
            SubWorkflowReport(session_id="wire-1.child-1", outcome=_outcome()),
            SendInput(message="hello", trigger="email", variables={"a": 1}),
            DeliverInput(trigger="email_reply", variables={"reply": "ORD-1"}),
            workspace.WorkspaceToolResult(content="done"),
            sandbox.SandboxRunResult(value={"ok": True}, returned_nothing=False),
            host_tools.HostToolCall(session_id="wire-1", tool="lookup", arguments={"id": 1}),
        ],
        ids=lambda value: type(value).__name__,
    )
    def test_an_added_top_level_field_is_ignored(self, value: BaseModel) -> None:
        """Today's model decodes the newer payload to the value it knows."""
        (payload,) = CONVERTER.to_payloads([value])

        def add(data: dict[str, Any]) -> None:
            data["added_in_a_later_release"] = {"any": ["shape"]}

        (decoded,) = CONVERTER.from_payloads([_newer(payload, add)], [type(value)])
        assert decoded == value

    def test_added_nested_fields_are_ignored(self) -> None:
        """Fields added inside nested models (a pending park, a trail step, a variable)
        decode too."""
        (payload,) = CONVERTER.to_payloads([_outcome()])

        def add(data: dict[str, Any]) -> None:
            data["pending"]["priority"] = "high"
            data["trail"][0]["actor"] = "a newer runtime"
            data["variables"]["title"]["source"] = "host"
            data["usage"]["reasoning_tokens"] = 12

        (decoded,) = CONVERTER.from_payloads([_newer(payload, add)], [Outcome])
        assert decoded == _outcome()


class TestStrictness:
    """Wire models ignore unknown fields; models of what a user authors refuse them."""

    @pytest.mark.parametrize("module", WIRE_MODULES, ids=lambda m: m.__name__)
    def test_every_wire_model_ignores_unknown_fields(self, module: ModuleType) -> None:
        """No model that travels between client and worker refuses a newer field."""
        strict = [m.__name__ for m in _models(module) if m.model_config.get("extra") != "ignore"]
        assert _models(module) and strict == []

    @pytest.mark.parametrize("module", [spec, case_model, steps], ids=lambda m: m.__name__)
    def test_authored_models_stay_strict(self, module: ModuleType) -> None:
        """The workflow.yaml spec and case files never silently drop a misspelt key."""
        lax = [m.__name__ for m in _models(module) if m.model_config.get("extra") == "ignore"]
        assert _models(module) and lax == []


def test_importing_the_wire_models_builds_none_and_a_worker_builds_them_all() -> None:
    """Importing the models stays cheap for a listing (schemas deferred); a worker's sandbox
    starts only once every project model is built, so no schema is built in a workflow task."""
    probe = (
        "from pydantic import BaseModel\n"
        "from archmax_temporal.workflows import models\n"
        "deferred = sorted(m.__name__ for m in (models.SessionState, models.SessionSummary)"
        " if not m.__pydantic_complete__)\n"
        "from archmax_temporal.worker import workflow_runner\n"
        "workflow_runner()\n"
        "def every(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from every(sub)\n"
        "left = sorted({m.__qualname__ for m in every(BaseModel)"
        " if m.__module__.startswith('archmax_temporal.') and not m.__pydantic_complete__})\n"
        "print(deferred, left)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "['SessionState', 'SessionSummary'] []"


@pytest.mark.parametrize(
    "slug_path", sorted(EXAMPLES.glob("*/workflows/*/workflow.yaml")), ids=lambda p: p.parent.name
)
def test_a_session_input_carries_its_spec_without_defaults(slug_path: Path) -> None:
    """A run's input (its start, a continue-as-new, a checkpoint) carries the spec without
    the fields at their defaults: about half the bytes, read back equal with the same hash."""
    loaded = load_workflow(slug_path.parents[2], slug_path.parent.name)
    start = SessionInput(
        session_id="s", workflow=loaded.slug, spec=loaded.spec, spec_hash=loaded.spec_hash
    )
    [payload] = DATA_CONVERTER.payload_converter.to_payloads([start])
    whole = loaded.spec.model_dump_json(by_alias=True).encode()
    sent = json.dumps(json.loads(payload.data)["spec"], separators=(",", ":")).encode()
    assert len(sent) < 0.7 * len(whole)
    [back] = DATA_CONVERTER.payload_converter.from_payloads([payload], [SessionInput])
    assert back == start and spec_hash(back.spec) == loaded.spec_hash
    edited = loaded.spec.model_copy(update={"disabled": True})  # off its default: carried
    [payload] = DATA_CONVERTER.payload_converter.to_payloads(
        [start.model_copy(update={"spec": edited})]
    )
    assert json.loads(payload.data)["spec"]["disabled"] is True
