"""The HTTP wire format (camelCase, archmax's field names):
:mod:`archmax_temporal.client.http.wire`."""

from __future__ import annotations

from datetime import UTC, datetime

from archmax_temporal.client.http.openapi import openapi_document
from archmax_temporal.client.http.wire import to_wire
from archmax_temporal.workflows.models import Outcome, PendingInput, Variable


class TestWire:
    def test_field_names_are_camel_cased_and_data_keys_are_not(self) -> None:
        outcome = Outcome(
            session_id="s-1",
            kind="parked",
            disposition="turn",
            status="awaiting_input",
            parked_channel="input",
            pending=PendingInput(
                state="clarify",
                reason="waiting",
                parked_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            ),
            variables={"conversation_id": Variable(value={"nested_key": 1}, locked=True)},
        )
        wire = to_wire(outcome)
        assert wire["sessionId"] == "s-1" and wire["parkedChannel"] == "input"
        assert wire["pending"]["parkedAt"] == "2026-01-02T03:04:05Z"
        assert wire["variables"] == {
            "conversation_id": {"value": {"nested_key": 1}, "locked": True}
        }

    def test_the_document_describes_exactly_what_to_wire_writes(self) -> None:
        schemas = openapi_document()["components"]["schemas"]
        outcome = Outcome(session_id="s", kind="completed", disposition="turn", status="completed")
        assert set(to_wire(outcome)) == set(schemas["Outcome"]["properties"])
        pending = schemas["PendingInput"]["properties"]
        assert {"parkedAt", "resumeAt"} <= set(pending)
