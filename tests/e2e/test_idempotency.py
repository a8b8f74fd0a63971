"""``idempotency_key`` on the host API, beyond tests/client/test_firing.py: a keyed firing that
names no session mints the same session on every retry (so Temporal can dedupe it there).
Over HTTP, ``Idempotency-Key`` is bound to its request and scoped to its caller."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.host import Agent
from archmax_temporal.client.http import ServeSettings
from archmax_temporal.client.http.problems import PROBLEM_JSON
from tests.support.agents import Scripted, copy_example, running_agent, write_workflow
from tests.support.http_harness import http_api
from tests.support.paths import EXAMPLES
from tests.support.scenarios import VAGUE, session_exists

ROOT = EXAMPLES / "support-inbox"
PLAYBOOK = ROOT / "workflows" / "support-inbox" / "playbook.yaml"


async def _accepted(agent: Agent, session_id: str) -> int:
    history = await agent.handle(session_id).fetch_history()
    kind = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == kind)


class TestIdempotencyKey:
    async def test_a_keyed_firing_that_mints_mints_the_same_session(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        server = scripted(PLAYBOOK)
        async with running_agent(
            client, task_queue, ROOT, "support-inbox", server, store=tmp_path / "s"
        ) as agent:
            first = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
            retry = await agent.workflow.send(None, VAGUE, idempotency_key="evt-9")
            accepted = await _accepted(agent, first.session_id)
            other = await agent.workflow.send(None, VAGUE, idempotency_key="evt-10")
        assert first.session_id == retry.session_id != other.session_id
        assert first.session_id.startswith("session-")
        assert retry == first
        assert accepted == 1


# --- over HTTP: a key is bound to its request and scoped to its caller ----------------------

INBOX = "support-inbox"
RECEIVED = f"/v1/workflows/{INBOX}/triggers/email_received"
MANUAL = f"/v1/workflows/{INBOX}/triggers/manual"
ALICE, BOB = "token-of-alice", "token-of-bob"
REPORT = """
states:
  compile:
    triggers:
      report_requested:
        requires: [{ name: company, type: string }]
    instructions: Compile the report.
"""


def _as(token: str, key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Idempotency-Key": key}


def _received(conversation: str, message: str = VAGUE) -> dict[str, Any]:
    return {"message": message, "variables": {"conversation_id": conversation}}


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    kind: str = response.json()["type"]
    return kind


class TestHttpKeys:
    async def test_the_same_key_with_another_body_is_422_never_the_first_outcome(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A key sent again with a different body is refused (422 IdempotencyKeyReusedError)
        and applies nothing, on a trigger and on a session route; the same body under the
        same key is still answered its first Outcome."""
        root = copy_example(INBOX, tmp_path)
        first_id, second_id = f"AAQk-{uuid.uuid4().hex[:8]}", f"AAQk-{uuid.uuid4().hex[:8]}"
        settings = ServeSettings(tokens=frozenset({ALICE}))
        async with http_api(
            client,
            task_queue,
            root,
            INBOX,
            scripted(PLAYBOOK),
            store=tmp_path / "s",
            settings=settings,
        ) as api:
            first = await api.http.post(
                RECEIVED, json=_received(first_id), headers=_as(ALICE, "k-1")
            )
            other = await api.http.post(
                RECEIVED, json=_received(second_id), headers=_as(ALICE, "k-1")
            )
            again = await api.http.post(
                RECEIVED, json=_received(first_id), headers=_as(ALICE, "k-1")
            )
            deliver = f"/v1/sessions/{first_id}/deliver"
            reply = {"trigger": "email_reply", "variables": {"reply_body": "It is ORD-1001."}}
            delivered = await api.http.post(deliver, json=reply, headers=_as(ALICE, "d-1"))
            changed = await api.http.post(
                deliver,
                json={**reply, "variables": {"reply_body": "No, ORD-2002."}},
                headers=_as(ALICE, "d-1"),
            )
            accepted = await _accepted(api.agent, first_id)
        assert first.status_code == 200 and first.json()["sessionId"] == first_id
        assert _problem(other, 422) == "IdempotencyKeyReusedError"
        assert "k-1" in other.json()["detail"]
        assert not await session_exists(client, second_id)
        assert again.json() == first.json()
        assert delivered.status_code == 200 and delivered.json()["kind"] == "completed"
        assert _problem(changed, 422) == "IdempotencyKeyReusedError"
        assert accepted == 2  # the firing and the delivery, once each

    async def test_a_minting_trigger_never_hands_one_callers_result_to_another(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """Two callers (two tokens) send the same key and body to a trigger that mints its
        session: each gets a session of its own; each caller's retry gets its own again."""
        root = copy_example(INBOX, tmp_path)
        settings = ServeSettings(tokens=frozenset({ALICE, BOB}))
        body = {"message": VAGUE}
        async with http_api(
            client,
            task_queue,
            root,
            INBOX,
            scripted(PLAYBOOK),
            store=tmp_path / "s",
            settings=settings,
        ) as api:
            alice = await api.http.post(MANUAL, json=body, headers=_as(ALICE, "evt-1"))
            bob = await api.http.post(MANUAL, json=body, headers=_as(BOB, "evt-1"))
            alice_again = await api.http.post(MANUAL, json=body, headers=_as(ALICE, "evt-1"))
            bob_again = await api.http.post(MANUAL, json=body, headers=_as(BOB, "evt-1"))
        assert alice.status_code == bob.status_code == 200, (alice.text, bob.text)
        assert alice.json()["sessionId"] != bob.json()["sessionId"]
        assert alice_again.json() == alice.json()
        assert bob_again.json() == bob.json()

    async def test_a_refused_request_leaves_its_key_free_for_the_corrected_one(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A refusal applies nothing, so the key is not spent on it: the corrected request
        under the same key fires."""
        write_workflow(tmp_path, "report", REPORT)
        model = scripted(json.dumps({"default": {"content": "done"}}))
        url = "/v1/workflows/report/triggers/report_requested"
        async with http_api(
            client, task_queue, tmp_path, "report", model, store=tmp_path / "s"
        ) as api:
            refused = await api.http.post(
                url, json={"session": "report-1"}, headers={"Idempotency-Key": "k-9"}
            )
            fixed = await api.http.post(
                url,
                json={"session": "report-1", "variables": {"company": "Acme"}},
                headers={"Idempotency-Key": "k-9"},
            )
        assert _problem(refused, 422) == "TriggerInputError"
        assert fixed.status_code == 200, fixed.text
        assert fixed.json()["kind"] == "completed"
