"""What the approvals API tests and the inbox's browser tests share: a root of two workflows
with a human state (``refund-review`` and a copy of it), a server behind a bearer token, and
sessions parked at the human state."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.http import ServeSettings
from tests.support.agents import copy_example
from tests.support.http_harness import Api
from tests.support.paths import EXAMPLES

REFUND = "refund-review"
EU = "refund-review-eu"
"""A second workflow: refund-review under another slug (the same states, the same playbook)."""

PLAYBOOK = EXAMPLES / REFUND / "workflows" / REFUND / "playbook.yaml"
TOKEN = "inbox-test-token-not-a-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SETTINGS = ServeSettings(tokens=frozenset({TOKEN}))
HANDOFF = "Your refund request for ORD-1001 is now with a person in finance for review."
APPROVED = "Good news: your refund for ORD-1001 is approved."
STILL_WITH_FINANCE = "Your request is still with finance; a person will decide it shortly."

VISIBLE_SECONDS = 20.0
"""How long a test waits for visibility to show what a session published."""


def two_workflows(tmp_path: Path) -> Path:
    """A private root holding refund-review and its copy refund-review-eu."""
    root = copy_example(REFUND, tmp_path)
    shutil.copytree(root / "workflows" / REFUND, root / "workflows" / EU)
    return root


def ticket() -> str:
    return f"T-{uuid.uuid4().hex[:10]}"


REQUEST = "Hi, I'd like a refund for order ORD-1001."


async def park(
    api: Api, session_id: str, workflow: str = REFUND, *, message: str = REQUEST
) -> dict[str, Any]:
    """Fire refund_requested for ``session_id``: the session parks at refund-review."""
    answer = await api.http.post(
        f"/v1/workflows/{workflow}/triggers/refund_requested",
        json={"message": message, "variables": {"ticket_id": session_id}},
        headers=AUTH,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["kind"], body["parkedChannel"]) == ("parked", "decision"), body
    return body


async def listed(
    http: httpx.AsyncClient, expected: set[str], **params: str
) -> list[dict[str, Any]]:
    """``GET /v1/approvals`` once visibility lists exactly ``expected`` (by session id)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + VISIBLE_SECONDS
    approvals: list[dict[str, Any]] = []
    while loop.time() < deadline:
        answer = await http.get("/v1/approvals", params=params, headers=AUTH)
        assert answer.status_code == 200, answer.text
        approvals = answer.json()["approvals"]
        if {a["sessionId"] for a in approvals} == expected:
            return approvals
        await asyncio.sleep(0.1)
    raise AssertionError(f"approvals {approvals} never became {sorted(expected)}")


async def accepted_updates(client: Client, session_id: str) -> int:
    """How many updates the session's history accepted (a refused one adds none)."""
    history = await client.get_workflow_handle(session_id).fetch_history()
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == accepted)


__all__ = [
    "APPROVED",
    "AUTH",
    "EU",
    "HANDOFF",
    "PLAYBOOK",
    "REFUND",
    "REQUEST",
    "SETTINGS",
    "STILL_WITH_FINANCE",
    "TOKEN",
    "accepted_updates",
    "listed",
    "park",
    "ticket",
    "two_workflows",
]
