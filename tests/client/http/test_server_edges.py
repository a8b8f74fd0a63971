"""``archmax serve`` at its edges, over real HTTP against the real dev server: bearer tokens
and Standard Webhooks signatures (replays refused), body limits, requests the HTTP parser or
the JSON reader refuse, the event stream resumed after a disconnect, signed notifications (one
per firing), and the ``archmax serve`` command itself."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from standardwebhooks import Webhook
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from archmax_temporal.client.http import ServeSettings, create_app, signed_headers
from archmax_temporal.client.http.app import problem_response
from archmax_temporal.client.http.problems import PROBLEM_JSON
from tests.support.agents import Scripted, copy_example
from tests.support.http_harness import Api, ApiFor, http_api, read_events, server_config, serving
from tests.support.paths import EXAMPLES, REPO
from tests.support.scenarios import VAGUE, session_exists

INBOX = "support-inbox"
PLAYBOOK = EXAMPLES / INBOX / "workflows" / INBOX / "playbook.yaml"
TOKEN = "t0ken-for-tests"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_" + "A" * 32
RECEIVED = f"/v1/workflows/{INBOX}/triggers/email_received"
HTTP_PAGE = REPO / "docs" / "http" / "index.md"


def _conversation() -> str:
    return f"AAQk-{uuid.uuid4().hex[:8]}"


def _firing(conversation: str) -> bytes:
    body = {"message": VAGUE, "variables": {"conversation_id": conversation}}
    return json.dumps(body).encode()


def _sign(
    body: bytes, message_id: str | None = None, *, now: float | None = None, secret: str = SECRET
) -> dict[str, str]:
    """The Standard Webhooks headers of ``body`` (a fresh id unless one is given)."""
    return signed_headers(secret, body, message_id=message_id or f"evt_{uuid.uuid4().hex}", now=now)


async def _accepted_updates(client: Client, session_id: str) -> int:
    history = await client.get_workflow_handle(session_id).fetch_history()
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == accepted)


def _kind(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    kind: str = response.json()["type"]
    return kind


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    return copy_example(INBOX, tmp_path)


@pytest.fixture
def inbox_api(
    client: Client, task_queue: str, scripted: Scripted, inbox: Path, tmp_path: Path
) -> ApiFor:
    """Opens the HTTP API over the support inbox (the scripted playbook)."""

    def open_api(settings: ServeSettings | None = None) -> AbstractAsyncContextManager[Api]:
        return http_api(
            client,
            task_queue,
            inbox,
            INBOX,
            scripted(PLAYBOOK),
            store=tmp_path / "s",
            settings=settings,
        )

    return open_api


class TestAuth:
    async def test_bearer_tokens_guard_the_api_routes(self, inbox_api: ApiFor) -> None:
        settings = ServeSettings(tokens=frozenset({TOKEN}))
        async with inbox_api(settings) as api:
            bare = await api.http.get("/v1/sessions")
            wrong = await api.http.get("/v1/sessions", headers={"Authorization": "Bearer nope"})
            right = await api.http.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
            fired = await api.http.post(RECEIVED, content=_firing(_conversation()))
            health = await api.http.get("/healthz")
            document = await api.http.get("/openapi.json")
        assert _kind(bare, 401) == "AuthenticationRequiredError"
        assert bare.headers["www-authenticate"] == "Bearer"
        assert _kind(wrong, 401) == "AuthenticationRequiredError"
        assert right.status_code == 200
        assert _kind(fired, 401) == "AuthenticationRequiredError"
        assert health.status_code == document.status_code == 200

    async def test_signed_webhooks_and_refusals_that_write_nothing(
        self, inbox_api: ApiFor, client: Client
    ) -> None:
        """A trigger with a secret takes a Standard Webhooks signed request without a token; a
        wrong signature, a timestamp outside the five-minute window, an unsigned request and an
        unknown trigger are refused and start no workflow."""
        settings = ServeSettings(
            tokens=frozenset({TOKEN}), secrets={f"{INBOX}/email_received": SECRET}
        )
        good, forged, stale, unsigned, other = (_conversation() for _ in range(5))
        async with inbox_api(settings) as api:
            post = api.http.post
            signed = await post(RECEIVED, content=_firing(good), headers=_sign(_firing(good)))
            wrong = await post(
                RECEIVED,
                content=_firing(forged),
                headers=_sign(_firing(forged), secret=OTHER_SECRET),
            )
            tampered = await post(
                RECEIVED,
                content=_firing(forged),
                headers=_sign(_firing(good)),  # signed another body
            )
            old = await post(
                RECEIVED,
                content=_firing(stale),
                headers=_sign(_firing(stale), now=time.time() - 301),
            )
            bare = await post(RECEIVED, content=_firing(unsigned))
            unknown = await post(
                f"/v1/workflows/{INBOX}/triggers/sms_received",
                content=_firing(other),
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            unknown_signed = await post(
                f"/v1/workflows/{INBOX}/triggers/sms_received",
                content=_firing(other),
                headers=_sign(_firing(other)),
            )
        assert signed.status_code == 200, signed.text
        assert signed.json()["sessionId"] == good
        assert _kind(wrong, 403) == "SignatureRejectedError"
        assert _kind(tampered, 403) == "SignatureRejectedError"
        assert "5 minutes" in old.json()["detail"]
        assert _kind(old, 403) == "SignatureRejectedError"
        assert _kind(bare, 401) == "AuthenticationRequiredError"
        assert _kind(unknown, 404) == "UnknownTriggerError"
        assert _kind(unknown_signed, 401) == "AuthenticationRequiredError"
        for session_id in (forged, stale, unsigned, other):
            assert not await session_exists(client, session_id), session_id

    async def test_a_captured_signed_request_fires_once_however_it_is_replayed(
        self, inbox_api: ApiFor, client: Client, task_queue: str, inbox: Path, tmp_path: Path
    ) -> None:
        """One captured signed request sent again as it was, and again under new
        Idempotency-Keys, is refused (403) and the session takes one firing. The sender's own
        retry (the same webhook-id, signed anew) is the same firing: its first Outcome. Sent
        to a second server process, which never saw it, the replay is still that one firing
        (the webhook-id is its idempotency key)."""
        settings = ServeSettings(secrets={f"{INBOX}/email_received": SECRET})
        conversation = _conversation()
        body = _firing(conversation)
        event = f"evt_{uuid.uuid4().hex}"
        captured = _sign(body, event)
        async with inbox_api(settings) as api:
            post = api.http.post
            first = await post(RECEIVED, content=body, headers=captured)
            replayed = await post(RECEIVED, content=body, headers=captured)
            rekeyed = [
                await post(RECEIVED, content=body, headers={**captured, "Idempotency-Key": key})
                for key in ("new-1", "new-2")
            ]
            keyed_alike = await post(
                RECEIVED,
                content=body,
                headers={**_sign(body, event, now=time.time() + 1), "Idempotency-Key": event},
            )
            retried = await post(
                RECEIVED, content=body, headers=_sign(body, event, now=time.time() + 2)
            )
            second = create_app(
                config=server_config(client, task_queue, inbox, tmp_path / "s"),
                settings=settings,
                worker="external",
            )
            async with (
                serving(second) as base,
                httpx.AsyncClient(base_url=base, timeout=60) as other,
            ):
                elsewhere = await other.post(
                    RECEIVED, content=body, headers={**captured, "Idempotency-Key": "new-3"}
                )
                elsewhere_plain = await other.post(RECEIVED, content=body, headers=captured)
            accepted = await _accepted_updates(client, conversation)
        assert first.status_code == 200, first.text
        assert _kind(replayed, 403) == "SignatureRejectedError"
        assert "already received" in replayed.json()["detail"]
        for answer in rekeyed:
            assert _kind(answer, 403) == "SignatureRejectedError"
        assert keyed_alike.status_code == retried.status_code == 200
        assert keyed_alike.json() == retried.json() == first.json()
        assert _kind(elsewhere, 403) == "SignatureRejectedError"
        assert "webhook-id" in elsewhere.json()["detail"]
        assert elsewhere_plain.json() == first.json()
        assert accepted == 1

    @pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
    async def test_the_docs_signed_curl_example_is_taken(self, inbox_api: ApiFor) -> None:
        """The HTTP page's shell example (openssl and curl) signs exactly as the server checks:
        run as written, against this server, it fires and answers the Outcome."""
        text = HTTP_PAGE.read_text(encoding="utf-8")
        start = text.index('body=\'{"message":"About my order"')
        script = text[start : text.index("\n# {", start)]
        settings = ServeSettings(secrets={f"{INBOX}/email_received": SECRET})
        async with inbox_api(settings) as api:
            env = {**os.environ, "SUPPORT_SECRET": SECRET, "MESSAGE_ID": uuid.uuid4().hex}
            ran = await asyncio.to_thread(
                subprocess.run,
                ["bash", "-c", script.replace("http://127.0.0.1:8000", api.base)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        assert ran.returncode == 0, ran.stderr
        answer = json.loads(ran.stdout)
        assert (answer["sessionId"], answer["kind"]) == ("AAQk-7", "parked"), answer

    async def test_on_loopback_without_tokens_a_secret_still_binds_its_trigger(
        self, inbox_api: ApiFor, client: Client
    ) -> None:
        settings = ServeSettings(secrets={f"{INBOX}/email_received": SECRET})
        conversation = _conversation()
        async with inbox_api(settings) as api:
            bare = await api.http.post(RECEIVED, content=_firing(conversation))
            open_route = await api.http.get("/v1/sessions")
        assert _kind(bare, 401) == "AuthenticationRequiredError"
        assert open_route.status_code == 200
        assert not await session_exists(client, conversation)


def _raw_request(port: int, head: str, body: bytes) -> bytes:
    """Send ``head`` and part of a body on a raw socket, then read what comes back without
    sending the rest: the server must answer before it has the whole body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in chunk:
                break
        return b"".join(chunks)


class TestBodyLimit:
    async def test_bodies_over_the_limit_are_refused_before_being_read_whole(
        self, inbox_api: ApiFor
    ) -> None:
        """413 PayloadTooLargeError: from Content-Length before the body is read, from the
        stream once a chunked body passes the limit, and for an ordinary oversized body."""
        settings = ServeSettings(max_body=4096)
        async with inbox_api(settings) as api:
            port = int(api.base.rsplit(":", 1)[1])
            declared = await asyncio.to_thread(
                _raw_request,
                port,
                f"POST {RECEIVED} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {50 * 1024 * 1024}\r\n\r\n",
                b"{" + b" " * 100,
            )
            chunk = b" " * 3000
            streamed = await asyncio.to_thread(
                _raw_request,
                port,
                f"POST {RECEIVED} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n",
                (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 2,  # no final chunk
            )
            whole = await api.http.post(
                f"/v1/sessions/{_conversation()}/reply", json={"message": "x" * 5000}
            )
        for answer in (declared, streamed):
            assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
            assert b"PayloadTooLargeError" in answer
        assert _kind(whole, 413) == "PayloadTooLargeError"


def _raw_exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` whole on a raw socket; read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks: list[bytes] = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _raw_problem(answer: bytes) -> dict[str, Any]:
    """The status line is 400 and the body a problem document; the document."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:300]
    assert f"content-type: {PROBLEM_JSON}".encode() in head.lower(), head
    document: dict[str, Any] = json.loads(body)
    return document


BAD_LENGTHS = ("-1", "abc", "1e3", "")


class TestMalformedRequests:
    async def test_unparsable_requests_and_deep_json_are_400_problems(
        self, inbox_api: ApiFor, client: Client
    ) -> None:
        """A negative or non-numeric Content-Length (refused by the HTTP parser, before the
        app) and JSON nested too deep (beyond the parser's recursion, or beyond the limit) are
        400 MalformedRequestError problem documents, never a plain-text 400 or a 500."""
        conversation = _conversation()
        async with inbox_api() as api:
            port = int(api.base.rsplit(":", 1)[1])
            lengths = [
                await asyncio.to_thread(
                    _raw_exchange,
                    port,
                    f"POST {RECEIVED} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {length}\r\n\r\n{{}}".encode(),
                )
                for length in BAD_LENGTHS
            ]
            abyss = await api.http.post(
                f"/v1/sessions/{conversation}/reply",
                content=b'{"message":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                headers={"Content-Type": "application/json"},
            )
            nested: Any = "deep"
            for _ in range(70):
                nested = {"n": nested}
            deep = await api.http.post(
                RECEIVED,
                json={
                    "message": VAGUE,
                    "variables": {"conversation_id": conversation, "x": nested},
                },
            )
            multipart = await api.http.post(
                f"/v1/workflows/{INBOX}/triggers/manual",
                data={"message": "hi", "variables": "[" * 50_000 + "]" * 50_000},
                files={"doc": ("a.txt", b"x")},
            )
        for answer in lengths:
            document = _raw_problem(answer)
            assert document["type"] == "MalformedRequestError"
            assert "Content-Length" in document["detail"]
        for response in (abyss, deep, multipart):
            assert _kind(response, 400) == "MalformedRequestError"
            assert "nests deeper than 64 levels" in response.json()["detail"]
        assert not await session_exists(client, conversation)


class TestEvents:
    async def test_a_resumed_stream_loses_and_repeats_nothing(self, inbox_api: ApiFor) -> None:
        """Follow a session live, drop the connection mid-stream (inside a group of events
        read off one history event), resume with Last-Event-ID while the next turn runs:
        the two halves are exactly the whole stream."""
        conversation = _conversation()
        async with inbox_api() as api:
            await api.http.post(RECEIVED, content=_firing(conversation))
            url = f"/v1/sessions/{conversation}/events"
            async with api.http.stream("GET", url) as live:
                head = await read_events(live, until="agent-text")
            assert head[-1].id is not None and "." in head[-1].id  # inside a group
            delivery = asyncio.create_task(
                api.http.post(
                    f"/v1/sessions/{conversation}/deliver",
                    json={"trigger": "email_reply", "variables": {"reply_body": "ORD-1001"}},
                )
            )
            async with api.http.stream(
                "GET", url, headers={"Last-Event-ID": head[-1].id}
            ) as resumed:
                tail = await read_events(resumed, until="turn-end")
            assert (await delivery).json()["kind"] == "completed"
            async with api.http.stream("GET", url, params={"follow": "false"}) as whole:
                everything = await read_events(whole)
            async with api.http.stream("GET", url, params={"follow": "false", "after": 5}) as late:
                after = await read_events(late)
            missing = await api.http.get("/v1/sessions/nobody-here/events")
            bad = await api.http.get(url, headers={"Last-Event-ID": "twelve"})
        ids = [e.id for e in head + tail]
        assert ids == [e.id for e in everything]
        assert [e.data for e in head + tail] == [e.data for e in everything]
        assert len(set(ids)) == len(ids)
        assert everything[-1].data["type"] == "turn-end"
        assert all(e.data["sessionId"] == conversation for e in everything)
        assert [e.id for e in after] == [e.id for e in everything if e.data["seq"] > 5]
        assert _kind(missing, 404) == "SessionNotFoundError"
        assert _kind(bad, 400) == "MalformedRequestError"


class _Receiver(BaseHTTPRequestHandler):
    """Records notifications; answers 503 to the first attempt of each one (by its
    ``webhook-id``) when ``refuse_first``."""

    seen: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    refused: ClassVar[set[str]] = set()
    refuse_first: ClassVar[bool] = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.seen.append((headers, body))
        key = headers["webhook-id"]
        status = 200 if key in self.refused or not self.refuse_first else 503
        self.refused.add(key)
        self.send_response(status)
        self.send_header("Retry-After", "0")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    _Receiver.seen, _Receiver.refused, _Receiver.refuse_first = [], set(), True
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Receiver
    server.shutdown()
    server.server_close()


async def _until(condition: Any, what: str) -> None:
    """Poll ``condition()`` until it holds (a minute at most: a loaded machine is slow)."""
    deadline = asyncio.get_running_loop().time() + 60
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class TestNotifications:
    async def test_a_park_and_a_finished_turn_are_posted_signed_and_retried(
        self, inbox_api: ApiFor, receiver: tuple[str, type[_Receiver]]
    ) -> None:
        """Each notification is a Standard Webhooks message: a receiver verifies it with the
        reference library; its retry carries the same webhook-id and body, signed anew."""
        url, recorded = receiver
        settings = ServeSettings(notify_url=url, notify_secret=SECRET)
        conversation = _conversation()
        async with inbox_api(settings) as api:
            await api.http.post(
                RECEIVED, content=_firing(conversation), headers={"Idempotency-Key": "mail-7"}
            )
            await api.http.post(
                f"/v1/sessions/{conversation}/deliver",
                json={"trigger": "email_reply", "variables": {"reply_body": "ORD-1001"}},
            )
            await _until(lambda: len(recorded.seen) >= 4, "four notification attempts")
        assert len(recorded.seen) == 4  # each notification refused once, then taken
        # the two are posted concurrently, so their attempts may interleave: by webhook-id
        by_id: dict[str, list[bytes]] = {}
        for headers, body in recorded.seen:
            Webhook(SECRET).verify(body, headers)
            assert headers["webhook-id"].startswith("ntf_") and "." not in headers["webhook-id"]
            by_id.setdefault(headers["webhook-id"], []).append(body)
        assert sorted(len(bodies) for bodies in by_id.values()) == [2, 2]
        assert all(bodies[0] == bodies[1] for bodies in by_id.values())
        events = {
            json.loads(bodies[0])["event"]: json.loads(bodies[0]) for bodies in by_id.values()
        }
        parked, finished = events["session.parked"], events["turn.finished"]
        assert (parked["sessionId"], parked["channel"]) == (conversation, "input")
        assert parked["question"].startswith("Thanks for writing! Which order")
        assert parked["handoff"] is None and parked["resumeAt"] is None
        assert parked["outcome"]["pending"]["reason"] == "the customer's reply naming the order"
        assert finished["kind"] == "completed"
        assert "ORD-1001" in finished["outcome"]["reply"]

    async def test_a_keyed_firing_retried_notifies_once(
        self, inbox_api: ApiFor, receiver: tuple[str, type[_Receiver]]
    ) -> None:
        """The same keyed firing POSTed three times settles three times and is notified once;
        another firing is notified on its own."""
        url, recorded = receiver
        recorded.refuse_first = False
        settings = ServeSettings(notify_url=url, notify_secret=SECRET)
        conversation, other = _conversation(), _conversation()
        async with inbox_api(settings) as api:
            answers = [
                await api.http.post(
                    RECEIVED, content=_firing(conversation), headers={"Idempotency-Key": "m-1"}
                )
                for _ in range(3)
            ]
            await api.http.post(RECEIVED, content=_firing(other))  # queued after any repeat
            await _until(
                lambda: {json.loads(b)["sessionId"] for _, b in recorded.seen} >= {other},
                "the second firing's notification",
            )
        assert {a.status_code for a in answers} == {200}
        assert len({a.text for a in answers}) == 1
        sessions = [json.loads(body)["sessionId"] for _, body in recorded.seen]
        assert sorted(sessions) == sorted([conversation, other])


class TestProblemTable:
    def test_temporal_refusals_map_through_the_one_translation(self) -> None:
        """The per-workflow update limit is SessionBusyError (409, Retry-After); a server that
        does not answer is TemporalUnavailableError (503, Retry-After)."""
        busy = problem_response(RPCError("limit", RPCStatusCode.RESOURCE_EXHAUSTED, b""))
        down = problem_response(RPCError("gone", RPCStatusCode.UNAVAILABLE, b""))
        odd = problem_response(RuntimeError("a bug, with a secret in it"))
        assert (busy.status_code, json.loads(bytes(busy.body))["type"]) == (409, "SessionBusyError")
        assert busy.headers["retry-after"] == "1"
        assert (down.status_code, json.loads(bytes(down.body))["type"]) == (
            503,
            "TemporalUnavailableError",
        )
        assert odd.status_code == 500
        assert "secret" not in bytes(odd.body).decode()


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "archmax_temporal", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class TestServeCommand:
    def test_refuses_a_public_address_without_tokens_in_one_line(self, tmp_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHMAX_SERVE_")}
        process = _cli("--root", str(tmp_path), "serve", "--host", "0.0.0.0", env=env)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 1
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "without bearer tokens" in lines[0], err

    async def test_serves_until_sigterm(
        self, client: Client, task_queue: str, inbox: Path, tmp_path: Path
    ) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "ARCHMAX_TASK_QUEUE": task_queue,
            "ARCHMAX_WORKER": "external",
            "ARCHMAX_STORE": str(tmp_path / "s"),
        }
        process = _cli("--root", str(inbox), "serve", "--port", str(port), env=env)
        try:
            health: httpx.Response | None = None
            async with httpx.AsyncClient(timeout=5) as http:
                for _ in range(200):
                    try:
                        health = await http.get(f"http://127.0.0.1:{port}/healthz")
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            assert health is not None and health.json()["status"] == "ok"
            unparsable = await asyncio.to_thread(
                _raw_exchange,
                port,
                b"POST /v1/sessions/x/reply HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            )
            assert _raw_problem(unparsable)["type"] == "MalformedRequestError"
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.to_thread(process.communicate, timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 0, err
        assert f"http://127.0.0.1:{port}" in err


__all__ = ["Api"]
