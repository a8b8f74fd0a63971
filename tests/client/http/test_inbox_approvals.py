"""``GET /v1/approvals`` over real HTTP against the real dev server: the sessions awaiting a
decision across workflows, filtered and paged like the session list, read with no worker
running; the login cookie reads it and changes nothing; a decision naming a park that was
decided since is refused before anything is written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from archmax_temporal.client.http import ServeSettings, create_app
from archmax_temporal.client.http.auth import LOGIN_COOKIE
from archmax_temporal.client.http.problems import PROBLEM_JSON
from tests.support.agents import Scripted
from tests.support.http_harness import http_api, server_config, serving
from tests.support.inbox_harness import (
    APPROVED,
    AUTH,
    EU,
    HANDOFF,
    PLAYBOOK,
    REFUND,
    SETTINGS,
    TOKEN,
    accepted_updates,
    listed,
    park,
    ticket,
    two_workflows,
)


def _problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = response.json()
    assert body["type"] == kind, body
    return body


def _cookie(value: str) -> dict[str, str]:
    return {"Cookie": f"{LOGIN_COOKIE}={value}"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return two_workflows(tmp_path)


class TestApprovals:
    async def test_every_session_awaiting_a_decision_across_workflows_and_nothing_else(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """Parked sessions of both workflows are listed with their handoff, edges, park and
        since when; a decided one is not; ?workflow= narrows to one workflow."""
        first, second, other, decided = ticket(), ticket(), ticket(), ticket()
        model = scripted(PLAYBOOK)
        async with http_api(
            client, task_queue, root, REFUND, model, store=tmp_path / "s", settings=SETTINGS
        ) as api:
            parked = await park(api, first)
            await park(api, second)
            await park(api, other, EU)
            await park(api, decided)
            done = await api.http.post(
                f"/v1/sessions/{decided}/decide", json={"to": "refund-closed"}, headers=AUTH
            )
            every = await listed(api.http, {first, second, other})
            eu = await listed(api.http, {other}, workflow=EU)
            bad = await api.http.get(
                "/v1/approvals", params={"workflow": "Not_A_Slug"}, headers=AUTH
            )
        assert done.json()["kind"] == "completed"
        approval = next(a for a in every if a["sessionId"] == first)
        created = datetime.fromisoformat(approval.pop("createdAt"))
        assert approval == {
            "sessionId": first,
            "workflow": REFUND,
            "state": "refund-review",
            "title": "Finance review",
            "handoff": HANDOFF,
            "transitions": [
                {
                    "to": "refund-closed",
                    "description": "Finance approved the refund.",
                    "type": "approve",
                },
                {
                    "to": "refund-request",
                    "description": "Finance needs more detail.",
                    "type": "refine",
                },
            ],
            "seq": parked["pending"]["seq"],
            "dueAt": None,
            "waitingOn": None,
        }
        assert created == datetime.fromisoformat(parked["pending"]["createdAt"])
        assert created <= datetime.now(UTC)
        assert [a["workflow"] for a in eu] == [EU]
        _problem(bad, 400, "MalformedRequestError")

    async def test_pages_follow_the_cursor_and_a_cursor_keeps_its_filters(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """limit=1 pages through every approval exactly once; a cursor replayed under another
        filter, or made up, is 400."""
        sessions = {ticket(), ticket(), ticket()}
        model = scripted(PLAYBOOK)
        async with http_api(
            client, task_queue, root, REFUND, model, store=tmp_path / "s", settings=SETTINGS
        ) as api:
            for session_id in sorted(sessions):
                await park(api, session_id)
            await listed(api.http, sessions)
            seen: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                params = {"limit": "1", **({"cursor": cursor} if cursor else {})}
                page = (await api.http.get("/v1/approvals", params=params, headers=AUTH)).json()
                seen += [a["sessionId"] for a in page["approvals"]]
                pages += 1
                cursor = page["nextCursor"]
                if cursor is None or pages > 10:
                    break
            first = (
                await api.http.get("/v1/approvals", params={"limit": "1"}, headers=AUTH)
            ).json()
            elsewhere = await api.http.get(
                "/v1/approvals",
                params={"limit": "1", "workflow": EU, "cursor": first["nextCursor"]},
                headers=AUTH,
            )
            forged = await api.http.get(
                "/v1/approvals", params={"cursor": "Zm9yZ2Vk"}, headers=AUTH
            )
            too_many = await api.http.get("/v1/approvals", params={"limit": "500"}, headers=AUTH)
        assert sorted(seen) == sorted(sessions)
        assert pages >= 3
        _problem(elsewhere, 400, "MalformedRequestError")
        _problem(forged, 400, "MalformedRequestError")
        _problem(too_many, 400, "MalformedRequestError")

    async def test_readable_with_no_worker_running(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """With the worker gone, a server of its own (running none) still lists the approvals,
        read from visibility: no query, no model call."""
        session_id = ticket()
        model = scripted(PLAYBOOK)
        store = tmp_path / "s"
        async with http_api(
            client, task_queue, root, REFUND, model, store=store, settings=SETTINGS
        ) as api:
            await park(api, session_id)
            await listed(api.http, {session_id})
        calls = len(model.requests)
        app = create_app(
            config=server_config(client, task_queue, root, store),
            settings=SETTINGS,
            worker="external",
        )
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60) as http:
            (approval,) = await listed(http, {session_id})
        assert approval["handoff"] == HANDOFF
        assert approval["transitions"][0]["to"] == "refund-closed"
        assert len(model.requests) == calls


class TestAuthentication:
    async def test_the_bearer_token_or_the_login_cookie_reads_only_the_token_changes(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """No credentials: 401. The cookie /inbox/login sets (never the token itself) reads
        the approvals, but a decision with it alone is 401 and writes nothing; a wrong token
        sets no cookie."""
        session_id = ticket()
        model = scripted(PLAYBOOK)
        async with http_api(
            client, task_queue, root, REFUND, model, store=tmp_path / "s", settings=SETTINGS
        ) as api:
            await park(api, session_id)
            anonymous = await api.http.get("/v1/approvals")
            wrong = await api.http.post("/inbox/login", data={"token": "guess"})
            login = await api.http.post("/inbox/login", data={"token": TOKEN, "next": "/inbox"})
            cookie = login.cookies[LOGIN_COOKIE]
            api.http.cookies.clear()  # each request below shows its own
            jar = _cookie(cookie)
            read = await api.http.get("/v1/approvals", headers=jar)
            summary = await api.http.get(f"/v1/sessions/{session_id}", headers=jar)
            updates = await accepted_updates(client, session_id)
            change = await api.http.post(
                f"/v1/sessions/{session_id}/decide", json={"to": "refund-closed"}, headers=jar
            )
            written = await accepted_updates(client, session_id)
            forged = await api.http.get("/v1/approvals", headers=_cookie("v1.1.x"))
        _problem(anonymous, 401, "AuthenticationRequiredError")
        assert wrong.status_code == 401 and LOGIN_COOKIE not in wrong.cookies
        assert login.status_code == 303 and login.headers["location"] == "/inbox"
        set_cookie = login.headers["set-cookie"].lower()
        assert "httponly" in set_cookie and "samesite=strict" in set_cookie
        assert "secure" not in set_cookie  # served over plain http here
        assert TOKEN not in cookie
        assert read.status_code == 200 and read.json()["approvals"] is not None
        assert summary.status_code == 200
        _problem(change, 401, "AuthenticationRequiredError")
        assert written == updates
        _problem(forged, 401, "AuthenticationRequiredError")

    async def test_without_tokens_forms_still_need_their_csrf_token(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """A loopback server with no tokens issues the login cookie unasked; a decision form
        without the CSRF token, or from another origin, is refused and writes nothing."""
        session_id = ticket()
        model = scripted(PLAYBOOK)
        async with http_api(
            client, task_queue, root, REFUND, model, store=tmp_path / "s", settings=ServeSettings()
        ) as api:
            await park(api, session_id)
            page = await api.http.get("/inbox")
            api.http.cookies.clear()
            jar = _cookie(page.cookies[LOGIN_COOKIE])
            form = {"id": session_id, "to": "refund-closed", "seq": "0", "key": "k1"}
            no_token = await api.http.post("/inbox/decide", data=form, headers=jar)
            updates = await accepted_updates(client, session_id)
            opened = await api.http.get("/inbox/session", params={"id": session_id}, headers=jar)
            csrf = opened.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            cross = await api.http.post(
                "/inbox/decide",
                data={**form, "csrf": csrf},
                headers={**jar, "Origin": "http://evil.example"},
            )
            written = await accepted_updates(client, session_id)
        assert page.status_code == 200 and "Awaiting a decision" in page.text
        assert no_token.status_code == 403 and "reload the page" in no_token.text
        assert cross.status_code == 403
        assert written == updates


class TestStaleDecisions:
    async def test_a_decision_naming_a_park_decided_since_is_refused_and_writes_nothing(
        self, client: Client, task_queue: str, scripted: Scripted, root: Path, tmp_path: Path
    ) -> None:
        """Sent back for refinement, the session parks again under the next seq: a decision
        naming the first park is 409 SessionNotParkedError with no update accepted; the
        current seq decides."""
        session_id = ticket()
        model = scripted(PLAYBOOK)
        async with http_api(
            client, task_queue, root, REFUND, model, store=tmp_path / "s", settings=SETTINGS
        ) as api:
            first = await park(api, session_id)
            seq = first["pending"]["seq"]
            url = f"/v1/sessions/{session_id}/decide"
            back = await api.http.post(url, json={"to": "refund-request", "seq": seq}, headers=AUTH)
            updates = await accepted_updates(client, session_id)
            stale = await api.http.post(url, json={"to": "refund-closed", "seq": seq}, headers=AUTH)
            written = await accepted_updates(client, session_id)
            current = await api.http.post(
                url,
                json={"to": "refund-closed", "seq": back.json()["pending"]["seq"]},
                headers=AUTH,
            )
        assert (back.json()["kind"], back.json()["parkedChannel"]) == ("parked", "decision")
        assert back.json()["pending"]["seq"] == seq + 1
        assert "already decided" in _problem(stale, 409, "SessionNotParkedError")["detail"]
        assert written == updates
        assert (current.json()["kind"], current.json()["reply"]) == ("completed", APPROVED)
