"""``archmax serve`` over real HTTP against the real dev server: triggers in (the seed's
session precedence and send rule), the session routes, every refusal as a problem document,
``Idempotency-Key`` as the update id, and ``respond-async``."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from archmax_temporal.client.config import RuntimeConfig
from archmax_temporal.client.http import ServeSettings, create_app
from archmax_temporal.client.http.problems import PROBLEM_JSON
from tests.support.agents import Scripted, copy_example, write_workflow
from tests.support.http_harness import Api, http_api, serving
from tests.support.paths import EXAMPLES
from tests.support.scenarios import VAGUE, session_exists

INBOX = "support-inbox"
REFUND = "refund-review"
REQUEST = "Hi, I'd like a refund for order ORD-1001."


def _playbook(example: str) -> Path:
    return EXAMPLES / example / "workflows" / example / "playbook.yaml"


def _conversation() -> str:
    return f"AAQk-{uuid.uuid4().hex[:8]}"


async def _accepted_updates(client: Client, session_id: str) -> int:
    history = await client.get_workflow_handle(session_id).fetch_history()
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == accepted)


def _problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = response.json()
    assert body["type"] == kind, body
    assert body["status"] == status and body["detail"]
    return body


async def _park(api: Api, conversation: str, **headers: str) -> httpx.Response:
    return await api.http.post(
        f"/v1/workflows/{INBOX}/triggers/email_received",
        json={"message": VAGUE, "variables": {"conversation_id": conversation}},
        headers=headers,
    )


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    return copy_example(INBOX, tmp_path)


@pytest.fixture
def refund(tmp_path: Path) -> Path:
    return copy_example(REFUND, tmp_path)


class TestTriggers:
    async def test_a_firing_starts_a_session_and_the_next_delivers_into_it(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """email_received routes by the trigger's `session: conversation_id` and parks;
        email_reply on the same conversation is delivered into the parked session."""
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            first = await _park(api, conversation)
            second = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/email_reply",
                json={
                    "variables": {"conversation_id": conversation, "reply_body": "It's ORD-1001."}
                },
            )
        assert first.status_code == 200, first.text
        parked = first.json()
        assert parked["sessionId"] == conversation
        assert (parked["kind"], parked["disposition"], parked["parkedChannel"]) == (
            "parked",
            "turn",
            "input",
        )
        assert parked["pending"]["reason"] == "the customer's reply naming the order"
        assert "Which order" in parked["reply"]
        assert parked["exit"] is None
        assert second.status_code == 200, second.text
        done = second.json()
        assert (done["sessionId"], done["kind"], done["disposition"]) == (
            conversation,
            "completed",
            "deliver",
        )
        assert done["exit"] == {"success": True, "code": None, "reason": None}
        assert "ORD-1001" in done["reply"]
        assert done["variables"]["reply_body"] == {"value": "It's ORD-1001.", "locked": True}

    async def test_a_firing_for_a_session_at_a_human_state_is_a_reply(
        self, client: Client, task_queue: str, scripted: Scripted, refund: Path, tmp_path: Path
    ) -> None:
        """A second refund_requested on the same ticket is answered where the session stands
        (disposition reply, still parked); /decide then routes it."""
        ticket = f"T-{uuid.uuid4().hex[:8]}"
        model = scripted(_playbook(REFUND))
        url = f"/v1/workflows/{REFUND}/triggers/refund_requested"
        async with http_api(client, task_queue, refund, REFUND, model, store=tmp_path / "s") as api:
            first = await api.http.post(
                url, json={"message": REQUEST, "variables": {"ticket_id": ticket}}
            )
            again = await api.http.post(
                url, json={"message": "Any news?", "variables": {"ticket_id": ticket}}
            )
            decided = await api.http.post(
                f"/v1/sessions/{ticket}/decide",
                json={"to": "refund-closed", "comment": "Verified."},
            )
        assert (first.json()["kind"], first.json()["parkedChannel"]) == ("parked", "decision")
        assert first.json()["pending"]["transitions"][0]["to"] == "refund-closed"
        body = again.json()
        assert (body["disposition"], body["kind"], body["status"]) == (
            "reply",
            "parked",
            "awaiting_decision",
        )
        assert (
            body["reply"] == "Your request is still with finance; a person will decide it shortly."
        )
        assert (decided.json()["disposition"], decided.json()["kind"]) == ("decide", "completed")
        assert decided.json()["reply"] == "Good news: your refund for ORD-1001 is approved."

    async def test_a_file_in_a_multipart_firing_is_placed_and_its_variable_seeded(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """Each file part is named by the variable it seeds; the bytes arrive exactly."""
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        store = tmp_path / "s"
        async with http_api(client, task_queue, inbox, INBOX, model, store=store) as api:
            response = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/email_received",
                data={
                    "message": VAGUE,
                    "variables": json.dumps({"conversation_id": conversation}),
                },
                files={"invoice": ("invoice.bin", b"\x00\xffbytes")},
            )
        assert response.status_code == 200, response.text
        seeded = response.json()["variables"]["invoice"]
        assert seeded == {"value": "scratchpad/attachments/invoice.bin", "locked": True}
        placed = store / conversation / "scratchpad" / "attachments" / "invoice.bin"
        assert placed.read_bytes() == b"\x00\xffbytes"

    async def test_an_unknown_trigger_is_404_lists_the_declared_and_starts_nothing(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            response = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/sms_received",
                json={"message": VAGUE, "session": conversation},
            )
            unknown_workflow = await api.http.post(
                "/v1/workflows/no-such-flow/triggers/manual", json={}
            )
            malformed = await api.http.post("/v1/workflows/Not_A_Slug/triggers/manual", json={})
        body = _problem(response, 404, "UnknownTriggerError")
        assert "manual, email_received, email_reply" in body["detail"]
        assert not await session_exists(client, conversation)
        assert "support-inbox" in _problem(unknown_workflow, 404, "UnknownWorkflowError")["detail"]
        _problem(malformed, 400, "MalformedRequestError")

    async def test_refusals_before_the_session_is_touched(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """Bad variable names (422), a malformed session id (400) or session path (400), a
        body that is not JSON (400), of the wrong shape (422) or of another media type (415):
        each refused with its problem type, and no session started."""
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        url = f"/v1/workflows/{INBOX}/triggers/email_received"
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            post = api.http.post
            names = await post(url, json={"session": conversation, "variables": {"Bad": 1}})
            bad_id = await post(url, json={"session": "line\nbreak"})
            bad_path = await post(url, json={"sessionPath": "a..b", "variables": {"a": 1}})
            not_json = await post(
                url, content=b"{nope", headers={"content-type": "application/json"}
            )
            shape = await post(url, json={"session": conversation, "mesage": "typo"})
            typed = await post(url, json={"session": conversation, "variables": []})
            media = await post(url, content=b"hi", headers={"content-type": "text/plain"})
            bad_key = await post(url, json={}, headers={"Idempotency-Key": "has space"})
        _problem(names, 422, "InvalidVariableNameError")
        _problem(bad_id, 400, "InvalidSessionIdError")
        _problem(bad_path, 400, "InvalidSessionIdError")
        _problem(not_json, 400, "MalformedRequestError")
        assert "mesage" in _problem(shape, 422, "RequestValidationError")["detail"]
        _problem(typed, 422, "RequestValidationError")
        _problem(media, 415, "UnsupportedMediaTypeError")
        _problem(bad_key, 400, "MalformedRequestError")
        assert not await session_exists(client, conversation)

    async def test_a_missing_required_input_is_422(
        self, client: Client, task_queue: str, scripted: Scripted, tmp_path: Path
    ) -> None:
        """A trigger's `requires:` is checked by the session's validator (TriggerInputError)."""
        root = tmp_path / "root"
        write_workflow(
            root,
            "orders",
            "title: Orders\nstates:\n  look:\n    triggers:\n      order_placed:\n"
            "        requires: [order_id]\n    instructions: Look the order up.\n",
        )
        model = scripted("rules: []\ndefault: { content: ok }\n")
        async with http_api(client, task_queue, root, "orders", model, store=tmp_path / "s") as api:
            missing = await api.http.post("/v1/workflows/orders/triggers/order_placed", json={})
            given = await api.http.post(
                "/v1/workflows/orders/triggers/order_placed",
                json={"variables": {"order_id": "A-1"}},
            )
        assert "order_id" in _problem(missing, 422, "TriggerInputError")["detail"]
        assert given.status_code == 200 and given.json()["kind"] == "completed"


class TestSessionRoutes:
    async def test_deliver_decide_reply_and_messages_refuse_a_session_in_the_wrong_shape(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """Each refusal maps its typed error: not parked for input (409), not at a human state
        (409), an unknown session (404), a delivery with an empty trigger (422), a body
        without its required field (422)."""
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            await _park(api, conversation)
            s = f"/v1/sessions/{conversation}"
            post = api.http.post
            decide = await post(f"{s}/decide", json={"to": "answer"})
            reply = await post(f"{s}/reply", json={"message": "hello?"})
            empty_trigger = await post(f"{s}/deliver", json={"trigger": " "})
            no_trigger = await post(f"{s}/deliver", json={"variables": {}})
            unknown = await post("/v1/sessions/nobody-here/deliver", json={"trigger": "x"})
            unknown_message = await post("/v1/sessions/nobody-here/messages", json={"message": "x"})
            bad_id = await post(f"/v1/sessions/{'x' * 256}/deliver", json={"trigger": "x"})
            control = await post("/v1/sessions/a%01b/deliver", json={"trigger": "x"})
            slashed = await post("/v1/sessions/mail%2F42/deliver", json={"trigger": "x"})
            via_message = await post(
                f"{s}/messages",
                json={"message": "Which order? The usual one.", "trigger": "email_reply"},
            )
            delivered = await post(
                f"{s}/deliver",
                json={"trigger": "email_reply", "variables": {"reply_body": "ORD-1001"}},
            )
            again = await post(f"{s}/deliver", json={"trigger": "email_reply"})
        _problem(decide, 409, "SessionNotParkedError")
        _problem(reply, 409, "SessionNotParkedError")
        _problem(empty_trigger, 422, "MissingDeliveryTriggerError")
        _problem(no_trigger, 422, "RequestValidationError")
        _problem(unknown, 404, "SessionNotFoundError")
        _problem(unknown_message, 404, "SessionNotFoundError")
        _problem(bad_id, 400, "InvalidSessionIdError")
        _problem(control, 400, "InvalidSessionIdError")
        assert "'mail/42'" in _problem(slashed, 404, "SessionNotFoundError")["detail"]
        assert via_message.status_code == 200, via_message.text
        assert (via_message.json()["disposition"], via_message.json()["kind"]) == (
            "deliver",
            "parked",
        )
        assert delivered.json()["kind"] == "completed"
        _problem(again, 409, "SessionNotAwaitingInputError")

    async def test_decide_and_reply_refusals_at_a_human_state(
        self, client: Client, task_queue: str, scripted: Scripted, refund: Path, tmp_path: Path
    ) -> None:
        ticket = f"T-{uuid.uuid4().hex[:8]}"
        model = scripted(_playbook(REFUND))
        async with http_api(client, task_queue, refund, REFUND, model, store=tmp_path / "s") as api:
            await api.http.post(
                f"/v1/workflows/{REFUND}/triggers/refund_requested",
                json={"message": REQUEST, "variables": {"ticket_id": ticket}},
            )
            s = f"/v1/sessions/{ticket}"
            wrong_edge = await api.http.post(f"{s}/decide", json={"to": "nowhere"})
            empty = await api.http.post(f"{s}/reply", json={"message": "  "})
            deliver = await api.http.post(f"{s}/deliver", json={"trigger": "x"})
            replied = await api.http.post(f"{s}/reply", json={"message": "Any news?"})
        assert "refund-closed" in _problem(wrong_edge, 422, "InvalidDecisionTargetError")["detail"]
        _problem(empty, 422, "EmptyMessageError")
        _problem(deliver, 409, "SessionNotAwaitingInputError")
        assert (replied.json()["disposition"], replied.json()["status"]) == (
            "reply",
            "awaiting_decision",
        )

    async def test_summaries_one_and_a_page_at_a_time(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """GET /v1/sessions filters by status, workflow and due, and pages with a cursor;
        GET /v1/sessions/{id} is the summary."""
        first, second = _conversation(), _conversation()
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            await _park(api, first)
            await _park(api, second)
            summary = await api.http.get(f"/v1/sessions/{first}")
            missing = await api.http.get("/v1/sessions/nobody-here")
            listed: list[str] = []
            for _ in range(100):  # visibility is eventually consistent
                page = (await api.http.get("/v1/sessions", params={"limit": 10})).json()
                listed = [s["sessionId"] for s in page["sessions"]]
                if len(listed) == 2:
                    break
                await asyncio.sleep(0.1)
            parked = await api.http.get(
                "/v1/sessions", params={"status": "awaiting_input", "workflow": INBOX}
            )
            done = await api.http.get("/v1/sessions", params={"status": "completed"})
            due = await api.http.get("/v1/sessions", params={"due": "true"})
            one = (await api.http.get("/v1/sessions", params={"limit": 1})).json()
            rest = (
                await api.http.get("/v1/sessions", params={"limit": 1, "cursor": one["nextCursor"]})
            ).json()
            bad = await api.http.get("/v1/sessions", params={"status": "sleeping"})
            bad_cursor = await api.http.get("/v1/sessions", params={"cursor": "!!"})
            forged = await api.http.get("/v1/sessions", params={"cursor": "Zm9yZ2Vk"})
        body = summary.json()
        assert (body["sessionId"], body["status"], body["workflow"]) == (
            first,
            "awaiting_input",
            INBOX,
        )
        assert body["waitReason"] == "the customer's reply naming the order"
        assert body["pendingInput"]["parkedAt"]
        _problem(missing, 404, "SessionNotFoundError")
        assert sorted(listed) == sorted([first, second])
        assert sorted(s["sessionId"] for s in parked.json()["sessions"]) == sorted([first, second])
        assert done.json()["sessions"] == []
        assert due.json()["sessions"] == []
        assert one["nextCursor"]
        assert {one["sessions"][0]["sessionId"], rest["sessions"][0]["sessionId"]} == {
            first,
            second,
        }
        _problem(bad, 400, "MalformedRequestError")
        _problem(bad_cursor, 400, "MalformedRequestError")
        _problem(forged, 400, "MalformedRequestError")

    async def test_health_and_the_document(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            health = await api.http.get("/healthz")
            document = await api.http.get("/openapi.json")
            nowhere = await api.http.get("/v2/nothing")
            wrong_method = await api.http.delete("/v1/sessions")
        assert health.json() == {"status": "ok", "temporal": "ok"}
        assert document.json()["openapi"].startswith("3.1")
        _problem(nowhere, 404, "RouteNotFoundError")
        _problem(wrong_method, 405, "MethodNotAllowedError")


class TestIdempotency:
    async def test_the_same_key_twenty_times_at_once_applies_once(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """Twenty racing retries of one webhook (one Idempotency-Key): one session, one turn,
        twenty identical Outcomes; a later retry gets the same Outcome and writes nothing."""
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        headers = {"Idempotency-Key": f"evt-{uuid.uuid4().hex}"}
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            answers = await asyncio.gather(
                *(_park(api, conversation, **headers) for _ in range(20))
            )
            history = len((await client.get_workflow_handle(conversation).fetch_history()).events)
            late = await _park(api, conversation, **headers)
            history_after = len(
                (await client.get_workflow_handle(conversation).fetch_history()).events
            )
        assert {a.status_code for a in answers} == {200}
        assert len({a.text for a in answers}) == 1
        assert late.text == answers[0].text
        assert await _accepted_updates(client, conversation) == 1
        assert history_after == history
        assert len([r for r in model.requests if not r.handoff]) == 1

    async def test_a_retried_delivery_returns_the_first_outcome_not_a_conflict(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        conversation = _conversation()
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            await _park(api, conversation)
            url = f"/v1/sessions/{conversation}/deliver"
            body = {"trigger": "email_reply", "variables": {"reply_body": "ORD-1001"}}
            first = await api.http.post(url, json=body, headers={"Idempotency-Key": "reply-1"})
            retry = await api.http.post(url, json=body, headers={"Idempotency-Key": "reply-1"})
            other = await api.http.post(url, json=body, headers={"Idempotency-Key": "reply-2"})
        assert first.status_code == retry.status_code == 200
        assert retry.json() == first.json()
        _problem(other, 409, "SessionNotAwaitingInputError")

    async def test_a_keyed_firing_that_mints_its_session_mints_the_same_one_on_retry(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        model = scripted(_playbook(INBOX))
        headers = {"Idempotency-Key": f"evt-{uuid.uuid4().hex}"}
        url = f"/v1/workflows/{INBOX}/triggers/manual"
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            first = await api.http.post(url, json={"message": VAGUE}, headers=headers)
            retry = await api.http.post(url, json={"message": VAGUE}, headers=headers)
            unkeyed = await api.http.post(url, json={"message": VAGUE})
        assert first.json()["sessionId"].startswith("session-")
        assert retry.json() == first.json()
        assert unkeyed.json()["sessionId"] != first.json()["sessionId"]


SLOW_INBOX = (_playbook(INBOX).read_text(encoding="utf-8")).replace(
    "  - name: clarify-asks-and-waits\n", "  - name: clarify-asks-and-waits\n    delay_ms: 1500\n"
)


class TestRespondAsync:
    async def test_prefer_respond_async_answers_202_and_the_turn_goes_on(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        """202 with Location once the session accepted the firing; a firing while the turn
        runs is 409 SessionNotResumableError; the session then parks as usual."""
        conversation = _conversation()
        model = scripted(SLOW_INBOX)
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            accepted = await _park(api, conversation, Prefer="respond-async")
            busy = await _park(api, conversation)
            status = ""
            for _ in range(100):
                status = (await api.http.get(f"/v1/sessions/{conversation}")).json()["status"]
                if status == "awaiting_input":
                    break
                await asyncio.sleep(0.1)
            refused = [  # a refusal is synchronous, however the poll and the call race
                await api.http.post(
                    f"/v1/sessions/{conversation}/decide",
                    json={"to": "answer"},
                    headers={"Prefer": "respond-async"},
                )
                for _ in range(5)
            ]
        assert accepted.status_code == 202, accepted.text
        assert accepted.headers["location"] == f"/v1/sessions/{conversation}"
        assert accepted.headers["preference-applied"] == "respond-async"
        assert accepted.json()["sessionId"] == conversation
        _problem(busy, 409, "SessionNotResumableError")
        assert status == "awaiting_input"
        for answer in refused:
            _problem(answer, 409, "SessionNotParkedError")

    async def test_respond_async_on_a_minted_session_names_it_in_location(
        self, client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
    ) -> None:
        model = scripted(_playbook(INBOX))
        async with http_api(client, task_queue, inbox, INBOX, model, store=tmp_path / "s") as api:
            accepted = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/manual",
                json={"message": VAGUE},
                headers={"Prefer": "respond-async", "Idempotency-Key": "k-1"},
            )
            session_id = accepted.json()["sessionId"]
            retried = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/manual",
                json={"message": VAGUE},
                headers={"Idempotency-Key": "k-1"},
            )
        assert accepted.status_code == 202
        assert accepted.headers["location"] == f"/v1/sessions/{session_id}"
        assert retried.json()["sessionId"] == session_id
        assert retried.json()["kind"] == "parked"


class TestTemporalUnavailable:
    async def test_no_temporal_is_503_with_retry_after(self, tmp_path: Path, inbox: Path) -> None:
        """A server whose Temporal does not answer still serves, answering 503."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = RuntimeConfig(
            root=inbox, store=tmp_path / "s", address=f"127.0.0.1:{port}", address_configured=True
        )
        app = create_app(config=config, settings=ServeSettings(), worker="external")
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as http:
            health = await http.get("/healthz")
            listed = await http.get("/v1/sessions")
            fired = await http.post(f"/v1/workflows/{INBOX}/triggers/manual", json={})
        for response in (health, listed, fired):
            _problem(response, 503, "TemporalUnavailableError")
            assert response.headers["retry-after"] == "1"
